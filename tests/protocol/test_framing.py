"""Kafka's framing on bytes alone: frames cut however the stream is split, buffers that grow with
the bytes that arrive (not with what a size prefix claims), and a bad size after good frames."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from odradek.protocol.framing import (
    FrameReader,
    FrameSizeError,
    fill_size_prefix,
    framed,
    size_prefix,
)

MB = 1024 * 1024


def feed(reader: FrameReader, data: bytes, piece: int) -> list[bytes]:
    """``data`` received ``piece`` bytes at a time; the frames it completed, as bytes."""
    out = []
    position = 0
    while position < len(data):
        buffer = reader.get_buffer()
        n = min(len(buffer), piece, len(data) - position)
        buffer[:n] = data[position : position + n]
        del buffer
        reader.buffer_updated(n)
        position += n
        while (frame := reader.next_frame()) is not None:
            out.append(bytes(frame))
    return out


def test_prefix_helpers_agree() -> None:
    body = b"twelve bytes"
    frame = bytearray(4) + body
    fill_size_prefix(frame)
    assert bytes(frame) == framed(body) == size_prefix(12) + body


@given(
    bodies=st.lists(st.binary(max_size=300), max_size=20),
    piece=st.integers(min_value=1, max_value=700),
    copy_below=st.sampled_from([0, 50, 1000]),
)
def test_frames_come_out_whole_however_the_stream_is_cut(
    bodies: list[bytes], piece: int, copy_below: int
) -> None:
    reader = FrameReader(1000, copy_below=copy_below, min_buffer=64, max_buffer=256, min_read=8)
    assert feed(reader, b"".join(framed(b) for b in bodies), piece) == bodies
    assert reader.partial == 0 and reader.cut_bytes == sum(map(len, bodies))


def test_small_frames_are_copied_and_large_ones_are_views_of_the_buffer() -> None:
    reader = FrameReader(MB, copy_below=100)
    buffer = reader.get_buffer()
    data = framed(b"s" * 10) + framed(b"L" * 200)
    buffer[: len(data)] = data
    reader.buffer_updated(len(data))
    small, large = reader.next_frame(), reader.next_frame()
    assert isinstance(small, bytes) and small == b"s" * 10
    assert isinstance(large, memoryview) and large.obj is buffer.obj
    assert bytes(large) == b"L" * 200


def test_a_huge_announcement_costs_only_the_bytes_that_came() -> None:
    """A peer that announces 100 MB and sends a little gets a buffer that fits what it sent."""
    reader = FrameReader(200 * MB)
    sent = 100 * 1024
    feed(reader, size_prefix(100 * MB) + b"x" * sent, piece=5000)
    assert reader.partial == sent + 4
    assert reader.capacity <= 4 * sent
    assert not reader.frames


def test_a_large_frame_grows_its_buffer_geometrically_and_arrives_intact() -> None:
    reader = FrameReader(64 * MB, min_buffer=64 * 1024)
    body = bytes(range(256)) * (40 * 1024)  # 10 MiB
    capacities = set()
    out = []
    data = framed(body)
    position = 0
    while position < len(data):
        buffer = reader.get_buffer()
        n = min(len(buffer), 256 * 1024, len(data) - position)
        buffer[:n] = data[position : position + n]
        del buffer
        reader.buffer_updated(n)
        position += n
        capacities.add(reader.capacity)
        # Never more than about twice what has arrived.
        assert reader.capacity <= max(64 * 1024, 2 * position + 16 * 1024)
        out.extend(bytes(f) for f in iter(reader.next_frame, None))
    assert out == [body]
    assert len(capacities) < 12  # doubling, not one buffer per read


def test_a_bad_size_after_good_frames_keeps_the_good_ones() -> None:
    reader = FrameReader(1000, min_size=4)
    buffer = reader.get_buffer()
    data = framed(b"good") + framed(b"also good") + size_prefix(5000) + b"rest"
    buffer[: len(data)] = data
    del buffer
    with pytest.raises(FrameSizeError, match=r"frame of 5000 bytes is outside 4\.\.1000"):
        reader.buffer_updated(len(data))
    assert [bytes(f) for f in reader.frames] == [b"good", b"also good"]


@pytest.mark.parametrize(
    ("prefix", "hint"),
    [(b"POST", "an HTTP request?"), (b"\x16\x03\x01\x02", "a TLS handshake on a plaintext")],
)
def test_a_bad_size_says_what_it_looks_like(prefix: bytes, hint: str) -> None:
    reader = FrameReader(1000)
    buffer = reader.get_buffer()
    buffer[:4] = prefix
    del buffer
    with pytest.raises(FrameSizeError) as raised:
        reader.buffer_updated(4)
    assert hint in raised.value.hint


def test_a_buffer_with_a_live_frame_is_not_overwritten() -> None:
    reader = FrameReader(MB, min_buffer=64, max_buffer=64, min_read=16)
    buffer = reader.get_buffer()
    buffer[:44] = framed(b"A" * 40)
    del buffer
    reader.buffer_updated(44)
    first = reader.next_frame()
    assert isinstance(first, memoryview)
    # Many more frames than the buffer holds: new buffers, since ``first`` views the old one.
    later = [bytes([i]) * 40 for i in range(20)]
    assert feed(reader, b"".join(framed(b) for b in later), piece=30) == later
    assert bytes(first) == b"A" * 40


def test_an_outsized_buffer_is_shed_between_frames() -> None:
    reader = FrameReader(64 * MB, max_buffer=MB)
    assert feed(reader, framed(b"z" * (3 * MB)), piece=MB) == [b"z" * (3 * MB)]
    assert reader.capacity > MB
    reader.shed()
    assert reader.capacity == 0
    assert feed(reader, framed(b"after"), piece=100) == [b"after"]


def test_a_trusted_peers_large_frames_one_after_another_reuse_one_buffer() -> None:
    reader = FrameReader(64 * MB, min_buffer=64 * 1024, max_buffer=256 * 1024, trusted=8 * MB)
    frames = [bytes([i]) * (3 * MB) for i in range(4)]
    assert feed(reader, framed(frames[0]), piece=256 * 1024) == [frames[0]]
    kept = reader.capacity
    assert kept > 3 * MB
    for expected in frames[1:]:
        data = framed(expected)
        # The next frame's first bytes land in the buffer the last one had, not a small one.
        assert feed(reader, data[:1000], piece=256 * 1024) == []
        assert reader.capacity == kept
        assert feed(reader, data[1000:], piece=256 * 1024) == [expected]
        assert reader.capacity == kept


def test_a_kept_large_buffer_is_not_overwritten_while_a_frame_views_it() -> None:
    reader = FrameReader(64 * MB, min_buffer=64 * 1024, max_buffer=256 * 1024, trusted=8 * MB)
    reader.feed(framed(b"a" * (2 * MB)))
    held = reader.next_frame()
    assert held is not None
    assert feed(reader, framed(b"b" * (2 * MB)), piece=256 * 1024) == [b"b" * (2 * MB)]
    assert bytes(held) == b"a" * (2 * MB)


def test_a_trusted_peers_large_frames_alive_in_turn_take_turns_in_two_buffers() -> None:
    # A follower with two fetches out: each answer arrives while the one before is still used.
    reader = FrameReader(64 * MB, min_buffer=64 * 1024, max_buffer=256 * 1024, trusted=8 * MB)
    reader.feed(framed(b"a" * (2 * MB)))
    first = reader.next_frame()
    reader.feed(framed(b"b" * (2 * MB)))
    second = reader.next_frame()
    assert isinstance(first, memoryview) and isinstance(second, memoryview)
    buffers = (first.obj, second.obj)
    assert buffers[0] is not buffers[1]
    held = [(first, b"a"), (second, b"b")]
    for i in range(4):
        held.pop(0)[0].release()
        reader.feed(framed(bytes([i]) * (2 * MB)))
        frame = reader.next_frame()
        assert isinstance(frame, memoryview)
        assert frame.obj is buffers[i % 2]
        assert frame == bytes([i]) * (2 * MB)
        kept, byte = held[0]
        assert kept == byte * (2 * MB)  # the frame still alive was not written over
        held.append((frame, bytes([i])))


def test_small_frames_after_large_ones_give_the_large_buffer_back_once_it_is_full() -> None:
    reader = FrameReader(64 * MB, min_buffer=64 * 1024, max_buffer=256 * 1024, trusted=8 * MB)
    assert feed(reader, framed(b"x" * (3 * MB)), piece=256 * 1024) == [b"x" * (3 * MB)]
    small = [bytes([i % 256]) * 1000 for i in range(4000)]  # more than the kept buffer holds
    assert feed(reader, b"".join(framed(f) for f in small), piece=64 * 1024) == small
    assert reader.capacity <= 256 * 1024


def test_an_untrusted_peers_large_buffer_is_not_kept() -> None:
    reader = FrameReader(64 * MB, min_buffer=64 * 1024, max_buffer=256 * 1024)
    assert feed(reader, framed(b"x" * (3 * MB)), piece=256 * 1024) == [b"x" * (3 * MB)]
    assert feed(reader, framed(b"y" * 100), piece=256 * 1024) == [b"y" * 100]
    assert reader.capacity <= 256 * 1024


def test_buffers_given_up_while_frames_view_them_are_taken_again_once_they_are_gone() -> None:
    # A producer whose acks=all requests wait for the followers: the last few frames are alive
    # while the next ones arrive, so the buffer they view cannot be read into again yet.
    reader = FrameReader(MB, min_buffer=64 * 1024, max_buffer=64 * 1024, min_read=1024)
    buffers: list[object] = []
    alive: list[memoryview] = []
    for i in range(300):
        body = bytes([i % 256]) * (20 * 1024)
        reader.feed(framed(body))
        frame = reader.next_frame()
        assert isinstance(frame, memoryview) and frame == body
        if not any(frame.obj is seen for seen in buffers):
            buffers.append(frame.obj)
        alive.append(frame)
        if len(alive) > 3:
            alive.pop(0).release()
        for j, kept in enumerate(alive):  # none written over while alive
            assert kept == bytes([(i - len(alive) + 1 + j) % 256]) * (20 * 1024)
    assert len(buffers) <= 4  # the one read into and at most two retired, in turn


def test_shed_lets_the_retired_buffers_go() -> None:
    reader = FrameReader(MB, min_buffer=64 * 1024, max_buffer=64 * 1024, min_read=1024)
    alive = []
    for i in range(10):
        reader.feed(framed(bytes([i]) * (20 * 1024)))
        alive.append(reader.next_frame())
    assert reader._retired
    alive.clear()
    reader.shed()
    assert reader._retired == []
    assert feed(reader, framed(b"after"), piece=100) == [b"after"]


def test_a_trusted_peers_large_buffer_outlives_a_few_small_frames_between_large_ones() -> None:
    # A follower's fetch answers: megabytes, then a nearly empty one, then megabytes again.
    reader = FrameReader(64 * MB, min_buffer=64 * 1024, max_buffer=256 * 1024, trusted=8 * MB)
    holders = set()
    for i, size in enumerate((2 * MB, 1900 * 1024, 1500 * 1024, 1800 * 1024, MB, 1200 * 1024)):
        large = bytes([i]) * size
        reader.feed(framed(large))
        frame = reader.next_frame()
        assert isinstance(frame, memoryview) and frame == large
        holders.add(id(frame.obj))
        frame.release()
        assert feed(reader, framed(b"small") * 3, piece=64 * 1024) == [b"small"] * 3
    assert len(holders) == 1


def test_an_untrusted_peers_outsized_buffer_is_not_retired_while_its_frame_lives() -> None:
    # A client's 3 MB request still being handled while its small ones keep coming: the buffer
    # the large one needed lives as long as that request, and not a moment longer here.
    reader = FrameReader(64 * MB, min_buffer=64 * 1024, max_buffer=256 * 1024, min_read=1024)
    reader.feed(framed(b"x" * (3 * MB)))
    held = reader.next_frame()
    assert isinstance(held, memoryview)
    small = [bytes([i % 256]) * 1000 for i in range(600)]
    assert feed(reader, b"".join(framed(f) for f in small), piece=64 * 1024) == small
    assert all(len(kept) <= 256 * 1024 for kept in reader._retired)
    assert reader.capacity <= 256 * 1024
    assert bytes(held) == b"x" * (3 * MB)
