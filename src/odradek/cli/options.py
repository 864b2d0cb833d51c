"""What the client subcommands (cluster, groups, topics) share: connection options and tables."""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Callable, Coroutine, Sequence
from typing import Any, TextIO

from odradek.client.core import ClientError

DEFAULT_BOOTSTRAP = "127.0.0.1:9092"


def connection_options(parser: argparse.ArgumentParser, bootstrap: str, timeout: object) -> None:
    """``--bootstrap-server`` and ``--timeout``; pass ``argparse.SUPPRESS`` as the defaults to
    accept them again after an action without overriding what was given before it."""
    parser.add_argument(
        "--bootstrap-server",
        default=bootstrap,
        metavar="HOST:PORT",
        help=f"a broker to ask, or several comma-separated (default {DEFAULT_BOOTSTRAP})",
    )
    parser.add_argument("--timeout", type=float, default=timeout, help="seconds per request")


def print_table(rows: Sequence[Sequence[str]], out: TextIO) -> None:
    """Rows (the first is the header) in columns aligned with spaces, for people to read and
    ``split()`` to take apart: no cell may be empty or hold a space."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for row in rows:
        out.write("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())
        out.write("\n")


Command = Callable[[argparse.Namespace, TextIO], Coroutine[Any, Any, int]]


def run_command(command: Command, prefix: str = "odradek") -> Callable[[argparse.Namespace], int]:
    """``command`` as a subcommand's ``run``: on its own event loop, printing to stdout; a
    broker that cannot be reached or answers an error ends it with status 1."""

    def run(args: argparse.Namespace) -> int:
        try:
            return asyncio.run(command(args, sys.stdout))
        except ClientError as e:
            print(f"{prefix}: {e}", file=sys.stderr)
            return 1

    return run
