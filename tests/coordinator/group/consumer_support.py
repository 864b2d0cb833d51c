"""KIP-848 members for the coordinator's state machine tests: a topic catalog and a client that
heartbeats the way Kafka's consumers do (it revokes at once what an answer no longer gives it
and reports what it owns in its next heartbeat)."""

from __future__ import annotations

import uuid

from odradek.coordinator.group.assignors import TopicInfo
from odradek.coordinator.group.messages import ConsumerHeartbeatRequest, ConsumerHeartbeatResult
from odradek.protocol.errors import ErrorCode

from .support import Harness


class Catalog:
    def __init__(self, **topics: int) -> None:
        self.topics = {name: TopicInfo(uuid.uuid4(), count) for name, count in topics.items()}

    def topic_info(self, name: str) -> TopicInfo | None:
        return self.topics.get(name)

    def topic_names(self) -> list[str]:
        return list(self.topics)

    def id(self, name: str) -> uuid.UUID:
        return self.topics[name].topic_id


def consumer_harness(**topics: int) -> tuple[Harness, Catalog]:
    h = Harness()
    catalog = Catalog(**topics)
    h.coordinator.consumer.topics = catalog
    return h, catalog


def restarted(h: Harness, catalog: Catalog) -> Harness:
    after = h.restarted()
    after.coordinator.consumer.topics = catalog
    return after


class Member:
    def __init__(
        self,
        h: Harness,
        topics: tuple[str, ...] = ("t",),
        group: str = "g",
        instance_id: str | None = None,
        assignor: str | None = None,
        member_id: str | None = None,
    ) -> None:
        self.h = h
        self.group = group
        self.topics = topics
        self.instance_id = instance_id
        self.assignor = assignor
        self.member_id = member_id or str(uuid.uuid4())
        self.epoch = 0
        self.owned: set[tuple[uuid.UUID, int]] = set()
        self.last: ConsumerHeartbeatResult | None = None

    def heartbeat(self, *, epoch: int | None = None, full: bool = False) -> ErrorCode:
        joining = self.epoch == 0 if epoch is None else epoch == 0
        result = self.h.coordinator.consumer.heartbeat(
            ConsumerHeartbeatRequest(
                group_id=self.group,
                member_id=self.member_id,
                member_epoch=self.epoch if epoch is None else epoch,
                instance_id=self.instance_id,
                rebalance_timeout_ms=30_000 if joining or full else -1,
                subscribed_topic_names=self.topics if joining or full else None,
                server_assignor=self.assignor,
                owned=tuple(sorted(self.owned)),
                client_id="client",
                client_host="/127.0.0.1",
            )
        )
        self.last = result
        if result.error is ErrorCode.none:
            self.epoch = result.member_epoch
            if result.assignment is not None:
                self.owned = {(t, p) for t, ps in result.assignment.items() for p in ps}
        return result.error

    def leave(self, epoch: int = -1) -> ErrorCode:
        result = self.h.coordinator.consumer.heartbeat(
            ConsumerHeartbeatRequest(
                group_id=self.group,
                member_id=self.member_id,
                member_epoch=epoch,
                instance_id=self.instance_id,
            )
        )
        if result.error is ErrorCode.none:
            self.owned = set()
            self.epoch = 0
        return result.error

    def partitions(self, topic: uuid.UUID) -> set[int]:
        return {p for t, p in self.owned if t == topic}


def settle(*members: Member, rounds: int = 6) -> None:
    """Heartbeat every member in turn until nothing changes."""
    for _ in range(rounds):
        for m in members:
            assert m.heartbeat() is ErrorCode.none, m.last
