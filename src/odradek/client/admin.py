"""Administration over the wire: what ``kafka-consumer-groups.sh`` and ``kafka-topics.sh`` show.

:class:`GroupAdmin` lists a cluster's groups and describes one: its state and protocol, its
members with their assignments (decoded from the consumer protocol), and per partition the
committed offset, the log end offset and the lag between them.

:class:`ClusterAdmin` describes the cluster and its topics: the live brokers and the controller
(Metadata), every partition's leader, replicas, in-sync replicas and offline replicas as the
broker asked answers them, each topic's ``min.insync.replicas`` (DescribeConfigs), and per
partition its log's start and end offsets (ListOffsets, from its leader) and its size on one
broker's disk (DescribeLogDirs, which a broker answers only for the replicas it hosts).

Both keep one connection per broker they talk to, made on first need, and close them all on
:meth:`AdminClient.close`. Run on one asyncio event loop.
"""

from __future__ import annotations

import asyncio
import struct
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Self

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
from odradek.client.core import ClientError, ConnectionFailed, parse_address
from odradek.protocol.bounds import entity_check
from odradek.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from odradek.security.client_settings import ClientSecurity

FIND_COORDINATOR, LIST_GROUPS, DESCRIBE_GROUPS, OFFSET_FETCH = 10, 16, 15, 9
SHARE_GROUP_DESCRIBE, DESCRIBE_SHARE_GROUP_OFFSETS = 77, 90
STREAMS_GROUP_DESCRIBE = 89
SHARE_PROTOCOL_TYPE = "share"
OFFSET_COMMIT, DELETE_GROUPS, DELETE_RECORDS = 8, 42, 21
CREATE_TOPICS, DELETE_TOPICS, CREATE_PARTITIONS, INCREMENTAL_ALTER_CONFIGS = 19, 20, 37, 44
BROKER_RESOURCE = 4
METADATA, LIST_OFFSETS, DESCRIBE_CONFIGS, DESCRIBE_LOG_DIRS = 3, 2, 32, 35
EARLIEST, LATEST = -2, -1
RESET_TARGETS = ("earliest", "latest", "offset", "timestamp", "shift")
NO_NODE = -1
TOPIC_RESOURCE = 2
MIN_INSYNC_REPLICAS = "min.insync.replicas"
CONSUMER_PROTOCOL_TYPE = "consumer"
_ASSIGNMENT_VERSIONS: tuple[Any, ...] = (AssignmentV0, AssignmentV1, AssignmentV2, AssignmentV3)

TopicPartition = tuple[str, int]


@dataclass(frozen=True, slots=True, order=True)
class ConfigEntry:
    """One config of a topic or broker as DescribeConfigs answers it: its value (None when
    sensitive or unset), where the value comes from (Kafka's source names: DYNAMIC_TOPIC_CONFIG,
    STATIC_BROKER_CONFIG, DEFAULT_CONFIG, …) and the default it has when nothing sets it."""

    name: str
    value: str | None
    source: str
    read_only: bool
    default: str | None


@dataclass(frozen=True, slots=True)
class ListedGroup:
    group_id: str
    state: str
    protocol_type: str
    # "classic", "consumer" (KIP-848) or "share" (KIP-932), as ListGroups v5 tells it.
    group_type: str = "classic"


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
        # its counts are a client's word: checked before kio reserves room for them
        entity_check(schema)(data, 2)
        assignment, _ = entity_reader(schema)(data, 2)
    except Exception as e:
        raise ClientError(f"unreadable consumer assignment: {e}") from e
    return tuple((tp.topic, int(p)) for tp in assignment.assigned_partitions for p in tp.partitions)


