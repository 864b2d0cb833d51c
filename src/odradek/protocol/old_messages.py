"""Requests and responses of versions Kafka 4 dropped (KIP-896) and kio therefore lacks, for
APIs odradek serves: ListOffsets v0, OffsetCommit v0-v1, OffsetFetch v0, CreateTopics v0-v1,
DeleteTopics v0, OffsetForLeaderEpoch v0-v1, DescribeConfigs v0, DescribeLogDirs v0, and
DescribeAcls, CreateAcls and DeleteAcls v0 (which sarama up to 1.26 sends), and WriteTxnMarkers v0
(which brokers of Kafka 2.x send).

Written once from Kafka 3.9's message definitions (clients/src/main/resources/common/message/
*.json): each version is a list of fields under kio's names, so a decoded request reads like
kio's (attributes, with the defaults Kafka gives fields a version lacks) and a response is
written from the same version-independent fields a handler gives ``RequestContext.respond``.
All these versions are non-flexible: request header v1, response header v0, int16-length
strings, int32-length arrays. Pure functions on bytes.

Field types: ``int8`` ... ``int64``, ``timedelta_i32`` (milliseconds, read as a
``timedelta`` as kio reads it), ``bool``, ``string``, ``nullable_string``, a list of fields
(an array of structs), ``("array", type)`` (``"nullable_array"`` when null is allowed), or
``("absent", value)`` for a field of later versions inside a struct: nothing on the wire, read as
Kafka's default ``value``. A response field may name a function computing its value from the
mapping instead.
"""

from __future__ import annotations

import datetime
import struct
from collections.abc import Callable, Mapping, Sequence
from types import SimpleNamespace
from typing import Any

from odradek.protocol.bounds import BoundedReader, MalformedRequest
from odradek.protocol.framing import fill_size_prefix
from odradek.protocol.messages import RequestHeader, decode_request, peek_header

FieldType = Any  # str | list[Field] | tuple[str, FieldType]
Field = tuple[str, FieldType] | tuple[str, FieldType, Callable[[Mapping[str, Any]], Any]]

_HEADER_PREFIX_SIZE = 8
_INTS = {"int8": struct.Struct(">b"), "int16": struct.Struct(">h"), "int32": struct.Struct(">i")}
_INTS["int64"] = struct.Struct(">q")
DEFAULT_CONFIG = 5  # DescribeConfigs' config source of a config nobody set

_OFFSET_COMMIT_RESPONSE: list[Field] = [
    (
        "topics",
        [
            ("name", "string"),
            ("partitions", [("partition_index", "int32"), ("error_code", "int16")]),
        ],
    )
]
_OFFSET_FETCH_REQUEST: list[Field] = [
    ("group_id", "string"),
    ("topics", [("name", "string"), ("partition_indexes", ("array", "int32"))]),
]
_OFFSET_FETCH_RESPONSE: list[Field] = [
    (
        "topics",
        [
            ("name", "string"),
            (
                "partitions",
                [
                    ("partition_index", "int32"),
                    ("committed_offset", "int64"),
                    ("metadata", "nullable_string"),
                    ("error_code", "int16"),
                ],
            ),
        ],
    )
]

_CREATE_TOPICS_REQUEST: list[Field] = [
    (
        "topics",
        [
            ("name", "string"),
            ("num_partitions", "int32"),
            ("replication_factor", "int16"),
            ("assignments", [("partition_index", "int32"), ("broker_ids", ("array", "int32"))]),
            ("configs", [("name", "string"), ("value", "nullable_string")]),
        ],
    ),
    ("timeout", "timedelta_i32"),
]
_OFFSET_FOR_LEADER_EPOCH_REQUEST: list[Field] = [
    (
        "topics",
        [("topic", "string"), ("partitions", [("partition", "int32"), ("leader_epoch", "int32")])],
    )
]

# Kafka's default for the resource pattern type the ACL APIs gained in v1: LITERAL
_LITERAL = ("absent", 3)
_ACL_FILTER: list[Field] = [
    ("resource_type_filter", "int8"),
    ("resource_name_filter", "nullable_string"),
    ("pattern_type_filter", _LITERAL),
    ("principal_filter", "nullable_string"),
    ("host_filter", "nullable_string"),
    ("operation", "int8"),
    ("permission_type", "int8"),
]

