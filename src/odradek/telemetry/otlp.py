"""The OpenTelemetry metrics a client pushes (OTLP's ``MetricsData`` protobuf), decoded with the
protobuf library from a descriptor of the part of OTLP's schema the broker reads.

Only what a broker reports is described: metric names, gauges' and sums' number points and
histograms' counts and sums, with their attributes and the resource's attributes. Protobuf skips
the fields a descriptor lacks, so a client's full OTLP message decodes with the field numbers
of ``opentelemetry/proto/metrics/v1/metrics.proto`` (OTLP 1.x) kept here.

The protobuf library is imported, and the descriptor built, only once something is subscribed
(:class:`~odradek.telemetry.clients.ClientTelemetry` does it on a thread of its own then): every
broker imports this module, few are pushed to, and protobuf is a part of a broker's start.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from google.protobuf import descriptor_pb2

_PACKAGE = "odradek.otlp"

# (message, [(field, number, type, label, message type of the field)]), OTLP's field numbers;
# type and label as named in protobuf's FieldDescriptorProto.
_SCHEMA: Sequence[tuple[str, Sequence[tuple[str, int, str, str, str]]]] = (
    (
        "MetricsData",
        (("resource_metrics", 1, "TYPE_MESSAGE", "LABEL_REPEATED", "ResourceMetrics"),),
    ),
    (
        "ResourceMetrics",
        (
            ("resource", 1, "TYPE_MESSAGE", "LABEL_OPTIONAL", "Resource"),
            ("scope_metrics", 2, "TYPE_MESSAGE", "LABEL_REPEATED", "ScopeMetrics"),
        ),
    ),
    ("Resource", (("attributes", 1, "TYPE_MESSAGE", "LABEL_REPEATED", "KeyValue"),)),
    ("ScopeMetrics", (("metrics", 2, "TYPE_MESSAGE", "LABEL_REPEATED", "Metric"),)),
    (
        "Metric",
        (
            ("name", 1, "TYPE_STRING", "LABEL_OPTIONAL", ""),
            ("gauge", 5, "TYPE_MESSAGE", "LABEL_OPTIONAL", "Gauge"),
            ("sum", 7, "TYPE_MESSAGE", "LABEL_OPTIONAL", "Sum"),
            ("histogram", 9, "TYPE_MESSAGE", "LABEL_OPTIONAL", "Histogram"),
        ),
    ),
    ("Gauge", (("data_points", 1, "TYPE_MESSAGE", "LABEL_REPEATED", "NumberDataPoint"),)),
    (
        "Sum",
        (
            ("data_points", 1, "TYPE_MESSAGE", "LABEL_REPEATED", "NumberDataPoint"),
            ("aggregation_temporality", 2, "TYPE_INT32", "LABEL_OPTIONAL", ""),
            ("is_monotonic", 3, "TYPE_BOOL", "LABEL_OPTIONAL", ""),
        ),
    ),
    (
        "Histogram",
        (
            ("data_points", 1, "TYPE_MESSAGE", "LABEL_REPEATED", "HistogramDataPoint"),
            ("aggregation_temporality", 2, "TYPE_INT32", "LABEL_OPTIONAL", ""),
        ),
    ),
    (
        "NumberDataPoint",
        (
            ("time_unix_nano", 3, "TYPE_FIXED64", "LABEL_OPTIONAL", ""),
            ("as_double", 4, "TYPE_DOUBLE", "LABEL_OPTIONAL", ""),
            ("as_int", 6, "TYPE_SFIXED64", "LABEL_OPTIONAL", ""),
            ("attributes", 7, "TYPE_MESSAGE", "LABEL_REPEATED", "KeyValue"),
        ),
    ),
    (
        "HistogramDataPoint",
        (
            ("time_unix_nano", 3, "TYPE_FIXED64", "LABEL_OPTIONAL", ""),
            ("count", 4, "TYPE_FIXED64", "LABEL_OPTIONAL", ""),
            ("sum", 5, "TYPE_DOUBLE", "LABEL_OPTIONAL", ""),
            ("attributes", 9, "TYPE_MESSAGE", "LABEL_REPEATED", "KeyValue"),
        ),
    ),
    (
        "KeyValue",
        (
            ("key", 1, "TYPE_STRING", "LABEL_OPTIONAL", ""),
            ("value", 2, "TYPE_MESSAGE", "LABEL_OPTIONAL", "AnyValue"),
        ),
    ),
    (
        "AnyValue",
        (
            ("string_value", 1, "TYPE_STRING", "LABEL_OPTIONAL", ""),
            ("bool_value", 2, "TYPE_BOOL", "LABEL_OPTIONAL", ""),
            ("int_value", 3, "TYPE_INT64", "LABEL_OPTIONAL", ""),
            ("double_value", 4, "TYPE_DOUBLE", "LABEL_OPTIONAL", ""),
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
    from google.protobuf import descriptor_pb2

    kinds = descriptor_pb2.FieldDescriptorProto
    file = descriptor_pb2.FileDescriptorProto(
        name="odradek_otlp_metrics.proto", package=_PACKAGE, syntax="proto3"
    )
    for name, fields in _SCHEMA:
        message = file.message_type.add(name=name)
        oneof = _ONEOFS.get(name)
        if oneof is not None:
            message.oneof_decl.add(name=oneof[0])
        for field, number, kind, label, type_name in fields:
            entry = message.field.add(
                name=field, number=number, type=getattr(kinds, kind), label=getattr(kinds, label)
            )
            if type_name:
                entry.type_name = f".{_PACKAGE}.{type_name}"
            if oneof is not None and field in oneof[1]:
                entry.oneof_index = 0
    return file


@functools.cache
def metrics_data_class() -> Any:
    """The message class of OTLP's ``MetricsData`` (as far as described here)."""
    from google.protobuf import descriptor_pool, message_factory

    pool = descriptor_pool.DescriptorPool()
    pool.Add(_file())
    return message_factory.GetMessageClass(pool.FindMessageTypeByName(f"{_PACKAGE}.MetricsData"))


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
    from google.protobuf.message import DecodeError

    data = metrics_data_class()()
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
