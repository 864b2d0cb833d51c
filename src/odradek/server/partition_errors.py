"""The ``topics: [{name, partitions: [{partition_index, error_code}]}]`` shape several group APIs
answer with, in the order the request named the partitions."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, TypeVar

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


_Partition = TypeVar("_Partition", bound=tuple[str, int])


def by_topic(rows: Mapping[_Partition, dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """Per-partition answer entries grouped by topic, topics and partitions sorted (the
    ``topics: [{name, partitions: [...]}]`` shape of the controller APIs' answers)."""
    topics: dict[str, list[dict[str, Any]]] = {}
    for topic_partition in sorted(rows):
        topics.setdefault(topic_partition[0], []).append(rows[topic_partition])
    return topics
