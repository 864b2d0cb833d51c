"""A group coordinator on a manual clock with an in-memory ``__consumer_offsets``, and members
that speak to it the way a Kafka consumer does."""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import Any, cast

from odradek.clock import ManualClock
from odradek.coordinator.common.runtime import CoordinatorWrite, append_writes
from odradek.coordinator.group import records as rec
from odradek.coordinator.group.consumer_protocol import ConsumerProtocol
from odradek.coordinator.group.coordinator import GroupConfig, GroupCoordinator
from odradek.coordinator.group.messages import (
    CommitRequest,
    HeartbeatRequest,
    JoinRequest,
    JoinResult,
    MemberIdentity,
    OffsetCommit,
    Protocol,
    SyncRequest,
    SyncResult,
)
from odradek.coordinator.group.offsets import OffsetManager
from odradek.coordinator.group.share_group import ShareGroups
from odradek.coordinator.group.streams_group import StreamsGroups
from odradek.protocol.errors import ErrorCode, KafkaError

SESSION_MS = 10_000
REBALANCE_MS = 30_000


def subscription(*topics: str) -> bytes:
    """A ``ConsumerProtocolSubscription`` v0: the topics, no user data."""
    out = bytearray(struct.pack(">hi", 0, len(topics)))
    for topic in topics:
        out += struct.pack(">h", len(topic)) + topic.encode()
    out += struct.pack(">i", -1)
    return bytes(out)


def assignment(partitions: dict[str, list[int]]) -> bytes:
    """A ``ConsumerProtocolAssignment`` v0."""
    out = bytearray(struct.pack(">hi", 0, len(partitions)))
    for topic, indexes in partitions.items():
        out += struct.pack(">h", len(topic)) + topic.encode()
        out += struct.pack(">i", len(indexes))
        for index in indexes:
            out += struct.pack(">i", index)
    out += struct.pack(">i", -1)
    return bytes(out)


class MemoryLog:
    """``__consumer_offsets`` as a list; ``fail_with`` makes the next writes fail. Every write
    is appended (or refused) at once; ``refused`` counts the writes refused, ``last_error`` is
    the first refusal of the last operation (NONE: none), what its request is answered with."""

    def __init__(self) -> None:
        self.records: list[tuple[int, bytes, bytes | None]] = []
        # The producer id of each record's batch (-1: not transactional).
        self.producers: list[int] = []
        # (records before it, partition, producer id, commit)
        self.markers: list[tuple[int, int, int, bool]] = []
        self.fail_with: ErrorCode | None = None
        self.refused = 0
        self.last_error = ErrorCode.none

    def append(self, write: CoordinatorWrite) -> int:
        if self.fail_with is not None:
            self.refused += 1
            raise KafkaError(self.fail_with, "write refused by the test")
        first = len(self.records)
        self.records.extend((write.partition, key, value) for key, value in write.records)
        self.producers.extend([write.producer_id] * len(write.records))
        return first

    def mark(self, partition: int, producer_id: int, commit: bool) -> None:
        """A COMMIT or ABORT marker of ``producer_id`` in ``partition``, after the records so
        far (in a real log: a control batch, written by WriteTxnMarkers)."""
        self.markers.append((len(self.records), partition, producer_id, commit))

    def decoded(self) -> list[tuple[rec.Key, rec.Value | None]]:
        out = []
        for _, key, value in self.records:
            k = rec.decode_key(key)
            out.append((k, rec.decode_value(k, value)))
        return out

    def group_values(self, group: str) -> list[rec.GroupValue | None]:
        return [
            v
            for k, v in self.decoded()
            if isinstance(k, rec.GroupKey)
            and k.group == group
            and (v is None or isinstance(v, rec.GroupValue))
        ]


class Appending:
    """The state machine as its runtime drives it: after each call, the writes it asked for
    are appended to the log, in the same step."""

    def __init__(self, target: object, coordinator: GroupCoordinator, log: MemoryLog) -> None:
        object.__setattr__(self, "_target", target)
        object.__setattr__(self, "_coordinator", coordinator)
        object.__setattr__(self, "_log", log)

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._target, name)
        if isinstance(value, ConsumerProtocol | OffsetManager | ShareGroups | StreamsGroups):
            return Appending(value, self._coordinator, self._log)
        if not callable(value) or isinstance(value, type):
            return value

        def call(*args: Any, **kwargs: Any) -> Any:
            result = value(*args, **kwargs)
            _, self._log.last_error = append_writes(self._coordinator, self._log.append)
            return result

        return call

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(self._target, name, value)


