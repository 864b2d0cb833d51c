"""Kafka's record-batch compression codecs, by the id in bits 0-2 of a batch's attributes.

=====  ======  =====================================================================
id     name    wire format
=====  ======  =====================================================================
0      none    the records as they are
1      gzip    a gzip member (RFC 1952)
2      snappy  raw snappy; or xerial-framed snappy, which the Java client writes
3      lz4     an LZ4 frame with independent blocks
4      zstd    a zstd frame
=====  ======  =====================================================================

Xerial framing, as the Java client writes it: the 8-byte magic ``\\x82SNAPPY\\x00``, two
big-endian int32 (version, compatible version), then blocks, each a big-endian int32 length
followed by that many bytes of raw snappy. :func:`decompress` accepts both forms; :func:`compress`
writes raw snappy, which every client reads.

Pure functions on bytes, backed by ``cramjam``. Mapping a topic's ``compression.type`` values
``producer`` and ``uncompressed`` onto these ids is the caller's business.

:func:`decompress_bounded` is for bytes from the network: it never writes more than a given
limit, so a small batch that claims (or inflates to) gigabytes costs no more memory than the
limit, and it decompresses into a buffer each thread reuses, so a produce path that validates
every compressed batch does not allocate one per batch.
"""

from __future__ import annotations

import struct
import threading

import cramjam

NONE = 0
GZIP = 1
SNAPPY = 2
LZ4 = 3
ZSTD = 4

CODEC_NAMES: dict[str, int] = {
    "none": NONE,
    "gzip": GZIP,
    "snappy": SNAPPY,
    "lz4": LZ4,
    "zstd": ZSTD,
}

XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER_SIZE = len(XERIAL_MAGIC) + 8  # magic, version, compatible version
_BLOCK_LENGTH = struct.Struct(">i")

GZIP_LEVEL = 6  # java.util.zip's default, which the Java client uses
ZSTD_LEVEL = 3  # zstd's and Kafka's default

Bytes = bytes | bytearray | memoryview


class CompressionError(ValueError):
    """Data that the codec cannot decode, or a codec id Kafka does not define."""


class DecompressedTooLarge(CompressionError):
    """Data that decompresses to more than the limit it was given."""


def codec_id(name: str) -> int:
    """The attribute id of a codec named ``none``, ``gzip``, ``snappy``, ``lz4`` or ``zstd``."""
    try:
        return CODEC_NAMES[name.lower()]
    except KeyError:
        raise CompressionError(f"unknown compression codec {name!r}") from None


def codec_name(codec: int) -> str:
    for name, value in CODEC_NAMES.items():
        if value == codec:
            return name
    raise CompressionError(f"unknown compression codec id {codec}")


def compress(codec: int, data: Bytes) -> bytes:
    """Compress ``data`` as a batch with compression ``codec`` carries its records."""
    if codec == NONE:
        return bytes(data)
    if codec == GZIP:
        return bytes(cramjam.gzip.compress(data, level=GZIP_LEVEL))
    if codec == SNAPPY:
        return bytes(cramjam.snappy.compress_raw(data))
    if codec == LZ4:
        # Kafka's Java reader decodes each block on its own, so blocks must not refer back.
        compressor = cramjam.lz4.Compressor(block_linked=False)
        compressor.compress(data if isinstance(data, bytes) else bytes(data))
        return bytes(compressor.finish())
    if codec == ZSTD:
        return bytes(cramjam.zstd.compress(data, level=ZSTD_LEVEL))
    raise CompressionError(f"unknown compression codec id {codec}")


def decompress(codec: int, data: Bytes) -> bytes:
    """The bytes ``data`` holds compressed with ``codec``; :class:`CompressionError` if invalid."""
    if codec == NONE:
        return bytes(data)
    try:
        if codec == GZIP:
            return bytes(cramjam.gzip.decompress(data))
        if codec == SNAPPY:
            if bytes(data[: len(XERIAL_MAGIC)]) == XERIAL_MAGIC:
                return _xerial_decompress(memoryview(data))
            return bytes(cramjam.snappy.decompress_raw(data))
        if codec == LZ4:
            return bytes(cramjam.lz4.decompress(data))
        if codec == ZSTD:
            return bytes(cramjam.zstd.decompress(data))
    except cramjam.DecompressionError as e:
        raise CompressionError(f"invalid {codec_name(codec)} data: {e}") from e
    raise CompressionError(f"unknown compression codec id {codec}")


def _xerial_blocks(data: memoryview) -> list[memoryview]:
    """The snappy blocks of a xerial stream (Kafka's snappy framing: a header, then blocks each
    after its 4-byte length), every length checked against the bytes left."""
    if len(data) < _XERIAL_HEADER_SIZE:
        raise CompressionError("xerial snappy stream ends inside its header")
    blocks = []
    position = _XERIAL_HEADER_SIZE
    end = len(data)
    while position < end:
        if end - position < 4:
            raise CompressionError("xerial snappy stream ends inside a block length")
        (length,) = _BLOCK_LENGTH.unpack_from(data, position)
        position += 4
        if length < 0 or position + length > end:
            raise CompressionError(f"xerial snappy block length {length} overruns the stream")
        blocks.append(data[position : position + length])
        position += length
    return blocks


