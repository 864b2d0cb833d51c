"""The generated reference pages: current with the code, and complete."""

from __future__ import annotations

from pathlib import Path

from odradek.cli.completion import tree
from odradek.cli.main import build_parser
from odradek.config import BROKER_CONFIGS, KAFKA_DIFFERENCES, TOPIC_CONFIGS
from odradek.docs import REGENERATE, api, cli, configuration, pages, stale, write
from odradek.docs.__main__ import main
from odradek.server.registry import load_handlers

DOCS = Path(__file__).resolve().parents[2] / "docs"


def test_the_committed_reference_pages_are_what_the_code_makes_now() -> None:
    found = stale(DOCS)
    assert not found, f"stale generated pages {found}: regenerate them with `{REGENERATE}`"


def test_every_setting_is_on_the_configuration_page() -> None:
    page = configuration.page()
    for name in [*BROKER_CONFIGS, *TOPIC_CONFIGS]:
        assert f"| `{name}` |" in page, name


def test_every_kafka_difference_names_a_setting() -> None:
    unknown = set(KAFKA_DIFFERENCES) - set(BROKER_CONFIGS) - set(TOPIC_CONFIGS)
    assert not unknown


def test_every_handler_is_on_the_api_page_with_its_versions() -> None:
    page = api.page()
    for key, handler in load_handlers().items():
        served = api.versions(handler.min_version, handler.max_version)
        assert f"| {key} | {served} |" in page, key


def test_every_command_is_on_the_cli_page() -> None:
    page = cli.page()
    for node in tree(build_parser()):
        assert f"# `{node.path}`\n" in page, node.path
        for option in node.options:
            if option not in ("-h", "--help"):
                assert f"`{option}" in page, (node.path, option)


def test_check_names_a_stale_page_and_a_write_mends_it(tmp_path: Path) -> None:
    assert write(tmp_path) == list(pages())
    assert main(["--check", "--docs-dir", str(tmp_path)]) == 0
    (tmp_path / "reference/api.md").write_text("edited by hand\n")
    assert main(["--check", "--docs-dir", str(tmp_path)]) == 1
    assert stale(tmp_path) == ["reference/api.md"]
    assert main(["--docs-dir", str(tmp_path)]) == 0
    assert stale(tmp_path) == []
