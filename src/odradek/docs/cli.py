"""The command-line reference: every ``odradek`` command and subcommand with its arguments,
from the argparse parsers of :mod:`odradek.cli` (the ones ``odradek --help`` and the shell
completion use)."""

from __future__ import annotations

import argparse
from collections.abc import Iterator

from odradek.docs import header, table

_INTRO = """\
# Command line

`odradek serve` runs a broker and `odradek bench` benchmarks one; the other commands do what
Kafka's `kafka-*.sh` tools do, against any Kafka-compatible cluster (`--bootstrap-server
HOST:PORT`, default 127.0.0.1:9092). Every command also answers `--help`. The
[operations guide](../guides/operations.md) shows them at work.
"""


def _commands(
    parser: argparse.ArgumentParser, path: str, help_text: str
) -> Iterator[tuple[str, str, argparse.ArgumentParser]]:
    """Every parser under ``parser`` (itself first), depth first, each once (aliases skipped),
    with the help its parent gives it."""
    yield path, help_text, parser
    for action in parser._actions:
        if not isinstance(action, argparse._SubParsersAction):
            continue
        helps = {choice.dest: choice.help or "" for choice in action._choices_actions}
        seen: set[int] = set()
        for name, sub in action.choices.items():
            if id(sub) in seen:
                continue
            seen.add(id(sub))
            yield from _commands(sub, f"{path} {name}", helps.get(name, ""))


def _argument(action: argparse.Action) -> str:
    if not action.option_strings:
        return f"`{action.metavar or action.dest}`"
    metavar = ""
    if action.nargs != 0:
        metavar = " " + str(action.metavar or action.dest.upper())
    return ", ".join(f"`{option}{metavar}`" for option in action.option_strings)


def _meaning(action: argparse.Action) -> str:
    text = action.help or ""
    if "%" in text:  # argparse's own expansion of the help text
        params = {k: v for k, v in vars(action).items() if v is not argparse.SUPPRESS}
        if action.choices is not None:
            params["choices"] = ", ".join(str(c) for c in action.choices)
        text = text % {**params, "prog": "odradek"}
    if action.choices is not None and not isinstance(action, argparse._SubParsersAction):
        choices = ", ".join(str(c) for c in action.choices)
        text = f"{text} (one of: {choices})" if text else f"one of: {choices}"
    shown = action.default not in (None, False, argparse.SUPPRESS, [], "")
    if shown and action.nargs != 0 and "default" not in text.lower():
        text += f" [default: {action.default}]"
    if getattr(action, "required", False) and action.option_strings:
        text = "required. " + text
    return text


def _section(path: str, help_text: str, parser: argparse.ArgumentParser) -> str:
    rows = []
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction | argparse._SubParsersAction):
            continue
        if action.help == argparse.SUPPRESS:
            continue
        rows.append([_argument(action), _meaning(action)])
    subcommands = [
        name
        for action in parser._actions
        if isinstance(action, argparse._SubParsersAction)
        for name in action.choices
    ]
    level = "#" * max(2, min(1 + path.count(" "), 4))
    text = f"{level} `{path}`\n\n"
    if help_text:
        text += help_text[0].upper() + help_text[1:] + ".\n\n"
    if parser.description and parser.description != help_text:
        text += parser.description.strip() + "\n\n"
    if subcommands:
        text += "Subcommands: " + ", ".join(f"`{name}`" for name in subcommands) + ".\n\n"
    if rows:
        text += table(["Argument", "Meaning"], rows) + "\n"
    return text


def page() -> str:
    from odradek.cli.main import build_parser

    parser = build_parser()
    sections = [
        _section(path, help_text, sub)
        for path, help_text, sub in _commands(parser, "odradek", parser.description or "")
    ]
    return header("the argparse parsers of src/odradek/cli/") + _INTRO + "\n" + "".join(sections)
