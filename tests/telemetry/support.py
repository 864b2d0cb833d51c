"""OTLP bytes as a client makes them, for tests of the broker's side."""

from __future__ import annotations

from collections.abc import Sequence

from odradek.telemetry import otlp


def otlp_metrics(points: Sequence[tuple[str, str, float, dict[str, str]]]) -> bytes:
    """OTLP ``MetricsData`` of (name, ``gauge`` or ``sum``, value, attributes) points."""
    data = otlp.metrics_data_class()()
    resource = data.resource_metrics.add()
    resource.resource.attributes.add(key="client_rack").value.string_value = "r1"
    scope = resource.scope_metrics.add()
    for name, kind, value, attributes in points:
        metric = scope.metrics.add(name=name)
        point = getattr(metric, kind).data_points.add(as_double=value)
        for key, text in attributes.items():
            point.attributes.add(key=key).value.string_value = text
    return bytes(data.SerializeToString())
