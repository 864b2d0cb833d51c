"""``odradek tables list | describe``: the Iceberg tables of topics (``iceberg.mode``), read
from the catalog the broker's ``iceberg.*`` settings name (its SQLite file in the data dir by
default), so the commands need no running broker."""

from __future__ import annotations

import argparse
import datetime
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from odradek.cli.output import columns, output_option, wants_json, write_json, write_records
from odradek.config import BrokerConfig, ConfigError

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog
    from pyiceberg.table import Table

Command = Callable[[argparse.Namespace, TextIO], int]


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    tables = commands.add_parser("tables", help="the Iceberg tables of topics (iceberg.mode)")
    tables.add_argument("--config", help="the broker's server.properties (its iceberg.* settings)")
    tables.add_argument(
        "-o", "--override", action="append", metavar="KEY=VALUE", help="a broker config"
    )
    tables.add_argument("--data-dir", help="the broker's data directory (log.dirs)")
    actions = tables.add_subparsers(dest="action", required=True)

    listing = actions.add_parser("list", help="tables with their rows, files and snapshots")
    listing.add_argument("--namespace", help="only this namespace's tables")
    output_option(listing)
    listing.set_defaults(run=_runner(_list))

    describe = actions.add_parser(
        "describe", help="a table's columns, partitioning, files and committed offsets"
    )
    describe.add_argument("table", help="a topic's name, or NAMESPACE.TOPIC")
    output_option(describe)
    describe.set_defaults(run=_runner(_describe))


def _runner(command: Command) -> Callable[[argparse.Namespace], int]:
    def run(args: argparse.Namespace) -> int:
        try:
            return command(args, sys.stdout)
        except (ConfigError, OSError, ValueError, LookupError) as e:
            print(f"odradek tables: {e}", file=sys.stderr)
            return 1
        except ImportError as e:
            print(f"odradek tables: {e} (install odradek[iceberg])", file=sys.stderr)
            return 1

    return run


def _catalog(args: argparse.Namespace) -> Catalog:
    from odradek.iceberg.tables import open_catalog

    overrides = list(args.override or [])
    if args.data_dir:
        overrides.append(f"log.dirs={args.data_dir}")
    config = BrokerConfig.load(Path(args.config) if args.config else None, overrides)
    return open_catalog(config.iceberg_catalog())


def _summary(table: Table) -> dict[str, Any]:
    from odradek.iceberg.tables import TOPIC_ID, committed_offsets

    snapshot = table.current_snapshot()
    summary = snapshot.summary.additional_properties if snapshot and snapshot.summary else {}
    committed_ms = snapshot.timestamp_ms if snapshot else None
    return {
        "table": ".".join(table.name()),
        "rows": int(summary.get("total-records", 0)),
        "files": int(summary.get("total-data-files", 0)),
        "bytes": int(summary.get("total-files-size", 0)),
        "snapshots": len(table.metadata.snapshots),
        "last_commit": datetime.datetime.fromtimestamp(committed_ms / 1000, datetime.UTC)
        .isoformat(timespec="seconds")
        .replace("+00:00", "Z")
        if committed_ms
        else None,
        "offsets": {str(p): o for p, o in sorted(committed_offsets(table).items())},
        # Whose rows and offsets: a topic made again under the same name has another id.
        "topic_id": table.properties.get(TOPIC_ID),
    }


def _list(args: argparse.Namespace, out: TextIO) -> int:
    catalog = _catalog(args)
    namespaces = [tuple(args.namespace.split("."))] if args.namespace else catalog.list_namespaces()
    records = [
        _summary(catalog.load_table(identifier))
        for namespace in namespaces
        for identifier in sorted(catalog.list_tables(namespace))
    ]
    shown = columns(
        ("TABLE", "table"),
        ("ROWS", "rows"),
        ("FILES", "files"),
        ("BYTES", "bytes"),
        ("SNAPSHOTS", "snapshots"),
        ("LAST-COMMIT", "last_commit"),
    )
    write_records(args, records, shown, out, empty="no tables")
    return 0


def _describe(args: argparse.Namespace, out: TextIO) -> int:
    from pyiceberg.exceptions import NoSuchTableError

    catalog = _catalog(args)
    name = str(args.table)
    identifier = tuple(name.split(".")) if "." in name else ("odradek", name)
    try:
        table = catalog.load_table(identifier)
    except NoSuchTableError:
        # A topic name may hold dots: the last part is not always the whole table name.
        try:
            table = catalog.load_table(("odradek", name))
        except NoSuchTableError:
            raise LookupError(f"no table {name}") from None
    described = _summary(table)
    described["location"] = table.location()
    described["partitioning"] = [
        f"{f.transform}({table.schema().find_column_name(f.source_id)})"
        for f in table.spec().fields
    ]
    described["columns"] = [
        {"id": f.field_id, "name": f.name, "type": str(f.field_type)} for f in table.schema().fields
    ]
    if wants_json(args):
        write_json(described, out)
        return 0
    for key in (
        "table",
        "topic_id",
        "location",
        "rows",
        "files",
        "bytes",
        "snapshots",
        "last_commit",
    ):
        out.write(
            f"{key.replace('_', '-')}: {described[key] if described[key] is not None else '-'}\n"
        )
    out.write(f"partitioning: {', '.join(described['partitioning']) or 'none'}\n")
    offsets = described["offsets"]
    out.write(
        "committed offsets: "
        + (", ".join(f"{p}={o}" for p, o in offsets.items()) if offsets else "none")
        + "\n"
    )
    out.write("columns:\n")
    for column in described["columns"]:
        out.write(f"  {column['name']}: {column['type']}\n")
    return 0
