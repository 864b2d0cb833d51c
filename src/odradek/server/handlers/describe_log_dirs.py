"""DescribeLogDirs (35): each log dir of this broker, with the bytes each partition takes there.

``partition_size`` is the sum of the partition's segment files (``.log``), as Kafka reports it;
``offset_lag`` is 0, since a partition here has no future replica catching up.  The volume's
total and usable bytes (v4+) come from the file system.  An offline log dir (KIP-112) answers
KAFKA_STORAGE_ERROR with no partitions and unknown (-1) sizes, as Kafka does.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from odradek.protocol import old_messages
from odradek.protocol.errors import ErrorCode
from odradek.server.authorize import CLUSTER, Op, permits_cluster, refusal
from odradek.server.context import RequestContext, Response
from odradek.server.old_versions import respond
from odradek.server.registry import handles


def _wanted(request: Any) -> dict[str, set[int]] | None:
    if request.topics is None:
        return None
    wanted: dict[str, set[int]] = {}
    for topic in request.topics:
        wanted.setdefault(topic.topic, set()).update(int(p) for p in topic.partitions)
    return wanted


def _offline_dir(log_dir: Path) -> dict[str, Any]:
    return {
        "error_code": ErrorCode.kafka_storage_error,
        "log_dir": str(log_dir.absolute()),
        "topics": [],
        "total_bytes": -1,
        "usable_bytes": -1,
        "is_cordoned": False,
    }


def _describe_dir(
    log_dir: Path, sizes: list[tuple[str, int, int]], wanted: dict[str, set[int]] | None
) -> dict[str, Any]:
    topics: dict[str, list[dict[str, Any]]] = {}
    for topic, index, size in sizes:
        if wanted is not None and index not in wanted.get(topic, ()):
            continue
        topics.setdefault(topic, []).append(
            {
                "partition_index": index,
                "partition_size": size,
                "offset_lag": 0,
                "is_future_key": False,
            }
        )
    try:
        usage = shutil.disk_usage(log_dir)
        total, usable = usage.total, usage.free
    except OSError:
        total = usable = -1
    return {
        "error_code": ErrorCode.none,
        "log_dir": str(log_dir.absolute()),
        "topics": [
            {"name": name, "partitions": sorted(parts, key=lambda p: p["partition_index"])}
            for name, parts in sorted(topics.items())
        ],
        "total_bytes": total,
        "usable_bytes": usable,
        "is_cordoned": False,
    }


@handles(api_key=35, min_version=0, max_version=4, decode=old_messages.decoder(35))
async def handle_describe_log_dirs(ctx: RequestContext, request: Any) -> Response:
    if not permits_cluster(ctx, Op.DESCRIBE):
        return refusal(ctx, CLUSTER, results=[])
    manager = ctx.services.logs
    wanted = _wanted(request)
    return respond(
        ctx,
        throttle_time=0,
        error_code=ErrorCode.none,
        results=[
            _offline_dir(log_dir)
            if manager.failures.is_offline(log_dir)
            else _describe_dir(log_dir, manager.sizes_in(log_dir), wanted)
            for log_dir in manager.log_dirs
        ],
    )
