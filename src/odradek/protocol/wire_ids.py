"""The schema registry ids a records section's keys or values carry, in the registry's wire
format (magic byte 0, then the id as a big-endian int32): what a leader reads of every record of
a topic that validates schema ids (``confluent.key/value.schema.validation``).

The section is one that :mod:`odradek.protocol.record_scan` passed, so its framing holds; this
reads each record's key and value lengths and the first five bytes after them, and builds a set
of the distinct ids. Record layout: see :mod:`odradek.protocol.records`.

Self-contained, plain typed Python that mypyc compiles (``setup.py``, as ``record_scan``):
:mod:`odradek.protocol.records` takes the extension where it was built from this source, else
this source. Pure function on bytes, any thread.
"""

from __future__ import annotations

_PREFIX_SIZE = 5


def _varint(buf: bytes, position: int) -> tuple[int, int]:
    """The zigzag varint at ``position`` and the position after it."""
    raw = 0
    shift = 0
    while True:
        b = buf[position]
        position += 1
        raw |= (b & 0x7F) << shift
        if b < 0x80:
            return (raw >> 1) ^ -(raw & 1), position
        shift += 7
        if shift > 63:
            raise IndexError("varint longer than 10 bytes")


def _schema_id(buf: bytes, position: int) -> int:
    value = buf[position] << 24 | buf[position + 1] << 16 | buf[position + 2] << 8
    value |= buf[position + 3]
    return value - (1 << 32) if value >= 1 << 31 else value


def schema_ids(buf: bytes, count: int, keys: bool, values: bool) -> tuple[set[int], bool]:
    """The distinct schema ids of the ``count`` records' keys (if ``keys``) and values (if
    ``values``) in ``buf``, and whether any such key or value, not null, lacks the wire-format
    prefix. Raises IndexError where the records end early (framing not checked)."""
    ids: set[int] = set()
    missing = False
    position = 0
    for _ in range(count):
        b = buf[position]
        if b < 0x80:
            length = (b >> 1) ^ -(b & 1)
            position += 1
        else:
            length, position = _varint(buf, position)
        end = position + length
        position += 1  # attributes
        if buf[position] < 0x80:  # timestamp delta
            position += 1
        else:
            position = _varint(buf, position)[1]
        if buf[position] < 0x80:  # offset delta
            position += 1
        else:
            position = _varint(buf, position)[1]
        b = buf[position]
        if b < 0x80:
            key_length = (b >> 1) ^ -(b & 1)
            position += 1
        else:
            key_length, position = _varint(buf, position)
        if key_length >= 0:
            if keys:
                if key_length < _PREFIX_SIZE or buf[position] != 0:
                    missing = True
                else:
                    ids.add(_schema_id(buf, position + 1))
            position += key_length
        if values:
            b = buf[position]
            if b < 0x80:
                value_length = (b >> 1) ^ -(b & 1)
                position += 1
            else:
                value_length, position = _varint(buf, position)
            if value_length >= 0:
                if value_length < _PREFIX_SIZE or buf[position] != 0:
                    missing = True
                else:
                    ids.add(_schema_id(buf, position + 1))
        if end > len(buf):
            raise IndexError("a record's length passes the section's end")
        position = end
    return ids, missing
