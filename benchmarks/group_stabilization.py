"""How long a three-member consumer group takes to become stable (issue 3's measurement).

Starts a broker as a child process, creates a 6-partition topic, starts three confluent-kafka
consumers at once in the same group, and measures the time from their subscribe() until every
partition is assigned to exactly one member — with Kafka's default
``group.initial.rebalance.delay.ms`` (3 s) and with 0. Prints one line per run.

    .venv/bin/python benchmarks/group_stabilization.py [--runs 3]
"""

from __future__ import annotations

import argparse
import tempfile
import threading
import time
import uuid
from pathlib import Path

from confluent_kafka import Consumer
from confluent_kafka.admin import AdminClient, NewTopic

from odradek.testing import BrokerProcess

PARTITIONS = 6
MEMBERS = 3


def measure(bootstrap: str) -> float:
    topic, group = f"stab-{uuid.uuid4().hex[:8]}", f"g-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(10)
    owned: dict[int, set[int]] = {i: set() for i in range(MEMBERS)}
    lock = threading.Lock()
    stop = threading.Event()

    def member(i: int) -> None:
        consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": group,
                "session.timeout.ms": 10000,
                "enable.auto.commit": False,
            }
        )

        def on_assign(c: Consumer, partitions: list) -> None:  # type: ignore[type-arg]
            with lock:
                owned[i] = {p.partition for p in partitions}

        def on_revoke(c: Consumer, partitions: list) -> None:  # type: ignore[type-arg]
            with lock:
                owned[i] = set()

        consumer.subscribe([topic], on_assign=on_assign, on_revoke=on_revoke)
        while not stop.is_set():
            consumer.poll(0.05)
        consumer.close()

    started = time.monotonic()
    threads = [threading.Thread(target=member, args=(i,)) for i in range(MEMBERS)]
    for t in threads:
        t.start()
    try:
        while time.monotonic() - started < 60:
            with lock:
                sets = list(owned.values())
            if all(sets) and sorted(p for s in sets for p in s) == list(range(PARTITIONS)):
                return time.monotonic() - started
            time.sleep(0.01)
        raise RuntimeError("the group did not become stable in 60 s")
    finally:
        stop.set()
        for t in threads:
            t.join()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    for delay in (3000, 0):
        with tempfile.TemporaryDirectory() as data:
            broker = BrokerProcess(Path(data), "-o", f"group.initial.rebalance.delay.ms={delay}")
            broker.start()
            try:
                for run in range(args.runs):
                    seconds = measure(broker.bootstrap)
                    print(
                        f"group.initial.rebalance.delay.ms={delay}: run {run + 1}: "
                        f"3 members stable in {seconds:.2f} s"
                    )
            finally:
                broker.terminate()


if __name__ == "__main__":
    main()
