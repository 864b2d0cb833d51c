"""How the client subcommands print what they found: ``--output table`` (the default: aligned
columns, for people and for ``split()``) or ``--output json`` (for scripts).

A verb builds its answer once, as JSON-ready values (dicts, lists, str, int, bool, None), and
hands it here; the table is drawn from the same records, so the two never disagree. JSON field
names are ``snake_case``, one name per meaning across verbs (``topic``, ``partition``,
``leader``, ``replicas``, ``log_end_offset``, ``group``, …), and stable: a script may rely on
them. An absent value is ``null`` in JSON and ``-`` in a table; broker id lists are JSON arrays
and ``1,2,3`` in a table.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TextIO

from odradek.cli.options import print_table

FORMATS = ("table", "json")
Record = Mapping[str, object]


def output_option(parser: argparse.ArgumentParser, default: object = "table") -> None:
    """``--output table|json``; pass ``argparse.SUPPRESS`` to accept it again after an action
    without overriding what was given before it."""
    parser.add_argument(
        "--output",
        choices=FORMATS,
        default=default,
        help="table (aligned columns, the default) or json (stable field names, for scripts)",
    )


def wants_json(args: argparse.Namespace) -> bool:
    return getattr(args, "output", "table") == "json"


def write_json(value: object, out: TextIO) -> None:
    out.write(json.dumps(value, indent=2) + "\n")


def cell(value: object, escape: bool = True) -> str:
    """A value as a table cell: ``-`` for none or empty, ids joined by commas, booleans as
    yes/no, and spaces escaped (a cell holds none, so ``split()`` takes rows apart) unless
    ``escape`` is false (a last column written for people only)."""
    if value is None or value == "" or (isinstance(value, list | tuple) and not value):
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, list | tuple):
        return ",".join(cell(v, escape) for v in value)
    text = str(value)
    return text.replace(" ", "\\u0020") if escape else text


@dataclass(frozen=True, slots=True)
class Column:
    """A table column: its header, and the record field it shows."""

    header: str
    field: str
    escape: bool = True  # false: spaces kept (the last column only, read by people)


def columns(*pairs: tuple[str, str]) -> tuple[Column, ...]:
    return tuple(Column(header, field) for header, field in pairs)


def write_table(records: Sequence[Record], shown: Sequence[Column], out: TextIO) -> None:
    rows = [tuple(c.header for c in shown)]
    rows += [tuple(cell(r.get(c.field), c.escape) for c in shown) for r in records]
    print_table(rows, out)


def write_records(
    args: argparse.Namespace,
    records: Sequence[Record],
    shown: Sequence[Column],
    out: TextIO,
    *,
    empty: str | None = None,
) -> None:
    """Records as a JSON array of objects, or as a table of the ``shown`` columns (``empty``
    instead of a bare header when there are none, if given)."""
    if wants_json(args):
        write_json([dict(r) for r in records], out)
    elif not records and empty is not None:
        out.write(empty + "\n")
    else:
        write_table(records, shown, out)


def write_result(args: argparse.Namespace, result: Record, text: str, out: TextIO) -> None:
    """What a change did: ``result`` as a JSON object, or the sentence ``text`` for people."""
    if wants_json(args):
        write_json(dict(result), out)
    else:
        out.write(text + "\n")
