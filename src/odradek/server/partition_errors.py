"""The ``topics: [{name, partitions: [{partition_index, error_code}]}]`` shape several group APIs
answer with, in the order the request named the partitions."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from odradek.protocol.errors import ErrorCode


def partition_errors(
    requested_topics: Iterable[Any], results: Mapping[tuple[str, int], ErrorCode]
) -> list[dict[str, Any]]:
    return [
        {
            "name": topic.name,
            "partitions": [
                {
                    "partition_index": p.partition_index,
                    "error_code": results[(topic.name, int(p.partition_index))],
                }
                for p in topic.partitions
            ],
        }
        for topic in requested_topics
    ]
