"""confluent-kafka (librdkafka) against a real odradek broker over real sockets.

Consumer groups are not served yet, so consumers ``assign()`` partitions at explicit offsets and
never commit.
"""

from __future__ import annotations

import time
from typing import Any

import pytest
from confluent_kafka import (
    OFFSET_BEGINNING,
    TIMESTAMP_CREATE_TIME,
    Consumer,
    KafkaError,
    Message,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import (
    AdminClient,
    ConfigResource,
    ConfigSource,
    ResourceType,
)

from odradek.testing import running_broker

from .conftest import (
    ADMIN_TIMEOUT_S,
    COMPRESSIBLE,
    assert_per_key_order,
    create_topics,
    keyed_messages,
    stored_codecs,
)

TIMEOUT_S = 15


def producer_config(bootstrap: str, **extra: Any) -> dict[str, Any]:
    return {
        "bootstrap.servers": bootstrap,
        "linger.ms": 5,
        "message.timeout.ms": TIMEOUT_S * 1000,
        **extra,
    }


def produce(
    bootstrap: str, topic: str, messages: list[dict[str, Any]], **config: Any
) -> list[Message]:
    """Produce each ``messages`` item (kwargs of ``Producer.produce``); the delivered messages in
    sending order, after checking that none failed."""
    producer = Producer(producer_config(bootstrap, **config))
    reports: list[tuple[KafkaError | None, Message]] = []
    for message in messages:
        producer.produce(topic, on_delivery=lambda err, msg: reports.append((err, msg)), **message)
        producer.poll(0)
    assert producer.flush(TIMEOUT_S) == 0, "messages left undelivered"
    errors = [err for err, _ in reports if err is not None]
    assert not errors, errors
    assert len(reports) == len(messages)
    return [msg for _, msg in reports]


def consumer(bootstrap: str, **extra: Any) -> Consumer:
    return Consumer(
        {
            "bootstrap.servers": bootstrap,
            # librdkafka wants a group id even for assign(); no group API is used with it.
            "group.id": "odradek-e2e-unused",
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "fetch.wait.max.ms": 100,
            **extra,
        }
    )


def consume(
    bootstrap: str, topic: str, partitions: list[int], count: int, offset: int = OFFSET_BEGINNING
) -> list[Message]:
    """Exactly ``count`` messages from the partitions starting at ``offset``, polling with a
    deadline; then a short extra poll proves nothing more arrives."""
    c = consumer(bootstrap)
    try:
        c.assign([TopicPartition(topic, p, offset) for p in partitions])
        got: list[Message] = []
        deadline = time.monotonic() + TIMEOUT_S
        while len(got) < count and time.monotonic() < deadline:
            msg = c.poll(0.2)
            if msg is None:
                continue
            assert msg.error() is None, msg.error()
            got.append(msg)
        assert len(got) == count, f"consumed {len(got)} of {count} messages"
        extra = c.poll(0.3)
        assert extra is None or extra.error() is not None, "more messages than produced"
        return got
    finally:
        c.close()


def test_keyed_messages_keep_their_order_within_a_key(bootstrap, make_topic, topic_name):
    topic = make_topic(topic_name, partitions=4)
    sent = keyed_messages()
    delivered = produce(bootstrap, topic, [{"key": k, "value": v} for k, v in sent])
    per_partition: dict[int, list[int]] = {}
    for msg in delivered:
        per_partition.setdefault(msg.partition(), []).append(msg.offset())
    for offsets in per_partition.values():
        assert offsets == list(range(len(offsets)))

    got = consume(bootstrap, topic, [0, 1, 2, 3], len(sent))
    assert_per_key_order([(m.partition(), m.key(), m.value()) for m in got], sent)


# librdkafka turns LZ4 on only for brokers that advertise FindCoordinator (its marker of Kafka
# 0.8.2), so this also checks that the broker advertises it.
@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
def test_compressed_batches_round_trip(broker, bootstrap, make_topic, topic_name, codec):
    topic = make_topic(topic_name)
    values = [COMPRESSIBLE + str(i).encode() for i in range(50)]
    delivered = produce(
        bootstrap,
        topic,
        [{"key": str(i).encode(), "value": v} for i, v in enumerate(values)],
        **{"compression.codec": codec, "linger.ms": 50},
    )
    assert [m.offset() for m in delivered] == list(range(50))

    got = consume(bootstrap, topic, [0], len(values))
    assert [m.value() for m in got] == values
    assert [m.offset() for m in got] == list(range(50))
    # The broker kept the producer's compressed batches as they came.
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
            {"key": b"empty", "value": b"", "headers": [("empty", b""), ("null", None)]},
            {"key": None, "value": None},
        ],
    )
    got = consume(bootstrap, topic, [0], 5)
    assert [(m.key(), m.value()) for m in got] == [
        (b"k", b"v"),
        (None, b"no key"),
        (b"gone", None),
        (b"empty", b""),
        (None, None),
    ]
    assert got[0].headers() == [("trace", b"abc"), ("trace", b"def")]
    assert got[1].headers() is None
    assert got[3].headers() == [("empty", b""), ("null", None)]


