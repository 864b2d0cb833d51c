"""kill -9 under load loses no acknowledged record.

A confluent-kafka producer with acks=all writes as fast as it can; the broker process is killed
with SIGKILL while records are still in flight, restarted on the same data directory and port,
and killed again after more load. Reading every partition back from offset 0 must find each
acknowledged record at the offset it was acknowledged with, and offsets with no gap or repeat.
Duplicates of a value are allowed (a retried batch whose first ack was lost: at-least-once).
"""

from __future__ import annotations

import time
from pathlib import Path

from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    Message,
    Producer,
    TopicPartition,
)

from odradek.testing import BrokerProcess

TOPIC = "crash"
PARTITIONS = 3
ROUNDS = 2
ACKS_BEFORE_KILL = 3000
SENT_WHILE_DOWN = 300
MIN_IN_FLIGHT = 100
TIMEOUT_S = 20


class Recorder:
    """Delivery reports: what the broker acknowledged, and how many failed for good."""

    def __init__(self) -> None:
        self.acked: dict[tuple[int, int], bytes] = {}
        self.failed = 0

    def __call__(self, err: KafkaError | None, message: Message) -> None:
        if err is not None:
            self.failed += 1
            return
        partition, offset, value = message.partition(), message.offset(), message.value()
        assert partition is not None and offset is not None and value is not None
        assert (partition, offset) not in self.acked, f"{partition}/{offset} acknowledged twice"
        self.acked[(partition, offset)] = value


def start(data_dir: Path, port: int = 0) -> BrokerProcess:
    return BrokerProcess(data_dir, "-o", f"num.partitions={PARTITIONS}", port=port).start()


def produce_until(producer: Producer, recorder: Recorder, target: int, prefix: str) -> int:
    """Keep producing until ``target`` acks while records are still in flight (so a kill now
    lands mid-load); returns how many records were sent."""
    sent = 0
    deadline = time.monotonic() + TIMEOUT_S
    while len(recorder.acked) < target or len(producer) < MIN_IN_FLIGHT:
        assert time.monotonic() < deadline, f"only {len(recorder.acked)} acks of {target}"
        try:
            producer.produce(TOPIC, f"{prefix}-{sent:07d}".encode(), on_delivery=recorder)
            sent += 1
        except BufferError:
            producer.poll(0.005)
        producer.poll(0)
    return sent


def read_back(bootstrap: str) -> dict[int, list[tuple[int, bytes]]]:
    """Every (offset, value) of every partition, from offset 0 to the high watermark."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "crash-check",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
        }
    )
    try:
        ends = {
            p: consumer.get_watermark_offsets(TopicPartition(TOPIC, p), timeout=TIMEOUT_S)[1]
            for p in range(PARTITIONS)
        }
        consumer.assign([TopicPartition(TOPIC, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
        found: dict[int, list[tuple[int, bytes]]] = {p: [] for p in range(PARTITIONS)}
        done = {p for p, end in ends.items() if end == 0}
        deadline = time.monotonic() + TIMEOUT_S
        while len(done) < PARTITIONS:
            assert time.monotonic() < deadline, f"partitions {set(ends) - done} not read to end"
            message = consumer.poll(1.0)
            if message is None:
                continue
            partition, offset = message.partition(), message.offset()
            assert partition is not None and offset is not None
            if message.error() is not None:
                assert message.error().code() == KafkaError._PARTITION_EOF, message.error()
                if offset >= ends[partition]:
                    done.add(partition)
                continue
            value = message.value()
            assert value is not None
            found[partition].append((offset, value))
            if offset + 1 >= ends[partition]:
                done.add(partition)
        return found
    finally:
        consumer.close()


def test_acknowledged_records_survive_repeated_kill_9(tmp_path: Path) -> None:
    started = time.monotonic()
    data_dir = tmp_path / "data"
    broker = start(data_dir)
    port = broker.port
    recorder = Recorder()
    producer = Producer(
        {
            "bootstrap.servers": broker.bootstrap,
            "acks": "all",
            "linger.ms": 2,
            "batch.num.messages": 200,
            "message.timeout.ms": TIMEOUT_S * 1000,
            "retry.backoff.ms": 50,
            "reconnect.backoff.ms": 20,
            "reconnect.backoff.max.ms": 200,
        }
    )
    try:
        assert len(producer.list_topics(TOPIC, timeout=TIMEOUT_S).topics[TOPIC].partitions) == 3
        for round_ in range(ROUNDS):
            target = len(recorder.acked) + ACKS_BEFORE_KILL
            produce_until(producer, recorder, target, f"r{round_}")
            in_flight = len(producer)
            broker.kill()
            assert in_flight >= MIN_IN_FLIGHT, "the producer was idle when the broker died"
            # The application keeps sending while the broker is down.
            for i in range(SENT_WHILE_DOWN):
                producer.produce(TOPIC, f"r{round_}-down-{i:04d}".encode(), on_delivery=recorder)
                producer.poll(0)
            broker = start(data_dir, port)
            assert broker.port == port
            assert producer.flush(TIMEOUT_S) == 0
        # Everything sent while the broker was down got through once it was back.
        assert recorder.failed == 0
        acked = dict(recorder.acked)
        found = read_back(broker.bootstrap)
    finally:
        if broker.process is not None and broker.process.poll() is None:
            broker.kill()

    assert len(acked) >= ROUNDS * (ACKS_BEFORE_KILL + SENT_WHILE_DOWN)
    for partition, records in found.items():
        offsets = [offset for offset, _ in records]
        assert offsets == list(range(len(offsets))), f"partition {partition}: gap or repeat"
    stored = {(p, offset): value for p, records in found.items() for offset, value in records}
    missing = {key: value for key, value in acked.items() if key not in stored}
    assert not missing, (
        f"{len(missing)} acknowledged records lost, e.g. {list(missing.items())[:5]}"
    )
    wrong = {key: (value, stored[key]) for key, value in acked.items() if stored[key] != value}
    assert not wrong, f"{len(wrong)} records changed, e.g. {list(wrong.items())[:5]}"
    assert time.monotonic() - started < 60
