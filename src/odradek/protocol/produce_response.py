"""Produce responses (v0-v11) written by hand.

kio builds a response through validated entity objects, which cost more than the rest of a small
Produce request together; this writer takes the handler's plain values. Field order follows
ProduceResponse.json (v1 added the throttle time, v2 the log append time); v9 is the first
flexible version (compact strings and arrays, tagged-field sections, response header v1). The
tagged fields of later versions (current leader, node endpoints) are never written.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping, Sequence
from typing import Any

from odradek.protocol.fetch_response import uvarint
from odradek.protocol.framing import fill_size_prefix
from odradek.protocol.produce_request import FIRST_FLEXIBLE_VERSION, MAX_VERSION, MIN_VERSION

_INT32 = struct.Struct(">i")
_INT16 = struct.Struct(">h")
_PARTITION = struct.Struct(">ihqq")  # index, error code, base offset, log append time
_INT64 = struct.Struct(">q")
_CORRELATION_FLEXIBLE = struct.Struct(">ib")  # correlation id, no header tags


def _string(out: bytearray, value: str, flexible: bool) -> None:
    data = value.encode()
    if flexible:
        out += uvarint(len(data) + 1)
    else:
        out += _INT16.pack(len(data))
    out += data


def _nullable_string(out: bytearray, value: str | None, flexible: bool) -> None:
    if value is None:
        out += b"\0" if flexible else _INT16.pack(-1)
    else:
        _string(out, value, flexible)


def _array_length(out: bytearray, length: int, flexible: bool) -> None:
    out += uvarint(length + 1) if flexible else _INT32.pack(length)


def encode(
    version: int,
    correlation_id: int,
    topics: Sequence[tuple[str, Sequence[Mapping[str, Any]]]],
    throttle_time_ms: int = 0,
) -> bytes:
    """The whole frame, length prefix included. Each partition is a mapping with ``index``,
    ``error_code``, ``base_offset``, ``log_append_time``, ``log_start_offset``, ``record_errors``
    (mappings with ``batch_index`` and ``batch_index_error_message``) and ``error_message``."""
    if not MIN_VERSION <= version <= MAX_VERSION:
        raise ValueError(f"produce response version {version} is not written here")
    flexible = version >= FIRST_FLEXIBLE_VERSION
    out = bytearray(b"\0\0\0\0")
    out += (
        _CORRELATION_FLEXIBLE.pack(correlation_id, 0) if flexible else _INT32.pack(correlation_id)
    )
    _array_length(out, len(topics), flexible)
    for name, partitions in topics:
        _string(out, name, flexible)
        _array_length(out, len(partitions), flexible)
        for p in partitions:
            out += _PARTITION.pack(
                p["index"], p["error_code"], p["base_offset"], p["log_append_time"]
            )
            if version < 2:
                del out[-8:]
            if version >= 5:
                out += _INT64.pack(p["log_start_offset"])
            if version >= 8:
                errors = p["record_errors"]
                _array_length(out, len(errors), flexible)
                for error in errors:
                    out += _INT32.pack(error["batch_index"])
                    _nullable_string(out, error["batch_index_error_message"], flexible)
                    if flexible:
                        out += b"\0"
                _nullable_string(out, p["error_message"], flexible)
            if flexible:
                out += b"\0"
        if flexible:
            out += b"\0"
    if version >= 1:
        out += _INT32.pack(throttle_time_ms)
    if flexible:
        out += b"\0"
    fill_size_prefix(out)
    return bytes(out)
