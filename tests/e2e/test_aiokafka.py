"""aiokafka against a real odradek broker over real sockets.

Each test runs its coroutine with ``asyncio.run`` on the test's thread while the broker serves on
its own. Consumers have no group (``group_id=None``) and ``assign()`` their partitions.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, ConsumerRecord, TopicPartition

from .conftest import COMPRESSIBLE, assert_per_key_order, keyed_messages, stored_codecs

TIMEOUT_S = 15


async def produce(bootstrap: str, topic: str, messages: list[dict[str, Any]], **extra: Any):
    """Send each ``messages`` item (kwargs of ``send``); their RecordMetadata in order."""
    config: dict[str, Any] = {"linger_ms": 5, "request_timeout_ms": TIMEOUT_S * 1000, **extra}
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, **config)
    await producer.start()
    try:
        futures = [await producer.send(topic, **message) for message in messages]
        await producer.flush()
        return [await asyncio.wait_for(f, TIMEOUT_S) for f in futures]
    finally:
        await producer.stop()


def consumer(bootstrap: str) -> AIOKafkaConsumer:
    return AIOKafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=None,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        fetch_max_wait_ms=100,
        request_timeout_ms=TIMEOUT_S * 1000,
    )


async def consume(
    bootstrap: str, topic: str, partitions: list[int], count: int, offset: int | None = None
) -> list[ConsumerRecord]:
    """Exactly ``count`` records (from the start, or from ``offset``), then nothing more."""
    c = consumer(bootstrap)
    await c.start()
    try:
        tps = [TopicPartition(topic, p) for p in partitions]
        c.assign(tps)
        for tp in tps:
            if offset is None:
                await c.seek_to_beginning(tp)
            else:
                c.seek(tp, offset)
        got: list[ConsumerRecord] = []
        deadline = time.monotonic() + TIMEOUT_S
        while len(got) < count and time.monotonic() < deadline:
            for records in (await c.getmany(timeout_ms=200)).values():
                got.extend(records)
        assert len(got) == count, f"consumed {len(got)} of {count} records"
        assert not any((await c.getmany(timeout_ms=300)).values()), "more records than produced"
        return got
    finally:
        await c.stop()


def test_keyed_messages_keep_their_order_within_a_key(bootstrap, make_topic, topic_name):
    topic = make_topic(topic_name, partitions=3)
    sent = keyed_messages()

    async def scenario():
        metadata = await produce(bootstrap, topic, [{"key": k, "value": v} for k, v in sent])
        per_partition: dict[int, list[int]] = {}
        for m in metadata:
            per_partition.setdefault(m.partition, []).append(m.offset)
        assert all(offsets == list(range(len(offsets))) for offsets in per_partition.values())
        return await consume(bootstrap, topic, [0, 1, 2], len(sent))

    got = asyncio.run(scenario())
    assert_per_key_order([(r.partition, r.key, r.value) for r in got], sent)


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
def test_compressed_batches_round_trip(broker, bootstrap, make_topic, topic_name, codec):
    topic = make_topic(topic_name)
    values = [COMPRESSIBLE + str(i).encode() for i in range(40)]

    async def scenario():
        metadata = await produce(
            bootstrap,
            topic,
            [{"key": str(i).encode(), "value": v} for i, v in enumerate(values)],
            compression_type=codec,
            linger_ms=50,
        )
        assert [m.offset for m in metadata] == list(range(40))
        return await consume(bootstrap, topic, [0], len(values))

    got = asyncio.run(scenario())
    assert [r.value for r in got] == values
    assert [r.offset for r in got] == list(range(40))
    assert stored_codecs(broker, topic) == {codec}


def test_headers_null_keys_and_tombstones(bootstrap, make_topic, topic_name):
    topic = make_topic(topic_name)

    async def scenario():
        await produce(
            bootstrap,
            topic,
            [
                {"key": b"k", "value": b"v", "headers": [("trace", b"abc"), ("trace", b"def")]},
                {"key": None, "value": b"no key"},
                {"key": b"gone", "value": None},
                {"key": b"empty", "value": b"", "headers": [("empty", b"")]},
            ],
        )
        return await consume(bootstrap, topic, [0], 4)

    got = asyncio.run(scenario())
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
    p0, p1 = TopicPartition(topic, 0), TopicPartition(topic, 1)

    async def scenario():
        await produce(
            bootstrap,
            topic,
            [
                {"value": f"m{i}".encode(), "partition": 0, "timestamp_ms": base + i * 1000}
                for i in range(6)
            ],
        )
        c = consumer(bootstrap)
        await c.start()
        try:
            assert await c.beginning_offsets([p0, p1]) == {p0: 0, p1: 0}
            assert await c.end_offsets([p0, p1]) == {p0: 6, p1: 0}
            found = await c.offsets_for_times({p0: base + 2500, p1: base})
            assert (found[p0].offset, found[p0].timestamp) == (3, base + 3000)
            assert found[p1] is None  # an empty partition
            assert (await c.offsets_for_times({p0: base}))[p0].offset == 0
            assert (await c.offsets_for_times({p0: base + 5000}))[p0].offset == 5
            assert (await c.offsets_for_times({p0: base + 60_000}))[p0] is None
        finally:
            await c.stop()
        return await consume(bootstrap, topic, [0], 3, offset=3)

    got = asyncio.run(scenario())
    assert [(r.offset, r.value, r.timestamp) for r in got] == [
        (i, f"m{i}".encode(), base + i * 1000) for i in (3, 4, 5)
    ]


@pytest.mark.parametrize("acks", [0, 1, "all"])
def test_acks(bootstrap, make_topic, topic_name, acks):
    topic = make_topic(topic_name)
    values = [f"r{r}-{i}".encode() for r in range(3) for i in range(5)]

    async def scenario():
        metadata = []
        for start in range(0, 15, 5):
            metadata += await produce(
                bootstrap, topic, [{"value": v} for v in values[start : start + 5]], acks=acks
            )
        if acks == 0:
            assert metadata == [None] * 15  # no response, so no offsets
        else:
            assert [m.offset for m in metadata] == list(range(15))
        return await consume(bootstrap, topic, [0], 15)

    got = asyncio.run(scenario())
    assert [(r.offset, r.value) for r in got] == list(enumerate(values))
