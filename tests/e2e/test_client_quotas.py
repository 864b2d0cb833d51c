"""Client quotas with a real client: a producer over its producer_byte_rate is throttled (its
statistics show the broker's throttle time) and held near its quota, while a producer without a
quota on the same broker is not."""

from __future__ import annotations

import json
import time
from typing import Any

from confluent_kafka import Producer

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
