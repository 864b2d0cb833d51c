"""DeleteGroups (42): remove empty groups and their committed offsets (a share group's state on
the partitions this broker leads too)."""

from __future__ import annotations

import asyncio
from typing import Any

from odradek.coordinator.common.runtime import CoordinatorError
from odradek.protocol.errors import ErrorCode
from odradek.server.authorize import GROUP, Op, denied
from odradek.server.context import RequestContext, Response
from odradek.server.registry import handles
from odradek.server.share_requests import share_group


@handles(api_key=42, min_version=0, max_version=2)
async def handle_delete_groups(ctx: RequestContext, request: Any) -> Response:
    names = list(dict.fromkeys(request.groups_names))
    refused = denied(ctx, Op.DELETE, GROUP, names)

    async def delete(name: str) -> ErrorCode:
        if name in refused:
            return ErrorCode.group_authorization_failed
        shares = ctx.services.share_partitions
        # A share group's persisted states go with it (asked before: after, it is gone).
        is_share = shares is not None and (await share_group(ctx, name)).error == ErrorCode.none
        try:
            results = await ctx.services.groups.write(
                name, lambda c: c.delete_groups([name]), api_key=ctx.header.api_key
            )
        except CoordinatorError as e:
            return e.code
        if results[name] == ErrorCode.none and shares is not None:
            topics = ctx.services.topics.topics() if is_share else []
            await shares.forget_group(
                name, {t.name: t.partitions for t in topics if not t.name.startswith("__")}
            )
        return results[name]

    codes = await asyncio.gather(*(delete(name) for name in names))
    return ctx.respond(
        throttle_time=0,
        results=[
            {"group_id": name, "error_code": code} for name, code in zip(names, codes, strict=True)
        ],
    )
