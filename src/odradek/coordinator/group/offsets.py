"""The committed offsets of the group coordinator (Kafka's ``OffsetMetadataManager``), as a state
machine: OffsetCommit, TxnOffsetCommit and the transaction markers that settle them, OffsetFetch,
OffsetDelete, the offsets of deleted topics, and expiry after ``offsets.retention.minutes``.

The offsets are kept in each :class:`~odradek.coordinator.group.group.Group` of the
:class:`~odradek.coordinator.group.coordinator.GroupCoordinator`; a change is asked for as records
of ``__consumer_offsets`` (the coordinator's ``write``) and made once the log took them.
Transactional commits are written as a transactional batch of the committing producer and kept
pending per producer in the group until that producer's COMMIT or ABORT marker lands in the group's
partition (:meth:`OffsetManager.complete_transaction`).

No I/O; called on the broker's event loop only, through the coordinator.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from dataclasses import replace
from functools import partial
from typing import TYPE_CHECKING

from odradek.coordinator.common.internal_topic import write_error
from odradek.coordinator.group import records as rec
from odradek.coordinator.group.group import CONSUMER_PROTOCOL_TYPE, Group, GroupState
from odradek.coordinator.group.messages import (
    NO_PRODUCER_ID,
    UNKNOWN_MEMBER_ID,
    CommitRequest,
    CommittedOffset,
    FetchedOffsets,
    OffsetCommit,
    TopicPartition,
    TxnCommitRequest,
)
from odradek.coordinator.group.streams_group import input_topics
from odradek.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from odradek.coordinator.group.coordinator import GroupCoordinator

log = logging.getLogger(__name__)

# The name of the offset expiry's deadline in the coordinator's timers.
EXPIRE_OFFSETS = ("expire-offsets",)

# Errors of writing a commit, as Kafka reports them to the committer.
_COMMIT_WRITE_ERRORS = {
    ErrorCode.message_too_large: ErrorCode.invalid_commit_offset_size,
    ErrorCode.record_list_too_large: ErrorCode.invalid_commit_offset_size,
    ErrorCode.invalid_fetch_size: ErrorCode.invalid_commit_offset_size,
}


def commit_write_error(code: ErrorCode) -> ErrorCode:
    """A commit's refused write as the committer is answered."""
    return _COMMIT_WRITE_ERRORS.get(code, write_error(code))


def _not_written(what: str, group_id: str, code: ErrorCode) -> None:
    log.warning("group %s: could not %s: %s", group_id, what, code.name)


