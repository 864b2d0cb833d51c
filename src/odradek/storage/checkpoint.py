"""Checkpoint files: a per-log-dir map of partition to offset, in Kafka's text format.

Format: see :mod:`odradek.storage.formats`.  Crash: the file is replaced by writing a temporary
file, fsyncing it and renaming it over the old one, so it is always the old or the new map.  A
file that cannot be parsed (it can only come from outside the broker) is reported and read as
empty, which makes the caller fall back to safe defaults: recovery from the log start, and a log
start offset at the first segment.  Caller: the log manager.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path

from odradek.storage.fileio import write_file_atomically
from odradek.storage.formats import format_checkpoint, parse_checkpoint

log = logging.getLogger(__name__)


def read_checkpoint(path: Path) -> dict[tuple[str, int], int]:
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return {}
    try:
        return parse_checkpoint(data)
    except (ValueError, UnicodeDecodeError) as e:
        log.warning("ignoring malformed checkpoint file %s: %s", path, e)
        return {}


def write_checkpoint(path: Path, entries: Mapping[tuple[str, int], int]) -> None:
    write_file_atomically(path, format_checkpoint(entries))
