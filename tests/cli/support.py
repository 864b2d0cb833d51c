"""Running ``odradek`` subcommands as users do, and reading their tables back."""

from __future__ import annotations

import subprocess
import sys

COMMAND_TIMEOUT_S = 60


def odradek(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "odradek", *args],
        capture_output=True,
        text=True,
        timeout=COMMAND_TIMEOUT_S,
        check=check,
    )


def table(lines: list[str], start: int) -> list[dict[str, str]]:
    """The table whose header is ``lines[start]``, up to the first line that is not a row, as
    one dict per row (column → cell)."""
    header = lines[start].split()
    rows = []
    for line in lines[start + 1 :]:
        cells = line.split()
        if len(cells) != len(header):
            break
        rows.append(dict(zip(header, cells, strict=True)))
    return rows


def table_after(output: str, first_column: str, after: str = "") -> list[dict[str, str]]:
    """The first table whose header starts with ``first_column``, after the line starting
    with ``after`` (if given)."""
    lines = output.splitlines()
    begin = next(i for i, line in enumerate(lines) if line.startswith(after)) if after else 0
    start = next(i for i in range(begin, len(lines)) if lines[i].startswith(first_column + " "))
    return table(lines, start)


def ids(text: str) -> list[int]:
    """``1,2,3`` → [1, 2, 3]; ``-`` → []."""
    return [] if text == "-" else [int(i) for i in text.split(",")]
