"""The framing check of a RecordBatch v2's records: what a leader reads of every record it
accepts, as Kafka's LogValidator does by reading each one (``DefaultRecord.readFrom``), since a
batch whose records do not parse would break every reader later.

The check reads the records section in place and builds no object per record: each field is a
one- or two-byte varint in all but odd records, so those are read inline (one-byte zigzag values
from a table), anything longer through :func:`_varint`. Record layout: see
:mod:`odradek.protocol.records`.

This module is self-contained, plain typed Python that mypyc compiles: ``setup.py`` builds it as
an extension module where a C compiler is at hand (about ten times as fast: the produce path
calls it for every record), and :mod:`odradek.protocol.records` falls back to this source where
the extension is missing or older than this file. Pure function on bytes, any thread.
"""

from __future__ import annotations

# One-byte zigzag varints, decoded.
_ZIGZAG = tuple((b >> 1) ^ -(b & 1) for b in range(0x80))
# How far a one-byte length of a key, value or header value moves the reader: past the varint
# and the bytes it announces; -1 (null) announces none. Kafka's reader takes any negative length
# for null, but other readers (librdkafka, this project's own) refuse one below -1, so such a
# length moves the reader out of any record, and the record is refused.
_NOWHERE = 1 << 62
_SKIP = tuple(
    _NOWHERE if b & 1 and b != 1 else 1 + max((b >> 1) ^ -(b & 1), 0) for b in range(0x80)
)
# The first byte of a two-byte zigzag varint, as the value's low six bits; a negative value (its
# lowest bit set), where only a length is read, as _NOWHERE.
_LOW_SEVEN = tuple(_NOWHERE if b & 1 else (b & 0x7F) >> 1 for b in range(0x100))
# A record takes at least 7 bytes: its length, attributes, and five one-byte varints (timestamp
# delta, offset delta, key length, value length, header count).
MIN_RECORD_SIZE = 7
_MAX_LONG = 2**63 - 1


class FramingError(ValueError):
    """Records whose framing Kafka's record reader refuses."""


def _varint(buf: bytes, position: int, max_bytes: int) -> tuple[int, int]:
    """The zigzag varint of at most ``max_bytes`` bytes at ``position``, and the position after
    it (5 bytes for Kafka's int32 fields, 10 for its varlongs)."""
    raw = 0
    shift = 0
    end = position + max_bytes
    while position < end:
        b = buf[position]
        position += 1
        raw |= (b & 0x7F) << shift
        if b < 0x80:
            return (raw >> 1) ^ -(raw & 1), position
        shift += 7
    raise FramingError(f"varint longer than {max_bytes} bytes")


class ScanState:
    """Where a check of ``count`` records in ``buf[start:end]`` has got to, so that it can go on
    in parts (:func:`scan_some`): the next record's position and index, and what the records
    checked so far said. A ``count`` the bytes cannot hold is refused here, before any record is
    read."""

    def __init__(self, start: int, end: int, count: int) -> None:
        if count < 0 or count > (end - start) // MIN_RECORD_SIZE:
            raise FramingError(
                f"record count {count} does not fit the {end - start} bytes of the batch's records"
            )
        self.position = start
        self.end = end
        self.count = count
        self.checked = 0
        self.min_delta = _MAX_LONG
        self.max_delta = -_MAX_LONG
        self.null_keys = 0
        self.in_order = True

    def result(self) -> tuple[int, int, int, bool]:
        """The least and greatest timestamp delta, how many records have a null key, and
        whether the offset deltas run 0, 1, 2, ... (of the records checked so far)."""
        return self.min_delta, self.max_delta, self.null_keys, self.in_order


def scan(buf: bytes, start: int, end: int, count: int) -> tuple[int, int, int, bool]:
    """Check that ``buf[start:end]`` is exactly ``count`` well-framed records, as Kafka's
    ``DefaultRecord.readFrom`` reads them; raise :class:`FramingError` otherwise.

    Each record's length must fit what remains, its fields (varints of at most 5 bytes, 10 for
    the timestamp delta; key, value and header values whose length is -1 or fits; a header count
    of 0 to the bytes left; header keys not null) must take exactly that length, and no byte
    may follow the last record. One check is stricter than Kafka's reader: a key, value or
    header value length below -1 is refused, not read as null, since other readers refuse it.

    Returns the least and greatest timestamp delta, how many records have a null key, and
    whether the offset deltas run 0, 1, 2, .... Nothing is allocated per record, and a ``count``
    the bytes cannot hold is refused before any is read.
    """
    state = ScanState(start, end, count)
    scan_some(buf, state, count)
    return state.result()


