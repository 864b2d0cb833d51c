"""The controller's admin requests: partition reassignments (AlterPartitionReassignments,
ListPartitionReassignments) and leader elections (ElectLeaders), as Kafka's ``Admin`` sends them.

Each goes to the controller that Metadata names; an answer of NOT_CONTROLLER (the controller
moved meanwhile) asks Metadata again and sends the request to the new one, a few times.
"""

from __future__ import annotations

import asyncio
import datetime
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from odradek.client.admin import ClusterAdmin
from odradek.client.aio import AsyncConnection
from odradek.client.core import ClientError, ConnectionFailed
from odradek.client.data import TopicPartition
from odradek.protocol.errors import ErrorCode

METADATA = 3
ELECT_LEADERS = 43
ALTER_PARTITION_REASSIGNMENTS = 45
LIST_PARTITION_REASSIGNMENTS = 46
NO_NODE = -1
PREFERRED, UNCLEAN = 0, 1
_CONTROLLER_ATTEMPTS = 5
_CONTROLLER_BACKOFF_S = 0.5


@dataclass(frozen=True, slots=True)
class PartitionResult:
    """A partition's answer: ``error`` is NONE when it was done (or started)."""

    error: ErrorCode
    message: str | None = None

    def describe(self) -> str:
        if self.error == ErrorCode.none:
            return "ok"
        return self.error.name + (f": {self.message}" if self.message else "")


@dataclass(frozen=True, slots=True)
class OngoingReassignment:
    """A move in progress: the replicas assigned meanwhile, and those on their way in and out."""

    replicas: tuple[int, ...]
    adding: tuple[int, ...]
    removing: tuple[int, ...]

    @property
    def target(self) -> tuple[int, ...]:
        return tuple(r for r in self.replicas if r not in self.removing)


class PartitionAdmin(ClusterAdmin):
    """Reassignments and leader elections through the controller."""

    async def _controller(self) -> AsyncConnection | None:
        """A connection to the controller Metadata names; None while it names none."""
        response = await self._bootstrap.request(
            METADATA, {"topics": [], "allow_auto_topic_creation": False}, highest=9
        )
        controller = int(response.controller_id)
        for broker in response.brokers:
            if int(broker.node_id) == controller != NO_NODE:
                return await self._broker(str(broker.host), int(broker.port))
        return None

    async def _to_controller(self, api_key: int, body: dict[str, Any], highest: int) -> Any:
        """Send to the controller; while there is none, or it moved (NOT_CONTROLLER, or it
        cannot be reached), ask Metadata again, a few times."""
        why = "no controller"
        for _ in range(_CONTROLLER_ATTEMPTS):
            try:
                connection = await self._controller()
                if connection is None:
                    why = "the cluster has no controller now"
                    await asyncio.sleep(_CONTROLLER_BACKOFF_S)
                    continue
                response = await connection.request(api_key, body, highest=highest)
            except ConnectionFailed as e:
                why = f"the controller cannot be reached: {e}"
                self._forget_closed()
                await asyncio.sleep(_CONTROLLER_BACKOFF_S)
                continue
            if response.error_code == ErrorCode.not_controller:
                why = "the controller moved: NOT_CONTROLLER"
                await asyncio.sleep(_CONTROLLER_BACKOFF_S)
                continue
            if response.error_code != ErrorCode.none:
                message = getattr(response, "error_message", None)
                detail = f": {message}" if message else ""
                raise ClientError(f"{ErrorCode(response.error_code).name}{detail}")
            return response
        raise ClientError(why)

    def _forget_closed(self) -> None:
        for address, connection in list(self._connections.items()):
            if connection.closed and connection is not self._bootstrap:
                del self._connections[address]

    async def alter_reassignments(
        self, targets: Mapping[TopicPartition, Iterable[int] | None]
    ) -> dict[TopicPartition, PartitionResult]:
        """Move each partition to its target replicas (None: cancel its move)."""
        by_topic: dict[str, list[dict[str, Any]]] = {}
        for (topic, partition), replicas in sorted(targets.items()):
            by_topic.setdefault(topic, []).append(
                {
                    "partition_index": partition,
                    "replicas": None if replicas is None else list(replicas),
                }
            )
        response = await self._to_controller(
            ALTER_PARTITION_REASSIGNMENTS,
            {
                "timeout": datetime.timedelta(seconds=self._timeout_s),
                "allow_replication_factor_change": True,
                "topics": [{"name": t, "partitions": ps} for t, ps in by_topic.items()],
            },
            highest=1,
        )
        return {
            TopicPartition(str(t.name), int(p.partition_index)): PartitionResult(
                ErrorCode(p.error_code), p.error_message
            )
            for t in response.responses
            for p in t.partitions
        }

    async def list_reassignments(
        self, partitions: Iterable[TopicPartition] | None = None
    ) -> dict[TopicPartition, OngoingReassignment]:
        """The moves in progress (of ``partitions`` only, when given)."""
        topics = None
        if partitions is not None:
            topics = [{"name": t, "partition_indexes": ps} for t, ps in _by_topic(partitions)]
        response = await self._to_controller(
            LIST_PARTITION_REASSIGNMENTS,
            {"timeout": datetime.timedelta(seconds=self._timeout_s), "topics": topics},
            highest=0,
        )
        return {
            TopicPartition(str(t.name), int(p.partition_index)): OngoingReassignment(
                tuple(int(r) for r in p.replicas),
                tuple(int(r) for r in p.adding_replicas),
                tuple(int(r) for r in p.removing_replicas),
            )
            for t in response.topics
            for p in t.partitions
        }

    async def elect_leaders(
        self, election_type: int, partitions: Iterable[TopicPartition] | None = None
    ) -> dict[TopicPartition, PartitionResult]:
        """ElectLeaders (PREFERRED or UNCLEAN) on ``partitions``, every partition when None."""
        topic_partitions = None
        if partitions is not None:
            topic_partitions = [{"topic": t, "partitions": ps} for t, ps in _by_topic(partitions)]
        response = await self._to_controller(
            ELECT_LEADERS,
            {
                "election_type": election_type,
                "topic_partitions": topic_partitions,
                "timeout": datetime.timedelta(seconds=self._timeout_s),
            },
            highest=2,
        )
        return {
            TopicPartition(str(t.topic), int(p.partition_id)): PartitionResult(
                ErrorCode(p.error_code), p.error_message
            )
            for t in response.replica_election_results
            for p in t.partition_result
        }


def _by_topic(partitions: Iterable[TopicPartition]) -> list[tuple[str, list[int]]]:
    by_topic: dict[str, list[int]] = {}
    for topic, partition in sorted(partitions):
        by_topic.setdefault(topic, []).append(partition)
    return sorted(by_topic.items())