# (api key, version) -> fields, from Kafka 3.9's *Request.json / *Response.json
REQUESTS: dict[tuple[int, int], list[Field]] = {
    (2, 0): [
        ("replica_id", "int32"),
        (
            "topics",
            [
                ("name", "string"),
                (
                    "partitions",
                    [
                        ("partition_index", "int32"),
                        ("timestamp", "int64"),
                        ("max_num_offsets", "int32"),
                    ],
                ),
            ],
        ),
    ],
    (8, 0): [
        ("group_id", "string"),
        (
            "topics",
            [
                ("name", "string"),
                (
                    "partitions",
                    [
                        ("partition_index", "int32"),
                        ("committed_offset", "int64"),
                        ("committed_metadata", "nullable_string"),
                    ],
                ),
            ],
        ),
    ],
    (8, 1): [
        ("group_id", "string"),
        ("generation_id_or_member_epoch", "int32"),
        ("member_id", "string"),
        (
            "topics",
            [
                ("name", "string"),
                (
                    "partitions",
                    [
                        ("partition_index", "int32"),
                        ("committed_offset", "int64"),
                        ("commit_timestamp", "int64"),
                        ("committed_metadata", "nullable_string"),
                    ],
                ),
            ],
        ),
    ],
    (9, 0): _OFFSET_FETCH_REQUEST,
    (19, 0): _CREATE_TOPICS_REQUEST,
    (19, 1): [*_CREATE_TOPICS_REQUEST, ("validate_only", "bool")],
    (20, 0): [("topic_names", ("array", "string")), ("timeout", "timedelta_i32")],
    (23, 0): _OFFSET_FOR_LEADER_EPOCH_REQUEST,
    (23, 1): _OFFSET_FOR_LEADER_EPOCH_REQUEST,
    (35, 0): [
        ("topics", ("nullable_array", [("topic", "string"), ("partitions", ("array", "int32"))]))
    ],
    (32, 0): [
        (
            "resources",
            [
                ("resource_type", "int8"),
                ("resource_name", "string"),
                ("configuration_keys", ("nullable_array", "string")),
            ],
        )
    ],
    (29, 0): _ACL_FILTER,
    (30, 0): [
        (
            "creations",
            [
                ("resource_type", "int8"),
                ("resource_name", "string"),
                ("resource_pattern_type", _LITERAL),
                ("principal", "string"),
                ("host", "string"),
                ("operation", "int8"),
                ("permission_type", "int8"),
            ],
        )
    ],
    (31, 0): [("filters", _ACL_FILTER)],
    (27, 0): [
        (
            "markers",
            [
                ("producer_id", "int64"),
                ("producer_epoch", "int16"),
                ("transaction_result", "bool"),
                ("topics", [("name", "string"), ("partition_indexes", ("array", "int32"))]),
                ("coordinator_epoch", "int32"),
            ],
        )
    ],
}

