"""StreamsGroupHeartbeat (88): a member of a Kafka Streams application's streams group (KIP-1071)
joins with its topology, heartbeats, confirms revoked tasks and leaves; the answer carries its
member epoch, its tasks when they changed, and the group's status (missing or wrongly
partitioned topics, a stale topology). The answer waits until the records behind it are
replicated.

As Kafka's ``KafkaApis``: READ on the group, DESCRIBE on every topic the topology names; the
internal topics the coordinator finds missing are created here when the principal may CREATE
them (on the cluster or each topic), else the answer says they are missing and why."""

from __future__ import annotations

import datetime
import logging
from typing import Any

from odradek.coordinator.common.runtime import CoordinatorError
from odradek.coordinator.group.streams_group import (
    MISSING_INTERNAL_TOPICS,
    Status,
    StreamsHeartbeatRequest,
    StreamsHeartbeatResult,
    Subtopology,
    TaskAssignment,
    Tasks,
    TopicSpec,
    Topology,
    topology_topics,
)
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.server.authorize import (
    GROUP,
    TOPIC,
    Op,
    client_host,
    denied,
    permits,
    permits_cluster,
    refusal,
)
from odradek.server.context import RequestContext, Response
from odradek.server.registry import handles

log = logging.getLogger(__name__)

_MS = datetime.timedelta(milliseconds=1)


def _spec(topic: Any) -> TopicSpec:
    return TopicSpec(
        topic.name,
        int(topic.partitions),
        int(topic.replication_factor),
        tuple((c.key, c.value) for c in topic.topic_configs),
    )


def _topology(topology: Any) -> Topology | None:
    if topology is None:
        return None
    return Topology(
        int(topology.epoch),
        tuple(
            Subtopology(
                s.subtopology_id,
                tuple(s.source_topics),
                tuple(s.repartition_sink_topics),
                tuple(_spec(t) for t in s.repartition_source_topics),
                tuple(_spec(t) for t in s.state_changelog_topics),
                tuple(
                    (
                        tuple(int(i) for i in g.source_topics),
                        tuple(int(i) for i in g.repartition_source_topics),
                    )
                    for g in s.copartition_groups
                ),
                tuple(s.source_topic_regex),
            )
            for s in topology.subtopologies
        ),
    )


def _tasks(listed: Any) -> dict[str, frozenset[int]]:
    return {t.subtopology_id: frozenset(int(p) for p in t.partitions) for t in listed}


def _owned(request: Any) -> TaskAssignment | None:
    lists = (request.active_tasks, request.standby_tasks, request.warmup_tasks)
    if all(x is None for x in lists):
        return None
    return TaskAssignment(*(_tasks(x or ()) for x in lists))


def _offsets(listed: Any) -> tuple[tuple[str, int, int], ...] | None:
    if listed is None:
        return None
    return tuple((t.subtopology_id, int(t.partition), int(t.offset)) for t in listed)


def _request(ctx: RequestContext, request: Any) -> StreamsHeartbeatRequest:
    endpoint = request.user_endpoint
    tags = request.client_tags
    return StreamsHeartbeatRequest(
        group_id=request.group_id,
        member_id=request.member_id,
        member_epoch=int(request.member_epoch),
        client_id=ctx.header.client_id or "",
        client_host="/" + client_host(ctx),  # as Kafka reports it
        endpoint_information_epoch=int(request.endpoint_information_epoch),
        instance_id=request.instance_id,
        rack_id=request.rack_id,
        rebalance_timeout_ms=int(request.rebalance_timeout / _MS),
        topology=_topology(request.topology),
        owned=_owned(request),
        process_id=request.process_id,
        user_endpoint=None if endpoint is None else (endpoint.host, int(endpoint.port)),
        client_tags=None if tags is None else tuple((t.key, t.value) for t in tags),
        task_offsets=_offsets(request.task_offsets),
        task_end_offsets=_offsets(request.task_end_offsets),
        shutdown_application=bool(request.shutdown_application),
    )


