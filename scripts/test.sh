#!/usr/bin/env bash
# Set up everything (Python packages and system packages such as kcat) and run the whole suite:
# pytest, then mypy and ruff on the package.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh --test
# The broker processes the tests start (hundreds) each import the package afresh: its bytecode
# is compiled once here, not by each of them where PYTHONDONTWRITEBYTECODE is set (most of a
# second of CPU per start, or more).
.venv/bin/python -m compileall -q src
# The slowest tests are printed so that a run shows where the suite's time goes.
.venv/bin/python -m pytest -q --durations=40 "$@"
.venv/bin/python -m mypy
.venv/bin/python -m ruff check .