RESPONSES: dict[tuple[int, int], list[Field]] = {
    (2, 0): [
        (
            "topics",
            [
                ("name", "string"),
                (
                    "partitions",
                    [
                        ("partition_index", "int32"),
                        ("error_code", "int16"),
                        ("old_style_offsets", ("array", "int64")),
                    ],
                ),
            ],
        )
    ],
    (8, 0): _OFFSET_COMMIT_RESPONSE,
    (8, 1): _OFFSET_COMMIT_RESPONSE,
    (9, 0): _OFFSET_FETCH_RESPONSE,
    (19, 0): [("topics", [("name", "string"), ("error_code", "int16")])],
    (19, 1): [
        (
            "topics",
            [("name", "string"), ("error_code", "int16"), ("error_message", "nullable_string")],
        )
    ],
    (20, 0): [("responses", [("name", "string"), ("error_code", "int16")])],
    (23, 0): [
        (
            "topics",
            [
                ("topic", "string"),
                (
                    "partitions",
                    [("error_code", "int16"), ("partition", "int32"), ("end_offset", "int64")],
                ),
            ],
        )
    ],
    (23, 1): [
        (
            "topics",
            [
                ("topic", "string"),
                (
                    "partitions",
                    [
                        ("error_code", "int16"),
                        ("partition", "int32"),
                        ("leader_epoch", "int32"),
                        ("end_offset", "int64"),
                    ],
                ),
            ],
        )
    ],
    (35, 0): [
        ("throttle_time", "int32"),
        (
            "results",
            [
                ("error_code", "int16"),
                ("log_dir", "string"),
                (
                    "topics",
                    [
                        ("name", "string"),
                        (
                            "partitions",
                            [
                                ("partition_index", "int32"),
                                ("partition_size", "int64"),
                                ("offset_lag", "int64"),
                                ("is_future_key", "bool"),
                            ],
                        ),
                    ],
                ),
            ],
        ),
    ],
    (32, 0): [
        ("throttle_time", "int32"),
        (
            "results",
            [
                ("error_code", "int16"),
                ("error_message", "nullable_string"),
                ("resource_type", "int8"),
                ("resource_name", "string"),
                (
                    "configs",
                    [
                        ("name", "string"),
                        ("value", "nullable_string"),
                        ("read_only", "bool"),
                        # v0 says whether a config is a default; v1 replaced it by its source
                        ("is_default", "bool", lambda c: c.get("config_source") == DEFAULT_CONFIG),
                        ("is_sensitive", "bool"),
                    ],
                ),
            ],
        ),
    ],
    # v0 answers carry no pattern type: a v0 filter selects LITERAL patterns only
    (29, 0): [
        ("throttle_time", "int32"),
        ("error_code", "int16"),
        ("error_message", "nullable_string"),
        (
            "resources",
            [
                ("resource_type", "int8"),
                ("resource_name", "string"),
                (
                    "acls",
                    [
                        ("principal", "string"),
                        ("host", "string"),
                        ("operation", "int8"),
                        ("permission_type", "int8"),
                    ],
                ),
            ],
        ),
    ],
    (30, 0): [
        ("throttle_time", "int32"),
        ("results", [("error_code", "int16"), ("error_message", "nullable_string")]),
    ],
    (31, 0): [
        ("throttle_time", "int32"),
        (
            "filter_results",
            [
                ("error_code", "int16"),
                ("error_message", "nullable_string"),
                (
                    "matching_acls",
                    [
                        ("error_code", "int16"),
                        ("error_message", "nullable_string"),
                        ("resource_type", "int8"),
                        ("resource_name", "string"),
                        ("principal", "string"),
                        ("host", "string"),
                        ("operation", "int8"),
                        ("permission_type", "int8"),
                    ],
                ),
            ],
        ),
    ],
    (27, 0): [
        (
            "markers",
            [
                ("producer_id", "int64"),
                (
                    "topics",
                    [
                        ("name", "string"),
                        ("partitions", [("partition_index", "int32"), ("error_code", "int16")]),
                    ],
                ),
            ],
        )
    ],
}

# What a request field missing from an old version means (Kafka's defaults), by name.
_REQUEST_DEFAULTS: dict[int, dict[str, Any]] = {
    8: {"generation_id_or_member_epoch": -1, "member_id": "", "group_instance_id": None},
    9: {"require_stable": False},
    19: {"validate_only": False},
    32: {"include_synonyms": False, "include_documentation": False},
}


def has_version(api_key: int, version: int) -> bool:
    return (api_key, version) in REQUESTS


def decoder(api_key: int) -> Callable[[memoryview], tuple[RequestHeader, Any]]:
    """A request decoder for ``api_key``: the versions here, kio's for the rest."""

    def decode(frame: memoryview) -> tuple[RequestHeader, Any]:
        _, version, _ = peek_header(frame)
        if (api_key, version) not in REQUESTS:
            return decode_request(frame.toreadonly())
        return decode_old_request(frame)

    return decode


