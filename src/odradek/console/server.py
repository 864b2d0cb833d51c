"""The HTTP listener of ``metrics.listener`` and ``odradek console``: ``/metrics`` for Prometheus,
the web console's page and its JSON API.

One small server on the standard library's :class:`~http.server.ThreadingHTTPServer`: a thread
that accepts, and a thread per connection, so a slow scrape or a slow cluster answer holds up only
its own request and never an event loop; at most ``MAX_CONNECTIONS`` at once, so that clients
that open connections and keep them (idle ones close after a minute) cannot pile up threads in
the broker's process. ``/metrics`` is prometheus_client's text format
(``generate_latest``) of the registry given; ``/`` and ``/static/...`` are the console's files
(from the package, read once at start, served gzip-compressed to browsers that accept it);
``/api/...`` goes to :class:`~odradek.console.api.ConsoleApi`. A server made without a registry
has no ``/metrics``; without an API, no console.

The console has no login of its own: whoever reaches the listener acts as the console's Kafka
principal. What it does refuse are changes a page of another site makes a browser send (a
cross-site POST, see :meth:`_Handler._check_same_origin`), and API requests naming a host that
is not this machine's (a page of another site whose name was made to resolve to this address,
"DNS rebinding", reads the API under its own name: :func:`host_allowed`).
"""

from __future__ import annotations

import contextlib
import gzip
import ipaddress
import json
import logging
import mimetypes
import socket
import threading
from collections.abc import Iterable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from prometheus_client.registry import CollectorRegistry

from odradek.console.api import ApiError, ConsoleApi

log = logging.getLogger(__name__)

STATIC_DIR = Path(__file__).parent / "static"
_MAX_BODY_BYTES = 1 << 20
# Connections served at once (a thread each, in the broker's process): plenty for Prometheus and
# a few browsers (six connections each); past it a connection is answered 503 and closed.
MAX_CONNECTIONS = 64
_BUSY = (
    b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain\r\n"
    b"Content-Length: 25\r\nConnection: close\r\n\r\ntoo many open connections"
)


class StaticFile:
    """A file of the page, kept in memory with its gzip form."""

    def __init__(self, path: Path) -> None:
        self.data = path.read_bytes()
        self.gzipped = gzip.compress(self.data, 9, mtime=0)
        kind = mimetypes.guess_type(path.name)[0] or "application/octet-stream"
        if path.suffix == ".js":
            kind = "text/javascript"  # whatever the platform's mime table says
        self.content_type = kind + ("; charset=utf-8" if kind.startswith("text/") else "")


def load_static(directory: Path = STATIC_DIR) -> dict[str, StaticFile]:
    """URL path → file, for every file under ``directory`` (``/`` is ``index.html``)."""
    files = {
        "/static/" + p.relative_to(directory).as_posix(): StaticFile(p)
        for p in sorted(directory.rglob("*"))
        if p.is_file()
    }
    if "/static/index.html" in files:
        files["/"] = files["/static/index.html"]
    return files


class _BoundedServer(ThreadingHTTPServer):
    """A thread per connection, but at most ``max_connections`` of them."""

    daemon_threads = True

    def __init__(
        self, address: tuple[str, int], handler: type[_Handler], max_connections: int
    ) -> None:
        super().__init__(address, handler)
        self._slots = threading.BoundedSemaphore(max_connections)

    def process_request(self, request: Any, client_address: Any) -> None:
        if not self._slots.acquire(blocking=False):
            with contextlib.suppress(OSError):
                request.sendall(_BUSY)
            self.shutdown_request(request)
            return
        try:
            super().process_request(request, client_address)
        except BaseException:
            self._slots.release()  # no thread was started to release it
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._slots.release()


def local_names(extra: Iterable[str] = ()) -> frozenset[str]:
    """The host names a request to this machine's console may carry: ``localhost``, this
    machine's names, and ``extra`` (``console.allowed.hosts``; ``*`` allows any)."""
    names = {"localhost", socket.gethostname(), socket.getfqdn()}
    return frozenset(n.strip().lower().rstrip(".") for n in (*names, *extra) if n.strip())


def host_allowed(host_header: str | None, allowed: frozenset[str]) -> bool:
    """Whether a request's ``Host`` names this machine: an IP address (a rebinding page
    cannot make a browser send one of ours as its own name), or one of ``allowed``."""
    if "*" in allowed:
        return True
    if not host_header:
        return False
    host = urlsplit("//" + host_header).hostname or ""
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return host.rstrip(".") in allowed
    return True


