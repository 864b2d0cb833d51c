"""The server's connection core on bytes alone (no sockets): requests out however the bytes are
cut, when reading pauses and resumes (read-ahead, the broker's memory pool), what closes the
connection, and the SASL gate."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from odradek.protocol.framing import framed, size_prefix
from odradek.security.sasl import SaslSession, SaslSettings
from odradek.server.connection_core import CloseConnection, ConnectionCore
from odradek.server.memory_pool import MemoryPool
from odradek.server.services import Session

API_VERSIONS, METADATA, SASL_HANDSHAKE = 18, 3, 17
MB = 1024 * 1024


def request(api_key: int, correlation_id: int = 1, body: bytes = b"") -> bytes:
    return framed(struct.pack(">hhih", api_key, 0, correlation_id, -1) + body)


class Shell:
    """What the asyncio connection does with a core, minus the socket."""

    def __init__(
        self,
        *,
        pool: MemoryPool | None = None,
        max_request_bytes: int = 100 * MB,
        read_ahead_bytes: int = 4 * MB,
        sasl: SaslSession | None = None,
    ) -> None:
        self.changes = 0
        self.core = ConnectionCore(
            Session("127.0.0.1:1", sasl=sasl),
            max_request_bytes=max_request_bytes,
            pool=pool,
            read_ahead_bytes=read_ahead_bytes,
            on_reading_change=self._changed,
        )

    def _changed(self) -> None:
        self.changes += 1

    def receive(self, data: bytes, piece: int = 1 << 30) -> int:
        """Feed ``data`` while the core reads; how many bytes it took."""
        position = 0
        while position < len(data) and self.core.reading:
            buffer = self.core.get_buffer()
            n = min(len(buffer), piece, len(data) - position)
            buffer[:n] = data[position : position + n]
            del buffer
            self.core.buffer_updated(n)
            position += n
        return position

    def take_all(self) -> list[bytes]:
        """Every request waiting, each handled at once."""
        out = []
        while (frame := self.core.next_request()) is not None:
            out.append(bytes(frame))
            del frame
            self.core.request_done()
        return out


@pytest.mark.parametrize("piece", [1, 7, 1000])
def test_requests_come_out_in_order_however_the_bytes_are_cut(piece: int) -> None:
    shell = Shell()
    frames = [request(METADATA, i, b"x" * (i * 13)) for i in range(30)]
    assert shell.receive(b"".join(frames), piece) == sum(map(len, frames))
    assert shell.take_all() == [f[4:] for f in frames]


def test_requests_are_views_of_the_receive_buffer() -> None:
    shell = Shell()
    shell.receive(request(METADATA, 1) + request(METADATA, 2))
    first, second = shell.core.next_request(), shell.core.next_request()
    assert isinstance(first, memoryview) and isinstance(second, memoryview)
    assert first.obj is second.obj


def test_reading_pauses_past_the_read_ahead_and_resumes_at_half() -> None:
    shell = Shell(read_ahead_bytes=960)
    frames = [request(METADATA, i, b"y" * 86) for i in range(20)]  # 96 bytes after the prefix
    taken = shell.receive(b"".join(frames), piece=100)
    assert not shell.core.reading and taken == 1000
    for _ in range(4):
        assert shell.core.next_request() is not None
        shell.core.request_done()
    assert not shell.core.reading  # 576 bytes wait: more than half
    assert shell.core.next_request() is not None
    assert shell.core.reading and shell.changes == 1


def test_a_frame_over_the_limit_closes_after_the_requests_before_it() -> None:
    shell = Shell(max_request_bytes=1000)
    shell.receive(request(API_VERSIONS, 1) + size_prefix(1001) + b"ignored")
    assert not shell.core.reading
    assert shell.core.next_request() is not None
    with pytest.raises(CloseConnection, match=r"1001 bytes is outside 0..socket.request.max.bytes"):
        shell.core.next_request()


def test_a_frame_too_short_for_a_header_closes() -> None:
    shell = Shell()
    shell.receive(framed(b"\0\x12"))
    with pytest.raises(CloseConnection, match="too short for a header"):
        shell.core.next_request()


def test_a_huge_announcement_costs_what_arrived() -> None:
    pool = MemoryPool(512 * MB)
    shell = Shell(pool=pool)
    shell.receive(size_prefix(100 * MB) + b"\0")
    shell.receive(b"\0")  # a second read, into a buffer that must not be 100 MB
    assert pool.used == 6
    assert shell.core.reading and shell.core.next_request() is None
    assert shell.core._reader.capacity <= 64 * 1024


def test_bytes_go_back_to_the_pool_when_handled_or_when_the_connection_is_lost() -> None:
    pool = MemoryPool(MB)
    shell = Shell(pool=pool)
    frames = request(METADATA, 1, b"a" * 100) + request(METADATA, 2)
    shell.receive(frames + size_prefix(500) + b"partial")
    assert pool.used == len(frames) + 11
    assert pool.releasable == len(frames)
    assert shell.core.next_request() is not None
    shell.core.request_done()
    assert pool.used == len(frames) + 11 - 114
    assert shell.core.next_request() is not None  # taken, not yet handled
    shell.core.connection_lost()
    assert pool.used == 0 and pool.releasable == 0


def test_an_exhausted_pool_stops_reading_until_memory_is_released() -> None:
    pool = MemoryPool(1000)
    busy, other = Shell(pool=pool), Shell(pool=pool)
    frames = [request(METADATA, i, b"z" * 86) for i in range(15)]  # 100 bytes each
    taken = busy.receive(b"".join(frames), piece=100)
    assert taken == 1000 and pool.exhausted and not busy.core.reading
    # Another connection reads what one receive brings, then waits too: nothing is lost.
    assert other.receive(request(API_VERSIONS, 1), piece=12) == 12
    assert not other.core.reading
    assert busy.take_all() == [f[4:] for f in frames[:10]]
    assert busy.core.reading and other.core.reading
    assert other.receive(request(API_VERSIONS, 1)[12:]) == 2
    assert other.take_all() == [request(API_VERSIONS, 1)[4:]]
    assert busy.receive(b"".join(frames[10:])) == 500
    assert busy.take_all() == [f[4:] for f in frames[10:]]
    assert pool.used == 0


def test_a_request_larger_than_the_pool_is_still_read_whole() -> None:
    """Partial requests alone fill the pool: the longest waiting may finish its own (else the
    broker would wait forever), and the others wait until it is handled."""
    pool = MemoryPool(1000)
    first, second = Shell(pool=pool), Shell(pool=pool)
    big = request(METADATA, 1, b"b" * 3000)
    assert second.receive(big[:600]) == 600
    assert first.receive(big, piece=500) == len(big)  # past the limit, by one request
    assert second.receive(big[600:], piece=100) == 100  # one more receive, then it waits
    assert not second.core.reading
    assert first.take_all() == [big[4:]]
    assert second.core.reading
    # Past the limit again, with nothing whole to release: its turn to finish.
    assert second.receive(big[700:], piece=100) == len(big) - 700
    assert second.take_all() == [big[4:]]
    assert pool.used == 0


# -- the SASL gate -------------------------------------------------------------------------------


def sasl_session(reauth_ms: int = 0) -> SaslSession:
    settings = SaslSettings(("PLAIN",), {"alice": "secret", "a": "b"}, lambda u, m: None, reauth_ms)
    return SaslSession(settings)


def test_before_authentication_only_the_handshake_apis_are_served() -> None:
    core = Shell(sasl=sasl_session()).core
    for api_key in (API_VERSIONS, SASL_HANDSHAKE, 36):
        core.admit(api_key, now_ms=0)
    with pytest.raises(CloseConnection, match="API key 3 before SASL authentication"):
        core.admit(METADATA, now_ms=0)


def test_a_session_past_its_reauthentication_deadline_is_closed() -> None:
    sasl = sasl_session(reauth_ms=1000)
    core = Shell(sasl=sasl).core
    sasl.handshake("PLAIN")
    sasl.authenticate(b"\0alice\0secret", now_ms=0)
    core.admit(METADATA, now_ms=999)
    with pytest.raises(CloseConnection, match="expired"):
        core.admit(METADATA, now_ms=1000)
    core.admit(SASL_HANDSHAKE, now_ms=1000)  # re-authentication is still served


def test_after_a_v0_handshake_a_bare_token_is_read_and_answered_as_a_bare_frame() -> None:
    sasl = sasl_session()
    shell = Shell(sasl=sasl)
    sasl.handshake("PLAIN")
    sasl.legacy_tokens = True  # what SaslHandshake v0 sets
    assert shell.core.expects_legacy_token
    shell.receive(framed(b"\0a\0b"))  # shorter than any request header
    token = shell.core.next_request()
    assert token is not None and bytes(token) == b"\0a\0b"
    assert shell.core.legacy_token(bytes(token), now_ms=0) == framed(b"")
    assert shell.core.session.principal == "User:a"
    assert not shell.core.expects_legacy_token


def test_a_failed_legacy_token_gets_no_answer_and_a_reason() -> None:
    sasl = sasl_session()
    core = Shell(sasl=sasl).core
    sasl.handshake("PLAIN")
    sasl.legacy_tokens = True
    assert core.legacy_token(b"\0alice\0wrong", now_ms=0) is None
    assert core.authentication_failure is not None


@settings(max_examples=100, deadline=None)
@given(
    st.lists(
        st.lists(st.integers(min_value=0, max_value=5000), min_size=1, max_size=6),
        min_size=1,
        max_size=4,
    ),
    st.integers(min_value=500, max_value=8000),
    st.data(),
)
def test_connections_sharing_a_small_pool_lose_nothing_and_never_wedge(
    bodies: list[list[int]], limit: int, data: st.DataObject
) -> None:
    """Any interleaving of receives and handling over a pool smaller than the requests: every
    request comes out whole and in order, memory stays within the limit plus one request and a
    receive per connection, and something can always happen until all is done."""
    pool = MemoryPool(limit)
    shells = [Shell(pool=pool) for _ in bodies]
    streams = [
        [request(METADATA, i, bytes([i % 251]) * n) for i, n in enumerate(sizes)]
        for sizes in bodies
    ]
    wire = [b"".join(frames) for frames in streams]
    sent = [0] * len(shells)
    got: list[list[bytes]] = [[] for _ in shells]
    holding = [False] * len(shells)
    largest = max(len(f) for frames in streams for f in frames)
    while any(len(g) < len(s) for g, s in zip(got, streams, strict=True)):
        moves = [
            ("receive", i)
            for i, s in enumerate(shells)
            if s.core.reading and sent[i] < len(wire[i])
        ]
        moves += [("finish", i) for i in range(len(shells)) if holding[i]]
        moves += [
            ("take", i) for i, s in enumerate(shells) if not holding[i] and s.core.has_requests
        ]
        assert moves, "wedged: no connection may read and no request waits"
        move, i = data.draw(st.sampled_from(moves))
        shell = shells[i]
        if move == "receive":
            buffer = shell.core.get_buffer()
            n = min(len(buffer), len(wire[i]) - sent[i], data.draw(st.integers(1, 3000)))
            buffer[:n] = wire[i][sent[i] : sent[i] + n]
            del buffer
            shell.core.buffer_updated(n)
            sent[i] += n
        elif move == "take":
            frame = shell.core.next_request()
            assert frame is not None
            got[i].append(bytes(frame))
            del frame
            holding[i] = True
        else:
            shell.core.request_done()
            holding[i] = False
        assert pool.used <= limit + largest + len(shells) * 16 * 1024
    assert got == [[f[4:] for f in frames] for frames in streams]
    for i, shell in enumerate(shells):
        if holding[i]:
            shell.core.request_done()
    assert pool.used == 0