def driven(coordinator: GroupCoordinator, log: MemoryLog) -> GroupCoordinator:
    return cast(GroupCoordinator, Appending(coordinator, coordinator, log))


@dataclass
class Box:
    """Where a reply lands when the coordinator gets round to it."""

    results: list[object] = field(default_factory=list)

    def __call__(self, result: object) -> None:
        self.results.append(result)

    @property
    def done(self) -> bool:
        return bool(self.results)

    @property
    def value(self) -> object:
        assert len(self.results) == 1, f"expected one reply, got {self.results}"
        return self.results[0]


class Harness:
    def __init__(self, **config: int) -> None:
        config.setdefault("initial_rebalance_delay_ms", 0)
        config.setdefault("offsets_partitions", 4)
        self.config = GroupConfig(**config)
        self.clock = ManualClock()
        self.log = MemoryLog()
        self.machine = GroupCoordinator(self.config, self.clock)
        self.coordinator = driven(self.machine, self.log)
        self.coordinator.finish_loading()

    def advance(self, ms: int) -> None:
        self.clock.advance(ms)
        self.coordinator.tick()

    def run_for(self, ms: int) -> None:
        """Let ``ms`` pass with the coordinator ticking at each of its deadlines, as the
        broker's event loop ticks it."""
        end = self.clock.monotonic_ms() + ms
        while True:
            deadline = self.coordinator.next_deadline()
            now = self.clock.monotonic_ms()
            if deadline is None or deadline > end:
                self.advance(end - now)
                return
            self.advance(max(deadline - now, 0))

    def restarted(self) -> Harness:
        """A new coordinator on the same clock that replayed this one's records."""
        other = Harness.__new__(Harness)
        other.config = self.config
        other.clock = self.clock
        other.log = MemoryLog()
        other.log.records = list(self.log.records)
        other.log.producers = list(self.log.producers)
        other.log.markers = list(self.log.markers)
        other.machine = GroupCoordinator(self.config, self.clock)
        other.coordinator = driven(other.machine, other.log)
        markers = sorted(self.log.markers)
        for offset, (_, key, value) in enumerate([*self.log.records, (0, b"", None)]):
            while markers and markers[0][0] == offset:
                _, partition, producer_id, commit = markers.pop(0)
                other.coordinator.offsets.complete_transaction(partition, producer_id, commit)
            if offset < len(self.log.records):
                other.coordinator.replay(
                    key, value, offset=offset, producer_id=self.log.producers[offset]
                )
        other.coordinator.finish_loading()
        return other

    def member(
        self,
        group: str = "g",
        *,
        topics: tuple[str, ...] = ("t",),
        instance_id: str | None = None,
        protocols: tuple[str, ...] = ("range",),
        session_ms: int = SESSION_MS,
        rebalance_ms: int = REBALANCE_MS,
        client_id: str = "client",
    ) -> Consumer:
        return Consumer(
            self, group, topics, instance_id, protocols, session_ms, rebalance_ms, client_id
        )

    def state(self, group: str = "g") -> str:
        return self.coordinator.describe_group(group).state


