"""A recording TCP proxy for the end-to-end tests: clients connect to it, it relays every byte
to the broker and back, and it keeps each request frame clients sent (the bytes after the 4-byte
length prefix), in the order they arrived.

A broker started with ``advertised.listeners`` naming the proxy's port sends clients back to the
proxy in its Metadata answers, so every connection a client opens — bootstrap, partition leader,
group coordinator — passes through it (``proxied_broker`` starts the two so).
``record_captures`` writes the first frame of each (API key, version) to a file of
tests/protocol/captured (how those fixtures are made).
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import struct
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from odradek.protocol.framing import FrameReader, FrameSizeError
from odradek.testing import RunningBroker, running_broker

CAPTURED_DIR = Path(__file__).resolve().parents[1] / "protocol" / "captured"
# A proxy records whatever a size prefix can announce.
_MAX_FRAME_BYTES = 2**31 - 1
# Set to write the frames the tests of a client see into CAPTURED_DIR (see its README).
CAPTURE_ENV = "ODRADEK_CAPTURE"


class RecordingProxy:
    """Listens on a free port of 127.0.0.1 from construction on, relays to ``upstream`` once
    :meth:`start` names it, and records the request frames; :meth:`close` ends every relay."""

    def __init__(self) -> None:
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._listener.getsockname()[1]
        self.frames: list[bytes] = []
        self._lock = threading.Lock()
        self._sockets: list[socket.socket] = []
        self._threads: list[threading.Thread] = []
        self._upstream: tuple[str, int] | None = None

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self, upstream: str) -> RecordingProxy:
        host, port = upstream.rsplit(":", 1)
        self._upstream = (host, int(port))
        self._spawn(self._accept)
        return self

    def sent_by(self, client_id: str) -> list[bytes]:
        """The frames recorded so far whose request header names ``client_id``."""
        with self._lock:
            return [frame for frame in self.frames if client_id_of(frame) == client_id]

    def requests(self, client_id: str) -> list[tuple[int, int]]:
        """(API key, version) of every frame ``client_id`` sent so far."""
        return [struct.unpack_from(">hh", frame) for frame in self.sent_by(client_id)]

    def clear(self) -> None:
        with self._lock:
            self.frames.clear()

    def close(self) -> None:
        # Closing a socket does not wake a thread blocked in its accept(); shutting it down
        # does (Linux), so the accepting thread ends now rather than at the join's timeout.
        with contextlib.suppress(OSError):
            self._listener.shutdown(socket.SHUT_RDWR)
        self._listener.close()
        with self._lock:
            sockets = list(self._sockets)
        for sock in sockets:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()
        for thread in self._threads:
            thread.join(timeout=5)

    def __enter__(self) -> RecordingProxy:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _spawn(self, target: Any, *args: Any) -> None:
        thread = threading.Thread(target=target, args=args, daemon=True, name="recording-proxy")
        self._threads.append(thread)
        thread.start()

    def _accept(self) -> None:
        assert self._upstream is not None
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:  # closed
                return
            try:
                broker = socket.create_connection(self._upstream, timeout=10)
            except OSError:
                client.close()
                continue
            broker.settimeout(None)
            with self._lock:
                self._sockets += [client, broker]
            self._spawn(self._relay_requests, client, broker)
            self._spawn(self._relay, broker, client)

    def _relay(self, source: socket.socket, sink: socket.socket) -> None:
        try:
            while chunk := source.recv(65536):
                sink.sendall(chunk)
        except OSError:
            pass
        finally:
            _shutdown_write(sink)

    def _relay_requests(self, client: socket.socket, broker: socket.socket) -> None:
        reader = FrameReader(_MAX_FRAME_BYTES)
        try:
            while chunk := client.recv(65536):
                broker.sendall(chunk)
                reader.feed(chunk)
                with self._lock:
                    while (frame := reader.next_frame()) is not None:
                        self.frames.append(bytes(frame))
        except (OSError, FrameSizeError):
            pass
        finally:
            _shutdown_write(broker)


@contextlib.contextmanager
def proxied_broker(
    directory: Path, **overrides: str
) -> Iterator[tuple[RecordingProxy, RunningBroker]]:
    """A broker (``running_broker`` overrides) that sends its clients back to a recording proxy
    in front of it (``advertised.listeners``), and that proxy."""
    with (
        RecordingProxy() as proxy,
        running_broker(
            directory, advertised_listeners=f"PLAINTEXT://{proxy.address}", **overrides
        ) as broker,
    ):
        proxy.start(broker.bootstrap)
        yield proxy, broker


def _shutdown_write(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_WR)


def client_id_of(frame: bytes) -> str | None:
    """The client id of a request frame: every request header version has it as a nullable
    int16-length string after api key, api version and correlation id."""
    (size,) = struct.unpack_from(">h", frame, 8)
    return None if size < 0 else frame[10 : 10 + size].decode(errors="replace")


def first_frames(frames: list[bytes]) -> dict[tuple[int, int], bytes]:
    """The first frame of each (API key, version), as the capture files keep them."""
    firsts: dict[tuple[int, int], bytes] = {}
    for frame in frames:
        firsts.setdefault(struct.unpack_from(">hh", frame), frame)
    return firsts


def record_captures(
    name: str,
    client: str,
    frames: list[bytes],
    topics: dict[str, int],
    variant: str = "",
    setup: dict[int, list[bytes]] | None = None,
) -> Path | None:
    """With ``ODRADEK_CAPTURE`` set, merge the first frame of each (API key, version) in
    ``frames`` into ``CAPTURED_DIR/<name>.json`` as ``"<key>/v<version>"`` (``"...+<variant>"``
    if given, e.g. a codec; frames already there are kept), naming the client and the topics
    (name: partitions) a replay must create and, per API key in ``setup``, the frames a replay
    sends before one of that API (say, the Produce requests a Fetch read). Returns the file
    written."""
    if not os.environ.get(CAPTURE_ENV):
        return None
    path = CAPTURED_DIR / f"{name}.json"
    captured: dict[str, dict[str, Any]] = json.loads(path.read_text()) if path.exists() else {}
    suffix = f"+{variant}" if variant else ""
    for (key, version), frame in first_frames(frames).items():
        entry: dict[str, Any] = {
            "api_key": key,
            "api_version": version,
            "client": client,
            "topics": topics,
            "frame": frame.hex(),
        }
        if setup and key in setup:
            entry["setup"] = [f.hex() for f in setup[key]]
        captured.setdefault(f"{key}/v{version}{suffix}", entry)
    ordered = sorted(
        captured.items(), key=lambda kv: (kv[1]["api_key"], kv[1]["api_version"], kv[0])
    )
    path.write_text(json.dumps(dict(ordered), indent=1) + "\n")
    return path
