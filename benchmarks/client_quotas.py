"""What client quotas cost and how closely they hold.

1. The produce ceiling with quota accounting off and on: the raw pipelined Produce load
   (:func:`odradek.bench.wire.raw_load`) against one broker process with no quota at all (the
   accounting is skipped) and with a ``producer_byte_rate`` set for another client id (every
   Produce is then looked up and counted), round after round in alternating order since the
   machine's load drifts; records/s and records per second of broker CPU.
2. How closely a ``producer_byte_rate`` quota holds: a confluent-kafka producer writing flat
   out against quotas of 1, 10 and 100 MB/s, its achieved rate over the run and the spread of
   its per-second rates (acknowledged bytes per 1 s window).

    python benchmarks/client_quotas.py --rounds 3 --duration 8 --hold-for 12
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from odradek.bench.scenarios import cpu_seconds
from odradek.bench.wire import raw_load
from odradek.client.blocking import BlockingConnection
from odradek.testing import BrokerProcess


def set_quota(bootstrap: str, client_id: str, key: str, value: float) -> None:
    connection = BlockingConnection.open(bootstrap, client_id="quota-bench", timeout_s=10)
    try:
        request = connection.send(
            49,
            {
                "entries": [
                    {
                        "entity": [{"entity_type": "client-id", "entity_name": client_id}],
                        "ops": [{"key": key, "value": value, "remove": False}],
                    }
                ],
                "validate_only": False,
            },
            version=1,
        )
        assert connection.receive(request) is not None
    finally:
        connection.close()


def start_broker() -> BrokerProcess:
    return BrokerProcess(Path(tempfile.mkdtemp(prefix="quota-bench-"))).start()


def make_topic(bootstrap: str, name: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(30)


def ceiling(quotas_on: bool, duration_s: float) -> tuple[float, float]:
    broker = start_broker()
    try:
        assert broker.process is not None
        topic = "ceiling"
        make_topic(broker.bootstrap, topic, 4)
        if quotas_on:
            set_quota(broker.bootstrap, "somebody-else", "producer_byte_rate", 1e6)
        cpu_before = cpu_seconds(broker.process.pid) or 0.0
        result = raw_load(
            broker.bootstrap,
            topic,
            record_size=100,
            batch_records=100,
            connections=4,
            window=8,
            duration_s=duration_s,
        )
        cpu = (cpu_seconds(broker.process.pid) or 0.0) - cpu_before
        return result.records / result.seconds, result.records / max(cpu, 1e-9)
    finally:
        broker.terminate()


def hold(rate: int, seconds: float) -> tuple[float, float, float]:
    broker = start_broker()
    try:
        topic = "held"
        make_topic(broker.bootstrap, topic, 1)
        set_quota(broker.bootstrap, "held", "producer_byte_rate", rate)
        acked_at: list[tuple[float, int]] = []

        def delivered(error: object, message: object) -> None:
            if error is None:
                acked_at.append((time.monotonic(), len(message.value())))  # type: ignore[attr-defined]

        producer = Producer(
            {
                "bootstrap.servers": broker.bootstrap,
                "client.id": "held",
                "linger.ms": 5,
                "queue.buffering.max.kbytes": max(rate // 2048, 256),
            }
        )
        value = b"q" * 10_000
        start = time.monotonic()
        while time.monotonic() - start < seconds:
            try:
                producer.produce(topic, value, on_delivery=delivered)
            except BufferError:
                producer.poll(0.01)
            producer.poll(0)
        producer.flush(120)
        windows: dict[int, int] = {}
        for at, size in acked_at:
            second = int(at - start)
            if second < seconds:
                windows[second] = windows.get(second, 0) + size
        total = sum(windows.values())
        per_second = [windows.get(s, 0) / rate for s in range(int(seconds))]
        return total / seconds / rate, min(per_second), max(per_second)
    finally:
        broker.terminate()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--duration", type=float, default=8.0)
    parser.add_argument("--hold-for", type=float, default=12.0)
    args = parser.parse_args()
    runs: dict[bool, list[tuple[float, float]]] = {False: [], True: []}
    for round_ in range(args.rounds):
        for on in (False, True) if round_ % 2 == 0 else (True, False):
            runs[on].append(ceiling(on, args.duration))
            rate, per_cpu = runs[on][-1]
            print(f"round {round_}: quotas {'on ' if on else 'off'} {rate:10,.0f} records/s "
                  f"{per_cpu:10,.0f} records/CPU-s", flush=True)  # fmt: skip
    for on in (False, True):
        rates = [r for r, _ in runs[on]]
        cpus = [c for _, c in runs[on]]
        print(
            f"quotas {'on ' if on else 'off'}: median {statistics.median(rates):,.0f} records/s "
            f"(range {min(rates):,.0f}-{max(rates):,.0f}), "
            f"{statistics.median(cpus):,.0f} records/CPU-s"
        )
    for rate in (1_000_000, 10_000_000, 100_000_000):
        achieved, low, high = hold(rate, args.hold_for)
        print(
            f"producer_byte_rate {rate / 1e6:.0f} MB/s: achieved {achieved:.2f}x the quota over "
            f"{args.hold_for:.0f} s; per-second windows {low:.2f}x-{high:.2f}x"
        )


if __name__ == "__main__":
    main()