def _listed(tasks: Tasks) -> list[dict[str, Any]]:
    return [
        {"subtopology_id": s, "partitions": sorted(ps)} for s, ps in sorted(tasks.items()) if ps
    ]


async def _create(ctx: RequestContext, topics: tuple[TopicSpec, ...]) -> Status | None:
    """Create the missing internal topics if the principal may (else the status saying it may
    not); a topic made meanwhile by someone else is no failure."""
    if not permits_cluster(ctx, Op.CREATE):
        refused = denied(ctx, Op.CREATE, TOPIC, (t.name for t in topics))
        if refused:
            return Status(
                MISSING_INTERNAL_TOPICS,
                f"Unauthorized to CREATE on topics {', '.join(sorted(refused))}.",
            )
    for spec in topics:
        try:
            await ctx.services.topics.create_topic(
                spec.name,
                spec.partitions,
                spec.replication_factor or -1,
                dict(spec.configs),
            )
            log.info("created internal topic %s of a streams group", spec.name)
        except KafkaError as e:
            if e.code != ErrorCode.topic_already_exists:
                log.warning("could not create internal topic %s: %s", spec.name, e)
    return None


@handles(api_key=88, min_version=0, max_version=0)
async def handle_streams_group_heartbeat(ctx: RequestContext, request: Any) -> Response:
    if not permits(ctx, Op.READ, GROUP, request.group_id):
        return refusal(ctx, GROUP, member_id=request.member_id, member_epoch=-1)
    heartbeat = _request(ctx, request)
    hidden = (
        denied(ctx, Op.DESCRIBE, TOPIC, topology_topics(heartbeat.topology))
        if heartbeat.topology is not None
        else frozenset()
    )
    if hidden:
        result = StreamsHeartbeatResult(
            ErrorCode.topic_authorization_failed,
            f"not authorized to describe {', '.join(sorted(hidden))}",
        )
    else:
        # The group's own configs (streams.*) are known before the coordinator needs them.
        await ctx.services.groups.group_configs.ensure(heartbeat.group_id)
        try:
            result = await ctx.services.groups.write(
                heartbeat.group_id,
                lambda coordinator: coordinator.streams.heartbeat(heartbeat),
                api_key=ctx.header.api_key,
            )
        except CoordinatorError as e:
            message = None if e.refused == ErrorCode.none else e.refused.name
            result = StreamsHeartbeatResult(e.code, message)
    statuses = list(result.statuses)
    if result.error == ErrorCode.none and result.creatable_topics:
        unauthorized = await _create(ctx, result.creatable_topics)
        if unauthorized is not None:
            statuses.append(unauthorized)
    ok = result.error == ErrorCode.none
    assignment = result.assignment
    endpoints = result.endpoints
    return ctx.respond(
        throttle_time=0,
        error_code=result.error,
        error_message=None if ok else result.message,
        member_id=result.member_id or heartbeat.member_id,
        member_epoch=result.member_epoch if ok else -1,
        heartbeat_interval=datetime.timedelta(milliseconds=result.heartbeat_interval_ms),
        acceptable_recovery_lag=result.acceptable_recovery_lag,
        task_offset_interval=datetime.timedelta(milliseconds=result.task_offset_interval_ms),
        status=[{"status_code": s.code, "status_detail": s.detail} for s in statuses]
        if ok
        else None,
        active_tasks=None if assignment is None else _listed(assignment.active),
        standby_tasks=None if assignment is None else _listed(assignment.standby),
        warmup_tasks=None if assignment is None else _listed(assignment.warmup),
        endpoint_information_epoch=result.endpoint_information_epoch,
        partitions_by_user_endpoint=None
        if endpoints is None
        else [
            {
                "user_endpoint": {"host": e.endpoint[0], "port": e.endpoint[1]},
                "active_partitions": [{"topic": t, "partitions": list(ps)} for t, ps in e.active],
                "standby_partitions": [{"topic": t, "partitions": list(ps)} for t, ps in e.standby],
            }
            for e in endpoints
        ],
    )