class AdminClient:
    """Connections to the brokers of the cluster at a bootstrap address, one per broker, made
    on first need; the requests both admins send (Metadata, ListOffsets)."""

    CLIENT_ID = "odradek-admin"

    def __init__(
        self,
        bootstrap: AsyncConnection,
        client_id: str,
        timeout_s: float,
        security: ClientSecurity | None = None,
    ) -> None:
        self._bootstrap = bootstrap
        self._client_id = client_id
        self._timeout_s = timeout_s
        self._security = security
        self._connections: dict[tuple[str, int], AsyncConnection] = {}
        # Concurrent requests to one broker (gathered) share one connection, opened once.
        self._opening = asyncio.Lock()

    @classmethod
    async def connect(
        cls,
        bootstrap: str,
        *,
        client_id: str | None = None,
        timeout_s: float = 30.0,
        security: ClientSecurity | None = None,
    ) -> Self:
        """Connect to the first broker of ``bootstrap`` (``host:port``, or several
        comma-separated, as Kafka's ``bootstrap.servers``) that answers, over TLS and with
        SASL as ``security`` says."""
        client_id = client_id or cls.CLIENT_ID
        addresses = [a.strip() for a in bootstrap.split(",") if a.strip()]
        if not addresses:
            raise ClientError("no bootstrap server given")
        failures: list[str] = []
        for address in addresses:
            try:
                connection = await AsyncConnection.open(
                    address, client_id=client_id, timeout_s=timeout_s, security=security
                )
            except ClientError as e:
                failures.append(str(e))
                continue
            admin = cls(connection, client_id, timeout_s, security)
            admin._connections[parse_address(address)] = connection
            return admin
        raise ClientError("; ".join(failures))

    async def close(self) -> None:
        for connection in self._connections.values():
            await connection.close()
        self._connections.clear()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def _broker(self, host: str, port: int) -> AsyncConnection:
        connection = self._connections.get((host, port))
        if connection is not None:
            return connection
        async with self._opening:
            connection = self._connections.get((host, port))
            if connection is None:
                connection = await AsyncConnection.open(
                    f"{host}:{port}",
                    client_id=self._client_id,
                    timeout_s=self._timeout_s,
                    security=self._security,
                )
                self._connections[(host, port)] = connection
        return connection

    async def _brokers(self) -> list[tuple[int, str, int]]:
        response = await self._bootstrap.request(
            METADATA, {"topics": [], "allow_auto_topic_creation": False}, highest=9
        )
        return [(int(b.node_id), b.host, int(b.port)) for b in response.brokers]

    async def _broker_by_id(self, node_id: int) -> AsyncConnection:
        """A connection to broker ``node_id`` as Metadata lists it."""
        for found, host, port in await self._brokers():
            if found == node_id:
                return await self._broker(host, port)
        raise ClientError(f"broker {node_id} is not in the cluster's metadata")

    async def list_offsets(
        self, partitions: Iterable[TopicPartition], timestamp: int
    ) -> dict[TopicPartition, int]:
        """The offsets ListOffsets answers for ``timestamp`` (:data:`EARLIEST`: the log start,
        :data:`LATEST`: the high watermark), asked of each partition's leader; partitions that
        do not exist or have no leader this client can reach are left out."""
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
        found: dict[TopicPartition, int] = {}
        for leader, tps in by_leader.items():
            try:
                connection = await self._broker(*addresses[leader])
            except ConnectionFailed:
                continue  # a leader that just died, still listed: its partitions are left out
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
                                    "timestamp": timestamp,
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
                        found[(t.name, int(p.partition_index))] = int(p.offset)
        return found


