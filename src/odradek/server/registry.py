"""Kafka API handlers by API key. ApiVersions advertises exactly what is registered here."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from odradek.protocol.messages import RequestHeader
    from odradek.server.context import RequestContext, Response

HandlerFn = Callable[["RequestContext", Any], Awaitable["Response | None"]]
# Parses a whole request frame (a view of the connection's receive buffer) into its header and
# body; the default is kio's, which copies what it reads.
Decoder = Callable[[memoryview], "tuple[RequestHeader, Any]"]


@dataclass(frozen=True, slots=True)
class Handler:
    api_key: int
    min_version: int
    max_version: int
    fn: HandlerFn
    decode: Decoder | None = None


HANDLERS: dict[int, Handler] = {}


def handles(
    api_key: int, min_version: int, max_version: int, decode: Decoder | None = None
) -> Callable[[HandlerFn], HandlerFn]:
    """Register ``fn`` as the handler of ``api_key`` for versions min..max inclusive, its
    requests parsed by ``decode`` (kio's decoder if None)."""

    def register(fn: HandlerFn) -> HandlerFn:
        if api_key in HANDLERS:
            raise RuntimeError(f"API key {api_key} has two handlers")
        HANDLERS[api_key] = Handler(api_key, min_version, max_version, fn, decode)
        return fn

    return register


def load_handlers() -> dict[int, Handler]:
    """Import every handler module so each registers itself."""
    import importlib
    import pkgutil

    from odradek.server import handlers

    for module in pkgutil.iter_modules(handlers.__path__):
        importlib.import_module(f"{handlers.__name__}.{module.name}")
    return HANDLERS
