"""Command-line options the client subcommands (groups, topics) share."""

from __future__ import annotations

import argparse

DEFAULT_BOOTSTRAP = "127.0.0.1:9092"


def connection_options(parser: argparse.ArgumentParser, bootstrap: str, timeout: object) -> None:
    """``--bootstrap-server`` and ``--timeout``; pass ``argparse.SUPPRESS`` as the defaults to
    accept them again after an action without overriding what was given before it."""
    parser.add_argument(
        "--bootstrap-server",
        default=bootstrap,
        metavar="HOST:PORT",
        help=f"a broker to ask (default {DEFAULT_BOOTSTRAP})",
    )
    parser.add_argument("--timeout", type=float, default=timeout, help="seconds per request")