def test_offsets_for_times_and_watermarks(bootstrap, make_topic, topic_name):
    topic = make_topic(topic_name, partitions=2)
    base = int(time.time() * 1000) - 60_000
    produce(
        bootstrap,
        topic,
        [
            {"value": f"m{i}".encode(), "partition": 0, "timestamp": base + i * 1000}
            for i in range(6)
        ],
    )
    c = consumer(bootstrap)
    try:
        assert c.get_watermark_offsets(TopicPartition(topic, 0), TIMEOUT_S, cached=False) == (0, 6)
        assert c.get_watermark_offsets(TopicPartition(topic, 1), TIMEOUT_S, cached=False) == (0, 0)

        found = c.offsets_for_times(
            [
                TopicPartition(topic, 0, base),  # the first record's own timestamp
                TopicPartition(topic, 1, base),  # an empty partition
            ],
            TIMEOUT_S,
        )
        assert [(tp.partition, tp.offset) for tp in found] == [(0, 0), (1, -1)]
        # between two records: the first one at or after it
        (between,) = c.offsets_for_times([TopicPartition(topic, 0, base + 2500)], TIMEOUT_S)
        assert between.offset == 3
        (exact,) = c.offsets_for_times([TopicPartition(topic, 0, base + 4000)], TIMEOUT_S)
        assert exact.offset == 4
        # after the last record: no offset (-1, the end)
        (after,) = c.offsets_for_times([TopicPartition(topic, 0, base + 60_000)], TIMEOUT_S)
        assert after.offset == -1
    finally:
        c.close()

    got = consume(bootstrap, topic, [0], 3, offset=3)
    assert [m.offset() for m in got] == [3, 4, 5]
    assert [m.value() for m in got] == [b"m3", b"m4", b"m5"]
    assert [m.timestamp() for m in got] == [
        (TIMESTAMP_CREATE_TIME, base + i * 1000) for i in (3, 4, 5)
    ]


@pytest.mark.parametrize("acks", ["0", "1", "all"])
def test_acks(bootstrap, make_topic, topic_name, acks):
    topic = make_topic(topic_name)
    delivered: list[Message] = []
    for round_ in range(3):
        delivered += produce(
            bootstrap,
            topic,
            [{"value": f"r{round_}-{i}".encode()} for i in range(5)],
            acks=acks,
        )
    values = [f"r{r}-{i}".encode() for r in range(3) for i in range(5)]
    offsets = [m.offset() for m in delivered]
    if acks == "0":
        # Nothing comes back with acks=0, so the producer cannot know the offsets.
        assert offsets == [None] * 15
    else:
        assert offsets == list(range(15))

    got = consume(bootstrap, topic, [0], 15)
    assert [m.value() for m in got] == values
    assert [m.offset() for m in got] == list(range(15))


def _topic_configs(bootstrap: str, topic: str) -> dict[str, Any]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    (future,) = admin.describe_configs(
        [ConfigResource(ResourceType.TOPIC, topic)], request_timeout=ADMIN_TIMEOUT_S
    ).values()
    return future.result(timeout=ADMIN_TIMEOUT_S)


