from __future__ import annotations

import struct

import cramjam
import pytest
from hypothesis import given
from hypothesis import strategies as st

from odradek.protocol import compression as c
from odradek.protocol.compression import CompressionError, codec_id, compress, decompress

CODECS = [c.NONE, c.GZIP, c.SNAPPY, c.LZ4, c.ZSTD]
SAMPLES = [
    b"",
    b"x",
    b"hello kafka " * 1000,
    bytes(range(256)) * 600,  # over an LZ4 block (64 KiB), so blocks must be independent
]


def test_codec_ids_are_kafkas() -> None:
    assert [codec_id(n) for n in ("none", "gzip", "snappy", "lz4", "zstd")] == [0, 1, 2, 3, 4]
    assert codec_id("ZSTD") == 4
    with pytest.raises(CompressionError):
        codec_id("brotli")
    with pytest.raises(CompressionError):
        codec_id("producer")  # a topic-config value the caller resolves, not a codec


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("data", SAMPLES, ids=lambda d: f"{len(d)}B")
def test_round_trip(codec: int, data: bytes) -> None:
    packed = compress(codec, data)
    assert isinstance(packed, bytes)
    assert decompress(codec, packed) == data
    assert decompress(codec, memoryview(packed)) == data
    assert decompress(codec, bytearray(packed)) == data
    assert decompress(codec, compress(codec, bytearray(data))) == data
    assert decompress(codec, compress(codec, memoryview(data))) == data


@given(codec=st.sampled_from(CODECS), data=st.binary(max_size=5000))
def test_round_trip_any_bytes(codec: int, data: bytes) -> None:
    assert decompress(codec, compress(codec, data)) == data


def test_compression_shrinks_repetitive_data() -> None:
    data = b"abcdefgh" * 4096
    for codec in CODECS[1:]:
        assert len(compress(codec, data)) < len(data) // 10


def test_formats_are_the_standard_ones() -> None:
    data = b"0123456789" * 500
    assert compress(c.GZIP, data)[:2] == b"\x1f\x8b"
    assert compress(c.LZ4, data)[:4] == b"\x04\x22\x4d\x18"  # LZ4 frame magic
    assert compress(c.ZSTD, data)[:4] == b"\x28\xb5\x2f\xfd"  # zstd frame magic
    # raw snappy: another raw snappy decoder reads it
    assert bytes(cramjam.snappy.decompress_raw(compress(c.SNAPPY, data))) == data


def test_lz4_blocks_are_independent() -> None:
    frame = compress(c.LZ4, b"a" * 10)
    flags = frame[4]
    assert flags >> 6 == 0b01  # frame format version 1
    assert flags & 0x20  # block independence


def _xerial(data: bytes, block_size: int) -> bytes:
    out = bytearray(b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1))
    for i in range(0, len(data), block_size):
        block = bytes(cramjam.snappy.compress_raw(data[i : i + block_size]))
        out += struct.pack(">i", len(block)) + block
    return bytes(out)


@pytest.mark.parametrize("data", SAMPLES, ids=lambda d: f"{len(d)}B")
def test_xerial_snappy_is_decoded(data: bytes) -> None:
    assert decompress(c.SNAPPY, _xerial(data, 32 * 1024)) == data
    assert decompress(c.SNAPPY, _xerial(data, 7)) == data


def test_xerial_snappy_with_little_endian_version_is_decoded() -> None:
    # some producers write the version ints little-endian; the blocks are what matters
    frame = bytearray(_xerial(b"abc" * 100, 1024))
    frame[8:16] = struct.pack("<ii", 1, 1)
    assert decompress(c.SNAPPY, bytes(frame)) == b"abc" * 100


@pytest.mark.parametrize(
    "frame",
    [
        b"\x82SNAPPY\x00\x00\x00",  # header cut short
        b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1) + b"\x00\x00",  # block length cut short
        b"\x82SNAPPY\x00" + struct.pack(">iii", 1, 1, 100) + b"abc",  # block overruns
        b"\x82SNAPPY\x00" + struct.pack(">iii", 1, 1, -1),  # negative block length
        b"\x82SNAPPY\x00" + struct.pack(">iii", 1, 1, 3) + b"\xff\xff\xff",  # bad block
    ],
)
def test_bad_xerial_raises(frame: bytes) -> None:
    with pytest.raises(CompressionError):
        decompress(c.SNAPPY, frame)


