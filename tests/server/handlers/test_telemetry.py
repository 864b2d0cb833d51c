"""GetTelemetrySubscriptions and PushTelemetry as handlers: a client is given an instance id and
its subscription, pushes, and what it pushed is among the broker's client metrics."""

from __future__ import annotations

import uuid

from odradek.protocol.errors import ErrorCode
from odradek.server.metrics import client_metric_samples
from tests.server.handlers.conftest import HandlerCaller
from tests.telemetry.support import otlp_metrics

GET, PUSH = 71, 72
LATENCY = "org.apache.kafka.producer.node.request.latency.avg"


def test_a_client_subscribes_and_pushes(handlers: HandlerCaller) -> None:
    telemetry = handlers.services.telemetry
    assert telemetry is not None
    telemetry.update({"all": {"metrics": "org.apache.kafka.producer.", "interval.ms": "1000"}})
    answer = handlers.call(GET, 0, client_instance_id=uuid.UUID(int=0))
    assert answer.error_code == ErrorCode.none
    assert answer.client_instance_id.int != 0
    assert list(answer.requested_metrics) == ["org.apache.kafka.producer."]
    assert answer.push_interval.total_seconds() == 1.0
    assert set(answer.accepted_compression_types) == {1, 2, 3, 4}
    assert answer.delta_temporality is False

    pushed = handlers.call(
        PUSH,
        0,
        client_instance_id=answer.client_instance_id,
        subscription_id=answer.subscription_id,
        terminating=False,
        compression_type=0,
        metrics=otlp_metrics([(LATENCY, "gauge", 3.0, {"node.id": "1"})]),
    )
    assert pushed.error_code == ErrorCode.none
    samples = client_metric_samples(telemetry)
    assert samples == (
        (
            "org_apache_kafka_producer_node_request_latency_avg",
            (
                ("client_instance_id", str(answer.client_instance_id)),
                ("client_id", "odradek-tests"),
                ("principal", "User:ANONYMOUS"),
                ("client_rack", "r1"),
                ("node_id", "1"),
            ),
            3.0,
        ),
    )
    stale = handlers.call(
        PUSH,
        0,
        client_instance_id=answer.client_instance_id,
        subscription_id=answer.subscription_id + 1,
        terminating=True,
        compression_type=0,
        metrics=b"",
    )
    assert stale.error_code == ErrorCode.unknown_subscription_id
