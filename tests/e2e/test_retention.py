"""Delete retention with real clients: old segments go by time and by size, consumers of
deleted offsets are reset by auto.offset.reset, and ``odradek topics describe`` shows it.

The broker runs on a manual clock that starts at the real time (so that producers' timestamps
are accepted) and moves only when a test says; retention is checked every second of it.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition

from odradek.clock import ManualClock
from odradek.testing import RunningBroker, running_broker, wait_until

TIMEOUT_S = 15
RETENTION_WAIT_S = 10
POLL_S = 0.05


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory, clock: ManualClock) -> Iterator[RunningBroker]:
    with running_broker(
        tmp_path_factory.mktemp("retention"),
        clock=clock,
        log_retention_check_interval_ms="1000",
    ) as running:
        yield running


def produce_one_by_one(bootstrap: str, topic: str, count: int) -> dict[int, bytes]:
    """``count`` records, each in a batch of its own; offset → value."""
    acked: dict[int, bytes] = {}

    def delivered(err: KafkaError | None, message: object) -> None:
        assert err is None, err
        acked[message.offset()] = message.value()  # type: ignore[attr-defined]

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    for i in range(count):
        producer.produce(topic, f"record-{i:04d}".encode() * 4, on_delivery=delivered)
        producer.flush(TIMEOUT_S)
    assert len(acked) == count
    return acked


def watermarks(bootstrap: str, topic: str) -> tuple[int, int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "watermarks"})
    try:
        low, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=TIMEOUT_S)
        return int(low), int(high)
    finally:
        consumer.close()


def describe(bootstrap: str, topic: str) -> list[str]:
    """The partition row of ``odradek topics describe``, split into its columns."""
    command = ["topics", "describe", topic, "--bootstrap-server", bootstrap]
    done = subprocess.run(
        [sys.executable, "-m", "odradek", *command],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    lines = done.stdout.splitlines()
    assert lines[0].startswith(f"Topic: {topic}\tPartitionCount: 1")
    columns = ["PARTITION", "LEADER", "LOG-START", "LOG-END", "SEGMENTS", "SIZE-BYTES", "LOG-DIR"]
    header = lines[1].split()
    assert set(columns) <= set(header), header
    row = dict(zip(header, lines[2].split(), strict=True))
    return [row[c] for c in columns]


def test_time_retention_and_a_consumer_reset_to_the_new_log_start(
    broker: RunningBroker,
    bootstrap: str,
    clock: ManualClock,
    make_topic: Callable[..., str],
    topic_name: str,
) -> None:
    make_topic(topic_name, segment_bytes="500", retention_ms="60000")
    acked = produce_one_by_one(bootstrap, topic_name, 40)
    assert watermarks(bootstrap, topic_name) == (0, 40)
    _, _, start, end, segments, _, _ = describe(bootstrap, topic_name)
    assert (start, end) == ("0", "40") and int(segments) > 4

    clock.advance(120_000)  # every record is now two minutes old
    wait_until(
        lambda: watermarks(bootstrap, topic_name)[0] > 0, RETENTION_WAIT_S, POLL_S, "retention"
    )
    low, high = watermarks(bootstrap, topic_name)
    assert 0 < low < high == 40
    _, _, start, end, segments, _, _ = describe(bootstrap, topic_name)
    assert (start, end, segments) == (str(low), "40", "1")  # only the active segment is left

    # A consumer whose position was deleted: OFFSET_OUT_OF_RANGE, then auto.offset.reset.
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"{topic_name}-reader",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    try:
        consumer.assign([TopicPartition(topic_name, 0, 3)])
        seen: list[tuple[int, bytes]] = []
        deadline = time.monotonic() + TIMEOUT_S
        while len(seen) < high - low and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is None or message.error() is not None:
                continue
            seen.append((message.offset(), message.value()))
    finally:
        consumer.close()
    assert seen == [(offset, acked[offset]) for offset in range(low, high)]


def test_size_retention_keeps_the_newest_bytes(
    broker: RunningBroker,
    bootstrap: str,
    clock: ManualClock,
    make_topic: Callable[..., str],
    topic_name: str,
) -> None:
    make_topic(topic_name, segment_bytes="500", retention_bytes="1500")
    produce_one_by_one(bootstrap, topic_name, 40)
    _, _, _, _, _, size_before, _ = describe(bootstrap, topic_name)
    assert int(size_before) > 3000
    clock.advance(1_000)  # a retention check is due
    wait_until(
        lambda: watermarks(bootstrap, topic_name)[0] > 0, RETENTION_WAIT_S, POLL_S, "retention"
    )
    _, _, start, end, segments, size, _ = describe(bootstrap, topic_name)
    assert end == "40" and int(start) > 0
    # At least retention.bytes stay; no more than one segment beyond it.
    assert 1500 <= int(size) <= 1500 + 500
    assert int(segments) >= 3


def test_delete_retention_ignores_compacted_topics(
    broker: RunningBroker,
    bootstrap: str,
    clock: ManualClock,
    make_topic: Callable[..., str],
    topic_name: str,
) -> None:
    make_topic(topic_name, segment_bytes="500", retention_ms="1000", cleanup_policy="compact")
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    for i in range(20):
        producer.produce(topic_name, b"v" * 50, key=f"key-{i}".encode())
        producer.flush(TIMEOUT_S)
    clock.advance(10_000)
    time.sleep(1.5)  # housekeeping runs every half second; give it a few turns
    assert watermarks(bootstrap, topic_name) == (0, 20)


def test_describe_log_dirs_reports_each_partitions_size(
    broker: RunningBroker, bootstrap: str, make_topic: Callable[..., str], topic_name: str
) -> None:
    from kafka import KafkaAdminClient

    make_topic(topic_name, partitions=2)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    producer.produce(topic_name, b"x" * 1000, partition=1)
    producer.flush(TIMEOUT_S)
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        [result] = admin.describe_log_dirs({topic_name: [0, 1]})
    finally:
        admin.close()
    [log_dir] = result["log_dirs"]
    assert log_dir["log_dir"] == str(Path(broker.data_dir).absolute())
    [topic] = log_dir["topics"]
    sizes = {p["partition_index"]: p["partition_size"] for p in topic["partitions"]}
    assert sizes[0] == 0 and sizes[1] > 1000


def test_topics_list_and_an_unknown_topic(
    bootstrap: str, make_topic: Callable[..., str], topic_name: str
) -> None:
    make_topic(topic_name)
    listed = subprocess.run(
        [sys.executable, "-m", "odradek", "topics", "list", "--bootstrap-server", bootstrap],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert topic_name in listed.stdout.split()
    command = ["topics", "describe", f"{topic_name}-missing", "--bootstrap-server", bootstrap]
    missing = subprocess.run(
        [sys.executable, "-m", "odradek", *command],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert missing.returncode == 1 and "unknown_topic_or_partition" in missing.stderr
