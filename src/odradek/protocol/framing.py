"""Kafka's framing: every request and response is a 4-byte big-endian size, then that many bytes.

Pure code on bytes, no I/O. :class:`FrameReader` cuts a received stream into frames however the
reads split it; the broker's connection core (:mod:`odradek.server.connection_core`) and the
client core (:mod:`odradek.client.core`) both read through it, in the manner of
:class:`asyncio.BufferedProtocol`: the shell receives straight into :meth:`FrameReader.get_buffer`
and reports the count to :meth:`FrameReader.buffer_updated`.

Memory follows the bytes that arrive, not the sizes that prefixes announce: a frame's buffer
grows geometrically as its bytes come in, up to the frame's size, so a peer that announces
100 MB and sends one byte costs one small buffer. Complete frames are handed out as
``memoryview`` slices of the receive buffer (no copy between the socket and the consumer), or,
below ``copy_below``, as copied ``bytes`` so that a kept frame does not pin a whole buffer.
"""

from __future__ import annotations

import struct
from collections import deque

SIZE = struct.Struct(">i")
PREFIX_BYTES = SIZE.size
# Buffers a reader keeps for reuse once their frames are gone (besides the one it reads into).
_RETIRED = 4
# Reads cutting only ordinary frames after which a trusted peer's outsized buffers go.
_LARGE_FOR = 8

# A TLS record's first bytes (handshake content type 22, major version 3), read as a size.
_TLS_HELLO_PREFIX = b"\x16\x03"


def size_prefix(size: int) -> bytes:
    """The 4-byte prefix of a frame of ``size`` bytes."""
    return SIZE.pack(size)


def framed(body: bytes) -> bytes:
    """``body`` as one frame: its size, then itself."""
    return SIZE.pack(len(body)) + body


def fill_size_prefix(frame: bytearray | memoryview) -> None:
    """Write the size of a frame encoded after 4 reserved bytes into those bytes."""
    SIZE.pack_into(frame, 0, len(frame) - PREFIX_BYTES)


class FrameSizeError(ValueError):
    """A size prefix outside the bounds the reader was given: the stream cannot be trusted from
    there on. Frames before it were cut and stay available."""

    def __init__(self, size: int, low: int, high: int, prefix: bytes) -> None:
        # What the peer may have meant instead, for the log.
        self.hint = (
            " (an HTTP request?)"
            if prefix.isalpha()
            else " (a TLS handshake on a plaintext listener?)"
            if prefix.startswith(_TLS_HELLO_PREFIX)
            else ""
        )
        super().__init__(f"frame of {size} bytes is outside {low}..{high}{self.hint}")
        self.size = size


def _unexported(buffer: bytearray) -> bool:
    """Whether no memoryview of ``buffer`` is alive, so its bytes may be overwritten.

    A bytearray refuses to change size while exported; shrinking by one byte and growing back
    stays within its allocation, so the probe costs no copy.
    """
    last = buffer[-1]
    try:
        del buffer[-1:]
    except BufferError:
        return False
    buffer.append(last)
    return True