def scan_some(buf: bytes, state: ScanState, records: int) -> bool:
    """Check the next ``records`` records (fewer where fewer are left) of the scan ``state``
    (see :func:`scan`), and move it past them; True once all of its records are checked and
    found to end where the bytes do. A scan in parts says what one whole :func:`scan` says,
    wherever it is cut: a long one can give way to other work between its parts."""
    end = state.end
    count = state.count
    first = state.checked
    last = min(count, first + max(records, 0))
    zigzag = _ZIGZAG
    skip = _SKIP
    low = _LOW_SEVEN
    varint = _varint
    position = state.position
    min_delta = state.min_delta
    max_delta = state.max_delta
    null_keys = state.null_keys
    in_order = state.in_order
    try:
        # ``expected``: the zigzag form of the offset delta the record should carry.
        for expected in range(2 * first, 2 * last, 2):
            b = buf[position]
            if b < 0x80:
                length = zigzag[b]
                position += 1
                if length < 6:  # MIN_RECORD_SIZE less the length itself
                    raise FramingError(f"record length {length} is too short for a record")
            else:
                c = buf[position + 1]
                if c < 0x80:
                    length = low[b] + (c << 6)  # at least 64, or _NOWHERE if negative
                    position += 2
                else:
                    length, position = varint(buf, position, 5)
                    if length < 6:
                        raise FramingError(f"record length {length} is too short for a record")
            record_end = position + length
            if record_end > end:
                raise FramingError(
                    "record length "
                    + ("below zero" if length >= _NOWHERE else str(length))
                    + f" does not fit the {end - position} bytes left"
                )
            # attributes (unused), then the timestamp delta
            b = buf[position + 1]
            if b < 0x80:
                delta = zigzag[b]
                position += 2
            else:
                delta, position = varint(buf, position + 1, 10)
            if delta > max_delta:
                max_delta = delta
            if delta < min_delta:
                min_delta = delta
            b = buf[position]
            if b < 0x80:
                position += 1
                if b != expected:
                    in_order = False
            else:
                c = buf[position + 1]
                if c < 0x80:
                    position += 2
                    if (b & 0x7F) | (c << 7) != expected:
                        in_order = False
                else:
                    offset_delta, position = varint(buf, position, 5)
                    if offset_delta != expected >> 1:
                        in_order = False
            # key
            b = buf[position]
            if b < 0x80:
                if b == 1:
                    null_keys += 1
                position += skip[b]
            else:
                size, position = varint(buf, position, 5)
                if size >= 0:
                    position += size
                elif size == -1:
                    null_keys += 1
                else:
                    raise FramingError(f"record key length {size} is below -1")
            # value
            b = buf[position]
            if b < 0x80:
                position += skip[b]
            else:
                c = buf[position + 1]
                if c < 0x80:
                    position += 2 + low[b] + (c << 6)  # below -1: out of the record
                else:
                    size, position = varint(buf, position, 5)
                    if size >= 0:
                        position += size
                    elif size != -1:
                        raise FramingError(f"record value length {size} is below -1")
            # headers
            b = buf[position]
            if b:
                if b < 0x80 and not b & 1:
                    headers = b >> 1
                    position += 1
                else:
                    headers, position = varint(buf, position, 5)
                    if headers < 0:
                        raise FramingError(f"record header count {headers} is negative")
                if headers > record_end - position:
                    raise FramingError(
                        f"record header count {headers} is more than the record's bytes left"
                    )
                for _ in range(headers):
                    size, position = varint(buf, position, 5)
                    if size < 0:
                        raise FramingError(f"record header key length {size} is negative")
                    position += size
                    size, position = varint(buf, position, 5)
                    if size >= 0:
                        position += size
                    elif size != -1:
                        raise FramingError(f"record header value length {size} is below -1")
                    if position > record_end:
                        break
            else:
                position += 1
            if position != record_end:
                raise FramingError(
                    f"record length {length} disagrees with its fields, which take "
                    f"{position - record_end + length}"
                )
    except IndexError:
        raise FramingError(
            f"the batch's records end inside a record (record count {count})"
        ) from None
    state.position = position
    state.checked = last
    state.min_delta = min_delta
    state.max_delta = max_delta
    state.null_keys = null_keys
    state.in_order = in_order
    if last < count:
        return False
    if position != end:
        raise FramingError(f"{end - position} bytes follow the {count} records of the batch")
    return True
