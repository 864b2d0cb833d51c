"""``python -m odradek.docs [--check] [--docs-dir DIR]``: see :mod:`odradek.docs`."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from odradek.docs import REGENERATE, stale, write

# The repository's docs/ when run from a checkout (src/odradek/docs/__main__.py → docs/).
_CHECKOUT_DOCS = Path(__file__).resolve().parents[3] / "docs"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m odradek.docs", description=__doc__)
    parser.add_argument("--check", action="store_true", help="only say which pages are stale")
    parser.add_argument("--docs-dir", type=Path, default=_CHECKOUT_DOCS)
    args = parser.parse_args(argv)
    if args.check:
        found = stale(args.docs_dir)
        for name in found:
            print(f"stale: docs/{name} (regenerate: {REGENERATE})", file=sys.stderr)
        return 1 if found else 0
    for name in write(args.docs_dir):
        print(f"wrote docs/{name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