def decode_old_request(frame: bytes | memoryview) -> tuple[RequestHeader, Any]:
    """Parse a whole request frame (without its length prefix) of a version listed here."""
    api_key, version, correlation_id = peek_header(frame)
    fields = REQUESTS.get((api_key, version))
    if fields is None:
        raise MalformedRequest(f"API key {api_key} version {version} is not read here")
    reader = BoundedReader(frame)
    reader.take(_HEADER_PREFIX_SIZE)
    client_id = reader.nullable_string()
    body = _read_struct(reader, fields)
    for name, value in _REQUEST_DEFAULTS.get(api_key, {}).items():
        if not hasattr(body, name):
            setattr(body, name, value)
    return RequestHeader(api_key, version, correlation_id, client_id), body


def _read_struct(reader: BoundedReader, fields: Sequence[Field]) -> SimpleNamespace:
    return SimpleNamespace(**{field[0]: _read(reader, field[1]) for field in fields})


def _read(reader: BoundedReader, kind: FieldType) -> Any:
    if isinstance(kind, list):
        return tuple(_read_struct(reader, kind) for _ in range(reader.array_length(False)))
    if isinstance(kind, tuple):
        container, item = kind
        if container == "absent":
            return item
        count = reader.int32()
        if count == -1 and container == "nullable_array":
            return None
        if count < 0:
            raise MalformedRequest(f"array length {count} where no null is allowed")
        if count > reader.end - reader.position:  # every element takes a byte at the least
            raise MalformedRequest(
                f"array of {count} elements claimed with {reader.end - reader.position} bytes left"
            )
        if isinstance(item, list):
            return tuple(_read_struct(reader, item) for _ in range(count))
        return tuple(_read(reader, item) for _ in range(count))
    if kind in _INTS:
        return int(reader.unpack(_INTS[kind])[0])
    if kind == "timedelta_i32":
        return datetime.timedelta(milliseconds=int(reader.unpack(_INTS["int32"])[0]))
    if kind == "bool":
        return bool(reader.unpack(_INTS["int8"])[0])
    if kind == "nullable_string":
        return reader.nullable_string()
    if kind == "string":
        value = reader.nullable_string()
        if value is None:
            raise MalformedRequest("null where a string is required")
        return value
    raise ValueError(f"unknown field type {kind!r}")


def encode_response(
    api_key: int, version: int, correlation_id: int, fields: Mapping[str, Any]
) -> bytes:
    """The whole response frame, length prefix included, from version-independent fields (the
    keyword arguments a handler gives ``RequestContext.respond``)."""
    layout = RESPONSES[(api_key, version)]
    out = bytearray(struct.pack(">ii", 0, correlation_id))
    _write_struct(out, layout, fields)
    fill_size_prefix(out)
    return bytes(out)


def _write_struct(out: bytearray, layout: Sequence[Field], values: Mapping[str, Any]) -> None:
    for field in layout:
        value = field[2](values) if len(field) == 3 else values.get(field[0])
        _write(out, field[1], value)


def _write(out: bytearray, kind: FieldType, value: Any) -> None:
    if isinstance(kind, list):
        items = list(value or ())
        out += struct.pack(">i", len(items))
        for item in items:
            _write_struct(out, kind, item)
    elif isinstance(kind, tuple):
        if kind[0] == "absent":
            return
        if value is None and kind[0] == "nullable_array":
            out += struct.pack(">i", -1)
            return
        items = list(value or ())
        out += struct.pack(">i", len(items))
        for item in items:
            if isinstance(kind[1], list):
                _write_struct(out, kind[1], item)
            else:
                _write(out, kind[1], item)
    elif kind in _INTS or kind == "timedelta_i32":
        kind = "int32" if kind == "timedelta_i32" else kind
        if isinstance(value, datetime.timedelta):
            value = value // datetime.timedelta(milliseconds=1)
        out += _INTS[kind].pack(int(value or 0))
    elif kind == "bool":
        out += b"\x01" if value else b"\x00"
    elif kind in ("string", "nullable_string"):
        if value is None:
            out += struct.pack(">h", -1 if kind == "nullable_string" else 0)
        else:
            data = str(value).encode()
            out += struct.pack(">h", len(data)) + data
    else:
        raise ValueError(f"unknown field type {kind!r}")
