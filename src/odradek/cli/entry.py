"""The ``odradek`` command's entry point: the console script and ``python -m odradek``.

kio is imported without its Hypothesis strategies (see :mod:`odradek.kio_import`): a fifth of
what a broker process spends to start, where Hypothesis is installed.
"""

from __future__ import annotations


def main() -> int:
    from odradek.kio_import import import_kio_without_strategies

    import_kio_without_strategies()
    from odradek.cli.main import main as run

    return run()
