"""OTLP metrics decode into points with their attributes and the resource's; bytes that are
not OTLP are refused."""

from __future__ import annotations

import pytest

from odradek.telemetry.otlp import InvalidMetrics, Point, decode
from tests.telemetry.support import otlp_metrics


def test_gauges_and_sums_decode_with_their_attributes() -> None:
    payload = otlp_metrics(
        [
            ("org.apache.kafka.producer.node.request.latency.avg", "gauge", 1.5, {"node.id": "1"}),
            ("org.apache.kafka.producer.record.queue.time.max", "sum", 7.0, {}),
        ]
    )
    assert decode(payload) == [
        Point(
            "org.apache.kafka.producer.node.request.latency.avg",
            (("client_rack", "r1"), ("node.id", "1")),
            1.5,
            "gauge",
        ),
        Point(
            "org.apache.kafka.producer.record.queue.time.max",
            (("client_rack", "r1"),),
            7.0,
            "sum",
        ),
    ]


def test_bytes_that_are_not_otlp_are_refused() -> None:
    with pytest.raises(InvalidMetrics):
        decode(b"\xff\xff\xff\xff not protobuf")
