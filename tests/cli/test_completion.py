"""``odradek completion``: the bash script, sourced into a real bash with ``COMP_WORDS`` set as
bash's completion sets it, offers the verbs, actions, options and option choices of the
argparse tree; the zsh and fish scripts name the same verbs."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from odradek.cli.completion import script, tree
from odradek.cli.main import build_parser

from .support import odradek


@pytest.fixture(scope="module")
def bash_script() -> str:
    return odradek("completion", "bash").stdout


def complete(bash_script: str, *words: str) -> list[str]:
    """What the completion function offers for ``words``, the last being the word at the
    cursor (possibly empty)."""
    quoted = " ".join("'" + w.replace("'", "'\\''") + "'" for w in words)
    program = (
        f"{bash_script}\n"
        f"COMP_WORDS=({quoted}); COMP_CWORD=$((${{#COMP_WORDS[@]}} - 1)); COMPREPLY=()\n"
        '_odradek; printf "%s\\n" "${COMPREPLY[@]}"\n'
    )
    bash = shutil.which("bash")
    assert bash is not None
    done = subprocess.run(
        [bash, "--norc", "--noprofile", "-c", program],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    assert done.stderr == ""
    return [line for line in done.stdout.splitlines() if line]


def test_bash_completes_verbs_actions_options_and_choices(bash_script: str) -> None:
    verbs = complete(bash_script, "odradek", "")
    assert {"serve", "topics", "groups", "configs", "cluster", "completion"} <= set(verbs)
    assert complete(bash_script, "odradek", "gr") == ["groups"]
    assert complete(bash_script, "odradek", "groups", "") == [
        "list", "describe", "delete", "reset-offsets"
    ]  # fmt: skip
    assert complete(bash_script, "odradek", "groups", "reset-offsets", "--to-e") == [
        "--to-earliest"
    ]
    assert complete(bash_script, "odradek", "topics", "list", "--output", "") == [
        "table", "json"
    ]  # fmt: skip
    assert complete(bash_script, "odradek", "completion", "") == ["bash", "zsh", "fish"]


def test_bash_skips_options_and_their_values_on_the_way(bash_script: str) -> None:
    # --log-level and --bootstrap-server take values, which must not be read as verbs.
    assert complete(bash_script, "odradek", "--log-level", "DEBUG", "top") == ["topics"]
    assert complete(bash_script, "odradek", "topics", "--bootstrap-server", "list", "de") == [
        "describe",
        "delete",
    ]
    offered = complete(bash_script, "odradek", "configs", "describe", "--entity-name", "x", "--")
    assert {"--entity-type", "--all", "--output", "--bootstrap-server"} <= set(offered)
    # The value of an option without choices is left to the shell (file names): nothing here.
    assert complete(bash_script, "odradek", "produce", "--bootstrap-server", "") == []


def test_every_parser_of_the_tree_is_in_each_script() -> None:
    parser = build_parser()
    nodes = tree(parser)
    paths = {n.path for n in nodes}
    assert {"odradek groups reset-offsets", "odradek configs describe"} <= paths
    bash = script("bash", parser)
    zsh = script("zsh", parser)
    fish = script("fish", parser)
    for node in nodes:
        assert f'["{node.path}"]' in bash
    assert "bashcompinit" in zsh and "complete -o default -F _odradek odradek" in zsh
    assert "complete -c odradek -n '__fish_seen_subcommand_from groups; and not " in fish
    assert "-l to-earliest" in fish and "-l output -x -a 'table json'" in fish
