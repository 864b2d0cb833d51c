"""The web console and ``/metrics`` with many topics: a fresh broker process (``odradek serve``
with ``metrics.listener``) gets ``--topics`` topics of one partition each (a few records in
every tenth), then

- the topics page in Debian's chromium (playwright-core, ``tests/console/drive.mjs``): from a
  click on "Topics" until every row is drawn, ``--repeat`` times in one page, and once from a
  cold page load; targets: under a second;
- ``GET /api/topics``, the JSON behind that page, ``--repeat`` times;
- ``GET /metrics`` (one partition per topic, so ``--topics`` partitions), ``--repeat`` times;
  target: under 200 ms;
- the page's weight: the bytes its first load transfers (headers and gzip'd bodies).

Prints each figure (median, min, max). Needs ``scripts/setup.sh --test`` (chromium, node,
playwright-core).

    python benchmarks/console.py --topics 1000 --repeat 10
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import shutil
import statistics
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path

from odradek.client.admin import ClusterAdmin
from odradek.client.data import DataClient, TopicPartition
from odradek.protocol.records import NewRecord, encode_batch
from odradek.testing import BrokerProcess

REPO = Path(__file__).resolve().parent.parent
DRIVER = REPO / "tests" / "console" / "drive.mjs"


def timed_get(url: str) -> tuple[float, int]:
    started = time.perf_counter()
    with urllib.request.urlopen(url, timeout=60) as response:
        size = len(response.read())
    return (time.perf_counter() - started) * 1000, size


def summary(name: str, times: list[float], target: str = "") -> None:
    print(
        f"{name:42} median {statistics.median(times):8.1f} ms   "
        f"min {min(times):8.1f}   max {max(times):8.1f}   {target}"
    )


async def create_topics(bootstrap: str, count: int) -> None:
    async with await ClusterAdmin.connect(bootstrap) as admin:
        for i in range(count):
            await admin.create_topic(f"bench-{i:05d}", 1, 1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--topics", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=10)
    args = parser.parse_args()

    directory = Path(tempfile.mkdtemp(prefix="console-bench-"))
    broker = BrokerProcess(directory / "data", "-o", "metrics.listener=127.0.0.1:0").start()
    try:
        address = None
        deadline = time.monotonic() + 30
        while address is None and time.monotonic() < deadline:
            found = re.search(r"metrics on http://([^/\s]+)/metrics", "".join(broker.output))
            address = found.group(1) if found else None
            time.sleep(0.05)
        assert address, "".join(broker.output)
        base = f"http://{address}"
        started = time.perf_counter()
        asyncio.run(create_topics(broker.bootstrap, args.topics))
        print(f"{args.topics} topics created in {time.perf_counter() - started:.1f} s")
        with DataClient(broker.bootstrap) as client:
            batch = encode_batch([NewRecord(None, b"x" * 100)] * 10, now_ms=int(time.time() * 1000))
            client.produce(
                {TopicPartition(f"bench-{i:05d}", 0): batch for i in range(0, args.topics, 10)}
            )

        api = [timed_get(base + "/api/topics") for _ in range(args.repeat)]
        summary(f"GET /api/topics ({api[0][1]:,} bytes)", [t for t, _ in api])
        metrics = [timed_get(base + "/metrics") for _ in range(args.repeat)]
        summary(
            f"GET /metrics, {args.topics} partitions ({metrics[0][1]:,} bytes)",
            [t for t, _ in metrics],
            "target < 200 ms",
        )

        out = directory / "browser"
        out.mkdir()
        config = {
            "scenario": "bench",
            "base": base,
            "out": str(out),
            "topics": args.topics,
            "repeat": args.repeat,
            "timeout_ms": 120_000,
        }
        node = shutil.which("node") or "node"
        subprocess.run(
            [node, str(DRIVER), json.dumps(config)], cwd=DRIVER.parent, check=True, timeout=900
        )
        seen = json.loads((out / "results.json").read_text())
        summary(
            f"topics page, {args.topics} topics, in the page",
            seen["topics_page_ms"],
            "target < 1000 ms",
        )
        split = seen.get("in_page", [])
        if split:
            summary("  of which the API and making rows", [r["fetch_ms"] for r in split])
            summary("  of which putting them in the page", [r["draw_ms"] for r in split])
            summary(
                "in the page: route to first paint", [r["shown_ms"] for r in split], "(< 1000 ms)"
            )
        print(
            f"{'topics page, cold load (page + API + draw)':42} "
            f"{seen['cold_topics_page_ms']:8.1f} ms"
        )
        first = seen["first_load"]
        print(
            f"{'page weight, first load':42} {first['bytes']:,} bytes in "
            f"{len(first['requests'])} requests ({', '.join(first['requests'])})"
        )
    finally:
        broker.terminate()
        shutil.rmtree(directory, ignore_errors=True)


if __name__ == "__main__":
    main()