def _xerial_decompress(data: memoryview) -> bytes:
    return b"".join(bytes(cramjam.snappy.decompress_raw(block)) for block in _xerial_blocks(data))


# -- bounded decompression ---------------------------------------------------------------------

# The reused buffer starts at this size and is kept between calls up to _SCRATCH_KEEP; a batch
# that inflates beyond that gets a buffer of its own, dropped afterwards.
_SCRATCH_START = 256 * 1024
_SCRATCH_KEEP = 8 * 1024 * 1024
# What cramjam's streaming decoders (gzip, lz4 frame, zstd) say when the output buffer is full,
# as opposed to when the input is not valid.
_OUTPUT_FULL = "failed to write whole buffer"


class _Scratch(threading.local):
    buffer: bytearray | None = None


_scratch = _Scratch()


def decompress_bounded(codec: int, data: Bytes, limit: int) -> tuple[bytearray, int]:
    """The bytes ``data`` holds compressed with ``codec``, at most ``limit`` of them: the answer
    ``(buffer, size)`` has them in ``buffer[:size]``.

    Raises :class:`DecompressedTooLarge` past the limit (having written no more than ``limit + 1``
    bytes) and :class:`CompressionError` for data the codec cannot decode. ``buffer`` is one this
    thread reuses: read it before the next call on the same thread.

    Snappy says its decompressed size up front, so it is checked before anything is allocated;
    the stream codecs are decompressed into a buffer that grows (4x at a time, to ``limit + 1``)
    only while the output keeps filling it.
    """
    if codec == NONE:
        if len(data) > limit:
            raise DecompressedTooLarge(f"{len(data)} bytes are over the limit of {limit}")
        return bytearray(data), len(data)
    try:
        if codec == SNAPPY:
            if bytes(data[: len(XERIAL_MAGIC)]) == XERIAL_MAGIC:
                return _xerial_bounded(memoryview(data), limit)
            size = _snappy_claim(data)
            if size > limit:
                raise DecompressedTooLarge(
                    f"snappy data claims {size} bytes, over the limit of {limit}"
                )
            buffer = _buffer(size)
            return buffer, int(cramjam.snappy.decompress_raw_into(data, memoryview(buffer)[:size]))
        if codec == GZIP:
            into = cramjam.gzip.decompress_into
        elif codec == LZ4:
            into = cramjam.lz4.decompress_into
        elif codec == ZSTD:
            into = cramjam.zstd.decompress_into
        else:
            raise CompressionError(f"unknown compression codec id {codec}")
        size = min(limit + 1, max(_SCRATCH_START, 8 * len(data)))
        while True:
            buffer = _buffer(size)
            try:
                written = int(into(data, memoryview(buffer)[:size]))
            except cramjam.DecompressionError as e:
                if _OUTPUT_FULL not in str(e):
                    raise
                written = size
            if written > limit:
                raise DecompressedTooLarge(
                    f"{codec_name(codec)} data inflates past the limit of {limit} bytes"
                )
            if written < size:
                return buffer, written
            # Full: the data may be exactly this long or longer; only a bigger buffer can tell.
            size = min(limit + 1, size * 4)
    except cramjam.DecompressionError as e:
        raise CompressionError(f"invalid {codec_name(codec)} data: {e}") from e


def _buffer(size: int) -> bytearray:
    """A buffer of at least ``size`` bytes: this thread's reused one where it is big enough."""
    buffer = _scratch.buffer
    if buffer is not None and len(buffer) >= size:
        return buffer
    buffer = bytearray(max(size, _SCRATCH_START))
    if len(buffer) <= _SCRATCH_KEEP:
        _scratch.buffer = buffer
    return buffer


# Snappy's densest element, a copy of 64 bytes, takes 3 bytes: no data inflates further.
_SNAPPY_MAX_RATIO = 22


def _snappy_claim(data: Bytes) -> int:
    """The decompressed size raw snappy ``data`` announces, if it could be true."""
    size = int(cramjam.snappy.decompress_raw_len(data))
    if size > _SNAPPY_MAX_RATIO * len(data) + 64:
        raise CompressionError(f"snappy data of {len(data)} bytes claims {size} bytes")
    return size


def _xerial_bounded(data: memoryview, limit: int) -> tuple[bytearray, int]:
    blocks: list[tuple[memoryview, int]] = []  # (block, decompressed size)
    total = 0
    for block in _xerial_blocks(data):
        size = _snappy_claim(block)
        total += size
        if total > limit:
            raise DecompressedTooLarge(f"snappy data claims over the limit of {limit} bytes")
        blocks.append((block, size))
    buffer = _buffer(total)
    view = memoryview(buffer)
    written = 0
    for block, size in blocks:
        if cramjam.snappy.decompress_raw_into(block, view[written:]) != size:
            raise CompressionError("xerial snappy block is shorter than it claims")
        written += size
    return buffer, written