class OffsetManager:
    """The offsets operations of ``coordinator``'s groups."""

    def __init__(self, coordinator: GroupCoordinator) -> None:
        self.coordinator = coordinator
        # (offsets partition, producer id) -> groups with commits pending in that producer's
        # transaction: where its COMMIT or ABORT marker in that partition applies.
        self.open_transactions: dict[tuple[int, int], set[str]] = {}

    def forget_transactions(self, partition: int) -> None:
        """``partition`` is no longer served: its open transactions go with its groups."""
        for key in [k for k in self.open_transactions if k[0] == partition]:
            del self.open_transactions[key]

    def replay(
        self,
        group: Group,
        key: rec.OffsetKey,
        value: rec.OffsetValue | None,
        offset: int,
        producer_id: int,
    ) -> None:
        """Apply one offset record of ``group`` read back (at ``offset`` in the log, of a
        transactional batch of ``producer_id`` when it is not NO_PRODUCER_ID)."""
        tp = (key.topic, key.partition)
        if value is None:
            group.offsets.pop(tp, None)
            group.drop_pending_offset(tp)
            return
        committed = CommittedOffset(
            value.offset, value.leader_epoch, value.metadata, value.commit_timestamp, offset
        )
        if producer_id == NO_PRODUCER_ID:
            group.offsets[tp] = committed
        else:
            self.add_pending(group, producer_id, {tp: committed})

    def schedule_expiry(self) -> None:
        self.coordinator.timers.schedule(
            EXPIRE_OFFSETS,
            self.coordinator.clock.monotonic_ms()
            + self.coordinator.config.offsets_retention_check_interval_ms,
            self._on_offset_expiry,
        )

    def _on_offset_expiry(self) -> None:
        try:
            self.expire_offsets()
        finally:
            self.schedule_expiry()

    def commit_offsets(self, request: CommitRequest) -> dict[TopicPartition, ErrorCode]:
        """Each partition's result. Partitions the handler found unknown never get here."""
        # Handlers before OffsetCommit v9 report GROUP_ID_NOT_FOUND as ILLEGAL_GENERATION.
        target = self._commit_target(request, ErrorCode.group_id_not_found, transactional=False)
        if isinstance(target, ErrorCode):
            return self._all(request, target)
        group, created = target
        results, accepted = self._accept_offsets(request.offsets)

        def stored(first: int) -> None:
            if created:
                self.coordinator.groups[request.group_id] = group
            group.offsets.update(_numbered(accepted, first))
            member = group.members.get(request.member_id)
            if member is not None and request.generation_id >= 0:
                self.coordinator.schedule_session(group, member)

        def not_stored(code: ErrorCode) -> None:
            log.warning("group %s: could not store offsets: %s", request.group_id, code.name)
            answer = commit_write_error(code)
            for tp in accepted:
                results[tp] = answer

        self.coordinator.write(
            request.group_id, self._offset_records(request.group_id, accepted), stored, not_stored
        )
        return results

    def commit_transactional_offsets(
        self, request: TxnCommitRequest
    ) -> dict[TopicPartition, ErrorCode]:
        """TxnOffsetCommit: each partition's result. The accepted offsets are written as one
        transactional batch of the request's producer and stay pending — invisible to
        OffsetFetch — until that producer's marker reaches the group's partition
        (:meth:`complete_transaction`). Checks as Kafka's: a group that does not exist is
        created (a simple group) only for a commit without a generation, and neither an
        active group without member id nor a rebalance refuses a transactional commit."""
        target = self._commit_target(request, ErrorCode.illegal_generation, transactional=True)
        if isinstance(target, ErrorCode):
            return self._all(request, target)
        group, created = target
        results, accepted = self._accept_offsets(request.offsets)

        def stored(first: int) -> None:
            if created:
                self.coordinator.groups[request.group_id] = group
            self.add_pending(group, request.producer_id, _numbered(accepted, first))

        def not_stored(code: ErrorCode) -> None:
            log.warning(
                "group %s: could not store transactional offsets: %s", request.group_id, code.name
            )
            for tp in accepted:
                results[tp] = write_error(code)

        self.coordinator.write(
            request.group_id,
            self._offset_records(request.group_id, accepted),
            stored,
            not_stored,
            producer_id=request.producer_id,
            producer_epoch=request.producer_epoch,
        )
        return results

    def complete_transaction(self, partition: int, producer_id: int, commit: bool) -> None:
        """The COMMIT (``commit``) or ABORT marker of ``producer_id`` is in ``partition`` of
        ``__consumer_offsets`` (just appended, or replayed): the producer's pending commits to
        the groups there become committed offsets — unless a later plain commit to the same
        partition is already there — or are dropped. Nothing is written: the marker is the
        record of it."""
        for group_id in self.open_transactions.pop((partition, producer_id), set()):
            group = self.coordinator.groups.get(group_id)
            if group is None:
                continue
            pending = group.pending_offsets.pop(producer_id, {})
            if commit:
                for tp, offset in pending.items():
                    existing = group.offsets.get(tp)
                    if existing is None or offset.record_offset > existing.record_offset:
                        group.offsets[tp] = offset
            self.coordinator.maybe_forget(group)

    def add_pending(
        self, group: Group, producer_id: int, offsets: dict[TopicPartition, CommittedOffset]
    ) -> None:
        group.pending_offsets.setdefault(producer_id, {}).update(offsets)
        key = (self.coordinator.partition_for(group.group_id), producer_id)
        self.open_transactions.setdefault(key, set()).add(group.group_id)

    def _accept_offsets(
        self, commits: Iterable[OffsetCommit]
    ) -> tuple[dict[TopicPartition, ErrorCode], dict[TopicPartition, CommittedOffset]]:
        """Each partition's result so far, and the offsets to store (metadata within
        ``offset.metadata.max.bytes``), stamped now."""
        results: dict[TopicPartition, ErrorCode] = {}
        accepted: dict[TopicPartition, CommittedOffset] = {}
        now = self.coordinator.clock.time_ms()
        for commit in commits:
            tp = (commit.topic, commit.partition)
            metadata = commit.metadata or ""
            if len(metadata.encode()) > self.coordinator.config.offset_metadata_max_bytes:
                results[tp] = ErrorCode.offset_metadata_too_large
                continue
            accepted[tp] = CommittedOffset(commit.offset, commit.leader_epoch, metadata, now)
            results[tp] = ErrorCode.none
        return results, accepted

    def _offset_records(
        self, group_id: str, offsets: dict[TopicPartition, CommittedOffset]
    ) -> list[tuple[bytes, bytes | None]]:
        return [
            (
                rec.encode_key(rec.OffsetKey(group_id, topic, partition)),
                rec.encode_offset_value(
                    rec.OffsetValue(c.offset, c.leader_epoch, c.metadata, c.commit_timestamp)
                ),
            )
            for (topic, partition), c in offsets.items()
        ]

    def _commit_target(
        self,
        request: CommitRequest | TxnCommitRequest,
        unknown_with_generation: ErrorCode,
        *,
        transactional: bool,
    ) -> tuple[Group, bool] | ErrorCode:
        """The group a commit goes to and whether it is new (not yet kept), or why the commit
        is refused. A commit without a generation to a group that does not exist makes a
        "simple" group (a consumer without group management, or an admin tool)."""
        status = self.coordinator.status(request.group_id)
        if status is not ErrorCode.none:
            return status
        group = self.coordinator.groups.get(request.group_id)
        created = group is None
        if group is None:
            if request.generation_id >= 0:
                return unknown_with_generation
            group = Group(request.group_id, self.coordinator.clock.time_ms())
        error = self._check_commit(
            group,
            request.generation_id,
            request.member_id,
            request.group_instance_id,
            transactional=transactional,
        )
        return error if error is not ErrorCode.none else (group, created)

    def _all(
        self, request: CommitRequest | TxnCommitRequest, error: ErrorCode
    ) -> dict[TopicPartition, ErrorCode]:
        return {(c.topic, c.partition): error for c in request.offsets}

    def _check_commit(
        self,
        group: Group,
        generation_id: int,
        member_id: str,
        group_instance_id: str | None,
        *,
        transactional: bool,
    ) -> ErrorCode:
        if group.consumer is not None or group.streams is not None:
            # A consumer (streams) group's commits carry the member epoch (in generation_id).
            if group.streams is not None:
                error = self.coordinator.streams.check_commit(
                    group.streams, member_id, generation_id
                )
            else:
                assert group.consumer is not None
                error = self.coordinator.consumer.check_commit(
                    group.consumer, member_id, generation_id
                )
            if transactional and error is ErrorCode.stale_member_epoch:
                return ErrorCode.illegal_generation
            return error
        if group.is_in(GroupState.DEAD):
            return ErrorCode.coordinator_not_available
        if generation_id < 0 and group.is_in(GroupState.EMPTY):
            return ErrorCode.none  # a commit from outside group management
        if generation_id >= 0 or member_id != UNKNOWN_MEMBER_ID or group_instance_id is not None:
            error = self.coordinator.check_member(group, member_id, group_instance_id)
            if error is not ErrorCode.none:
                return error
            if generation_id != group.generation:
                return ErrorCode.illegal_generation
        elif not transactional and not group.is_in(GroupState.EMPTY):
            # Without member id and generation, commits are accepted only from outside an
            # active group; TxnOffsetCommit before v3 carries neither, so is exempt.
            return ErrorCode.unknown_member_id
        # A transactional commit is not tied to the group's state (as Kafka).
        if not transactional and group.is_in(GroupState.COMPLETING_REBALANCE):
            return ErrorCode.rebalance_in_progress
        return ErrorCode.none

    def fetch_offsets(
        self,
        group_id: str,
        partitions: Iterable[TopicPartition] | None,
        *,
        require_stable: bool = False,
    ) -> FetchedOffsets:
        """Committed offsets of ``partitions`` (None: every partition with one); a partition
        without a commit comes back with None. With ``require_stable`` (OffsetFetch v7+), a
        partition with a transactional commit pending is named in ``unstable`` instead."""
        status = self.coordinator.status(group_id)
        if status is not ErrorCode.none:
            return FetchedOffsets(status)
        group = self.coordinator.groups.get(group_id)
        offsets = group.offsets if group is not None else {}
        unstable: frozenset[TopicPartition] = frozenset()
        if require_stable and group is not None and group.pending_offsets:
            unstable = frozenset(group.pending_partitions())
        if partitions is None:
            found = tuple(sorted(offsets.items()))
            return FetchedOffsets(
                ErrorCode.none,
                tuple((tp, c) for tp, c in found),
                unstable.intersection(offsets),
            )
        asked = tuple(partitions)
        return FetchedOffsets(
            ErrorCode.none,
            tuple((tp, offsets.get(tp)) for tp in asked),
            unstable.intersection(asked),
        )

    def delete_offsets(
        self, group_id: str, partitions: Sequence[TopicPartition]
    ) -> tuple[ErrorCode, dict[TopicPartition, ErrorCode]]:
        """OffsetDelete: a group-level error, or each partition's."""
        status = self.coordinator.status(group_id)
        if status is not ErrorCode.none:
            return status, {}
        group = self.coordinator.groups.get(group_id)
        if group is None or group.is_in(GroupState.DEAD):
            return ErrorCode.group_id_not_found, {}
        subscribed: set[str] = set()
        if group.consumer is not None:
            subscribed = self.coordinator.consumer.subscribed_topics(group.consumer)
        elif group.streams is not None:
            if group.streams.members:
                subscribed = input_topics(group.streams.resolved)
        elif not group.is_in(GroupState.EMPTY):
            topics = group.subscribed_topics()
            if topics is None:
                return ErrorCode.non_empty_group, {}
            subscribed = topics
        results: dict[TopicPartition, ErrorCode] = {}
        doomed = []
        for tp in partitions:
            if tp[0] in subscribed:
                results[tp] = ErrorCode.group_subscribed_to_topic
                continue
            results[tp] = ErrorCode.none
            # A pending transactional commit is deleted too (as Kafka: its tombstone removes
            # it on replay).
            if tp in group.offsets or group.has_pending_offset(tp):
                doomed.append(tp)
        # A refused write answers the whole request with its error (the runtime's).
        self.coordinator.write(
            group_id,
            [self.tombstone(group_id, tp) for tp in doomed],
            lambda _: self._drop_offsets(group, doomed),
        )
        return ErrorCode.none, results

    def _drop_offsets(self, group: Group, partitions: Iterable[TopicPartition]) -> None:
        for tp in partitions:
            group.offsets.pop(tp, None)
            group.drop_pending_offset(tp)
        self.coordinator.maybe_forget(group)

    def tombstone(self, group_id: str, tp: TopicPartition) -> tuple[bytes, None]:
        return rec.encode_key(rec.OffsetKey(group_id, tp[0], tp[1])), None

    def remove_offsets_of_topics(self, topics: set[str]) -> None:
        """Deleted topics take their committed offsets with them."""
        for group in self.coordinator.active_groups():
            doomed = [
                tp for tp in group.offsets.keys() | group.pending_partitions() if tp[0] in topics
            ]
            if not doomed:
                continue
            group_id = group.group_id
            self.coordinator.write(
                group_id,
                [self.tombstone(group_id, tp) for tp in doomed],
                partial(self._drop_offsets_applied, group, doomed),
                partial(_not_written, "delete offsets of deleted topics", group_id),
            )

    def _drop_offsets_applied(self, group: Group, partitions: list[TopicPartition], _: int) -> None:
        self._drop_offsets(group, partitions)

    def expire_offsets(self) -> int:
        """Drop offsets older than ``offsets.retention.minutes``, as Kafka does: in an empty
        group, counted from when it became empty; in a group outside group management, from
        each commit; in an active consumer group, only for topics no member subscribes to,
        from each commit. An offset with a transactional commit pending does not expire, and a
        group with an open transaction is not deleted (as Kafka). An empty group left
        without offsets is deleted. Returns how many offsets expired."""
        now = self.coordinator.clock.time_ms()
        expired_total = 0
        for group in self.coordinator.active_groups():
            expired = self._expirable(group, now)
            if group.pending_offsets:
                expired = [tp for tp in expired if not group.has_pending_offset(tp)]
            records: list[tuple[bytes, bytes | None]] = [
                self.tombstone(group.group_id, tp) for tp in expired
            ]
            remove_group = (
                group.is_in(GroupState.EMPTY)
                and (group.consumer is None or not group.consumer.members)
                and group.streams is None
                and len(expired) == len(group.offsets)
                and not group.pending_members
                and not group.pending_offsets
            )
            if remove_group and group.consumer is not None:
                records.extend(self.coordinator.consumer.delete_records(group))
            elif remove_group and group.generation > 0:
                records.append((rec.encode_key(rec.GroupKey(group.group_id)), None))
            group_id = group.group_id
            self.coordinator.write(
                group_id,
                records,
                partial(self._expired, group, expired, remove_group),
                partial(_not_written, "expire offsets", group_id),
            )
            expired_total += len(expired)
        return expired_total

    def _expirable(self, group: Group, now: int) -> list[TopicPartition]:
        """The group's offsets past ``offsets.retention.minutes`` by the rule for its kind
        (see :meth:`expire_offsets`), pending transactional commits not yet set aside."""
        retention = self.coordinator.config.offsets_retention_ms

        def committed_before(excluded: frozenset[str] | set[str]) -> list[TopicPartition]:
            return [
                tp
                for tp, c in group.offsets.items()
                if tp[0] not in excluded and c.commit_timestamp + retention <= now
            ]

        if group.consumer is not None:
            # As Kafka's consumer groups: from each commit, for topics no member subscribes to.
            return committed_before(self.coordinator.consumer.subscribed_topics(group.consumer))
        if group.streams is not None:
            busy = input_topics(group.streams.resolved) if group.streams.members else set()
            return committed_before(busy)
        if group.is_in(GroupState.EMPTY):
            if group.protocol_type is None:
                return committed_before(frozenset())
            return list(group.offsets) if group.state_timestamp + retention <= now else []
        if group.is_in(GroupState.STABLE) and group.protocol_type == CONSUMER_PROTOCOL_TYPE:
            subscribed = group.subscribed_topics()
            if subscribed is not None:
                return committed_before(subscribed)
        return []

    def _expired(
        self, group: Group, expired: list[TopicPartition], remove_group: bool, _: int
    ) -> None:
        for tp in expired:
            group.offsets.pop(tp, None)
        if expired:
            log.info("group %s: %d committed offsets expired", group.group_id, len(expired))
        if remove_group and self.coordinator.groups.get(group.group_id) is group:
            group.transition(GroupState.DEAD, self.coordinator.clock.time_ms())
            del self.coordinator.groups[group.group_id]


def _numbered(
    offsets: dict[TopicPartition, CommittedOffset], first: int
) -> dict[TopicPartition, CommittedOffset]:
    """``offsets`` with the log offsets of their records, written in order from ``first``."""
    return {tp: replace(c, record_offset=first + i) for i, (tp, c) in enumerate(offsets.items())}
