"""Client quotas with a real client: a producer over its producer_byte_rate is throttled (its
statistics show the broker's throttle time) and held near its quota, while a producer without a
quota on the same broker is not."""

from __future__ import annotations

import json
import time
from typing import Any

from confluent_kafka import Consumer, Producer

from odradek.protocol.errors import ErrorCode
from odradek.testing import running_broker
from tests.server.conftest import KafkaConnection, unique_topic

ALTER_CLIENT_QUOTAS = 49
QUOTA = 200_000  # bytes/s
PRODUCE_FOR_S = 4.0


def set_quota(bootstrap: str, entity: list[tuple[str, str | None]], key: str, value: float) -> None:
    with KafkaConnection(bootstrap) as connection:
        response = connection.request(
            ALTER_CLIENT_QUOTAS,
            1,
            entries=[
                {
                    "entity": [{"entity_type": t, "entity_name": n} for t, n in entity],
                    "ops": [{"key": key, "value": value, "remove": False}],
                }
            ],
            validate_only=False,
        )
    assert [e.error_code for e in response.entries] == [ErrorCode.none]


def produce_flat_out(bootstrap: str, topic: str, client_id: str) -> tuple[int, float, float]:
    """Bytes acknowledged, the seconds it took (producing for PRODUCE_FOR_S, then flushing),
    and the largest throttle time the client saw."""
    throttles: list[float] = []

    def stats(text: str) -> None:
        for broker in json.loads(text)["brokers"].values():
            throttles.append(broker["throttle"]["max"])

    acked = 0

    def delivered(error: Any, message: Any) -> None:
        nonlocal acked
        if error is None:
            acked += len(message.value())

    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "client.id": client_id,
            "linger.ms": 5,
            # A small queue: produce() refuses (BufferError) rather than queue gigabytes.
            "queue.buffering.max.kbytes": 512,
            "statistics.interval.ms": 500,
            "stats_cb": stats,
        }
    )
    value = b"x" * 10_000
    deadline = time.monotonic() + PRODUCE_FOR_S
    started = time.monotonic()
    while time.monotonic() < deadline:
        try:
            producer.produce(topic, value, on_delivery=delivered)
        except BufferError:
            producer.poll(0.05)
        producer.poll(0)
    assert producer.flush(60) == 0
    elapsed = time.monotonic() - started
    producer.poll(1.0)  # the last statistics
    return acked, elapsed, max(throttles, default=0.0)


def test_a_producer_over_its_quota_is_throttled_and_others_are_not() -> None:
    with running_broker() as broker:
        topic = unique_topic("quota")
        with KafkaConnection(broker.bootstrap) as connection:
            connection.create_topic(topic)
        set_quota(broker.bootstrap, [("client-id", "throttled")], "producer_byte_rate", QUOTA)

        throttled_bytes, elapsed, throttle = produce_flat_out(broker.bootstrap, topic, "throttled")
        free_bytes, _, free_throttle = produce_flat_out(broker.bootstrap, topic, "free")

        assert throttle > 0, "the throttled producer saw no throttle time"
        assert free_throttle == 0
        # Kafka's window lets a first burst of up to (samples - 1) seconds' quota through.
        allowed = QUOTA * (elapsed + 10) * 1.5
        assert throttled_bytes <= allowed, (throttled_bytes, allowed)
        assert free_bytes > throttled_bytes


def consume_for(
    bootstrap: str, topic: str, client_id: str, seconds: float, enough: int | None = None
) -> tuple[int, float]:
    """Bytes a consumer reads from the start of ``topic`` in ``seconds`` (or until it has
    ``enough``), and the largest throttle time its statistics showed."""
    throttles: list[float] = []

    def stats(text: str) -> None:
        for broker in json.loads(text)["brokers"].values():
            throttles.append(broker["throttle"]["max"])

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "client.id": client_id,
            "group.id": f"group-{client_id}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "statistics.interval.ms": 500,
            "stats_cb": stats,
        }
    )
    consumer.subscribe([topic])
    read = 0
    deadline = time.monotonic() + seconds
    try:
        while time.monotonic() < deadline and (enough is None or read < enough):
            message = consumer.poll(0.2)
            if message is not None and message.error() is None:
                read += len(message.value())
        consumer.poll(1.0)  # the last statistics
    finally:
        consumer.close()
    return read, max(throttles, default=0.0)


def test_a_consumer_over_its_quota_is_throttled_and_others_are_not() -> None:
    with running_broker(group_initial_rebalance_delay_ms="0") as broker:
        topic = unique_topic("quota")
        with KafkaConnection(broker.bootstrap) as connection:
            connection.create_topic(topic)
        producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5})
        for _ in range(2_000):
            producer.produce(topic, b"y" * 10_000)
            producer.poll(0)
        assert producer.flush(60) == 0  # 20 MB
        set_quota(broker.bootstrap, [("client-id", "slow")], "consumer_byte_rate", QUOTA)

        slow, throttle = consume_for(broker.bootstrap, topic, "slow", PRODUCE_FOR_S)
        fast, fast_throttle = consume_for(broker.bootstrap, topic, "fast", 60, 20_000_000)
        assert throttle > 0 and fast_throttle == 0
        # One fetch answer of up to fetch.max.bytes (50 MiB by default, here the whole topic
        # at most) may go out before the throttle holds the rest back.
        assert slow < 20_000_000, slow
        assert fast == 20_000_000


def test_a_producer_over_its_request_percentage_is_throttled_and_others_are_not() -> None:
    # 1% of one thread: 10 ms of handling a second, far less than producing flat out takes.
    with running_broker() as broker:
        topic = unique_topic("quota")
        with KafkaConnection(broker.bootstrap) as connection:
            connection.create_topic(topic)
        set_quota(broker.bootstrap, [("client-id", "busy")], "request_percentage", 1)

        _, _, throttle = produce_flat_out(broker.bootstrap, topic, "busy")
        _, _, free_throttle = produce_flat_out(broker.bootstrap, topic, "idle")

        assert throttle > 0, "the producer over its request quota saw no throttle time"
        assert free_throttle == 0
