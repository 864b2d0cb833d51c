"""A click-stream producer: page views as JSON records into the topic ``clicks``.

Each record is one click, keyed by user (so one user's clicks stay in order in one partition),
with the click's time as the record's timestamp and in the JSON::

    {"user": "u042", "page": "/pricing", "ts": "2024-05-01T12:00:07.250Z"}

It uses odradek's own data client, so it needs nothing but odradek. Any Kafka producer would do.

    python examples/clickstream/producer.py --bootstrap 127.0.0.1:9092 --clicks 10000
"""

from __future__ import annotations

import argparse
import json
import random
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from odradek.client.data import DataClient, TopicPartition
from odradek.protocol.partitioner import key_partition
from odradek.spark.sink import encode_records

PAGES = ("/", "/pricing", "/docs", "/blog", "/signup", "/login")
TOPIC = "clicks"


@dataclass(frozen=True)
class Click:
    user: str
    page: str
    ts_ms: int

    def to_json(self) -> bytes:
        stamp = datetime.fromtimestamp(self.ts_ms / 1000, tz=UTC)
        iso = stamp.isoformat(timespec="milliseconds").replace("+00:00", "Z")
        return json.dumps({"user": self.user, "page": self.page, "ts": iso}).encode()


def random_clicks(count: int, start_ms: int, seconds: float, seed: int = 1) -> list[Click]:
    """``count`` clicks by 50 users over ``seconds`` from ``start_ms``, in time order."""
    rng = random.Random(seed)
    stamps = sorted(start_ms + int(rng.random() * seconds * 1000) for _ in range(count))
    weights = (30, 15, 25, 10, 5, 15)
    return [Click(f"u{rng.randrange(50):03d}", rng.choices(PAGES, weights)[0], ts) for ts in stamps]


def send(bootstrap: str, clicks: Iterable[Click], topic: str = TOPIC) -> int:
    """Produce ``clicks`` to ``topic`` (created with the broker's defaults if missing)."""
    by_partition: dict[int, list[Click]] = {}
    with DataClient(bootstrap, client_id="clickstream-producer") as client:
        info = client.describe([topic], auto_create=True)[topic]
        for click in clicks:
            partition = key_partition(click.user.encode(), info.partitions)
            by_partition.setdefault(partition, []).append(click)
        sent = 0
        for partition, items in sorted(by_partition.items()):
            for first in range(0, len(items), 1000):
                chunk = items[first : first + 1000]
                batch = encode_records(
                    [c.user.encode() for c in chunk],
                    [c.to_json() for c in chunk],
                    None,
                    timestamp_ms=chunk[0].ts_ms,
                    timestamps=[c.ts_ms for c in chunk],  # each click's own event time
                )
                client.produce({TopicPartition(topic, partition): batch})
                sent += len(chunk)
    return sent


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="produce random clicks to a topic")
    parser.add_argument("--bootstrap", default="127.0.0.1:9092")
    parser.add_argument("--topic", default=TOPIC)
    parser.add_argument("--clicks", type=int, default=10_000)
    parser.add_argument("--minutes", type=float, default=5.0, help="event time they span")
    args = parser.parse_args(argv)
    now_ms = int(time.time() * 1000)
    clicks = random_clicks(args.clicks, now_ms - int(args.minutes * 60_000), args.minutes * 60)
    sent = send(args.bootstrap, clicks, args.topic)
    print(f"sent {sent} clicks to {args.topic}")


if __name__ == "__main__":
    main()