class FrameReader:
    """Cuts a byte stream into frames (without their size prefixes). Not thread-safe.

    ``[_start, _end)`` of ``_buffer`` is received but not yet cut; the frame being received
    ends at ``_frame_end`` (or its size prefix does, while that is incomplete). The buffer starts
    at ``min_buffer`` bytes and doubles, up to ``max_buffer``, while it keeps filling up with
    whole frames (a busy peer reads in bigger gulps); a frame larger than that gets a buffer that
    grows with its bytes, or, up to ``trusted`` bytes (a peer trusted not to lie about sizes, as
    a client trusts its broker), its whole size at once, which saves the copies. A buffer is
    reused only when no frame cut from it is still alive; otherwise another is taken, and the
    old one, while its frames live, is kept among the reader's ``_RETIRED`` last ones, to be
    taken again once they are gone rather than a fresh buffer whose pages the kernel must find
    and zero (a producer whose acks=all requests wait for the followers keeps a few buffers
    busy, taking turns). :meth:`shed`, once every frame is answered, lets the retired ones go.
    From a trusted peer, a buffer larger than ``max_buffer`` is kept for the next frame while
    the frames keep coming that large (a follower's fetches of megabytes, one after another),
    and so are the retired ones that large (a follower with two fetches out: the two take
    turns); once the frames are ordinary again, those go.
    """

    def __init__(
        self,
        max_size: int,
        *,
        min_size: int = 0,
        copy_below: int = 0,
        min_buffer: int = 64 * 1024,
        max_buffer: int = 1024 * 1024,
        min_read: int = 16 * 1024,
        trusted: int = 0,
    ) -> None:
        self.max_size = max_size
        self.trusted = trusted
        self.min_size = min_size
        self.copy_below = copy_below
        self.min_buffer = min_buffer
        self.max_buffer = max_buffer
        self.min_read = min_read
        # Complete frames not yet taken, oldest first (take them with ``popleft``).
        self.frames: deque[memoryview | bytes] = deque()
        # Bytes of all frames cut so far, prefixes not counted (what was taken is the caller's).
        self.cut_bytes = 0
        self._buffer_size = min_buffer
        self._buffer = bytearray()
        self._view: memoryview | None = None
        # Buffers given up while frames still viewed them, newest last, to be taken again once
        # those are gone (see above); at most _RETIRED.
        self._retired: list[bytearray] = []
        self._start = 0
        self._end = 0
        self._frame_end = PREFIX_BYTES
        # Reads that may still cut only ordinary frames before a trusted peer's buffers for
        # outsized ones go: a follower's fetches alternate between megabytes and a little.
        self._large_left = 0

    @property
    def partial(self) -> int:
        """Bytes received of a frame not yet complete (its prefix included)."""
        return self._end - self._start

    @property
    def capacity(self) -> int:
        """Bytes of the current receive buffer."""
        return len(self._buffer)

    def next_frame(self) -> memoryview | bytes | None:
        """The oldest complete frame, or None."""
        return self.frames.popleft() if self.frames else None

    def feed(self, data: bytes | bytearray | memoryview) -> None:
        """Bytes received into a buffer of the caller's (a copy): :meth:`get_buffer` and
        :meth:`buffer_updated` until all are in."""
        with memoryview(data) as view:
            position = 0
            while position < len(view):
                with self.get_buffer() as buffer:
                    n = min(len(buffer), len(view) - position)
                    buffer[:n] = view[position : position + n]
                self.buffer_updated(n)
                position += n

    def get_buffer(self) -> memoryview:
        """Where to receive the next bytes (as :class:`asyncio.BufferedProtocol` asks); then
        call :meth:`buffer_updated` with how many were put at its start."""
        view = self._view
        end = self._end
        # Less room than a gulp costs a syscall for too few bytes, unless it holds the rest of
        # a frame that is nearly complete.
        least = self.min_read
        if end - self._start >= PREFIX_BYTES:
            least = min(self._frame_end - end, least)
        if view is None or len(self._buffer) - end < least:
            self._make_room()
            view = self._view
            assert view is not None
        return view[self._end :]

    def _make_room(self) -> None:
        """Give the frame being received a buffer with room to read into; only the partial
        frame is copied."""
        old, old_view = self._buffer, self._view
        partial = self._end - self._start
        if old_view is not None and partial < len(old) // 2:
            # The old buffer filled up with frames: the peer is busy, so read in bigger gulps.
            self._buffer_size = min(self._buffer_size * 2, self.max_buffer)
        # Grow with what arrived, never past the frame: what a prefix announces is a claim.
        needed = self._frame_end - self._start
        if needed <= self.trusted:
            size = max(self._buffer_size, needed)
        else:
            size = max(self._buffer_size, min(needed, 2 * partial + self.min_read))
        if old_view is not None:
            old_view.release()
        # A trusted peer's outsized frames keep their buffers while they keep coming.
        keep = bool(self.trusted) and (self._large_left > 0 or needed > self.max_buffer)
        largest = max(size, self.max_buffer)
        if keep:
            largest = max(largest, len(old))
        retired = self._retired
        if retired and not keep:
            self._drop_outsized()
        if size <= len(old) <= largest and _unexported(old):
            buffer = old
            view = memoryview(buffer)
            view[:partial] = view[self._start : self._end]
        else:
            buffer = self._reusable(size, None if keep else largest) or bytearray(size)
            view = memoryview(buffer)
            if partial:
                with memoryview(old) as source:
                    view[:partial] = source[self._start : self._end]
            outsized = len(old) > self.max_buffer
            if self.min_buffer <= len(old) and (keep or not outsized) and not _unexported(old):
                # Its frames are still in use (a produce waiting for its followers, a fetch
                # being applied): it is taken again once they are done, rather than a fresh
                # buffer whose pages the kernel must find and zero again. Of outsized ones
                # (a trusted peer's only), only the last is kept.
                if outsized:
                    self._drop_outsized()
                retired.append(old)
                if len(retired) > _RETIRED:
                    del retired[0]
        self._buffer, self._view = buffer, view
        self._frame_end -= self._start
        self._start, self._end = 0, partial

    def _drop_outsized(self) -> None:
        self._retired[:] = [b for b in self._retired if len(b) <= self.max_buffer]

    def _reusable(self, size: int, largest: int | None) -> bytearray | None:
        """A retired buffer of at least ``size`` bytes (at most ``largest``) whose frames are all
        gone, taken out of the retired ones."""
        retired = self._retired
        for i, candidate in enumerate(retired):
            if (
                size <= len(candidate)
                and (largest is None or len(candidate) <= max(largest, 2 * size))
                and _unexported(candidate)
            ):
                del retired[i]
                return candidate
        return None

    def buffer_updated(self, nbytes: int) -> None:
        """``nbytes`` were received at the start of the last :meth:`get_buffer`. Cuts the
        frames they complete; raises :class:`FrameSizeError` at a size out of bounds (the frames
        before it are kept)."""
        self._end += nbytes
        view = self._view
        assert view is not None
        start, end = self._start, self._end
        frames = self.frames
        copy_below = self.copy_below
        low, high = self.min_size, self.max_size
        size = cut = largest = 0
        try:
            while end - start >= 4:
                (size,) = SIZE.unpack_from(view, start)
                if size < low or size > high:
                    raise FrameSizeError(size, low, high, bytes(view[start : start + 4]))
                frame_end = start + 4 + size
                if frame_end > end:
                    break
                if size < copy_below:
                    frames.append(bytes(view[start + 4 : frame_end]))
                else:
                    frames.append(view[start + 4 : frame_end])
                cut += size
                if size > largest:
                    largest = size
                start = frame_end
        finally:
            if largest > self.max_buffer:
                self._large_left = _LARGE_FOR
            elif cut and self._large_left:
                self._large_left -= 1
            self.cut_bytes += cut
            self._start = start
            self._frame_end = start + PREFIX_BYTES + size if end - start >= 4 else start + 4

    def shed(self) -> None:
        """Between frames (every frame answered), let go of a buffer that only one outsized
        frame needed, and of the retired ones a busy stream reuses."""
        if self._start != self._end or self.frames:
            return
        self._retired.clear()
        if len(self._buffer) > self.max_buffer:
            if self._view is not None:
                self._view.release()
            self._buffer, self._view = bytearray(), None
            self._start = self._end = 0
            self._frame_end = PREFIX_BYTES

    def clear(self) -> None:
        """The stream is gone: drop what was received."""
        self.frames.clear()
