"""The OpenTelemetry metrics a client pushes (OTLP's ``MetricsData`` protobuf), decoded with the
protobuf library from a descriptor of the part of OTLP's schema the broker reads.

Only what a broker reports is described: metric names, gauges' and sums' number points and
histograms' counts and sums, with their attributes and the resource's attributes. Protobuf skips
the fields a descriptor lacks, so a client's full OTLP message decodes with the field numbers
of ``opentelemetry/proto/metrics/v1/metrics.proto`` (OTLP 1.x) kept here.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from google.protobuf.message import DecodeError

_F = descriptor_pb2.FieldDescriptorProto
_PACKAGE = "odradek.otlp"

# (message, [(field, number, type, label, message type of the field)]), OTLP's field numbers.
_SCHEMA: Sequence[tuple[str, Sequence[tuple[str, int, int, int, str]]]] = (
    (
        "MetricsData",
        (("resource_metrics", 1, _F.TYPE_MESSAGE, _F.LABEL_REPEATED, "ResourceMetrics"),),
    ),
    (
        "ResourceMetrics",
        (
            ("resource", 1, _F.TYPE_MESSAGE, _F.LABEL_OPTIONAL, "Resource"),
            ("scope_metrics", 2, _F.TYPE_MESSAGE, _F.LABEL_REPEATED, "ScopeMetrics"),
        ),
    ),
    ("Resource", (("attributes", 1, _F.TYPE_MESSAGE, _F.LABEL_REPEATED, "KeyValue"),)),
    ("ScopeMetrics", (("metrics", 2, _F.TYPE_MESSAGE, _F.LABEL_REPEATED, "Metric"),)),
    (
        "Metric",
        (
            ("name", 1, _F.TYPE_STRING, _F.LABEL_OPTIONAL, ""),
            ("gauge", 5, _F.TYPE_MESSAGE, _F.LABEL_OPTIONAL, "Gauge"),
            ("sum", 7, _F.TYPE_MESSAGE, _F.LABEL_OPTIONAL, "Sum"),
            ("histogram", 9, _F.TYPE_MESSAGE, _F.LABEL_OPTIONAL, "Histogram"),
        ),
    ),
    ("Gauge", (("data_points", 1, _F.TYPE_MESSAGE, _F.LABEL_REPEATED, "NumberDataPoint"),)),
    (
        "Sum",
        (
            ("data_points", 1, _F.TYPE_MESSAGE, _F.LABEL_REPEATED, "NumberDataPoint"),
            ("aggregation_temporality", 2, _F.TYPE_INT32, _F.LABEL_OPTIONAL, ""),
            ("is_monotonic", 3, _F.TYPE_BOOL, _F.LABEL_OPTIONAL, ""),
        ),
    ),
    (
        "Histogram",
        (
            ("data_points", 1, _F.TYPE_MESSAGE, _F.LABEL_REPEATED, "HistogramDataPoint"),
            ("aggregation_temporality", 2, _F.TYPE_INT32, _F.LABEL_OPTIONAL, ""),
        ),
    ),
    (
        "NumberDataPoint",
        (
            ("time_unix_nano", 3, _F.TYPE_FIXED64, _F.LABEL_OPTIONAL, ""),
            ("as_double", 4, _F.TYPE_DOUBLE, _F.LABEL_OPTIONAL, ""),
            ("as_int", 6, _F.TYPE_SFIXED64, _F.LABEL_OPTIONAL, ""),
            ("attributes", 7, _F.TYPE_MESSAGE, _F.LABEL_REPEATED, "KeyValue"),
        ),
    ),
    (
        "HistogramDataPoint",
        (
            ("time_unix_nano", 3, _F.TYPE_FIXED64, _F.LABEL_OPTIONAL, ""),
            ("count", 4, _F.TYPE_FIXED64, _F.LABEL_OPTIONAL, ""),
            ("sum", 5, _F.TYPE_DOUBLE, _F.LABEL_OPTIONAL, ""),
            ("attributes", 9, _F.TYPE_MESSAGE, _F.LABEL_REPEATED, "KeyValue"),
        ),
    ),
    (
        "KeyValue",
        (
            ("key", 1, _F.TYPE_STRING, _F.LABEL_OPTIONAL, ""),
            ("value", 2, _F.TYPE_MESSAGE, _F.LABEL_OPTIONAL, "AnyValue"),
        ),
    ),
    (
        "AnyValue",
        (
            ("string_value", 1, _F.TYPE_STRING, _F.LABEL_OPTIONAL, ""),
            ("bool_value", 2, _F.TYPE_BOOL, _F.LABEL_OPTIONAL, ""),
            ("int_value", 3, _F.TYPE_INT64, _F.LABEL_OPTIONAL, ""),
            ("double_value", 4, _F.TYPE_DOUBLE, _F.LABEL_OPTIONAL, ""),
        ),
    ),
)
# The fields of a oneof in OTLP: which one a message holds must be told from which one is set.
_ONEOFS = {
    "Metric": ("data", ("gauge", "sum", "histogram")),
    "NumberDataPoint": ("value", ("as_double", "as_int")),
    "AnyValue": ("value", ("string_value", "bool_value", "int_value", "double_value")),
}


def _file() -> descriptor_pb2.FileDescriptorProto:
    file = descriptor_pb2.FileDescriptorProto(
        name="odradek_otlp_metrics.proto", package=_PACKAGE, syntax="proto3"
    )
    for name, fields in _SCHEMA:
        message = file.message_type.add(name=name)
        oneof = _ONEOFS.get(name)
        if oneof is not None:
            message.oneof_decl.add(name=oneof[0])
        for field, number, kind, label, type_name in fields:
            entry = message.field.add(name=field, number=number, type=kind, label=label)
            if type_name:
                entry.type_name = f".{_PACKAGE}.{type_name}"
            if oneof is not None and field in oneof[1]:
                entry.oneof_index = 0
    return file


_POOL = descriptor_pool.DescriptorPool()
_POOL.Add(_file())
_METRICS_DATA: Any = message_factory.GetMessageClass(
    _POOL.FindMessageTypeByName(f"{_PACKAGE}.MetricsData")
)


class InvalidMetrics(Exception):
    """The pushed bytes are not an OTLP ``MetricsData``."""


@dataclass(frozen=True, slots=True)
class Point:
    """One value of one metric: ``name`` as the client named it (dotted), its attributes and
    the resource's (``labels``), and ``kind`` (``gauge``, ``sum``, ``histogram_count`` or
    ``histogram_sum``)."""

    name: str
    labels: tuple[tuple[str, str], ...]
    value: float
    kind: str


def _value(any_value: Any) -> str:
    which = any_value.WhichOneof("value")
    return "" if which is None else str(getattr(any_value, which))


def _labels(*attribute_lists: Any) -> tuple[tuple[str, str], ...]:
    labels: dict[str, str] = {}
    for attributes in attribute_lists:
        for pair in attributes:
            labels[pair.key] = _value(pair.value)
    return tuple(sorted(labels.items()))


def decode(payload: bytes) -> list[Point]:
    """Every point of the pushed ``payload`` (uncompressed)."""
    data = _METRICS_DATA()
    try:
        data.ParseFromString(payload)
    except (DecodeError, RuntimeError, ValueError) as e:
        raise InvalidMetrics(f"not OTLP metrics: {e}") from e
    return list(_points(data))


def _points(data: Any) -> Iterator[Point]:
    for resource_metrics in data.resource_metrics:
        resource = resource_metrics.resource.attributes
        for scope in resource_metrics.scope_metrics:
            for metric in scope.metrics:
                which = metric.WhichOneof("data")
                if which in ("gauge", "sum"):
                    for point in getattr(metric, which).data_points:
                        number = point.WhichOneof("value")
                        value = float(getattr(point, number)) if number else 0.0
                        labels = _labels(resource, point.attributes)
                        yield Point(metric.name, labels, value, which)
                elif which == "histogram":
                    for point in metric.histogram.data_points:
                        labels = _labels(resource, point.attributes)
                        yield Point(metric.name, labels, float(point.count), "histogram_count")
                        yield Point(metric.name, labels, float(point.sum), "histogram_sum")
