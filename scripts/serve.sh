#!/usr/bin/env bash
# Set up and start one broker: 127.0.0.1:9092, data in ./odradek-data. Extra arguments go to
# `odradek serve` (e.g. -o num.partitions=3).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/odradek serve "$@"
