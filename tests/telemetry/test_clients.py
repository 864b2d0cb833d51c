"""Client instances get subscriptions by the selectors they match, push what they were asked
for, and are refused, forgotten and bounded as Kafka's ClientMetricsManager does; on a manual
clock, without sockets."""

from __future__ import annotations

import uuid

from odradek.clock import ManualClock
from odradek.protocol import compression
from odradek.protocol.errors import ErrorCode
from odradek.telemetry.clients import ClientTelemetry
from odradek.telemetry.subscriptions import DEFAULT_INTERVAL_MS
from tests.telemetry.support import otlp_metrics

LATENCY = "org.apache.kafka.producer.node.request.latency.avg"
QUEUE = "org.apache.kafka.consumer.fetch.manager.fetch.latency.avg"
PRODUCER = {"client_id": "orders-producer", "client_software_name": "confluent-kafka-python"}


def telemetry(clock: ManualClock, **subscriptions: dict[str, str]) -> ClientTelemetry:
    made = ClientTelemetry(clock, max_bytes=10_000, max_clients=3)
    made.update(subscriptions)
    return made


def test_a_client_gets_the_metrics_of_the_subscriptions_it_matches() -> None:
    clock = ManualClock(0)
    clients = telemetry(
        clock,
        producers={
            "metrics": "org.apache.kafka.producer.",
            "interval.ms": "1000",
            "match": "client_id=orders-.*",
        },
        consumers={
            "metrics": "org.apache.kafka.consumer.",
            "interval.ms": "500",
            "match": "client_id=billing-.*",
        },
    )
    producer = clients.subscribe(None, PRODUCER, "User:ann")
    assert producer.instance_id.int != 0
    assert producer.assigned.prefixes == ("org.apache.kafka.producer.",)
    assert producer.assigned.interval_ms == 1000
    other = clients.subscribe(None, {"client_id": "else"}, "User:bob")
    assert other.assigned.prefixes == ()
    assert other.assigned.interval_ms == DEFAULT_INTERVAL_MS
    assert other.assigned.subscription_id != producer.assigned.subscription_id

    everything = telemetry(clock, all={"metrics": "*", "interval.ms": "2000"})
    assert everything.subscribe(None, PRODUCER, "User:ann").assigned.prefixes == ("",)


def test_pushed_metrics_are_kept_as_asked_for() -> None:
    clock = ManualClock(0)
    clients = telemetry(
        clock, producers={"metrics": "org.apache.kafka.producer.", "interval.ms": "1000"}
    )
    instance = clients.subscribe(None, PRODUCER, "User:ann")
    payload = otlp_metrics([(LATENCY, "gauge", 2.5, {"node.id": "1"}), (QUEUE, "gauge", 9.0, {})])
    compressed = compression.compress(compression.ZSTD, payload)
    error = clients.push(
        instance.instance_id, instance.assigned.subscription_id, False, compression.ZSTD, compressed
    )
    assert error == ErrorCode.none
    (kept,) = clients.instances()
    assert kept.metrics == {(LATENCY, "gauge", (("client_rack", "r1"), ("node.id", "1"))): 2.5}


def test_pushes_are_refused_as_kafka_refuses_them() -> None:
    clock = ManualClock(0)
    clients = telemetry(clock, producers={"metrics": "*", "interval.ms": "1000"})
    instance = clients.subscribe(None, PRODUCER, "User:ann")
    sid = instance.assigned.subscription_id
    good = otlp_metrics([(LATENCY, "gauge", 1.0, {})])
    push = clients.push
    assert push(None, sid, False, compression.NONE, good) == ErrorCode.invalid_request
    assert (
        push(uuid.uuid4(), sid, False, compression.NONE, good) == ErrorCode.unknown_subscription_id
    )
    assert push(instance.instance_id, sid + 1, False, 0, good) == ErrorCode.unknown_subscription_id
    assert push(instance.instance_id, sid, False, 9, good) == ErrorCode.unsupported_compression_type
    assert push(instance.instance_id, sid, False, 0, b"x" * 10_001) == ErrorCode.telemetry_too_large
    assert push(instance.instance_id, sid, False, 0, good) == ErrorCode.none
    clock.advance(100)
    assert push(instance.instance_id, sid, False, 0, good) == ErrorCode.throttling_quota_exceeded
    clock.advance(500)
    assert (
        push(instance.instance_id, sid, False, 0, b"\xff\xff not otlp") == ErrorCode.invalid_record
    )
    # A subscription that changes makes the client's id stale: it must ask again.
    clients.update({"producers": {"metrics": "*", "interval.ms": "2000"}})
    again = clients.subscribe(instance.instance_id, PRODUCER, "User:ann")
    assert again.assigned.subscription_id != sid
    clock.advance(2000)
    assert push(instance.instance_id, sid, False, 0, good) == ErrorCode.unknown_subscription_id
    # The last, terminating push is taken however soon, and the instance goes with it.
    new_sid = again.assigned.subscription_id
    assert push(instance.instance_id, new_sid, False, 0, good) == ErrorCode.none
    assert push(instance.instance_id, new_sid, True, 0, good) == ErrorCode.none
    assert clients.instances() == []


def test_instances_are_forgotten_and_bounded() -> None:
    clock = ManualClock(0)
    clients = telemetry(clock, producers={"metrics": "*", "interval.ms": "1000"})
    first = clients.subscribe(None, PRODUCER, "User:ann")
    for _ in range(3):
        clients.subscribe(None, PRODUCER, "User:ann")
    assert len(clients.instances()) == 3  # max_clients: the first went
    assert first.instance_id not in {i.instance_id for i in clients.instances()}
    clock.advance(3001)  # three intervals without a word
    assert clients.instances() == []


def test_what_is_kept_is_bounded_per_client_and_in_all() -> None:
    clock = ManualClock(0)
    clients = ClientTelemetry(
        clock, max_bytes=1_000_000, max_clients=10, max_points_per_client=5, max_points=8
    )
    clients.update({"all": {"metrics": "*", "interval.ms": "1000"}})

    def push(instance_id: uuid.UUID, sid: int, labels: list[str]) -> None:
        points = [(LATENCY, "gauge", 1.0, {"node.id": n}) for n in labels]
        clock.advance(1000)
        assert clients.push(instance_id, sid, False, 0, otlp_metrics(points)) == ErrorCode.none

    first = clients.subscribe(None, PRODUCER, "User:ann")
    sid = first.assigned.subscription_id
    push(first.instance_id, sid, ["a", "b"])
    push(first.instance_id, sid, ["c", "d"])  # replaces the last push: labels do not pile up
    assert {labels[-1][1] for _, _, labels in first.metrics} == {"c", "d"}
    push(first.instance_id, sid, [str(n) for n in range(20)])
    assert len(first.metrics) == 5  # the client's bound
    second = clients.subscribe(None, PRODUCER, "User:bob")
    push(second.instance_id, second.assigned.subscription_id, [str(n) for n in range(20)])
    assert len(second.metrics) == 3  # what is left of the bound over every client
    assert sum(len(i.metrics) for i in clients.instances()) == 8
