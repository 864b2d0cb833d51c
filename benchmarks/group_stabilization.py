"""How long a three-member consumer group takes to become stable (issues 3 and 15).

Starts a broker as a child process, creates a 6-partition topic, starts three confluent-kafka
consumers at once in the same group, and measures the time from their subscribe() until every
partition is assigned to exactly one member, two each — with the classic protocol under Kafka's
default ``group.initial.rebalance.delay.ms`` (3 s) and with 0, then with the KIP-848 protocol
(``group.protocol=consumer``, the broker's default ``group.consumer.heartbeat.interval.ms`` of
5 s). Prints one line per run.

    .venv/bin/python benchmarks/group_stabilization.py [--runs 3] [--protocol classic|consumer]
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


def measure(bootstrap: str, protocol: str) -> float:
    topic, group = f"stab-{uuid.uuid4().hex[:8]}", f"g-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(10)
    owned: dict[int, set[int]] = {i: set() for i in range(MEMBERS)}
    lock = threading.Lock()
    stop = threading.Event()

    def member(i: int) -> None:
        settings: dict[str, object] = {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "enable.auto.commit": False,
        }
        if protocol == "consumer":
            # The session and heartbeat are the broker's to set under KIP-848.
            settings["group.protocol"] = "consumer"
        else:
            settings["session.timeout.ms"] = 10000
        consumer = Consumer(settings)
        consumer.subscribe([topic])
        while not stop.is_set():
            consumer.poll(0.01)
            # What the member holds (KIP-848 callbacks name only what changed).
            held = {p.partition for p in consumer.assignment()}
            with lock:
                owned[i] = held
        consumer.close()

    started = time.monotonic()
    threads = [threading.Thread(target=member, args=(i,)) for i in range(MEMBERS)]
    for t in threads:
        t.start()
    try:
        while time.monotonic() - started < 60:
            with lock:
                sets = list(owned.values())
            balanced = all(len(s) == PARTITIONS // MEMBERS for s in sets)
            if balanced and sorted(p for s in sets for p in s) == list(range(PARTITIONS)):
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
    parser.add_argument("--protocol", choices=("classic", "consumer"), action="append")
    args = parser.parse_args()
    setups = []
    protocols = args.protocol or ["classic", "consumer"]
    if "classic" in protocols:
        for delay in (3000, 0):
            setups.append(("classic", f"group.initial.rebalance.delay.ms={delay}"))
    if "consumer" in protocols:
        for interval in (5000, 500):
            setups.append(("consumer", f"group.consumer.heartbeat.interval.ms={interval}"))
    for protocol, setting in setups:
        with tempfile.TemporaryDirectory() as data:
            broker = BrokerProcess(Path(data), "-o", setting)
            broker.start()
            try:
                for run in range(args.runs):
                    seconds = measure(broker.bootstrap, protocol)
                    print(
                        f"{protocol} protocol, {setting}: run {run + 1}: "
                        f"3 members stable in {seconds:.2f} s"
                    )
            finally:
                broker.terminate()


if __name__ == "__main__":
    main()
