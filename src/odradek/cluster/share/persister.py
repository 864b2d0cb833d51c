"""What a partition leader asks of the share coordinator about its share-partitions (Kafka's
``Persister``): read a share-partition's persisted state when it is first used, write it when
acknowledgements change it, initialize it in a new state epoch (a first use, an offset reset)
and delete it. The share coordinator's side is :mod:`odradek.coordinator.share`; which broker
answers, and how it is reached, is the implementation's
(:class:`odradek.coordinator.share.persister.DefaultStatePersister`).

A state batch names a range of offsets past the start offset and what became of them:
AVAILABLE (to be delivered, ``delivery_count`` times so far), ACKNOWLEDGED or ARCHIVED (done).
Pure value objects and a protocol; nothing here does I/O.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from odradek.protocol.errors import ErrorCode

AVAILABLE = 0
ACKNOWLEDGED = 2
ARCHIVED = 4


@dataclass(frozen=True, slots=True)
class StateBatch:
    first_offset: int
    last_offset: int
    delivery_state: int
    delivery_count: int


@dataclass(frozen=True, slots=True)
class PersistedState:
    """A read's answer: the error, else the state (``start_offset`` -1: none stored)."""

    error: ErrorCode = ErrorCode.none
    state_epoch: int = 0
    leader_epoch: int = -1
    start_offset: int = -1
    batches: tuple[StateBatch, ...] = ()
    message: str | None = None


class StatePersister(Protocol):
    """The share coordinator as a partition leader calls it."""

    async def read(
        self, group_id: str, topic_id: uuid.UUID, partition: int, leader_epoch: int
    ) -> PersistedState: ...

    async def write(
        self,
        group_id: str,
        topic_id: uuid.UUID,
        partition: int,
        state_epoch: int,
        leader_epoch: int,
        start_offset: int,
        batches: Sequence[StateBatch],
    ) -> ErrorCode: ...

    async def initialize(
        self,
        group_id: str,
        topic_id: uuid.UUID,
        partition: int,
        state_epoch: int,
        start_offset: int,
    ) -> ErrorCode: ...

    async def summary(self, group_id: str, topic_id: uuid.UUID, partition: int) -> PersistedState:
        """The state epoch, leader epoch and start offset (no batches)."""
        ...

    async def delete(self, group_id: str, topic_id: uuid.UUID, partition: int) -> ErrorCode: ...