@pytest.mark.parametrize("codec", CODECS[1:])
@pytest.mark.parametrize("garbage", [b"garbage, not compressed at all", b"\xff" * 40])
def test_garbage_raises(codec: int, garbage: bytes) -> None:
    with pytest.raises(CompressionError):
        decompress(codec, garbage)


@pytest.mark.parametrize("codec", CODECS[1:])
def test_truncated_raises(codec: int) -> None:
    packed = compress(codec, bytes(range(256)) * 100)
    with pytest.raises(CompressionError):
        decompress(codec, packed[: len(packed) // 2])


def test_unknown_codec_raises() -> None:
    for codec in (5, 7, -1):
        with pytest.raises(CompressionError):
            compress(codec, b"x")
        with pytest.raises(CompressionError):
            decompress(codec, b"x")
    assert issubclass(CompressionError, ValueError)


# -- bounded decompression (bytes from the network) ---------------------------------------------


def bounded(codec: int, data: bytes, limit: int) -> bytes:
    buffer, size = c.decompress_bounded(codec, data, limit)
    return bytes(buffer[:size])


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("data", SAMPLES, ids=lambda d: f"{len(d)}B")
def test_bounded_round_trip(codec: int, data: bytes) -> None:
    packed = compress(codec, data)
    assert bounded(codec, packed, len(data)) == data  # exactly at the limit
    assert bounded(codec, packed, 1 << 30) == data
    assert bounded(c.SNAPPY, _xerial(data, 1000), len(data)) == data


@given(codec=st.sampled_from(CODECS), data=st.binary(max_size=3000))
def test_bounded_round_trip_any_bytes(codec: int, data: bytes) -> None:
    assert bounded(codec, compress(codec, data), len(data)) == data


@pytest.mark.parametrize("codec", CODECS)
def test_a_bomb_is_refused_without_inflating_it(codec: int) -> None:
    """16 MiB of zeros packs into a few KB (gzip, lz4, zstd) to a few hundred KB (snappy); a
    1 MiB limit refuses it having written little more than the limit."""
    bomb = compress(codec, bytes(16 << 20))
    with pytest.raises(c.DecompressedTooLarge):
        c.decompress_bounded(codec, bomb, 1 << 20)
    with pytest.raises(c.DecompressedTooLarge):
        c.decompress_bounded(c.SNAPPY, _xerial(bytes(16 << 20), 1 << 20), 1 << 20)
    buffer, _ = c.decompress_bounded(codec, compress(codec, b"small"), 1 << 20)
    assert len(buffer) <= 8 << 20  # the reused buffer did not keep the bomb's size


def test_a_snappy_claim_beyond_what_its_bytes_can_hold_is_corrupt() -> None:
    # the varint preamble says 2^31 bytes; 10 bytes of snappy cannot say that much
    with pytest.raises(CompressionError) as caught:
        c.decompress_bounded(c.SNAPPY, b"\x80\x80\x80\x80\x08abcde", 1 << 40)
    assert not isinstance(caught.value, c.DecompressedTooLarge)


@pytest.mark.parametrize("codec", CODECS[1:])
@pytest.mark.parametrize("garbage", [b"garbage, not compressed at all", b"\xff" * 40])
def test_bounded_garbage_raises(codec: int, garbage: bytes) -> None:
    with pytest.raises(CompressionError) as caught:
        c.decompress_bounded(codec, garbage, 1 << 20)
    assert not isinstance(caught.value, c.DecompressedTooLarge)


@pytest.mark.parametrize("codec", CODECS[1:])
def test_bounded_truncated_raises(codec: int) -> None:
    packed = compress(codec, bytes(range(256)) * 100)
    with pytest.raises(CompressionError):
        c.decompress_bounded(codec, packed[: len(packed) // 2], 1 << 20)
    with pytest.raises(CompressionError):
        c.decompress_bounded(codec, packed + b"trailing junk", 1 << 20)