def test_restart_keeps_records_and_topic_configs(tmp_path):
    with running_broker(tmp_path) as broker:
        topic = "survivor"
        create_topics(
            broker.bootstrap,
            {topic: 3},
            {"retention.ms": "86400000", "segment.bytes": "2048", "max.message.bytes": "65536"},
        )
        sent = keyed_messages(keys=9, per_key=20)
        messages = [{"key": k, "value": v + b"." * 100} for k, v in sent]
        delivered = []
        for start in range(0, len(messages), 20):  # many requests, so segments roll
            delivered += produce(broker.bootstrap, topic, messages[start : start + 20])
        before = sorted((m.partition(), m.offset(), m.key(), m.value()) for m in delivered)
        assert len(list((broker.data_dir / f"{topic}-0").glob("*.log"))) > 1
        # A log start offset moved by DeleteRecords survives too.
        trimmed = "trimmed"
        create_topics(broker.bootstrap, {trimmed: 1})
        produce(broker.bootstrap, trimmed, [{"value": f"t{i}".encode()} for i in range(10)])
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        (deleted,) = admin.delete_records([TopicPartition(trimmed, 0, 4)]).values()
        assert deleted.result(timeout=ADMIN_TIMEOUT_S).low_watermark == 4

        broker.restart()

        got = consume(broker.bootstrap, topic, [0, 1, 2], len(sent))
        after = sorted((m.partition(), m.offset(), m.key(), m.value()) for m in got)
        assert after == before

        got = consume(broker.bootstrap, trimmed, [0], 6)
        assert [(m.offset(), m.value()) for m in got] == [
            (i, f"t{i}".encode()) for i in range(4, 10)
        ]
        c = consumer(broker.bootstrap)
        try:
            watermarks = c.get_watermark_offsets(
                TopicPartition(trimmed, 0), TIMEOUT_S, cached=False
            )
            assert watermarks == (4, 10)
        finally:
            c.close()

        configs = _topic_configs(broker.bootstrap, topic)
        for name, value in [
            ("retention.ms", "86400000"),
            ("segment.bytes", "2048"),
            ("max.message.bytes", "65536"),
        ]:
            assert configs[name].value == value
            assert configs[name].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
        assert configs["cleanup.policy"].source == ConfigSource.DEFAULT_CONFIG.value

        # Appends go on from the recovered end of each partition.
        ends = {p: max(o for q, o, _, _ in before if q == p) + 1 for p in range(3)}
        more = produce(
            broker.bootstrap, topic, [{"key": k, "value": b"again"} for k, _ in sent[:9]]
        )
        for msg in more:
            assert msg.offset() >= ends[msg.partition()]
        per_partition = {
            p: sorted(m.offset() for m in more if m.partition() == p) for p in range(3)
        }
        for p, offsets in per_partition.items():
            assert offsets == list(range(ends[p], ends[p] + len(offsets)))


def test_producing_to_an_unknown_topic_creates_it_with_num_partitions(tmp_path):
    with running_broker(tmp_path, num_partitions="4") as broker:
        topic = "made-on-first-use"
        delivered = produce(
            broker.bootstrap, topic, [{"key": f"k{i}".encode(), "value": b"x"} for i in range(20)]
        )
        assert {m.topic() for m in delivered} == {topic}
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        metadata = admin.list_topics(topic, timeout=TIMEOUT_S)
        assert metadata.topics[topic].error is None
        assert sorted(metadata.topics[topic].partitions) == [0, 1, 2, 3]
        assert len(consume(broker.bootstrap, topic, [0, 1, 2, 3], 20)) == 20


def test_idempotent_producer(bootstrap, make_topic, topic_name):
    """enable.idempotence: InitProducerId, then sequenced batches, offsets without gaps."""
    topic = make_topic(topic_name)
    delivered = produce(
        bootstrap,
        topic,
        [{"value": b"i%d" % i} for i in range(200)],
        **{"enable.idempotence": True, "acks": "all"},
    )
    assert [m.offset() for m in delivered] == list(range(200))
    got = consume(bootstrap, topic, [0], 200)
    assert [m.value() for m in got] == [b"i%d" % i for i in range(200)]