class HttpServer:
    """``/metrics`` and the console on one listener (see the module doc). :meth:`start` and
    :meth:`stop` from any thread; :meth:`stop` blocks until the serving thread has ended."""

    def __init__(
        self,
        registry: CollectorRegistry | None = None,
        api: ConsoleApi | None = None,
        *,
        max_connections: int = MAX_CONNECTIONS,
        allowed_hosts: Iterable[str] = (),
    ) -> None:
        self.registry = registry
        self.api = api
        self.max_connections = max_connections
        self.allowed_hosts = local_names(allowed_hosts)
        self.static = load_static() if api is not None else {}
        self._server: _BoundedServer | None = None
        self._thread: threading.Thread | None = None
        self.bound: tuple[str, int] = ("", 0)

    def start(self, host: str, port: int) -> tuple[str, int]:
        owner = self

        class Handler(_Handler):
            server_owner = owner

        server = _BoundedServer((host, port), Handler, self.max_connections)
        self._server = server
        self._thread = threading.Thread(
            target=server.serve_forever, name="odradek-http", daemon=True
        )
        self._thread.start()
        self.bound = (host, server.server_port)
        return self.bound

    def stop(self) -> None:
        server, self._server = self._server, None
        if server is None:
            return
        server.shutdown()
        server.server_close()
        if self._thread is not None:
            self._thread.join(5)


class _Handler(BaseHTTPRequestHandler):
    """One connection's requests, on its own thread of the server (see the module doc)."""

    server_owner: HttpServer
    protocol_version = "HTTP/1.1"
    _body_unread = False
    # An idle kept-alive connection ends (and its thread with it) after this many seconds.
    timeout = 60

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("%s " + format, self.address_string(), *args)

    def do_GET(self) -> None:
        self._dispatch("GET")

    def do_POST(self) -> None:
        self._dispatch("POST")

    def do_DELETE(self) -> None:
        self._dispatch("DELETE")

    def _dispatch(self, method: str) -> None:
        owner = self.server_owner
        url = urlsplit(self.path)
        path = url.path
        # A body not read (a request refused before it, or sent to a path that takes none)
        # would be parsed as the next request of a kept-alive connection: such a connection
        # closes after its answer instead.
        self._body_unread = "Transfer-Encoding" in self.headers or (
            self.headers.get("Content-Length") or "0"
        ).strip() not in ("", "0")
        try:
            if path == "/metrics" and owner.registry is not None:
                if method != "GET":
                    raise ApiError(405, "/metrics is read with GET")
                self._send(200, generate_latest(owner.registry), CONTENT_TYPE_LATEST)
            elif path.startswith("/api/") and owner.api is not None:
                if not host_allowed(self.headers.get("Host"), owner.allowed_hosts):
                    raise ApiError(
                        403,
                        f"host {self.headers.get('Host')!r} is not this console's "
                        "(console.allowed.hosts lists the names it may be reached by)",
                    )
                if method != "GET":
                    self._check_same_origin(method)
                body = self._body()
                query = dict(parse_qsl(url.query, keep_blank_values=True))
                answer = owner.api.handle(method, path, query, body)
                self._send_json(200, answer)
            elif path in owner.static and method == "GET":
                self._send_static(owner.static[path])
            else:
                raise ApiError(404, f"nothing at {path}")
        except ApiError as e:
            self._send_json(e.status, {"error": e.message})
        except Exception as e:
            log.exception("%s %s failed", method, self.path)
            self._send_json(500, {"error": f"{type(e).__name__}: {e}"})

    def _check_same_origin(self, method: str) -> None:
        """A change must come from the console's own page. A page elsewhere can make a
        browser send a POST (a "simple" request: no preflight, so the browser does not ask
        first) but not one with a JSON content type, nor hide its origin."""
        origin = self.headers.get("Origin")
        if origin is not None and urlsplit(origin).netloc != self.headers.get("Host"):
            raise ApiError(403, f"{method} from another site ({origin}) is refused")
        kind = (self.headers.get("Content-Type") or "").split(";")[0].strip()
        if method == "POST" and kind != "application/json":
            raise ApiError(415, "a change is sent as JSON (Content-Type: application/json)")

    def _body(self) -> bytes:
        if "Transfer-Encoding" in self.headers:
            raise ApiError(411, "a request body is sent with a Content-Length")
        raw = self.headers.get("Content-Length") or "0"
        try:
            length = int(raw)
        except ValueError:
            length = -1
        if length < 0:
            # A negative length would read until the client closes, holding this thread.
            raise ApiError(400, f"Content-Length {raw!r} is not a byte count")
        if length > _MAX_BODY_BYTES:
            raise ApiError(413, f"the request body is over {_MAX_BODY_BYTES} bytes")
        body = self.rfile.read(length) if length else b""
        self._body_unread = False
        return body

    def _send_static(self, file: StaticFile) -> None:
        accepts_gzip = "gzip" in (self.headers.get("Accept-Encoding") or "")
        data = file.gzipped if accepts_gzip else file.data
        extra = {"Content-Encoding": "gzip"} if accepts_gzip else {}
        self._send(200, data, file.content_type, {"Cache-Control": "no-cache", **extra})

    def _send_json(self, status: int, value: Any) -> None:
        self._send(status, json.dumps(value).encode(), "application/json")

    def _send(
        self, status: int, data: bytes, content_type: str, headers: dict[str, str] | None = None
    ) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        if self._body_unread:
            self.send_header("Connection", "close")  # and close_connection with it
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)
