"""Kafka API handlers by API key. ApiVersions advertises exactly what is registered here."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from odradek.server.context import RequestContext, Response

HandlerFn = Callable[["RequestContext", Any], Awaitable["Response | None"]]


@dataclass(frozen=True, slots=True)
class Handler:
    api_key: int
    min_version: int
    max_version: int
    fn: HandlerFn


HANDLERS: dict[int, Handler] = {}


def handles(api_key: int, min_version: int, max_version: int) -> Callable[[HandlerFn], HandlerFn]:
    """Register ``fn`` as the handler of ``api_key`` for versions min..max inclusive."""

    def register(fn: HandlerFn) -> HandlerFn:
        if api_key in HANDLERS:
            raise RuntimeError(f"API key {api_key} has two handlers")
        HANDLERS[api_key] = Handler(api_key, min_version, max_version, fn)
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
