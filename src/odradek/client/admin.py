"""Consumer group administration over the wire: what ``kafka-consumer-groups.sh`` shows.

:class:`GroupAdmin` lists a cluster's groups and describes one: its state and protocol, its
members with their assignments (decoded from the consumer protocol), and per partition the
committed offset, the log end offset and the lag between them.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from kio.schema.consumer_protocol_assignment.v0.data import (
    ConsumerProtocolAssignment as AssignmentV0,
)
from kio.schema.consumer_protocol_assignment.v1.data import (
    ConsumerProtocolAssignment as AssignmentV1,
)
from kio.schema.consumer_protocol_assignment.v2.data import (
    ConsumerProtocolAssignment as AssignmentV2,
)
from kio.schema.consumer_protocol_assignment.v3.data import (
    ConsumerProtocolAssignment as AssignmentV3,
)
from kio.serial import entity_reader

from odradek.client.aio import AsyncConnection
from odradek.client.core import ClientError, parse_address
from odradek.protocol.errors import ErrorCode

FIND_COORDINATOR, LIST_GROUPS, DESCRIBE_GROUPS, OFFSET_FETCH = 10, 16, 15, 9
METADATA, LIST_OFFSETS = 3, 2
LATEST = -1
CONSUMER_PROTOCOL_TYPE = "consumer"
_ASSIGNMENT_VERSIONS: tuple[Any, ...] = (AssignmentV0, AssignmentV1, AssignmentV2, AssignmentV3)

TopicPartition = tuple[str, int]


@dataclass(frozen=True, slots=True)
class ListedGroup:
    group_id: str
    state: str
    protocol_type: str


@dataclass(frozen=True, slots=True)
class MemberInfo:
    member_id: str
    group_instance_id: str | None
    client_id: str
    host: str
    assignment: tuple[TopicPartition, ...]


@dataclass(frozen=True, slots=True)
class PartitionInfo:
    topic: str
    partition: int
    committed: int | None
    end_offset: int | None
    member: MemberInfo | None

    @property
    def lag(self) -> int | None:
        if self.committed is None or self.end_offset is None:
            return None
        return max(self.end_offset - self.committed, 0)


@dataclass(frozen=True, slots=True)
class GroupInfo:
    group_id: str
    state: str
    protocol_type: str
    protocol: str
    members: tuple[MemberInfo, ...]
    partitions: tuple[PartitionInfo, ...]

    @property
    def exists(self) -> bool:
        return self.state != "Dead" or bool(self.partitions)


def decode_assignment(data: bytes) -> tuple[TopicPartition, ...]:
    """The partitions of a ``ConsumerProtocolAssignment`` (any version: later versions only
    add fields at the end, so they are read as the newest one known)."""
    if len(data) < 2:
        return ()
    (version,) = struct.unpack_from(">h", data, 0)
    schema = _ASSIGNMENT_VERSIONS[min(max(version, 0), len(_ASSIGNMENT_VERSIONS) - 1)]
    try:
        assignment, _ = entity_reader(schema)(data, 2)
    except Exception as e:
        raise ClientError(f"unreadable consumer assignment: {e}") from e
    return tuple((tp.topic, int(p)) for tp in assignment.assigned_partitions for p in tp.partitions)


class GroupAdmin:
    """Group administration against the cluster at ``bootstrap`` (``host:port``)."""

    def __init__(self, bootstrap: AsyncConnection, client_id: str, timeout_s: float) -> None:
        self._bootstrap = bootstrap
        self._client_id = client_id
        self._timeout_s = timeout_s
        self._connections: dict[tuple[str, int], AsyncConnection] = {}

    @classmethod
    async def connect(
        cls, bootstrap: str, *, client_id: str = "odradek-groups", timeout_s: float = 30.0
    ) -> GroupAdmin:
        host, port = parse_address(bootstrap)
        connection = await AsyncConnection.open(bootstrap, client_id=client_id, timeout_s=timeout_s)
        admin = cls(connection, client_id, timeout_s)
        admin._connections[(host, port)] = connection
        return admin

    async def close(self) -> None:
        for connection in self._connections.values():
            await connection.close()
        self._connections.clear()

    async def __aenter__(self) -> GroupAdmin:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def _broker(self, host: str, port: int) -> AsyncConnection:
        connection = self._connections.get((host, port))
        if connection is None:
            connection = await AsyncConnection.open(
                f"{host}:{port}", client_id=self._client_id, timeout_s=self._timeout_s
            )
            self._connections[(host, port)] = connection
        return connection

    async def _brokers(self) -> list[tuple[int, str, int]]:
        response = await self._bootstrap.request(
            METADATA, {"topics": [], "allow_auto_topic_creation": False}, highest=9
        )
        return [(int(b.node_id), b.host, int(b.port)) for b in response.brokers]

    async def _coordinator(self, group_id: str) -> AsyncConnection:
        response = await self._bootstrap.request(
            FIND_COORDINATOR, {"key": group_id, "key_type": 0}, highest=3
        )
        if response.error_code != ErrorCode.none:
            raise ClientError(f"no coordinator for group {group_id!r}: {response.error_code.name}")
        return await self._broker(response.host, int(response.port))

    # -- listing -------------------------------------------------------------------------------

    async def list_groups(self) -> list[ListedGroup]:
        """Every group of every broker, sorted by id."""
        found: dict[str, ListedGroup] = {}
        for _, host, port in await self._brokers():
            connection = await self._broker(host, port)
            response = await connection.request(LIST_GROUPS, {"states_filter": []}, highest=4)
            if response.error_code != ErrorCode.none:
                raise ClientError(f"ListGroups failed: {response.error_code.name}")
            for g in response.groups:
                found[g.group_id] = ListedGroup(
                    g.group_id, getattr(g, "group_state", "") or "", g.protocol_type
                )
        return sorted(found.values(), key=lambda g: g.group_id)

    # -- describing ----------------------------------------------------------------------------

    async def describe_group(self, group_id: str) -> GroupInfo:
        coordinator = await self._coordinator(group_id)
        response = await coordinator.request(
            DESCRIBE_GROUPS,
            {"groups": [group_id], "include_authorized_operations": False},
            highest=5,
        )
        (described,) = response.groups
        if described.error_code != ErrorCode.none:
            raise ClientError(f"DescribeGroups failed: {described.error_code.name}")
        members = tuple(
            MemberInfo(
                m.member_id,
                getattr(m, "group_instance_id", None),
                m.client_id,
                m.client_host,
                decode_assignment(m.member_assignment)
                if described.protocol_type == CONSUMER_PROTOCOL_TYPE
                else (),
            )
            for m in described.members
        )
        committed = await self._committed(coordinator, group_id)
        owners = {tp: m for m in members for tp in m.assignment}
        partitions = sorted(set(committed) | set(owners))
        ends = await self.end_offsets(partitions)
        return GroupInfo(
            group_id,
            described.group_state,
            described.protocol_type,
            described.protocol_data,
            members,
            tuple(
                PartitionInfo(t, p, committed.get((t, p)), ends.get((t, p)), owners.get((t, p)))
                for t, p in partitions
            ),
        )

    async def _committed(
        self, coordinator: AsyncConnection, group_id: str
    ) -> dict[TopicPartition, int]:
        response = await coordinator.request(
            OFFSET_FETCH, {"group_id": group_id, "topics": None, "require_stable": False}, highest=7
        )
        if response.error_code != ErrorCode.none:
            raise ClientError(f"OffsetFetch failed: {response.error_code.name}")
        return {
            (t.name, int(p.partition_index)): int(p.committed_offset)
            for t in response.topics
            for p in t.partitions
            if p.error_code == ErrorCode.none and p.committed_offset >= 0
        }

    async def end_offsets(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        """The log end offsets (high watermarks) of ``partitions`` that exist."""
        wanted = sorted(set(partitions))
        if not wanted:
            return {}
        topics = sorted({t for t, _ in wanted})
        metadata = await self._bootstrap.request(
            METADATA,
            {"topics": [{"name": t} for t in topics], "allow_auto_topic_creation": False},
            highest=9,
        )
        addresses = {int(b.node_id): (b.host, int(b.port)) for b in metadata.brokers}
        leaders = {
            (t.name, int(p.partition_index)): int(p.leader_id)
            for t in metadata.topics
            if t.error_code == ErrorCode.none
            for p in t.partitions
        }
        by_leader: dict[int, list[TopicPartition]] = {}
        for tp in wanted:
            leader = leaders.get(tp)
            if leader is not None and leader in addresses:
                by_leader.setdefault(leader, []).append(tp)
        ends: dict[TopicPartition, int] = {}
        for leader, tps in by_leader.items():
            connection = await self._broker(*addresses[leader])
            by_topic: dict[str, list[int]] = {}
            for t, p in tps:
                by_topic.setdefault(t, []).append(p)
            response = await connection.request(
                LIST_OFFSETS,
                {
                    "replica_id": -1,
                    "isolation_level": 0,
                    "topics": [
                        {
                            "name": t,
                            "partitions": [
                                {
                                    "partition_index": p,
                                    "current_leader_epoch": -1,
                                    "timestamp": LATEST,
                                }
                                for p in ps
                            ],
                        }
                        for t, ps in by_topic.items()
                    ],
                },
                highest=7,
            )
            for t in response.topics:
                for p in t.partitions:
                    if p.error_code == ErrorCode.none:
                        ends[(t.name, int(p.partition_index))] = int(p.offset)
        return ends
