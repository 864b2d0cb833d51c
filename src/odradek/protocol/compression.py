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
"""

from __future__ import annotations

import struct

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


def _xerial_decompress(data: memoryview) -> bytes:
    if len(data) < _XERIAL_HEADER_SIZE:
        raise CompressionError("xerial snappy stream ends inside its header")
    out = bytearray()
    position = _XERIAL_HEADER_SIZE
    end = len(data)
    while position < end:
        if end - position < 4:
            raise CompressionError("xerial snappy stream ends inside a block length")
        (length,) = _BLOCK_LENGTH.unpack_from(data, position)
        position += 4
        if length < 0 or position + length > end:
            raise CompressionError(f"xerial snappy block length {length} overruns the stream")
        out += cramjam.snappy.decompress_raw(data[position : position + length])
        position += length
    return bytes(out)
