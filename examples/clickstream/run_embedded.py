"""The whole click-stream example on an embedded broker: no server to start, no JVM connector.

Starts an odradek broker inside this process (``odradek.testing.running_broker``), produces
``--clicks`` clicks spread over five minutes of event time plus one click three minutes later
(its only job is to move the watermark past the five minutes, so their windows finish), runs
the page-view job once with ``Trigger.AvailableNow``, and prints the counts read back from the
``pageviews`` topic and from Parquet next to the counts computed here from the clicks sent.

    python examples/clickstream/run_embedded.py [--clicks 20000] [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from collections import Counter
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import pageviews
import producer

from odradek.testing import running_broker

START_MS = 1_714_564_800_000  # 2024-05-01T12:00:00Z, a minute boundary


def expected_counts(clicks: Sequence[producer.Click]) -> Counter[tuple[str, str]]:
    def minute(ts_ms: int) -> str:
        stamp = datetime.fromtimestamp(ts_ms // 60_000 * 60, tz=UTC)
        return stamp.strftime("%Y-%m-%dT%H:%MZ")

    return Counter((minute(c.ts_ms), c.page) for c in clicks)


def run(clicks: int, out: Path, partitions: int = 3) -> dict[str, Counter[tuple[str, str]]]:
    """Produce, run the job, and return the counts per sink and the expected ones."""
    sent = producer.random_clicks(clicks, START_MS, seconds=300)
    closing = producer.Click("u000", "/", START_MS + 8 * 60_000)
    with running_broker(num_partitions=str(partitions)) as broker:
        producer.send(broker.bootstrap, [*sent, closing])
        spark = pageviews.session()
        for query in pageviews.start(spark, broker.bootstrap, out, available_now=True):
            query.awaitTermination()
        from_topic: Counter[tuple[str, str]] = Counter()
        records = (
            spark.read.format("odradek")
            .option("kafka.bootstrap.servers", broker.bootstrap)
            .option("subscribe", "pageviews")
            .load()
            .selectExpr("CAST(value AS STRING) AS json")
            .collect()
        )
        for row in records:
            item = json.loads(row.json)
            from_topic[(item["minute"], item["page"])] += item["views"]
        from_parquet: Counter[tuple[str, str]] = Counter()
        for row in spark.read.parquet(str(out / "parquet")).collect():
            key = (row.minute.astimezone(UTC).strftime("%Y-%m-%dT%H:%MZ"), row.page)
            from_parquet[key] += row.views
    return {"expected": expected_counts(sent), "topic": from_topic, "parquet": from_parquet}


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clicks", type=int, default=20_000)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    out = args.out or Path(tempfile.mkdtemp(prefix="pageviews-"))
    counts = run(args.clicks, out)
    expected = counts["expected"]
    print(f"{'minute':<18} {'page':<9} {'expected':>8} {'topic':>6} {'parquet':>7}")
    for key in sorted(expected):
        print(
            f"{key[0]:<18} {key[1]:<9} {expected[key]:>8} {counts['topic'][key]:>6} "
            f"{counts['parquet'][key]:>7}"
        )
    same = expected == counts["topic"] == counts["parquet"]
    print("all counts match" if same else "COUNTS DIFFER")
    print(f"Parquet output in {out / 'parquet'}")
    sys.exit(0 if same else 1)


if __name__ == "__main__":
    main()
