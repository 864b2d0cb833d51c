"""The ``odradek`` command's entry point: the console script and ``python -m odradek``.

When kio is imported where Hypothesis is importable, it registers Hypothesis strategies for its
types (``kio.static._phantom``): about half a second of CPU per process, a fifth of what a
broker process spends to start. The command never uses them, so where Hypothesis is installed (a
test environment, whose suites start brokers by the hundred) it is hidden from this process
before kio is imported. Only the command's own process: importing odradek as a library changes
nothing.
"""

from __future__ import annotations

import sys


def main() -> int:
    if "hypothesis" not in sys.modules:
        # None in sys.modules makes ``import hypothesis`` raise ImportError, kio's "not installed".
        sys.modules["hypothesis"] = None  # type: ignore[assignment]
    from odradek.cli.main import main as run

    return run()
