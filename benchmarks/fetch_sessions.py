"""What incremental fetch sessions (KIP-227) save the broker: a fetcher over ``--partitions``
(100) partitions of which one gets a record now and then, sending Fetch v12 requests back to back
(max.wait 0) for ``--duration`` seconds, first as full requests (no session: every partition
named and answered each time), then incrementally (a session: only what moved is named and
answered), alternating, on a fresh broker process. Prints fetches/s and the broker's CPU per
thousand fetches (user + system from /proc) for each, and their ratio.

    python benchmarks/fetch_sessions.py --rounds 3 --duration 5
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from odradek.bench.scenarios import cpu_seconds
from odradek.client.blocking import BlockingConnection
from odradek.protocol.records import encode_batch
from odradek.testing import BrokerProcess

FETCH, PRODUCE, CREATE_TOPICS = 1, 0, 19


def cpu_s(broker: BrokerProcess) -> float:
    assert broker.process is not None
    seconds = cpu_seconds(broker.process.pid)
    assert seconds is not None, "the broker process is gone"
    return seconds


def fetch_fields(
    topic: str, offsets: dict[int, int], session_id: int, epoch: int
) -> dict[str, object]:
    return {
        "replica_id": -1,
        "max_wait": 0,
        "min_bytes": 0,
        "max_bytes": 1 << 20,
        "isolation_level": 0,
        "session_id": session_id,
        "session_epoch": epoch,
        "topics": [
            {
                "topic": topic,
                "partitions": [
                    {
                        "partition": p,
                        "current_leader_epoch": -1,
                        "fetch_offset": o,
                        "last_fetched_epoch": -1,
                        "log_start_offset": -1,
                        "partition_max_bytes": 65536,
                    }
                    for p, o in sorted(offsets.items())
                ],
            }
        ]
        if offsets
        else [],
        "forgotten_topics_data": [],
        "rack_id": "",
    }


def run(
    broker: BrokerProcess, topic: str, partitions: int, incremental: bool, duration: float
) -> tuple[float, float]:
    """Fetches per second and broker CPU seconds per thousand fetches."""
    fetcher = BlockingConnection.open(broker.bootstrap, client_id="fetcher")
    producer = BlockingConnection.open(broker.bootstrap, client_id="producer")
    offsets = dict.fromkeys(range(partitions), 0)
    response = fetcher.request(
        FETCH, fetch_fields(topic, offsets, 0, 0 if incremental else -1), version=12
    )
    session_id, epoch = int(response.session_id), 1
    for t in response.responses:
        for p in t.partitions:
            offsets[int(p.partition_index)] = int(p.high_watermark)
    fetches = 0
    start_cpu = cpu_s(broker)
    start = time.monotonic()
    while time.monotonic() - start < duration:
        if fetches % 50 == 0:  # one partition moves now and then
            producer.request(
                PRODUCE,
                {
                    "acks": 1,
                    "timeout": 5000,
                    "topic_data": [
                        {
                            "name": topic,
                            "partition_data": [
                                {
                                    "index": fetches % partitions,
                                    "records": encode_batch([(None, b"x", (), None)], now_ms=1),
                                }
                            ],
                        }
                    ],
                },
                version=9,
            )
        if incremental:
            changed: dict[int, int] = {}
            response = fetcher.request(
                FETCH, fetch_fields(topic, changed, session_id, epoch), version=12
            )
            epoch += 1
        else:
            response = fetcher.request(FETCH, fetch_fields(topic, offsets, 0, -1), version=12)
        moved = {}
        for t in response.responses:
            for p in t.partitions:
                if p.records:
                    moved[int(p.partition_index)] = int(p.high_watermark)
        offsets.update(moved)
        if incremental and moved:
            # The fetcher names the partitions whose position moved in its next request.
            response = fetcher.request(
                FETCH, fetch_fields(topic, moved, session_id, epoch), version=12
            )
            epoch += 1
            fetches += 1
        fetches += 1
    seconds = time.monotonic() - start
    cpu = cpu_s(broker) - start_cpu
    fetcher.close()
    producer.close()
    return fetches / seconds, cpu / fetches * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--duration", type=float, default=5.0)
    parser.add_argument("--partitions", type=int, default=100)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="fetch-sessions-") as directory:
        broker = BrokerProcess(Path(directory)).start()
        try:
            admin = BlockingConnection.open(broker.bootstrap)
            admin.request(
                CREATE_TOPICS,
                {
                    "topics": [
                        {
                            "name": "many",
                            "num_partitions": args.partitions,
                            "replication_factor": 1,
                            "assignments": [],
                            "configs": [],
                        }
                    ],
                    "timeout": 30_000,
                },
                version=5,
            )
            admin.close()
            time.sleep(1)
            results: dict[str, list[tuple[float, float]]] = {"full": [], "incremental": []}
            for round_ in range(args.rounds):
                order = ["full", "incremental"] if round_ % 2 == 0 else ["incremental", "full"]
                for kind in order:
                    rate, cpu = run(
                        broker, "many", args.partitions, kind == "incremental", args.duration
                    )
                    results[kind].append((rate, cpu))
                    print(f"{kind:12s} {rate:8,.0f} fetches/s  {cpu:6.3f} broker CPU-s per 1000")
            medians = {
                kind: (
                    statistics.median(r for r, _ in runs),
                    statistics.median(c for _, c in runs),
                )
                for kind, runs in results.items()
            }
            for kind, (rate, cpu) in medians.items():
                print(f"median {kind:12s} {rate:8,.0f} fetches/s  {cpu:6.3f} CPU-s/1000")
            ratio = medians["incremental"][1] / medians["full"][1]
            print(f"incremental / full broker CPU per fetch = {ratio:.2f} (target <= 0.50)")
        finally:
            broker.terminate()


if __name__ == "__main__":
    main()
