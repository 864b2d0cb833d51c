"""The command's entry point hides Hypothesis from its own process only."""

from __future__ import annotations

import subprocess
import sys

_PROBE = """
import sys
{run}
import kio.static._phantom as phantom
print("kio sees hypothesis:", phantom.hypothesis is not None)
"""

_RUN_COMMAND = """
from odradek.cli import entry
sys.argv = ["odradek", "serve", "--help"]
try:
    entry.main()
except SystemExit:
    pass
"""


def _probe(run: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", _PROBE.format(run=run)],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return done.stdout.strip().splitlines()[-1]


def test_the_command_keeps_kio_from_registering_hypothesis_strategies() -> None:
    assert _probe(_RUN_COMMAND) == "kio sees hypothesis: False"


def test_importing_odradek_as_a_library_leaves_hypothesis_alone() -> None:
    # The suite's environment has Hypothesis: kio finds it unless the command hid it.
    assert _probe("import odradek.cli.main") == "kio sees hypothesis: True"
