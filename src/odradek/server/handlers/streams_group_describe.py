"""StreamsGroupDescribe (89): streams groups (KIP-1071) with their epochs, topology and members
(each with its current and target tasks). A group of another kind is GROUP_ID_NOT_FOUND here,
as in Kafka."""

from __future__ import annotations

from typing import Any

from odradek.coordinator.group.streams_group import (
    StreamsGroupDescription,
    TaskAssignment,
    Tasks,
    TopicSpec,
    Topology,
)
from odradek.server.authorize import OPERATIONS_NOT_ASKED
from odradek.server.context import RequestContext, Response
from odradek.server.group_answers import describe_each, groups_answer
from odradek.server.registry import handles


def _listed(tasks: Tasks) -> list[dict[str, Any]]:
    return [
        {"subtopology_id": s, "partitions": sorted(ps)} for s, ps in sorted(tasks.items()) if ps
    ]


def _assignment(a: TaskAssignment) -> dict[str, Any]:
    return {
        "active_tasks": _listed(a.active),
        "standby_tasks": _listed(a.standby),
        "warmup_tasks": _listed(a.warmup),
    }


def _topic(t: TopicSpec) -> dict[str, Any]:
    return {
        "name": t.name,
        "partitions": t.partitions,
        "replication_factor": t.replication_factor,
        "topic_configs": [{"key": k, "value": v} for k, v in t.configs],
    }


def _topology(topology: Topology | None) -> dict[str, Any] | None:
    if topology is None:
        return None
    return {
        "epoch": topology.epoch,
        "subtopologies": [
            {
                "subtopology_id": s.subtopology_id,
                "source_topics": list(s.source_topics),
                "repartition_sink_topics": list(s.repartition_sink_topics),
                "state_changelog_topics": [_topic(t) for t in s.state_changelog_topics],
                "repartition_source_topics": [_topic(t) for t in s.repartition_source_topics],
            }
            for s in topology.subtopologies
        ],
    }


def _describe(d: StreamsGroupDescription) -> dict[str, Any]:
    return {
        "error_code": d.error,
        "error_message": d.message,
        "group_id": d.group_id,
        "group_state": d.state,
        "group_epoch": d.group_epoch,
        "assignment_epoch": d.assignment_epoch,
        "topology": _topology(d.topology),
        "members": [
            {
                "member_id": m.member_id,
                "member_epoch": m.member_epoch,
                "instance_id": m.instance_id,
                "rack_id": m.rack_id,
                "client_id": m.client_id,
                "client_host": m.client_host,
                "topology_epoch": m.topology_epoch,
                "process_id": m.process_id,
                "user_endpoint": None
                if m.user_endpoint is None
                else {"host": m.user_endpoint[0], "port": m.user_endpoint[1]},
                "client_tags": [{"key": k, "value": v} for k, v in m.client_tags],
                "task_offsets": [
                    {"subtopology_id": s, "partition": p, "offset": o} for s, p, o in m.task_offsets
                ],
                "task_end_offsets": [
                    {"subtopology_id": s, "partition": p, "offset": o}
                    for s, p, o in m.task_end_offsets
                ],
                "assignment": _assignment(m.assigned),
                "target_assignment": _assignment(described.target),
                "is_classic": False,
            }
            for described in d.members
            for m in (described.member,)
        ],
        "authorized_operations": OPERATIONS_NOT_ASKED,
    }


@handles(api_key=89, min_version=0, max_version=0)
async def handle_streams_group_describe(ctx: RequestContext, request: Any) -> Response:
    described = await describe_each(
        ctx, request.group_ids, lambda c, g: c.streams.describe(g), StreamsGroupDescription
    )
    return groups_answer(
        ctx, [_describe(d) for d in described], request.include_authorized_operations
    )
