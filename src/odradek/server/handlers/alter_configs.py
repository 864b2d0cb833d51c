"""AlterConfigs (33): replace a topic's config overrides as a whole."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from odradek.server.config_changes import alter_resource
from odradek.server.context import RequestContext, Response
from odradek.server.registry import handles


def _replace_with(
    replacement: dict[str, str | None],
) -> Callable[[dict[str, str]], dict[str, str | None]]:
    return lambda _current: replacement


@handles(api_key=33, min_version=0, max_version=2)
async def handle_alter_configs(ctx: RequestContext, request: Any) -> Response:
    responses = []
    for resource in request.resources:
        replacement: dict[str, str | None] = {c.name: c.value for c in resource.configs}
        responses.append(
            await alter_resource(
                ctx, resource, _replace_with(replacement), bool(request.validate_only)
            )
        )
    return ctx.respond(throttle_time=0, responses=responses)