class GroupAdmin(AdminClient):
    """Group administration against the cluster at ``bootstrap`` (``host:port``)."""

    CLIENT_ID = "odradek-groups"

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
            response = await connection.request(
                LIST_GROUPS, {"states_filter": [], "types_filter": []}, highest=5
            )
            if response.error_code != ErrorCode.none:
                raise ClientError(f"ListGroups failed: {response.error_code.name}")
            for g in response.groups:
                found[g.group_id] = ListedGroup(
                    g.group_id,
                    getattr(g, "group_state", "") or "",
                    g.protocol_type,
                    getattr(g, "group_type", "") or "classic",
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
        unknown = described.error_code == ErrorCode.group_id_not_found or (
            described.error_code == ErrorCode.none and described.group_state == "Dead"
        )
        if unknown:
            # Not a classic group (DescribeGroups says Dead, or from v6 GROUP_ID_NOT_FOUND): a
            # share group (KIP-932) is described by its own APIs.
            share = await self._describe_share_group(coordinator, group_id)
            if share is not None:
                return share
            streams = await self._describe_streams_group(coordinator, group_id)
            if streams is not None:
                return streams
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
        return await self._group_info(
            group_id,
            described.group_state,
            described.protocol_type,
            described.protocol_data,
            members,
            committed,
        )

    async def _describe_share_group(
        self, coordinator: AsyncConnection, group_id: str
    ) -> GroupInfo | None:
        """A share group as ShareGroupDescribe and DescribeShareGroupOffsets tell it: the
        members and their assignments, and per partition the group's start offset (where
        ``kafka-share-groups.sh`` shows it); None when it is no share group either."""
        try:
            response = await coordinator.request(
                SHARE_GROUP_DESCRIBE,
                {"group_ids": [group_id], "include_authorized_operations": False},
                highest=1,
            )
        except ClientError:
            return None  # a broker without share groups (Kafka before 4.0)
        (described,) = response.groups
        if described.error_code == ErrorCode.group_id_not_found:
            return None
        if described.error_code != ErrorCode.none:
            raise ClientError(f"ShareGroupDescribe failed: {described.error_code.name}")
        members = tuple(
            MemberInfo(
                m.member_id,
                None,
                m.client_id,
                m.client_host,
                tuple(
                    (t.topic_name, int(p))
                    for t in m.assignment.topic_partitions
                    for p in t.partitions
                ),
            )
            for m in described.members
        )
        offsets = await coordinator.request(
            DESCRIBE_SHARE_GROUP_OFFSETS,
            {"groups": [{"group_id": group_id, "topics": None}]},
            highest=1,
        )
        (group,) = offsets.groups
        started = {
            (t.topic_name, int(p.partition_index)): int(p.start_offset)
            for t in group.topics
            for p in t.partitions
            if p.error_code == ErrorCode.none and p.start_offset >= 0
        }
        return await self._group_info(
            group_id,
            described.group_state,
            SHARE_PROTOCOL_TYPE,
            described.assignor_name,
            members,
            started,
        )

    async def _describe_streams_group(
        self, coordinator: AsyncConnection, group_id: str
    ) -> GroupInfo | None:
        """A streams group (KIP-1071) as StreamsGroupDescribe tells it: each member's active
        tasks as the partitions of its subtopology's source topics, and the committed offsets;
        None when it is no streams group either."""
        try:
            response = await coordinator.request(
                STREAMS_GROUP_DESCRIBE,
                {"group_ids": [group_id], "include_authorized_operations": False},
                highest=0,
            )
        except ClientError:
            return None  # a broker without streams groups
        (described,) = response.groups
        if described.error_code == ErrorCode.group_id_not_found:
            return None
        if described.error_code != ErrorCode.none:
            raise ClientError(f"StreamsGroupDescribe failed: {described.error_code.name}")
        sources: dict[str, list[str]] = {}
        if described.topology is not None:
            for s in described.topology.subtopologies or ():
                sources[s.subtopology_id] = [
                    *s.source_topics,
                    *(t.name for t in s.repartition_source_topics),
                ]
        members = tuple(
            MemberInfo(
                m.member_id,
                m.instance_id,
                m.client_id,
                m.client_host,
                tuple(
                    (topic, int(p))
                    for t in m.assignment.active_tasks
                    for topic in sources.get(t.subtopology_id, ())
                    for p in t.partitions
                ),
            )
            for m in described.members
        )
        committed = await self._committed(coordinator, group_id)
        return await self._group_info(
            group_id, described.group_state, "streams", "", members, committed
        )

    async def _group_info(
        self,
        group_id: str,
        state: str,
        protocol_type: str,
        protocol: str,
        members: tuple[MemberInfo, ...],
        offsets: Mapping[tuple[str, int], int],
    ) -> GroupInfo:
        """A described group with each partition it has an offset for or a member owns: that
        offset, the partition's end and its owner."""
        owners = {tp: m for m in members for tp in m.assignment}
        partitions = sorted(set(offsets) | set(owners))
        ends = await self.end_offsets(partitions)
        return GroupInfo(
            group_id,
            state,
            protocol_type,
            protocol,
            members,
            tuple(
                PartitionInfo(t, p, offsets.get((t, p)), ends.get((t, p)), owners.get((t, p)))
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
        return await self.list_offsets(partitions, LATEST)

    async def committed(self, group_id: str) -> dict[TopicPartition, int]:
        """The group's committed offsets."""
        return await self._committed(await self._coordinator(group_id), group_id)

    async def offsets_for_times(
        self, partitions: Iterable[TopicPartition], timestamp_ms: int
    ) -> dict[TopicPartition, int]:
        """The first offset at or after ``timestamp_ms`` per partition (the log end where
        every record is older)."""
        wanted = list(partitions)
        found = await self.list_offsets(wanted, timestamp_ms)
        missing = [tp for tp in wanted if tp not in found or found[tp] < 0]
        if missing:
            found.update(await self.list_offsets(missing, LATEST))
        return found

    async def reset_plan(
        self,
        group_id: str,
        partitions: Sequence[TopicPartition],
        to: str,
        value: int = 0,
        committed: dict[TopicPartition, int] | None = None,
    ) -> dict[TopicPartition, int]:
        """The offsets ``kafka-consumer-groups.sh --reset-offsets`` would commit for
        ``partitions``: ``to`` is one of :data:`RESET_TARGETS` (``offset``: to ``value``,
        ``timestamp``: the first offset at ``value`` ms or later, ``shift``: the committed
        offset moved by ``value``). As Kafka's tool, an offset outside a partition's log is
        moved to its nearest end; partitions with no live leader are left out."""
        if to not in RESET_TARGETS:
            raise ClientError(f"reset to {to!r}: not one of {', '.join(RESET_TARGETS)}")
        earliest = await self.list_offsets(partitions, EARLIEST)
        latest = await self.list_offsets(partitions, LATEST)
        if to == "earliest":
            target = earliest
        elif to == "latest":
            target = latest
        elif to == "offset":
            target = dict.fromkeys(partitions, value)
        elif to == "timestamp":
            target = await self.offsets_for_times(partitions, value)
        else:
            if committed is None:
                committed = await self.committed(group_id)
            target = {tp: committed.get(tp, latest.get(tp, 0)) + value for tp in partitions}
        return {
            tp: min(max(target[tp], earliest.get(tp, 0)), latest.get(tp, target[tp]))
            for tp in partitions
            if tp in target
        }

    async def reset_offsets(self, group_id: str, offsets: dict[TopicPartition, int]) -> None:
        """Commit ``offsets`` for an inactive group (as ``kafka-consumer-groups.sh
        --reset-offsets --execute``: outside any generation; a group with members refuses)."""
        coordinator = await self._coordinator(group_id)
        by_topic: dict[str, list[dict[str, Any]]] = {}
        for (topic, partition), offset in sorted(offsets.items()):
            by_topic.setdefault(topic, []).append(
                {
                    "partition_index": partition,
                    "committed_offset": offset,
                    "committed_leader_epoch": -1,
                    "committed_metadata": "",
                }
            )
        response = await coordinator.request(
            OFFSET_COMMIT,
            {
                "group_id": group_id,
                "generation_id_or_member_epoch": -1,
                "member_id": "",
                "group_instance_id": None,
                "topics": [{"name": t, "partitions": ps} for t, ps in by_topic.items()],
            },
            highest=8,
        )
        for t in response.topics:
            for p in t.partitions:
                if p.error_code != ErrorCode.none:
                    hint = (
                        " (the group has active members: stop them first)"
                        if p.error_code
                        in (ErrorCode.unknown_member_id, ErrorCode.illegal_generation)
                        else ""
                    )
                    raise ClientError(
                        f"committing {t.name}-{p.partition_index} for group {group_id!r}: "
                        f"{ErrorCode(p.error_code).name}{hint}"
                    )

    async def delete_groups(self, group_ids: Sequence[str]) -> dict[str, ErrorCode]:
        """DeleteGroups at each group's coordinator: per group NONE or why not."""
        results: dict[str, ErrorCode] = {}
        for group_id in group_ids:
            coordinator = await self._coordinator(group_id)
            response = await coordinator.request(
                DELETE_GROUPS, {"groups_names": [group_id]}, highest=2
            )
            for r in response.results:
                results[str(r.group_id)] = ErrorCode(r.error_code)
        return results


# -- the cluster and its topics -------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class BrokerNode:
    """A live broker, as Metadata lists it."""

    node_id: int
    host: str
    port: int
    rack: str | None

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"


@dataclass(frozen=True, slots=True)
class PartitionReplicas:
    """One partition's replication, as the broker asked sees it. ``leader`` is None when the
    partition has no live leader (offline); ``offline`` are the replicas on brokers not live."""

    topic: str
    partition: int
    leader: int | None
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    offline: tuple[int, ...]
    min_insync_replicas: int | None

    @property
    def is_offline(self) -> bool:
        return self.leader is None

    @property
    def is_under_replicated(self) -> bool:
        """Fewer in-sync replicas than replicas."""
        return len(self.isr) < len(self.replicas)

    @property
    def is_under_min_isr(self) -> bool:
        """Writes with acks=all fail: no leader, or fewer in-sync replicas than the topic's
        ``min.insync.replicas`` (Kafka's ``kafka-topics.sh --under-min-isr-partitions``)."""
        if self.leader is None:
            return True
        return self.min_insync_replicas is not None and len(self.isr) < self.min_insync_replicas


@dataclass(frozen=True, slots=True)
class TopicDescription:
    """A topic's partitions; ``error`` names why the broker could not describe it (e.g.
    ``unknown_topic_or_partition``), None when it could."""

    name: str
    error: str | None
    internal: bool
    partitions: tuple[PartitionReplicas, ...]

    @property
    def replication_factor(self) -> int:
        return max((len(p.replicas) for p in self.partitions), default=0)


@dataclass(frozen=True, slots=True)
class ClusterDescription:
    """The live brokers, the controller (None when there is none), and the topics described."""

    cluster_id: str | None
    controller_id: int | None
    brokers: tuple[BrokerNode, ...]
    topics: tuple[TopicDescription, ...]

    def partitions(self) -> list[PartitionReplicas]:
        return [p for t in self.topics for p in t.partitions]

    def broker(self, node_id: int) -> BrokerNode | None:
        return next((b for b in self.brokers if b.node_id == node_id), None)


@dataclass(frozen=True, slots=True)
class LogDirUsage:
    """A partition's replica on one broker: the bytes its segments take, in which log dir."""

    broker_id: int
    log_dir: str
    size_bytes: int


def _error_name(code: Any) -> str | None:
    value = int(code)
    if value == 0:
        return None
    try:
        return ErrorCode(value).name
    except ValueError:
        return f"error {value}"


class ClusterAdmin(AdminClient):
    """The cluster's brokers, controller, partitions and their logs (see the module doc)."""

    CLIENT_ID = "odradek-cli"

    async def describe_cluster(
        self, topics: Sequence[str] | None = None, *, with_min_isr: bool = True
    ) -> ClusterDescription:
        """Brokers, controller, and ``topics`` (every topic when None) with their partitions'
        replication and (unless ``with_min_isr`` is false, which saves a DescribeConfigs of
        every topic) ``min.insync.replicas``."""
        response = await self._bootstrap.request(
            METADATA,
            {
                "topics": None if topics is None else [{"name": t} for t in topics],
                "allow_auto_topic_creation": False,
                "include_topic_authorized_operations": False,
            },
            highest=12,
        )
        names = [str(t.name) for t in response.topics if t.error_code == ErrorCode.none]
        min_isr = await self._min_insync_replicas(names) if with_min_isr else {}
        described = []
        for t in response.topics:
            name = str(t.name)
            partitions = tuple(
                sorted(
                    (
                        PartitionReplicas(
                            name,
                            int(p.partition_index),
                            None if int(p.leader_id) == NO_NODE else int(p.leader_id),
                            int(p.leader_epoch),
                            tuple(int(r) for r in p.replica_nodes),
                            tuple(int(r) for r in p.isr_nodes),
                            tuple(int(r) for r in p.offline_replicas),
                            min_isr.get(name),
                        )
                        for p in t.partitions
                    ),
                    key=lambda p: p.partition,
                )
            )
            described.append(
                TopicDescription(name, _error_name(t.error_code), bool(t.is_internal), partitions)
            )
        controller = int(response.controller_id)
        return ClusterDescription(
            response.cluster_id,
            None if controller == NO_NODE else controller,
            tuple(
                sorted(
                    (
                        BrokerNode(int(b.node_id), str(b.host), int(b.port), b.rack)
                        for b in response.brokers
                    ),
                    key=lambda b: b.node_id,
                )
            ),
            tuple(sorted(described, key=lambda t: t.name)),
        )

    async def topic_configs(
        self, topics: Sequence[str], keys: Sequence[str] | None = None
    ) -> dict[str, dict[str, str]]:
        """topic → its configs (all, or only ``keys``), as DescribeConfigs answers them: the
        topic's own values and the broker defaults it inherits. Topics the broker could not
        describe are left out."""
        if not topics:
            return {}
        response = await self._bootstrap.request(
            DESCRIBE_CONFIGS,
            {
                "resources": [
                    {
                        "resource_type": TOPIC_RESOURCE,
                        "resource_name": t,
                        "configuration_keys": None if keys is None else list(keys),
                    }
                    for t in topics
                ],
                "include_synonyms": False,
                "include_documentation": False,
            },
            highest=4,
        )
        return {
            str(r.resource_name): {str(c.name): str(c.value) for c in r.configs}
            for r in response.results
            if r.error_code == ErrorCode.none
        }

    async def _min_insync_replicas(self, topics: Sequence[str]) -> dict[str, int]:
        configs = await self.topic_configs(topics, [MIN_INSYNC_REPLICAS])
        found: dict[str, int] = {}
        for topic, values in configs.items():
            value = values.get(MIN_INSYNC_REPLICAS, "")
            if value.isdigit():
                found[topic] = int(value)
        return found

    async def log_dirs(
        self, broker: BrokerNode, topic: str, partitions: Iterable[int]
    ) -> dict[int, LogDirUsage]:
        """partition → its replica's size on ``broker``'s disk (DescribeLogDirs, which a broker
        answers only for the replicas it hosts)."""
        wanted = sorted(set(partitions))
        connection = await self._broker(broker.host, broker.port)
        response = await connection.request(
            DESCRIBE_LOG_DIRS, {"topics": [{"topic": topic, "partitions": wanted}]}, highest=4
        )
        found: dict[int, LogDirUsage] = {}
        for result in response.results:
            if result.error_code != ErrorCode.none:
                continue
            for t in result.topics:
                if str(t.name) != topic:
                    continue
                for p in t.partitions:
                    found[int(p.partition_index)] = LogDirUsage(
                        broker.node_id, str(result.log_dir), int(p.partition_size)
                    )
        return found

    async def replica_sizes(self, brokers: Iterable[BrokerNode]) -> dict[TopicPartition, int]:
        """Every partition's size on disk: the largest of its replicas on ``brokers``
        (DescribeLogDirs of every topic; a broker that cannot be reached is left out)."""
        sizes: dict[TopicPartition, int] = {}
        for broker in brokers:
            try:
                connection = await self._broker(broker.host, broker.port)
            except ConnectionFailed:
                continue
            response = await connection.request(DESCRIBE_LOG_DIRS, {"topics": None}, highest=4)
            for result in response.results:
                if result.error_code != ErrorCode.none:
                    continue
                for t in result.topics:
                    for p in t.partitions:
                        tp = (str(t.name), int(p.partition_index))
                        sizes[tp] = max(sizes.get(tp, 0), int(p.partition_size))
        return sizes

    async def log_offsets(
        self, partitions: Iterable[TopicPartition]
    ) -> dict[TopicPartition, tuple[int, int]]:
        """partition → (log start offset, log end offset) from its leader; partitions with no
        live leader are left out."""
        wanted = sorted(set(partitions))
        starts = await self.list_offsets(wanted, EARLIEST)
        ends = await self.list_offsets(wanted, LATEST)
        return {tp: (starts[tp], ends[tp]) for tp in wanted if tp in starts and tp in ends}

    # -- changes -------------------------------------------------------------------------------

    async def create_topic(
        self,
        name: str,
        partitions: int = -1,
        replication_factor: int = -1,
        configs: dict[str, str] | None = None,
    ) -> None:
        """CreateTopics (-1: the broker's ``num.partitions`` / ``default.replication.factor``)."""
        response = await self._bootstrap.request(
            CREATE_TOPICS,
            {
                "topics": [
                    {
                        "name": name,
                        "num_partitions": partitions,
                        "replication_factor": replication_factor,
                        "assignments": [],
                        "configs": [{"name": k, "value": v} for k, v in (configs or {}).items()],
                    }
                ],
                "timeout": 30_000,
                "validate_only": False,
            },
            highest=7,
        )
        _raise_for(response.topics, f"creating topic {name!r}")

    async def delete_topics(self, names: Sequence[str]) -> None:
        response = await self._bootstrap.request(
            DELETE_TOPICS,
            {"topic_names": list(names), "topics": [{"name": n} for n in names], "timeout": 30_000},
            highest=6,
        )
        _raise_for(response.responses, "deleting topics")

    async def create_partitions(self, name: str, count: int) -> None:
        """Grow ``name`` to ``count`` partitions (CreatePartitions)."""
        response = await self._bootstrap.request(
            CREATE_PARTITIONS,
            {
                "topics": [{"name": name, "count": count, "assignments": None}],
                "timeout": 30_000,
                "validate_only": False,
            },
            highest=3,
        )
        _raise_for(response.results, f"adding partitions to {name!r}")

    async def describe_configs(
        self, resource_type: int, name: str
    ) -> list[tuple[str, str | None, str, bool]]:
        """(name, value, source, read only) of every config of a topic or broker, sorted by
        name; sensitive values are None."""
        entries = await self.config_entries(resource_type, name)
        return [(e.name, e.value, e.source, e.read_only) for e in entries]

    async def config_entries(self, resource_type: int, name: str) -> list[ConfigEntry]:
        """Every config of a topic or broker, sorted by name, with the default each falls back
        to (the broker's DEFAULT_CONFIG synonym, asked for with ``include_synonyms``). A
        broker's configs are asked of that broker, as Kafka's admin client asks them: each
        broker describes only its own."""
        connection = self._bootstrap
        if resource_type == BROKER_RESOURCE and name.isdigit():
            connection = await self._broker_by_id(int(name))
        response = await connection.request(
            DESCRIBE_CONFIGS,
            {
                "resources": [
                    {
                        "resource_type": resource_type,
                        "resource_name": name,
                        "configuration_keys": None,
                    }
                ],
                "include_synonyms": True,
                "include_documentation": False,
            },
            highest=4,
        )
        (result,) = response.results
        if result.error_code != ErrorCode.none:
            raise ClientError(
                f"describing {name!r}: {ErrorCode(result.error_code).name}"
                + (f": {result.error_message}" if result.error_message else "")
            )
        entries = []
        for c in result.configs:
            source = _CONFIG_SOURCES.get(int(getattr(c, "config_source", -1)), "UNKNOWN")
            default = next(
                (
                    s.value
                    for s in getattr(c, "synonyms", ())
                    if _CONFIG_SOURCES.get(int(s.source)) == "DEFAULT_CONFIG"
                ),
                None,
            )
            value = None if c.is_sensitive else c.value
            if default is None and source == "DEFAULT_CONFIG":
                default = value
            entries.append(ConfigEntry(str(c.name), value, source, bool(c.read_only), default))
        return sorted(entries)

    async def alter_configs(
        self,
        resource_type: int,
        name: str,
        set_values: dict[str, str],
        delete: Sequence[str] = (),
    ) -> None:
        """IncrementalAlterConfigs: set ``set_values``, return ``delete`` to their defaults."""
        configs = [{"name": k, "config_operation": 0, "value": v} for k, v in set_values.items()]
        configs += [{"name": k, "config_operation": 1, "value": None} for k in delete]
        response = await self._bootstrap.request(
            INCREMENTAL_ALTER_CONFIGS,
            {
                "resources": [
                    {"resource_type": resource_type, "resource_name": name, "configs": configs}
                ],
                "validate_only": False,
            },
            highest=1,
        )
        (result,) = response.responses
        if result.error_code != ErrorCode.none:
            raise ClientError(
                f"altering {name!r}: {ErrorCode(result.error_code).name}"
                + (f": {result.error_message}" if result.error_message else "")
            )

    async def delete_records(self, topic: str, partition: int, before: int) -> int:
        """DeleteRecords at the partition's leader: records below ``before`` (-1: all) go; the
        new log start offset."""
        metadata = await self._bootstrap.request(
            METADATA, {"topics": [{"name": topic}], "allow_auto_topic_creation": False}, highest=9
        )
        addresses = {int(b.node_id): (b.host, int(b.port)) for b in metadata.brokers}
        leader = next(
            (
                int(p.leader_id)
                for t in metadata.topics
                for p in t.partitions
                if int(p.partition_index) == partition
            ),
            None,
        )
        if leader is None or leader not in addresses:
            raise ClientError(f"{topic}-{partition} does not exist or has no leader")
        connection = await self._broker(*addresses[leader])
        response = await connection.request(
            DELETE_RECORDS,
            {
                "topics": [
                    {
                        "name": topic,
                        "partitions": [{"partition_index": partition, "offset": before}],
                    }
                ],
                "timeout": 30_000,
            },
            highest=2,
        )
        (result,) = response.topics[0].partitions
        if result.error_code != ErrorCode.none:
            raise ClientError(
                f"deleting records of {topic}-{partition}: {ErrorCode(result.error_code).name}"
            )
        return int(result.low_watermark)


# DescribeConfigs' config_source ids (KIP-226), as kafka-configs.sh names them.
_CONFIG_SOURCES = {
    1: "DYNAMIC_TOPIC_CONFIG",
    2: "DYNAMIC_BROKER_CONFIG",
    3: "DYNAMIC_DEFAULT_BROKER_CONFIG",
    4: "STATIC_BROKER_CONFIG",
    5: "DEFAULT_CONFIG",
    6: "DYNAMIC_BROKER_LOGGER_CONFIG",
    7: "CLIENT_METRICS_CONFIG",
    8: "GROUP_CONFIG",
}


def _raise_for(results: Iterable[Any], what: str) -> None:
    for r in results:
        if r.error_code != ErrorCode.none:
            message = getattr(r, "error_message", None)
            raise ClientError(
                f"{what}: {ErrorCode(r.error_code).name}" + (f": {message}" if message else "")
            )


# -- transactions --------------------------------------------------------------------------------

DESCRIBE_PRODUCERS, DESCRIBE_TRANSACTIONS, LIST_TRANSACTIONS, WRITE_TXN_MARKERS = 61, 65, 66, 27
TRANSACTION_KEY = 1


@dataclass(frozen=True, slots=True)
class ListedTransaction:
    transactional_id: str
    producer_id: int
    state: str
    coordinator_id: int


@dataclass(frozen=True, slots=True)
class TransactionInfo:
    transactional_id: str
    coordinator_id: int
    state: str
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    start_ms: int  # -1: no transaction running
    partitions: tuple[TopicPartition, ...]


@dataclass(frozen=True, slots=True)
class ProducerInfo:
    """A producer as a partition's leader knows it (DescribeProducers)."""

    producer_id: int
    producer_epoch: int
    last_sequence: int
    last_timestamp: int
    coordinator_epoch: int
    current_txn_start_offset: int  # -1: no open transaction in the partition


class TransactionAdmin(AdminClient):
    """What ``kafka-transactions.sh`` does: list and describe transactions at their coordinators,
    describe a partition's producers at its leader, and abort a hanging transaction by writing
    its ABORT marker to the partition (WriteTxnMarkers, as Kafka's admin client does)."""

    CLIENT_ID = "odradek-transactions"

    async def list_transactions(
        self,
        states: Sequence[str] = (),
        producer_ids: Sequence[int] = (),
        min_duration_ms: int = -1,
    ) -> list[ListedTransaction]:
        """Every broker's transactions (each coordinates its own), sorted by id."""
        found: list[ListedTransaction] = []
        for node_id, host, port in await self._brokers():
            connection = await self._broker(host, port)
            response = await connection.request(
                LIST_TRANSACTIONS,
                {
                    "state_filters": list(states),
                    "producer_id_filters": list(producer_ids),
                    "duration_filter": min_duration_ms,
                },
                highest=1,
            )
            if response.error_code != ErrorCode.none:
                raise ClientError(f"ListTransactions failed: {response.error_code.name}")
            found += [
                ListedTransaction(
                    t.transactional_id, int(t.producer_id), t.transaction_state, node_id
                )
                for t in response.transaction_states
            ]
        return sorted(found, key=lambda t: t.transactional_id)

    async def _txn_coordinator(self, transactional_id: str) -> tuple[int, AsyncConnection]:
        response = await self._bootstrap.request(
            FIND_COORDINATOR, {"key": transactional_id, "key_type": TRANSACTION_KEY}, highest=3
        )
        if response.error_code != ErrorCode.none:
            raise ClientError(
                f"no coordinator for transactional id {transactional_id!r}: "
                f"{response.error_code.name}"
            )
        return int(response.node_id), await self._broker(response.host, int(response.port))

    async def describe_transaction(self, transactional_id: str) -> TransactionInfo | None:
        """The transactional id's state at its coordinator; None if it does not know the id."""
        node_id, coordinator = await self._txn_coordinator(transactional_id)
        response = await coordinator.request(
            DESCRIBE_TRANSACTIONS, {"transactional_ids": [transactional_id]}, highest=0
        )
        (state,) = response.transaction_states
        if state.error_code == ErrorCode.transactional_id_not_found:
            return None
        if state.error_code != ErrorCode.none:
            raise ClientError(f"DescribeTransactions failed: {state.error_code.name}")
        start = state.transaction_start_time
        return TransactionInfo(
            transactional_id,
            node_id,
            state.transaction_state,
            int(state.producer_id),
            int(state.producer_epoch),
            int(state.transaction_timeout.total_seconds() * 1000),
            int(start.timestamp() * 1000) if state.transaction_state == "Ongoing" else -1,
            tuple((t.topic, int(p)) for t in state.topics for p in t.partitions),
        )

    async def _leader(self, topic: str, partition: int) -> AsyncConnection:
        metadata = await self._bootstrap.request(
            METADATA, {"topics": [{"name": topic}], "allow_auto_topic_creation": False}, highest=9
        )
        addresses = {int(b.node_id): (b.host, int(b.port)) for b in metadata.brokers}
        for t in metadata.topics:
            for p in t.partitions:
                if int(p.partition_index) == partition and int(p.leader_id) in addresses:
                    return await self._broker(*addresses[int(p.leader_id)])
        raise ClientError(f"{topic}-{partition} does not exist or has no leader")

    async def describe_producers(self, topic: str, partition: int) -> list[ProducerInfo]:
        leader = await self._leader(topic, partition)
        response = await leader.request(
            DESCRIBE_PRODUCERS,
            {"topics": [{"name": topic, "partition_indexes": [partition]}]},
            highest=0,
        )
        (p,) = response.topics[0].partitions
        if p.error_code != ErrorCode.none:
            raise ClientError(f"DescribeProducers of {topic}-{partition}: {p.error_code.name}")
        return [
            ProducerInfo(
                int(a.producer_id),
                int(a.producer_epoch),
                int(a.last_sequence),
                int(a.last_timestamp),
                int(a.coordinator_epoch),
                int(a.current_txn_start_offset),
            )
            for a in p.active_producers
        ]

    async def abort_transaction(
        self,
        topic: str,
        partition: int,
        producer_id: int,
        producer_epoch: int,
        coordinator_epoch: int,
    ) -> None:
        """Write the ABORT marker of ``producer_id``'s open transaction to the partition."""
        leader = await self._leader(topic, partition)
        response = await leader.request(
            WRITE_TXN_MARKERS,
            {
                "markers": [
                    {
                        "producer_id": producer_id,
                        "producer_epoch": producer_epoch,
                        "transaction_result": False,
                        "topics": [{"name": topic, "partition_indexes": [partition]}],
                        "coordinator_epoch": coordinator_epoch,
                    }
                ]
            },
        )
        for marker in response.markers:
            for t in marker.topics:
                for p in t.partitions:
                    if p.error_code != ErrorCode.none:
                        raise ClientError(
                            f"aborting producer {producer_id}'s transaction in "
                            f"{topic}-{partition}: {ErrorCode(p.error_code).name}"
                        )
