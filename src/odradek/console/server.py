"""The HTTP listener of ``metrics.listener`` and ``odradek console``: ``/metrics`` for Prometheus,
the web console's page and its JSON API, served by aiohttp on a thread of its own
(:class:`~odradek.web_server.WebServer`, the HTTP stack the schema registry's listener uses too),
over TLS when given an :class:`ssl.SSLContext` (``metrics.listener=https://...``).

Never on the broker's event loop, and a scrape (which waits for the broker's loop) or an API call
(which waits for the cluster) runs on the server's blocking threads, so a slow one holds up only
its own request. At most ``MAX_CONNECTIONS`` connections at once (past it a connection is
answered 503 and closed); idle ones close after a minute; a request body is at most 1 MiB.
``/metrics`` is prometheus_client's text format (``generate_latest``) of the registry given;
``/`` and ``/static/...`` are the console's files (from the package, read once at start, served
gzip-compressed to browsers that accept it); ``/api/...`` goes to
:class:`~odradek.console.api.ConsoleApi`. A server made without a registry has no ``/metrics``;
without an API, no console.

The console has no login of its own: whoever reaches the listener acts as the console's Kafka
principal. What it does refuse are changes a page of another site makes a browser send (a
cross-site POST, see :func:`_check_same_origin`), and API requests naming a host that is not
this machine's (a page of another site whose name was made to resolve to this address, "DNS
rebinding", reads the API under its own name: :func:`host_allowed`).
"""

from __future__ import annotations

import gzip
import ipaddress
import json
import logging
import mimetypes
import socket
import ssl
from collections.abc import Awaitable, Callable, Iterable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from aiohttp import hdrs, web
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from prometheus_client.registry import CollectorRegistry

from odradek.console.api import ApiError, ConsoleApi
from odradek.web_server import WebServer

log = logging.getLogger(__name__)

STATIC_DIR = Path(__file__).parent / "static"
_MAX_BODY_BYTES = 1 << 20
# Connections open at once: plenty for Prometheus and a few browsers (six connections each).
MAX_CONNECTIONS = 64

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


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
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        self.registry = registry
        self.api = api
        self.allowed_hosts = local_names(allowed_hosts)
        self.static = load_static() if api is not None else {}
        self._server = WebServer(
            self._app,
            name="odradek-http",
            ssl_context=ssl_context,
            max_connections=max_connections,
        )
        self.bound: tuple[str, int] = ("", 0)

    def start(self, host: str, port: int) -> tuple[str, int]:
        self.bound = self._server.start(host, port)
        return self.bound

    def stop(self) -> None:
        self._server.stop()

    def _app(self) -> web.Application:
        app = web.Application(client_max_size=_MAX_BODY_BYTES, middlewares=[_errors])
        if self.registry is not None:
            app.router.add_get("/metrics", self._metrics, allow_head=False)
        if self.api is not None:
            app.router.add_route("*", "/api/{tail:.*}", self._api)
            for path in self.static:
                app.router.add_get(path, self._static, allow_head=False)
        return app

    async def _metrics(self, request: web.Request) -> web.Response:
        registry = self.registry
        assert registry is not None
        # A scrape waits for the broker's loop to take its snapshot.
        data = await self._server.run_blocking(lambda: generate_latest(registry))
        return web.Response(body=data, headers={hdrs.CONTENT_TYPE: CONTENT_TYPE_LATEST})

    async def _static(self, request: web.Request) -> web.Response:
        file = self.static[request.path]
        accepts_gzip = "gzip" in request.headers.get(hdrs.ACCEPT_ENCODING, "")
        headers = {hdrs.CONTENT_TYPE: file.content_type, hdrs.CACHE_CONTROL: "no-cache"}
        if accepts_gzip:
            headers[hdrs.CONTENT_ENCODING] = "gzip"
        return web.Response(body=file.gzipped if accepts_gzip else file.data, headers=headers)

    async def _api(self, request: web.Request) -> web.Response:
        api = self.api
        assert api is not None
        host = request.headers.get(hdrs.HOST)
        if not host_allowed(host, self.allowed_hosts):
            raise ApiError(
                403,
                f"host {host!r} is not this console's "
                "(console.allowed.hosts lists the names it may be reached by)",
            )
        method = request.method
        if method != "GET":
            _check_same_origin(request)
        body = await _body(request)
        query = {name: value for name, value in request.query.items()}
        path = request.rel_url.raw_path  # names stay quoted: the API unquotes each part
        answer = await self._server.run_blocking(lambda: api.handle(method, path, query, body))
        return _json(200, answer)


def _json(status: int, value: Any) -> web.Response:
    return web.Response(
        body=json.dumps(value).encode(), status=status, content_type="application/json"
    )


@web.middleware
async def _errors(request: web.Request, handler: Handler) -> web.StreamResponse:
    try:
        response = await handler(request)
    except ApiError as e:
        response = _json(e.status, {"error": e.message})
    except web.HTTPException as e:
        if e.status < 400:
            raise
        text = f"nothing at {request.path}" if e.status == 404 else e.reason
        response = _json(e.status, {"error": text})
        if hdrs.ALLOW in e.headers:
            response.headers[hdrs.ALLOW] = e.headers[hdrs.ALLOW]
    except Exception as e:
        log.exception("%s %s failed", request.method, request.path)
        response = _json(500, {"error": f"{type(e).__name__}: {e}"})
    if request.can_read_body:
        # A body not read (a request refused before it): the connection closes after the
        # answer rather than read on past what nobody asked for.
        response.force_close()
    return response


def _check_same_origin(request: web.Request) -> None:
    """A change must come from the console's own page. A page elsewhere can make a browser
    send a POST (a "simple" request: no preflight, so the browser does not ask first) but not
    one with a JSON content type, nor hide its origin."""
    method = request.method
    origin = request.headers.get(hdrs.ORIGIN)
    if origin is not None and urlsplit(origin).netloc != request.headers.get(hdrs.HOST):
        raise ApiError(403, f"{method} from another site ({origin}) is refused")
    kind = request.headers.get(hdrs.CONTENT_TYPE, "").split(";")[0].strip()
    if method == "POST" and kind != "application/json":
        raise ApiError(415, "a change is sent as JSON (Content-Type: application/json)")


async def _body(request: web.Request) -> bytes:
    if hdrs.TRANSFER_ENCODING in request.headers:
        raise ApiError(411, "a request body is sent with a Content-Length")
    length = request.content_length or 0
    if length > _MAX_BODY_BYTES:
        raise ApiError(413, f"the request body is over {_MAX_BODY_BYTES} bytes")
    return await request.read() if length else b""