class Consumer:
    """One member, tracking its member id and generation as a client would."""

    def __init__(
        self,
        harness: Harness,
        group: str,
        topics: tuple[str, ...],
        instance_id: str | None,
        protocols: tuple[str, ...],
        session_ms: int,
        rebalance_ms: int,
        client_id: str,
    ) -> None:
        self.h = harness
        self.group = group
        self.topics = topics
        self.instance_id = instance_id
        self.protocols = protocols
        self.session_ms = session_ms
        self.rebalance_ms = rebalance_ms
        self.client_id = client_id
        self.member_id = ""
        self.generation = -1
        self.last_join: JoinResult | None = None

    def join_request(self, member_id: str | None = None) -> JoinRequest:
        return JoinRequest(
            group_id=self.group,
            member_id=self.member_id if member_id is None else member_id,
            group_instance_id=self.instance_id,
            session_timeout_ms=self.session_ms,
            rebalance_timeout_ms=self.rebalance_ms,
            protocol_type="consumer",
            protocols=tuple(Protocol(name, subscription(*self.topics)) for name in self.protocols),
            client_id=self.client_id,
            client_host="/127.0.0.1",
        )

    def send_join(self) -> Box:
        """Send JoinGroup (retrying once on MEMBER_ID_REQUIRED); the box fills when the
        coordinator answers."""
        box = Box()
        self.h.coordinator.join_group(self.join_request(), box)
        if box.done:
            first = box.value
            assert isinstance(first, JoinResult)
            if first.error == ErrorCode.member_id_required:
                self.member_id = first.member_id
                box = Box()
                self.h.coordinator.join_group(self.join_request(), box)
        return box

    def joined(self, box: Box) -> JoinResult:
        result = box.value
        assert isinstance(result, JoinResult), result
        assert result.error == ErrorCode.none, result
        self.member_id = result.member_id
        self.generation = result.generation_id
        self.last_join = result
        return result

    def join(self) -> JoinResult:
        box = self.send_join()
        assert box.done, "JoinGroup is still waiting for the group"
        return self.joined(box)

    @property
    def is_leader(self) -> bool:
        return self.last_join is not None and self.last_join.leader == self.member_id

    def send_sync(self, assignments: dict[str, bytes] | None = None) -> Box:
        box = Box()
        self.h.coordinator.sync_group(
            SyncRequest(
                group_id=self.group,
                generation_id=self.generation,
                member_id=self.member_id,
                group_instance_id=self.instance_id,
                assignments=tuple((assignments or {}).items()),
                protocol_type="consumer",
                protocol_name=self.last_join.protocol_name if self.last_join else None,
            ),
            box,
        )
        return box

    def sync(self, assignments: dict[str, bytes] | None = None) -> SyncResult:
        box = self.send_sync(assignments)
        result = box.value
        assert isinstance(result, SyncResult)
        return result

    def heartbeat(self, generation: int | None = None) -> ErrorCode:
        return self.h.coordinator.heartbeat(
            HeartbeatRequest(
                self.group,
                self.generation if generation is None else generation,
                self.member_id,
                self.instance_id,
            )
        )

    def leave(self) -> ErrorCode:
        result = self.h.coordinator.leave_group(
            self.group, [MemberIdentity(self.member_id, self.instance_id)]
        )
        assert result.error == ErrorCode.none, result
        ((_, code),) = result.members
        return code

    def commit(
        self, offsets: dict[tuple[str, int], int], *, generation: int | None = None, **kw: str
    ) -> dict[tuple[str, int], ErrorCode]:
        return self.h.coordinator.offsets.commit_offsets(
            CommitRequest(
                group_id=self.group,
                generation_id=self.generation if generation is None else generation,
                member_id=self.member_id,
                group_instance_id=self.instance_id,
                offsets=tuple(
                    OffsetCommit(t, p, o, metadata=kw.get("metadata", ""))
                    for (t, p), o in offsets.items()
                ),
            )
        )


def form_group(h: Harness, *members: Consumer, assign: dict[str, bytes] | None = None) -> None:
    """Join all ``members`` into one generation and sync it, as their clients would: a member
    whose JoinGroup was answered for an older generation rejoins (its heartbeat would tell it
    to). The leader assigns ``assign``, by default partition i of ``t`` to the i-th member."""
    boxes = [m.send_join() for m in members]
    for _ in range(len(members) + 1):
        if h.state(members[0].group) != "PreparingRebalance":
            break
        for i, (m, box) in enumerate(zip(members, boxes, strict=True)):
            if box.done:
                m.joined(box)
                boxes[i] = m.send_join()
    for m, box in zip(members, boxes, strict=True):
        m.joined(box)
    assert len({m.generation for m in members}) == 1
    leader = next(m for m in members if m.is_leader)
    if assign is None:
        assign = {m.member_id: assignment({"t": [i]}) for i, m in enumerate(members)}
    sync_boxes = [m.send_sync(assign if m is leader else None) for m in members]
    for box in sync_boxes:
        result = box.value
        assert isinstance(result, SyncResult) and result.error == ErrorCode.none, result
