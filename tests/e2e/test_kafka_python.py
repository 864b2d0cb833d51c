"""kafka-python against a real odradek broker over real sockets.

Consumers have no group (``group_id=None``) and ``assign()`` their partitions. kafka-python 3
makes producers idempotent by default; most producers here turn that off to test the plain path,
and ``test_default_idempotent_producer`` keeps the default.
"""

from __future__ import annotations

import time
from typing import Any

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.consumer.fetcher import ConsumerRecord

from .conftest import COMPRESSIBLE, assert_per_key_order, keyed_messages, stored_codecs

TIMEOUT_S = 15


def producer(bootstrap: str, **extra: Any) -> KafkaProducer:
    config: dict[str, Any] = {
        "linger_ms": 5,
        "request_timeout_ms": TIMEOUT_S * 1000,
        "max_block_ms": TIMEOUT_S * 1000,
        "enable_idempotence": False,
    }
    return KafkaProducer(bootstrap_servers=bootstrap, **{**config, **extra})


def produce(bootstrap: str, topic: str, messages: list[dict[str, Any]], **extra: Any):
    """Send each ``messages`` item (kwargs of ``KafkaProducer.send``); their metadata in order."""
    p = producer(bootstrap, **extra)
    try:
        futures = [p.send(topic, **message) for message in messages]
        p.flush(TIMEOUT_S)
        return [f.get(timeout=TIMEOUT_S) for f in futures]
    finally:
        p.close(timeout=TIMEOUT_S)


def consumer(bootstrap: str) -> KafkaConsumer:
    return KafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=None,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        fetch_max_wait_ms=100,
        request_timeout_ms=TIMEOUT_S * 1000,
    )


def consume(
    bootstrap: str, topic: str, partitions: list[int], count: int, offset: int | None = None
) -> list[ConsumerRecord]:
    """Exactly ``count`` records (from the start, or from ``offset``), then nothing more."""
    c = consumer(bootstrap)
    try:
        tps = [TopicPartition(topic, p) for p in partitions]
        c.assign(tps)
        for tp in tps:
            if offset is None:
                c.seek_to_beginning(tp)
            else:
                c.seek(tp, offset)
        got: list[ConsumerRecord] = []
        deadline = time.monotonic() + TIMEOUT_S
        while len(got) < count and time.monotonic() < deadline:
            for records in c.poll(timeout_ms=200).values():
                got.extend(records)
        assert len(got) == count, f"consumed {len(got)} of {count} records"
        assert not any(c.poll(timeout_ms=300).values()), "more records than produced"
        return got
    finally:
        c.close()


def test_keyed_messages_keep_their_order_within_a_key(bootstrap, make_topic, topic_name):
    topic = make_topic(topic_name, partitions=3)
    sent = keyed_messages()
    metadata = produce(bootstrap, topic, [{"key": k, "value": v} for k, v in sent])
    per_partition: dict[int, list[int]] = {}
    for m in metadata:
        per_partition.setdefault(m.partition, []).append(m.offset)
    assert all(offsets == list(range(len(offsets))) for offsets in per_partition.values())

    got = consume(bootstrap, topic, [0, 1, 2], len(sent))
    assert_per_key_order([(r.partition, r.key, r.value) for r in got], sent)


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
def test_compressed_batches_round_trip(broker, bootstrap, make_topic, topic_name, codec):
    topic = make_topic(topic_name)
    values = [COMPRESSIBLE + str(i).encode() for i in range(40)]
    metadata = produce(
        bootstrap,
        topic,
        [{"key": str(i).encode(), "value": v} for i, v in enumerate(values)],
        compression_type=codec,
        linger_ms=50,
    )
    assert [m.offset for m in metadata] == list(range(40))

    got = consume(bootstrap, topic, [0], len(values))
    assert [r.value for r in got] == values
    assert [r.key for r in got] == [str(i).encode() for i in range(40)]
    assert stored_codecs(broker, topic) == {codec}


def test_headers_null_keys_and_tombstones(bootstrap, make_topic, topic_name):
    topic = make_topic(topic_name)
    produce(
        bootstrap,
        topic,
        [
            {"key": b"k", "value": b"v", "headers": [("trace", b"abc"), ("trace", b"def")]},
            {"key": None, "value": b"no key"},
            {"key": b"gone", "value": None},
            {"key": b"empty", "value": b"", "headers": [("empty", b"")]},
        ],
    )
    got = consume(bootstrap, topic, [0], 4)
    assert [(r.key, r.value) for r in got] == [
        (b"k", b"v"),
        (None, b"no key"),
        (b"gone", None),
        (b"empty", b""),
    ]
    assert [list(r.headers) for r in got] == [
        [("trace", b"abc"), ("trace", b"def")],
        [],
        [],
        [("empty", b"")],
    ]


def test_offsets_for_times_and_watermarks(bootstrap, make_topic, topic_name):
    topic = make_topic(topic_name, partitions=2)
    base = int(time.time() * 1000) - 60_000
    metadata = produce(
        bootstrap,
        topic,
        [
            {"value": f"m{i}".encode(), "partition": 0, "timestamp_ms": base + i * 1000}
            for i in range(6)
        ],
    )
    assert [m.timestamp for m in metadata] == [base + i * 1000 for i in range(6)]
    p0, p1 = TopicPartition(topic, 0), TopicPartition(topic, 1)
    c = consumer(bootstrap)
    try:
        assert c.beginning_offsets([p0, p1]) == {p0: 0, p1: 0}
        assert c.end_offsets([p0, p1]) == {p0: 6, p1: 0}

        found = c.offsets_for_times({p0: base + 2500, p1: base})
        assert found[p0].offset == 3
        assert found[p0].timestamp == base + 3000
        assert found[p1] is None  # an empty partition
        assert c.offsets_for_times({p0: base})[p0].offset == 0
        assert c.offsets_for_times({p0: base + 5000})[p0].offset == 5
        assert c.offsets_for_times({p0: base + 60_000})[p0] is None
    finally:
        c.close()

    got = consume(bootstrap, topic, [0], 3, offset=3)
    assert [(r.offset, r.value, r.timestamp) for r in got] == [
        (i, f"m{i}".encode(), base + i * 1000) for i in (3, 4, 5)
    ]


@pytest.mark.parametrize("acks", [1, "all"])
def test_acks_give_consecutive_offsets(bootstrap, make_topic, topic_name, acks):
    topic = make_topic(topic_name)
    metadata = []
    for round_ in range(3):
        metadata += produce(
            bootstrap, topic, [{"value": f"r{round_}-{i}".encode()} for i in range(5)], acks=acks
        )
    assert [m.offset for m in metadata] == list(range(15))
    got = consume(bootstrap, topic, [0], 15)
    assert [r.value for r in got] == [f"r{r}-{i}".encode() for r in range(3) for i in range(5)]


def test_default_idempotent_producer(bootstrap, make_topic, topic_name):
    """kafka-python's producer is idempotent by default: InitProducerId and sequences."""
    topic = make_topic(topic_name)
    p = KafkaProducer(bootstrap_servers=bootstrap, max_block_ms=TIMEOUT_S * 1000)
    try:
        offsets = [p.send(topic, b"x%d" % i).get(timeout=TIMEOUT_S).offset for i in range(5)]
        assert offsets == [0, 1, 2, 3, 4]
    finally:
        p.close(timeout=TIMEOUT_S)
