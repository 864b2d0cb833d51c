"""The group coordinator of Kafka's classic group protocol, as a state machine.

Requests come in as value objects (:mod:`odradek.coordinator.messages`); answers go out as return
values or, for JoinGroup and SyncGroup, which wait for the rest of the group, through a reply
callback called later. Every change that must survive a restart becomes records of
``__consumer_offsets`` (:mod:`odradek.coordinator.records`): an operation does not write them, it
asks for them (:class:`CoordinatorWrite`, taken by the runtime with :meth:`take_writes` once the
operation returns), with the change to make once the log took them (``applied``) and what to do
when it refused them (``failed``) — Kafka's ``CoordinatorResult``, records and what follows.
:meth:`GroupCoordinator.replay` rebuilds the state from those records.

Time comes from the injected clock. Timeouts (sessions, rebalances, the initial rebalance delay,
offset expiry) are deadlines in :attr:`GroupCoordinator.timers`; nothing happens when they pass
until someone calls :meth:`GroupCoordinator.tick` — the broker's event loop at
:meth:`next_deadline`, a test after moving its ``ManualClock``.

Ownership: the coordinator of a group is the leader of the group's partition of
``__consumer_offsets`` (:meth:`partition_for`). Only the groups of partitions this coordinator
owns are in memory. :meth:`begin_loading` starts taking a partition on (its records are then
replayed), :meth:`finish_loading` makes its groups active, :meth:`unload` drops them (leadership
moved away: waiting JoinGroup and SyncGroup requests are answered NOT_COORDINATOR and their
timers cancelled). A request for a group of a partition being loaded gets
COORDINATOR_LOAD_IN_PROGRESS, for one of a partition not owned NOT_COORDINATOR, as Kafka's
``validateGroupStatus``. A lone broker owns every partition (``finish_loading()``).

Transactional offset commits (TxnOffsetCommit, KIP-98) are written as a transactional batch of
the committing producer and kept pending per producer in the group
(:attr:`~odradek.coordinator.group.Group.pending_offsets`); the producer's COMMIT or ABORT
marker in the group's partition — appended by WriteTxnMarkers, or met on replay — applies or
drops them (:meth:`GroupCoordinator.complete_transaction`), as Kafka's
``OffsetMetadataManager``.

The coordinator does no I/O of its own and is called from one thread (the broker's event loop).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from functools import partial

from odradek.clock import Clock
from odradek.coordinator import records as rec
from odradek.coordinator.consumer_group import ConsumerGroupSettings
from odradek.coordinator.consumer_protocol import ConsumerProtocol, is_consumer_group_key
from odradek.coordinator.coordinator_runtime import CoordinatorWrite
from odradek.coordinator.group import CONSUMER_PROTOCOL_TYPE, Group, GroupState, Member
from odradek.coordinator.internal_topic import write_error
from odradek.coordinator.messages import (
    NO_PRODUCER_ID,
    CommitRequest,
    CommittedOffset,
    DescribedMember,
    FetchedOffsets,
    GroupDescription,
    HeartbeatRequest,
    JoinedMember,
    JoinReply,
    JoinRequest,
    JoinResult,
    LeaveResult,
    ListedGroup,
    MemberIdentity,
    OffsetCommit,
    Protocol,
    SyncReply,
    SyncRequest,
    SyncResult,
    TopicPartition,
    TxnCommitRequest,
)
from odradek.coordinator.timers import Timers
from odradek.protocol.errors import ErrorCode

log = logging.getLogger(__name__)

UNKNOWN_MEMBER_ID = ""


def _ignore(_: object) -> None:
    """What a write does when nothing follows from it."""


def _not_written(what: str, group_id: str, code: ErrorCode) -> None:
    log.warning("group %s: could not %s: %s", group_id, what, code.name)


@dataclass(frozen=True, slots=True)
class GroupConfig:
    """The broker settings of the coordinator, under Kafka's names in the comments."""

    offsets_partitions: int = 50  # offsets.topic.num.partitions
    min_session_timeout_ms: int = 6_000  # group.min.session.timeout.ms
    max_session_timeout_ms: int = 1_800_000  # group.max.session.timeout.ms
    initial_rebalance_delay_ms: int = 3_000  # group.initial.rebalance.delay.ms
    max_group_size: int = 2**31 - 1  # group.max.size
    offset_metadata_max_bytes: int = 4096  # offset.metadata.max.bytes
    offsets_retention_ms: int = 7 * 24 * 3600 * 1000  # offsets.retention.minutes
    offsets_retention_check_interval_ms: int = 600_000  # offsets.retention.check.interval.ms
    # Kafka's fixed limit on how long a new member may take to finish its first rebalance.
    new_member_join_timeout_ms: int = 300_000
    # The KIP-848 consumer groups' settings (group.consumer.*).
    consumer: ConsumerGroupSettings = field(default_factory=ConsumerGroupSettings)


# Errors of writing a commit, as Kafka reports them to the committer.
_COMMIT_WRITE_ERRORS = {
    ErrorCode.message_too_large: ErrorCode.invalid_commit_offset_size,
    ErrorCode.record_list_too_large: ErrorCode.invalid_commit_offset_size,
    ErrorCode.invalid_fetch_size: ErrorCode.invalid_commit_offset_size,
}


def commit_write_error(code: ErrorCode) -> ErrorCode:
    """A commit's refused write as the committer is answered."""
    return _COMMIT_WRITE_ERRORS.get(code, write_error(code))


class GroupCoordinator:
    def __init__(self, config: GroupConfig, clock: Clock) -> None:
        self.config = config
        self.clock = clock
        # The writes asked for since the runtime last took them (:meth:`take_writes`).
        self._writes: list[CoordinatorWrite] = []
        self.timers = Timers()
        self.groups: dict[str, Group] = {}
        # Partitions of __consumer_offsets whose groups this coordinator serves, and those
        # whose records are being replayed.
        self.owned: set[int] = set()
        self.loading: set[int] = set()
        # (offsets partition, producer id) -> groups with commits pending in that producer's
        # transaction: where its COMMIT or ABORT marker in that partition applies.
        self.open_transactions: dict[tuple[int, int], set[str]] = {}
        # The KIP-848 consumer groups' operations (their state is in ``Group.consumer``).
        self.consumer = ConsumerProtocol(self)

    # -- time ----------------------------------------------------------------------------------

    def _now(self) -> int:
        """Monotonic ms, for deadlines."""
        return self.clock.monotonic_ms()

    def _wall(self) -> int:
        """Wall-clock ms, for what is stored (commit and state timestamps)."""
        return self.clock.time_ms()

    def next_deadline(self) -> int | None:
        """Monotonic ms at which :meth:`tick` has something to do; None when nothing is due."""
        return self.timers.next_deadline()

    def tick(self) -> int:
        """Act on every deadline that has passed; returns how many there were."""
        return self.timers.fire_due(self._now())

    # -- loading -------------------------------------------------------------------------------

    def partition_for(self, group_id: str) -> int:
        return rec.partition_for(group_id, self.config.offsets_partitions)

    def replay(
        self,
        key: bytes | None,
        value: bytes | None,
        *,
        offset: int = -1,
        producer_id: int = NO_PRODUCER_ID,
    ) -> None:
        """Apply one record of ``__consumer_offsets``, read back in log order at start:
        ``offset`` is its place in the log, ``producer_id`` that of its batch when the batch is
        transactional (the commit is then pending until the producer's marker,
        :meth:`complete_transaction`)."""
        if key is None:
            log.warning("skipping a record without a key in __consumer_offsets")
            return
        if is_consumer_group_key(key):
            try:
                self.consumer.replay(key, value)
            except rec.RecordFormatError as e:
                log.warning("skipping an unreadable record in __consumer_offsets: %s", e)
            return
        try:
            decoded_key = rec.decode_key(key)
            decoded = rec.decode_value(decoded_key, value)
        except rec.RecordFormatError as e:
            log.warning("skipping an unreadable record in __consumer_offsets: %s", e)
            return
        group = self.groups.get(decoded_key.group)
        if group is None:
            group = self.groups[decoded_key.group] = Group(decoded_key.group, self._wall())
        if isinstance(decoded_key, rec.OffsetKey):
            tp = (decoded_key.topic, decoded_key.partition)
            if decoded is None:
                group.offsets.pop(tp, None)
                group.drop_pending_offset(tp)
                return
            assert isinstance(decoded, rec.OffsetValue)
            committed = CommittedOffset(
                decoded.offset,
                decoded.leader_epoch,
                decoded.metadata,
                decoded.commit_timestamp,
                offset,
            )
            if producer_id == NO_PRODUCER_ID:
                group.offsets[tp] = committed
            else:
                self._add_pending(group, producer_id, {tp: committed})
            return
        previous = group
        group = self.groups[decoded_key.group] = Group(decoded_key.group, self._wall())
        group.offsets = previous.offsets
        group.pending_offsets = previous.pending_offsets
        if decoded is None:
            return
        assert isinstance(decoded, rec.GroupValue)
        group.protocol_type = decoded.protocol_type or None
        group.generation = decoded.generation
        group.protocol_name = decoded.protocol
        if decoded.current_state_timestamp >= 0:
            group.state_timestamp = decoded.current_state_timestamp
        for m in decoded.members:
            member = Member(
                m.member_id,
                m.group_instance_id,
                m.client_id,
                m.client_host,
                m.rebalance_timeout_ms,
                m.session_timeout_ms,
                decoded.protocol_type,
                # The one protocol known of a loaded member: the group's, as stored.
                (Protocol(decoded.protocol or "", m.subscription),),
                assignment=m.assignment,
            )
            group.add(member)
        if decoded.leader is not None and decoded.leader in group.members:
            group.leader_id = decoded.leader
        group.state = GroupState.STABLE if group.members else GroupState.EMPTY

    def begin_loading(self, partition: int) -> None:
        """This broker now leads ``partition``: its records follow (:meth:`replay`), and until
        :meth:`finish_loading` its groups' requests get COORDINATOR_LOAD_IN_PROGRESS."""
        self.unload(partition)
        self.loading.add(partition)

    def finish_loading(self, partitions: Iterable[int] | None = None) -> None:
        """After :meth:`replay` of every record of ``partitions`` (None: every partition, as a
        lone broker owns them all): forget what was deleted, start sessions, serve the groups."""
        every = range(self.config.offsets_partitions)
        done = set(every if partitions is None else partitions)
        loaded = 0
        for group_id, group in list(self.groups.items()):
            if self.partition_for(group_id) not in done:
                continue
            if self._is_forgettable(group):
                del self.groups[group_id]
                continue
            loaded += 1
            for member in group.members.values():
                self._schedule_session(group, member)
            self.consumer.start_sessions(group)
        self.loading -= done
        self.owned |= done
        if ("expire-offsets",) not in self.timers:
            self._schedule_offset_expiry()
        log.info("group coordinator loaded %d groups of partitions %s", loaded, sorted(done))

    def unload(self, partition: int) -> int:
        """This broker no longer leads ``partition``: its groups leave memory, their waiting
        JoinGroup and SyncGroup requests are answered NOT_COORDINATOR (the members find the new
        coordinator) and their timers are cancelled. Returns how many groups were dropped."""
        self.owned.discard(partition)
        self.loading.discard(partition)
        for key in [k for k in self.open_transactions if k[0] == partition]:
            del self.open_transactions[key]
        doomed = {g for g in self.groups if self.partition_for(g) == partition}
        if not doomed:
            return 0
        for group_id in doomed:
            group = self.groups.pop(group_id)
            self._answer_waiting(group, ErrorCode.not_coordinator)
            group.transition(GroupState.DEAD, self._wall())
        self.timers.cancel_where(
            lambda key: isinstance(key, tuple) and len(key) > 1 and key[1] in doomed
        )
        log.info("unloaded %d groups of partition %d", len(doomed), partition)
        return len(doomed)

    def is_active(self, partition: int) -> bool:
        """Whether this coordinator serves the groups of ``partition`` (owned and loaded)."""
        return partition in self.owned

    @property
    def loading_in_progress(self) -> bool:
        return bool(self.loading)

    def status(self, group_id: str) -> ErrorCode:
        return self._status(group_id)

    def _status(self, group_id: str) -> ErrorCode:
        """COORDINATOR_LOAD_IN_PROGRESS or NOT_COORDINATOR unless this coordinator serves the
        group (Kafka's validateGroupStatus)."""
        partition = self.partition_for(group_id)
        if partition in self.loading:
            return ErrorCode.coordinator_load_in_progress
        if partition not in self.owned:
            return ErrorCode.not_coordinator
        return ErrorCode.none

    def _active_groups(self) -> list[Group]:
        return [g for g in self.groups.values() if self.partition_for(g.group_id) in self.owned]

    def _is_forgettable(self, group: Group) -> bool:
        return (
            group.state is GroupState.EMPTY
            and group.consumer is None
            and group.generation == 0
            and group.protocol_type is None
            and not group.offsets
            and not group.pending_offsets
            and not group.pending_members
        )

    # -- records -------------------------------------------------------------------------------

    def take_writes(self) -> list[CoordinatorWrite]:
        """The writes asked for since the last call, in order, for the runtime to append."""
        writes, self._writes = self._writes, []
        return writes

    def write(
        self,
        group_id: str,
        records: Sequence[tuple[bytes, bytes | None]],
        applied: Callable[[int], None] = _ignore,
        failed: Callable[[ErrorCode], None] = _ignore,
        *,
        producer_id: int = NO_PRODUCER_ID,
        producer_epoch: int = -1,
    ) -> None:
        """Ask for ``records`` of ``group_id`` to be appended as one batch of its partition
        (:class:`CoordinatorWrite`); without records, ``applied`` runs now."""
        if not records:
            applied(-1)
            return
        self._writes.append(
            CoordinatorWrite(
                self.partition_for(group_id),
                tuple(records),
                applied,
                failed,
                producer_id,
                producer_epoch,
            )
        )

    def _group_record(
        self, group: Group, assignments: dict[str, bytes]
    ) -> tuple[bytes, bytes | None]:
        value = rec.GroupValue(
            protocol_type=group.protocol_type or "",
            generation=group.generation,
            protocol=group.protocol_name,
            leader=group.leader_id,
            current_state_timestamp=group.state_timestamp,
            members=tuple(
                rec.MemberValue(
                    m.member_id,
                    m.group_instance_id,
                    m.client_id,
                    m.client_host,
                    m.rebalance_timeout_ms,
                    m.session_timeout_ms,
                    m.metadata(group.protocol_name),
                    assignments.get(m.member_id, b""),
                )
                for m in group.members.values()
            ),
        )
        return rec.encode_key(rec.GroupKey(group.group_id)), rec.encode_group_value(value)

    def _store_group(
        self,
        group: Group,
        assignments: dict[str, bytes],
        applied: Callable[[int], None] = _ignore,
        failed: Callable[[ErrorCode], None] = _ignore,
    ) -> None:
        self.write(group.group_id, [self._group_record(group, assignments)], applied, failed)

    # -- timers --------------------------------------------------------------------------------

    def _schedule_session(
        self, group: Group, member: Member, timeout_ms: int | None = None
    ) -> None:
        group_id, member_id = group.group_id, member.member_id
        deadline = self._now() + (member.session_timeout_ms if timeout_ms is None else timeout_ms)
        self.timers.schedule(
            ("session", group_id, member_id),
            deadline,
            lambda: self._on_session_expired(group_id, member_id),
        )

    def _cancel_session(self, group: Group, member_id: str) -> None:
        self.timers.cancel(("session", group.group_id, member_id))

    def _on_session_expired(self, group_id: str, member_id: str) -> None:
        group = self.groups.get(group_id)
        if group is None:
            return
        if member_id in group.pending_members:
            log.info("group %s: pending member %s never rejoined", group_id, member_id)
            group.pending_members.discard(member_id)
            self._try_complete_join(group)
            self._maybe_forget(group)
            return
        member = group.members.get(member_id)
        if member is None:
            return
        # A member inside a JoinGroup or SyncGroup cannot heartbeat; the rebalance timeout
        # bounds those waits instead. A new member gets only the join timeout.
        if (member.awaiting_join and not member.is_new) or member.sync_reply is not None:
            self._schedule_session(group, member)
            return
        log.info(
            "group %s: member %s %s; removing it",
            group_id,
            member_id,
            "did not finish joining" if member.is_new else "missed its session timeout",
        )
        self._remove_member_and_update_group(group, member)

    def _schedule_offset_expiry(self) -> None:
        self.timers.schedule(
            ("expire-offsets",),
            self._now() + self.config.offsets_retention_check_interval_ms,
            self._on_offset_expiry,
        )

    def _on_offset_expiry(self) -> None:
        try:
            self.expire_offsets()
        finally:
            self._schedule_offset_expiry()

    # -- JoinGroup -----------------------------------------------------------------------------

    def join_group(self, request: JoinRequest, reply: JoinReply) -> None:
        """Answer through ``reply`` now (errors, MEMBER_ID_REQUIRED, no rebalance needed) or when
        the group's next generation forms."""

        def fail(code: ErrorCode, member_id: str = request.member_id) -> None:
            reply(JoinResult(code, member_id=member_id))

        if not request.group_id:
            return fail(ErrorCode.invalid_group_id)
        status = self._status(request.group_id)
        if status is not ErrorCode.none:
            return fail(status)
        if not (
            self.config.min_session_timeout_ms
            <= request.session_timeout_ms
            <= self.config.max_session_timeout_ms
        ):
            return fail(ErrorCode.invalid_session_timeout)
        group = self.groups.get(request.group_id)
        if group is None:
            if request.member_id != UNKNOWN_MEMBER_ID:
                return fail(ErrorCode.unknown_member_id)
            group = Group(request.group_id, self._wall())
            self.groups[request.group_id] = group
        if group.consumer is not None:
            converted = self._to_classic(group)
            if converted is None:
                return fail(ErrorCode.inconsistent_group_protocol)
            group = converted
        try:
            if group.is_in(GroupState.DEAD):
                # Being deleted: the client finds the coordinator again and retries.
                return fail(ErrorCode.coordinator_not_available)
            if request.member_id == UNKNOWN_MEMBER_ID:
                self._join_new_member(group, request, reply)
            else:
                self._join_known_member(group, request, reply)
        finally:
            self._maybe_forget(group)

    def _to_classic(self, group: Group) -> Group | None:
        """A classic member joins a consumer group: an empty one is deleted and a classic
        group takes its place, keeping its offsets (Kafka's downgrade of an empty group);
        None for one with members."""
        assert group.consumer is not None
        if group.consumer.members:
            return None
        group_id = group.group_id
        classic = Group(group_id, self._wall())
        classic.offsets = group.offsets
        classic.pending_offsets = group.pending_offsets
        # The classic group takes over now, as the join goes on with it; should the consumer
        # group's tombstones not be written, the consumer group comes back as it was.
        self.groups[group_id] = classic

        def failed(code: ErrorCode) -> None:
            log.warning(
                "group %s: could not convert it to a classic group: %s", group_id, code.name
            )
            if self.groups.get(group_id) is classic:
                self._answer_waiting(classic, write_error(code))
                self.timers.cancel_where(
                    lambda key: isinstance(key, tuple) and len(key) > 1 and key[1] == group_id
                )
                self.groups[group_id] = group

        self.write(group_id, self.consumer.delete_records(group), failed=failed)
        log.info("group %s: an empty consumer group becomes a classic group", group_id)
        return classic

    def _join_new_member(self, group: Group, request: JoinRequest, reply: JoinReply) -> None:
        instance_id = request.group_instance_id
        existing = group.static_member_id(instance_id) if instance_id is not None else None
        names = [p.name for p in request.protocols]
        if not group.supports_protocols(request.protocol_type, names, excluding=existing):
            return reply(JoinResult(ErrorCode.inconsistent_group_protocol))
        if existing is None and group.size >= self.config.max_group_size:
            return reply(JoinResult(ErrorCode.group_max_size_reached))
        member_id = f"{instance_id or request.client_id}-{uuid.uuid4()}"
        if instance_id is not None:
            if existing is not None:
                return self._replace_static_member(group, request, existing, member_id, reply)
            return self._add_member_and_rebalance(group, request, member_id, reply)
        if request.require_known_member_id:
            # KIP-394: the member must come back with this id, so a client that gave up on a
            # JoinGroup leaves no stray member behind. It has one session to do so.
            group.pending_members.add(member_id)
            self.timers.schedule(
                ("session", group.group_id, member_id),
                self._now() + request.session_timeout_ms,
                lambda: self._on_session_expired(group.group_id, member_id),
            )
            return reply(JoinResult(ErrorCode.member_id_required, member_id=member_id))
        return self._add_member_and_rebalance(group, request, member_id, reply)

    def _join_known_member(self, group: Group, request: JoinRequest, reply: JoinReply) -> None:
        member_id = request.member_id
        names = [p.name for p in request.protocols]
        if member_id in group.pending_members:
            if not group.supports_protocols(request.protocol_type, names):
                return reply(JoinResult(ErrorCode.inconsistent_group_protocol, member_id=member_id))
            group.pending_members.discard(member_id)
            self.timers.cancel(("session", group.group_id, member_id))
            return self._add_member_and_rebalance(group, request, member_id, reply)
        error = self._check_member(group, member_id, request.group_instance_id)
        if error is not ErrorCode.none:
            return reply(JoinResult(error, member_id=member_id))
        member = group.members[member_id]
        if not group.supports_protocols(request.protocol_type, names, excluding=member_id):
            return reply(JoinResult(ErrorCode.inconsistent_group_protocol, member_id=member_id))
        if group.is_in(GroupState.PREPARING_REBALANCE):
            return self._update_member_and_rebalance(
                group, member, request, reply, "member rejoined"
            )
        if group.is_in(GroupState.COMPLETING_REBALANCE):
            if member.matches(request.protocols):
                # It lost the JoinGroup response; answer again for this generation.
                return reply(self._join_result(group, member))
            return self._update_member_and_rebalance(
                group, member, request, reply, "member changed its protocols"
            )
        if group.is_in(GroupState.STABLE):
            if group.is_leader(member_id) or not member.matches(request.protocols):
                return self._update_member_and_rebalance(
                    group, member, request, reply, "leader or changed member rejoined"
                )
            self._schedule_session(group, member)
            return reply(self._join_result(group, member))
        return reply(JoinResult(ErrorCode.unknown_member_id, member_id=member_id))

    def _check_member(self, group: Group, member_id: str, instance_id: str | None) -> ErrorCode:
        """UNKNOWN_MEMBER_ID or FENCED_INSTANCE_ID unless ``member_id`` is a member of
        ``group`` (and, for a static member, the current holder of ``instance_id``)."""
        if instance_id is not None:
            current = group.static_member_id(instance_id)
            if current is None:
                return ErrorCode.unknown_member_id
            if current != member_id:
                return ErrorCode.fenced_instance_id
            return ErrorCode.none
        if member_id not in group.members:
            return ErrorCode.unknown_member_id
        return ErrorCode.none

    def _join_result(self, group: Group, member: Member) -> JoinResult:
        leader = group.is_leader(member.member_id)
        return JoinResult(
            ErrorCode.none,
            member_id=member.member_id,
            generation_id=group.generation,
            protocol_type=group.protocol_type,
            protocol_name=group.protocol_name,
            leader=group.leader_id or "",
            members=self._joined_members(group) if leader else (),
        )

    def _joined_members(self, group: Group) -> tuple[JoinedMember, ...]:
        return tuple(
            JoinedMember(m.member_id, m.group_instance_id, m.metadata(group.protocol_name))
            for m in group.members.values()
        )

    def _new_member(self, request: JoinRequest, member_id: str, reply: JoinReply) -> Member:
        rebalance_timeout = request.rebalance_timeout_ms
        if rebalance_timeout < 0:
            rebalance_timeout = request.session_timeout_ms
        return Member(
            member_id,
            request.group_instance_id,
            request.client_id,
            request.client_host,
            rebalance_timeout,
            request.session_timeout_ms,
            request.protocol_type,
            request.protocols,
            join_reply=reply,
            is_new=True,
        )

    def _add_member_and_rebalance(
        self, group: Group, request: JoinRequest, member_id: str, reply: JoinReply
    ) -> None:
        member = self._new_member(request, member_id, reply)
        group.add(member)
        log.info(
            "group %s: member %s joins (%d members)", group.group_id, member_id, len(group.members)
        )
        if group.is_in(GroupState.PREPARING_REBALANCE) and group.generation == 0:
            group.new_member_added = True
        # A joining member cannot heartbeat, and a client that gave up may retry as another
        # member: the join timeout stops such strays from stalling the rebalance forever.
        self._schedule_session(group, member, self.config.new_member_join_timeout_ms)
        self._rebalance_or_complete(group, f"member {member_id} joined")

    def _update_member_and_rebalance(
        self, group: Group, member: Member, request: JoinRequest, reply: JoinReply, reason: str
    ) -> None:
        if member.join_reply is not None and member.join_reply is not reply:
            # An earlier JoinGroup of this member, abandoned by its client.
            member.join_reply(JoinResult(ErrorCode.rebalance_in_progress, member.member_id))
        member.protocols = request.protocols
        member.session_timeout_ms = request.session_timeout_ms
        if request.rebalance_timeout_ms >= 0:
            member.rebalance_timeout_ms = request.rebalance_timeout_ms
        member.join_reply = reply
        self._rebalance_or_complete(group, reason)

    def _rebalance_or_complete(self, group: Group, reason: str) -> None:
        if group.is_in(GroupState.PREPARING_REBALANCE):
            self._try_complete_join(group)
        else:
            self._maybe_prepare_rebalance(group, reason)

    def _replace_static_member(
        self,
        group: Group,
        request: JoinRequest,
        old_id: str,
        new_id: str,
        reply: JoinReply,
    ) -> None:
        """KIP-345: a known group instance id joins with no member id (it restarted). It takes
        over its old member's place; in a Stable group whose protocol it does not change, no
        rebalance happens at all."""
        old = group.members[old_id]
        old_leader = group.leader_id
        old_protocols = old.protocols
        if old.join_reply is not None:
            old.join_reply(JoinResult(ErrorCode.fenced_instance_id, member_id=old_id))
            old.join_reply = None
        if old.sync_reply is not None:
            old.sync_reply(SyncResult(ErrorCode.fenced_instance_id))
            old.sync_reply = None
        self._cancel_session(group, old_id)
        member = group.replace_static_member(old.group_instance_id or "", old_id, new_id)
        member.protocols = request.protocols
        member.session_timeout_ms = request.session_timeout_ms
        if request.rebalance_timeout_ms >= 0:
            member.rebalance_timeout_ms = request.rebalance_timeout_ms
        member.client_id = request.client_id
        member.client_host = request.client_host
        self._schedule_session(group, member)
        log.info("group %s: static member %s is now %s", group.group_id, old_id, new_id)
        if group.is_in(GroupState.STABLE):
            if group.select_protocol() != group.protocol_name:
                member.join_reply = reply
                return self._maybe_prepare_rebalance(group, "static member changed protocols")

            def put_back(code: ErrorCode) -> None:
                # The old member returns, as it was.
                self._cancel_session(group, new_id)
                group.replace_static_member(old.group_instance_id or "", new_id, old_id)
                member.protocols = old_protocols
                self._schedule_session(group, member)
                reply(JoinResult(write_error(code), member_id=UNKNOWN_MEMBER_ID))

            def replaced(_: int) -> None:
                # The current leader keeps leading; answering with the old leader id keeps a
                # restarted leader from computing an assignment a Stable group would not use.
                reply(
                    JoinResult(
                        ErrorCode.none,
                        member_id=new_id,
                        generation_id=group.generation,
                        protocol_type=group.protocol_type,
                        protocol_name=group.protocol_name,
                        leader=old_leader or "",
                    )
                )

            return self._store_group(
                group,
                {m.member_id: m.assignment for m in group.members.values()},
                replaced,
                put_back,
            )
        member.join_reply = reply
        if group.is_in(GroupState.COMPLETING_REBALANCE):
            # The leader may be assigning to the old member id: start over.
            return self._prepare_rebalance(group, "static member rejoined during sync")
        self._try_complete_join(group)

    # -- rebalancing ---------------------------------------------------------------------------

    def _maybe_prepare_rebalance(self, group: Group, reason: str) -> None:
        if group.is_in(GroupState.STABLE, GroupState.COMPLETING_REBALANCE, GroupState.EMPTY):
            self._prepare_rebalance(group, reason)

    def _prepare_rebalance(self, group: Group, reason: str) -> None:
        if group.is_in(GroupState.COMPLETING_REBALANCE):
            self._reset_and_propagate_assignment_error(group, ErrorCode.rebalance_in_progress)
        self.timers.cancel(("sync", group.group_id))
        group.pending_sync.clear()
        initial = group.is_in(GroupState.EMPTY) and self.config.initial_rebalance_delay_ms > 0
        group.transition(GroupState.PREPARING_REBALANCE, self._wall())
        log.info(
            "group %s: preparing to rebalance generation %d (%s)",
            group.group_id,
            group.generation,
            reason,
        )
        group_id = group.group_id
        if initial:
            delay = self.config.initial_rebalance_delay_ms
            group.in_initial_delay = True
            group.new_member_added = False
            group.initial_delay_remaining_ms = max(group.rebalance_timeout_ms() - delay, 0)
            self.timers.schedule(
                ("join", group_id), self._now() + delay, lambda: self._on_initial_delay(group_id)
            )
            return
        self.timers.schedule(
            ("join", group_id),
            self._now() + group.rebalance_timeout_ms(),
            lambda: self._on_join_timeout(group_id),
        )
        self._try_complete_join(group)

    def _on_initial_delay(self, group_id: str) -> None:
        group = self.groups.get(group_id)
        if group is None or not group.in_initial_delay:
            return
        remaining = group.initial_delay_remaining_ms
        if group.new_member_added and remaining > 0:
            delay = min(self.config.initial_rebalance_delay_ms, remaining)
            group.new_member_added = False
            group.initial_delay_remaining_ms = max(remaining - delay, 0)
            self.timers.schedule(
                ("join", group_id), self._now() + delay, lambda: self._on_initial_delay(group_id)
            )
            return
        group.in_initial_delay = False
        self._complete_join(group)

    def _on_join_timeout(self, group_id: str) -> None:
        group = self.groups.get(group_id)
        if group is not None:
            self._complete_join(group)

    def _try_complete_join(self, group: Group) -> None:
        if (
            group.is_in(GroupState.PREPARING_REBALANCE)
            and not group.in_initial_delay
            and group.all_members_joined()
        ):
            self._complete_join(group)

    def _complete_join(self, group: Group) -> None:
        """The join phase is over (everyone rejoined, or the rebalance timeout passed)."""
        if not group.is_in(GroupState.PREPARING_REBALANCE):
            return
        group_id = group.group_id
        self.timers.cancel(("join", group_id))
        group.in_initial_delay = False
        for member in list(group.members.values()):
            if not member.awaiting_join and not member.is_static:
                log.info("group %s: member %s did not rejoin in time", group_id, member.member_id)
                self._cancel_session(group, member.member_id)
                group.remove(member.member_id)
        if group.members and not any(m.awaiting_join for m in group.members.values()):
            # Only static members that have not rejoined: wait for them another round.
            self.timers.schedule(
                ("join", group_id),
                self._now() + group.rebalance_timeout_ms(),
                lambda: self._on_join_timeout(group_id),
            )
            return
        leader = group.members.get(group.leader_id or "")
        if leader is None or not leader.awaiting_join:
            group.leader_id = next(
                (m.member_id for m in group.members.values() if m.awaiting_join), None
            )
        group.generation += 1
        if not group.members:
            group.protocol_name = None
            group.transition(GroupState.EMPTY, self._wall())
            log.info("group %s: generation %d is empty", group_id, group.generation)
            self._store_group(
                group,
                {},
                failed=lambda code: log.warning(
                    "group %s: could not store the empty group: %s", group_id, code.name
                ),
            )
            return
        group.protocol_name = group.select_protocol()
        group.transition(GroupState.COMPLETING_REBALANCE, self._wall())
        log.info(
            "group %s: generation %d has %d members, protocol %s, leader %s",
            group_id,
            group.generation,
            len(group.members),
            group.protocol_name,
            group.leader_id,
        )
        for member in group.members.values():
            reply, member.join_reply = member.join_reply, None
            member.is_new = False
            self._schedule_session(group, member)
            if reply is not None:
                reply(self._join_result(group, member))
        # Everyone must now SyncGroup within the rebalance timeout, or be removed (a member that
        # died after joining would otherwise hold up the group until its session ends).
        group.pending_sync = set(group.members)
        generation = group.generation
        self.timers.schedule(
            ("sync", group_id),
            self._now() + group.rebalance_timeout_ms(),
            lambda: self._on_sync_timeout(group_id, generation),
        )

    def _on_sync_timeout(self, group_id: str, generation: int) -> None:
        group = self.groups.get(group_id)
        if group is None or group.generation != generation or not group.pending_sync:
            return
        if not group.is_in(GroupState.COMPLETING_REBALANCE, GroupState.STABLE):
            return
        late = list(group.pending_sync)
        log.info("group %s: members %s did not sync in time", group_id, late)
        for member_id in late:
            member = group.members.get(member_id)
            if member is not None:
                if member.sync_reply is not None:
                    member.sync_reply(SyncResult(ErrorCode.unknown_member_id))
                    member.sync_reply = None
                self._cancel_session(group, member_id)
                group.remove(member_id)
        group.pending_sync.clear()
        if group.is_in(GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            self._prepare_rebalance(group, "members did not sync in time")

    def _reset_and_propagate_assignment_error(self, group: Group, error: ErrorCode) -> None:
        for member in group.members.values():
            member.assignment = b""
            if member.sync_reply is not None:
                reply, member.sync_reply = member.sync_reply, None
                reply(SyncResult(error))

    def _remove_member_and_update_group(self, group: Group, member: Member) -> None:
        if member.join_reply is not None:
            reply, member.join_reply = member.join_reply, None
            reply(JoinResult(ErrorCode.unknown_member_id, member_id=member.member_id))
        if member.sync_reply is not None:
            sync_reply, member.sync_reply = member.sync_reply, None
            sync_reply(SyncResult(ErrorCode.unknown_member_id))
        self._cancel_session(group, member.member_id)
        group.remove(member.member_id)
        if group.is_in(GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            self._prepare_rebalance(group, f"member {member.member_id} left")
        elif group.is_in(GroupState.PREPARING_REBALANCE):
            self._try_complete_join(group)

    # -- SyncGroup -----------------------------------------------------------------------------

    def sync_group(self, request: SyncRequest, reply: SyncReply) -> None:
        """Answer through ``reply``: at once, or (for followers that sync before the leader)
        when the leader's assignment arrives."""
        if not request.group_id:
            return reply(SyncResult(ErrorCode.invalid_group_id))
        status = self._status(request.group_id)
        if status is not ErrorCode.none:
            return reply(SyncResult(status))
        group = self.groups.get(request.group_id)
        if group is None or group.consumer is not None:
            return reply(SyncResult(ErrorCode.unknown_member_id))
        if group.is_in(GroupState.DEAD):
            return reply(SyncResult(ErrorCode.coordinator_not_available))
        error = self._check_member(group, request.member_id, request.group_instance_id)
        if error is not ErrorCode.none:
            return reply(SyncResult(error))
        if request.generation_id != group.generation:
            return reply(SyncResult(ErrorCode.illegal_generation))
        if (request.protocol_type is not None and request.protocol_type != group.protocol_type) or (
            request.protocol_name is not None and request.protocol_name != group.protocol_name
        ):
            return reply(SyncResult(ErrorCode.inconsistent_group_protocol))
        if group.is_in(GroupState.EMPTY):
            return reply(SyncResult(ErrorCode.unknown_member_id))
        if group.is_in(GroupState.PREPARING_REBALANCE):
            return reply(SyncResult(ErrorCode.rebalance_in_progress))
        member = group.members[request.member_id]
        self._schedule_session(group, member)
        self._synced(group, request.member_id)
        if group.is_in(GroupState.STABLE):
            return reply(self._sync_result(group, member.assignment))
        # CompletingRebalance: wait for the leader's assignment.
        if member.sync_reply is not None:
            member.sync_reply(SyncResult(ErrorCode.rebalance_in_progress))
        member.sync_reply = reply
        if not group.is_leader(member.member_id):
            return
        given = dict(request.assignments)
        assignments = {m: given.get(m, b"") for m in group.members}
        generation = group.generation

        def current() -> bool:
            # As Kafka's: the group may have moved on before the outcome is known.
            return (
                self.groups.get(group.group_id) is group
                and group.is_in(GroupState.COMPLETING_REBALANCE)
                and group.generation == generation
            )

        def stored(_: int) -> None:
            if not current():
                return
            for m in group.members.values():
                m.assignment = assignments.get(m.member_id, b"")
            group.transition(GroupState.STABLE, self._wall())
            log.info("group %s: generation %d is stable", group.group_id, group.generation)
            for m in group.members.values():
                if m.sync_reply is not None:
                    waiting, m.sync_reply = m.sync_reply, None
                    waiting(self._sync_result(group, m.assignment))

        def not_stored(code: ErrorCode) -> None:
            if not current():
                return
            log.warning(
                "group %s: could not store generation %d: %s",
                group.group_id,
                generation,
                code.name,
            )
            self._reset_and_propagate_assignment_error(group, write_error(code))
            self._maybe_prepare_rebalance(group, "storing the assignment failed")

        self._store_group(group, assignments, stored, not_stored)

    def _synced(self, group: Group, member_id: str) -> None:
        group.pending_sync.discard(member_id)
        if not group.pending_sync:
            self.timers.cancel(("sync", group.group_id))

    def _sync_result(self, group: Group, assignment: bytes) -> SyncResult:
        return SyncResult(ErrorCode.none, assignment, group.protocol_type, group.protocol_name)

    # -- Heartbeat and LeaveGroup --------------------------------------------------------------

    def heartbeat(self, request: HeartbeatRequest) -> ErrorCode:
        if not request.group_id:
            return ErrorCode.invalid_group_id
        status = self._status(request.group_id)
        if status is not ErrorCode.none:
            return status
        group = self.groups.get(request.group_id)
        if group is None or group.consumer is not None or group.is_in(GroupState.EMPTY):
            return ErrorCode.unknown_member_id
        if group.is_in(GroupState.DEAD):
            return ErrorCode.coordinator_not_available
        error = self._check_member(group, request.member_id, request.group_instance_id)
        if error is not ErrorCode.none:
            return error
        if request.generation_id != group.generation:
            return ErrorCode.illegal_generation
        self._schedule_session(group, group.members[request.member_id])
        if group.is_in(GroupState.PREPARING_REBALANCE):
            return ErrorCode.rebalance_in_progress
        return ErrorCode.none

    def leave_group(self, group_id: str, members: Sequence[MemberIdentity]) -> LeaveResult:
        if not group_id:
            return LeaveResult(ErrorCode.invalid_group_id)
        status = self._status(group_id)
        if status is not ErrorCode.none:
            return LeaveResult(status)
        group = self.groups.get(group_id)
        if group is None or group.consumer is not None or group.is_in(GroupState.DEAD):
            return LeaveResult(ErrorCode.unknown_member_id)
        results = []
        for identity in members:
            results.append((identity, self._leave(group, identity)))
        self._maybe_forget(group)
        return LeaveResult(ErrorCode.none, tuple(results))

    def _leave(self, group: Group, identity: MemberIdentity) -> ErrorCode:
        member_id = identity.member_id
        if identity.group_instance_id is not None:
            current = group.static_member_id(identity.group_instance_id)
            if current is None:
                return ErrorCode.unknown_member_id
            if member_id != UNKNOWN_MEMBER_ID and member_id != current:
                return ErrorCode.fenced_instance_id
            member_id = current
        elif member_id in group.pending_members:
            group.pending_members.discard(member_id)
            self.timers.cancel(("session", group.group_id, member_id))
            self._try_complete_join(group)
            return ErrorCode.none
        member = group.members.get(member_id)
        if member is None:
            return ErrorCode.unknown_member_id
        log.info(
            "group %s: member %s leaves%s",
            group.group_id,
            member_id,
            f" ({identity.reason})" if identity.reason else "",
        )
        self._remove_member_and_update_group(group, member)
        return ErrorCode.none

    # -- offsets -------------------------------------------------------------------------------

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
                self.groups[request.group_id] = group
            group.offsets.update(_numbered(accepted, first))
            member = group.members.get(request.member_id)
            if member is not None and request.generation_id >= 0:
                self._schedule_session(group, member)

        def not_stored(code: ErrorCode) -> None:
            log.warning("group %s: could not store offsets: %s", request.group_id, code.name)
            answer = commit_write_error(code)
            for tp in accepted:
                results[tp] = answer

        self.write(
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
                self.groups[request.group_id] = group
            self._add_pending(group, request.producer_id, _numbered(accepted, first))

        def not_stored(code: ErrorCode) -> None:
            log.warning(
                "group %s: could not store transactional offsets: %s", request.group_id, code.name
            )
            for tp in accepted:
                results[tp] = write_error(code)

        self.write(
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
            group = self.groups.get(group_id)
            if group is None:
                continue
            pending = group.pending_offsets.pop(producer_id, {})
            if commit:
                for tp, offset in pending.items():
                    existing = group.offsets.get(tp)
                    if existing is None or offset.record_offset > existing.record_offset:
                        group.offsets[tp] = offset
            self._maybe_forget(group)

    def _add_pending(
        self, group: Group, producer_id: int, offsets: dict[TopicPartition, CommittedOffset]
    ) -> None:
        group.pending_offsets.setdefault(producer_id, {}).update(offsets)
        key = (self.partition_for(group.group_id), producer_id)
        self.open_transactions.setdefault(key, set()).add(group.group_id)

    def _accept_offsets(
        self, commits: Iterable[OffsetCommit]
    ) -> tuple[dict[TopicPartition, ErrorCode], dict[TopicPartition, CommittedOffset]]:
        """Each partition's result so far, and the offsets to store (metadata within
        ``offset.metadata.max.bytes``), stamped now."""
        results: dict[TopicPartition, ErrorCode] = {}
        accepted: dict[TopicPartition, CommittedOffset] = {}
        now = self._wall()
        for commit in commits:
            tp = (commit.topic, commit.partition)
            metadata = commit.metadata or ""
            if len(metadata.encode()) > self.config.offset_metadata_max_bytes:
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
        status = self._status(request.group_id)
        if status is not ErrorCode.none:
            return status
        group = self.groups.get(request.group_id)
        created = group is None
        if group is None:
            if request.generation_id >= 0:
                return unknown_with_generation
            group = Group(request.group_id, self._wall())
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
        if group.consumer is not None:
            # A consumer group's commits carry the member epoch (generation_id holds it).
            error = self.consumer.check_commit(group.consumer, member_id, generation_id)
            if transactional and error is ErrorCode.stale_member_epoch:
                return ErrorCode.illegal_generation
            return error
        if group.is_in(GroupState.DEAD):
            return ErrorCode.coordinator_not_available
        if generation_id < 0 and group.is_in(GroupState.EMPTY):
            return ErrorCode.none  # a commit from outside group management
        if generation_id >= 0 or member_id != UNKNOWN_MEMBER_ID or group_instance_id is not None:
            error = self._check_member(group, member_id, group_instance_id)
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
        status = self._status(group_id)
        if status is not ErrorCode.none:
            return FetchedOffsets(status)
        group = self.groups.get(group_id)
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
        status = self._status(group_id)
        if status is not ErrorCode.none:
            return status, {}
        group = self.groups.get(group_id)
        if group is None or group.is_in(GroupState.DEAD):
            return ErrorCode.group_id_not_found, {}
        subscribed: set[str] = set()
        if group.consumer is not None:
            subscribed = self.consumer.subscribed_topics(group.consumer)
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
        self.write(
            group_id,
            [self._offset_tombstone(group_id, tp) for tp in doomed],
            lambda _: self._drop_offsets(group, doomed),
        )
        return ErrorCode.none, results

    def _drop_offsets(self, group: Group, partitions: Iterable[TopicPartition]) -> None:
        for tp in partitions:
            group.offsets.pop(tp, None)
            group.drop_pending_offset(tp)
        self._maybe_forget(group)

    def _offset_tombstone(self, group_id: str, tp: TopicPartition) -> tuple[bytes, None]:
        return rec.encode_key(rec.OffsetKey(group_id, tp[0], tp[1])), None

    def remove_offsets_of_topics(self, topics: set[str]) -> None:
        """Deleted topics take their committed offsets with them."""
        for group in self._active_groups():
            doomed = [
                tp for tp in group.offsets.keys() | group.pending_partitions() if tp[0] in topics
            ]
            if not doomed:
                continue
            group_id = group.group_id
            self.write(
                group_id,
                [self._offset_tombstone(group_id, tp) for tp in doomed],
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
        now = self._wall()
        expired_total = 0
        for group in self._active_groups():
            expired = self._expirable(group, now)
            if group.pending_offsets:
                expired = [tp for tp in expired if not group.has_pending_offset(tp)]
            records: list[tuple[bytes, bytes | None]] = [
                self._offset_tombstone(group.group_id, tp) for tp in expired
            ]
            remove_group = (
                group.is_in(GroupState.EMPTY)
                and (group.consumer is None or not group.consumer.members)
                and len(expired) == len(group.offsets)
                and not group.pending_members
                and not group.pending_offsets
            )
            if remove_group and group.consumer is not None:
                records.extend(self.consumer.delete_records(group))
            elif remove_group and group.generation > 0:
                records.append((rec.encode_key(rec.GroupKey(group.group_id)), None))
            group_id = group.group_id
            self.write(
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
        retention = self.config.offsets_retention_ms

        def committed_before(excluded: frozenset[str] | set[str]) -> list[TopicPartition]:
            return [
                tp
                for tp, c in group.offsets.items()
                if tp[0] not in excluded and c.commit_timestamp + retention <= now
            ]

        if group.consumer is not None:
            # As Kafka's consumer groups: from each commit, for topics no member subscribes to.
            return committed_before(self.consumer.subscribed_topics(group.consumer))
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
        if remove_group and self.groups.get(group.group_id) is group:
            group.transition(GroupState.DEAD, self._wall())
            del self.groups[group.group_id]

    # -- admin ---------------------------------------------------------------------------------

    def list_groups(
        self, states: Iterable[str] = (), types: Iterable[str] = ()
    ) -> list[ListedGroup]:
        wanted_states = {s.lower() for s in states}
        wanted_types = {t.lower() for t in types}
        listed = []
        for g in self._active_groups():
            if g.consumer is not None:
                entry = ListedGroup(
                    g.group_id, CONSUMER_PROTOCOL_TYPE, g.consumer.state.value, "consumer"
                )
            else:
                entry = ListedGroup(g.group_id, g.protocol_type or "", g.state.value)
            if wanted_states and entry.state.lower() not in wanted_states:
                continue
            if wanted_types and entry.group_type not in wanted_types:
                continue
            listed.append(entry)
        return listed

    def describe_group(self, group_id: str) -> GroupDescription:
        status = self._status(group_id)
        if status is not ErrorCode.none:
            return GroupDescription(status, group_id, "")
        group = self.groups.get(group_id)
        if group is None or group.consumer is not None:
            # A consumer group is described by ConsumerGroupDescribe (as Kafka 4).
            return GroupDescription(ErrorCode.group_id_not_found, group_id, GroupState.DEAD.value)
        stable = group.is_in(GroupState.STABLE)
        return GroupDescription(
            ErrorCode.none,
            group_id,
            group.state.value,
            group.protocol_type or "",
            (group.protocol_name or "") if stable else "",
            tuple(
                DescribedMember(
                    m.member_id,
                    m.group_instance_id,
                    m.client_id,
                    m.client_host,
                    m.metadata(group.protocol_name) if stable else b"",
                    m.assignment if stable else b"",
                )
                for m in group.members.values()
            ),
        )

    def delete_groups(self, group_ids: Iterable[str]) -> dict[str, ErrorCode]:
        results: dict[str, ErrorCode] = {}
        for group_id in group_ids:
            status = self._status(group_id)
            if status is not ErrorCode.none:
                results[group_id] = status
                continue
            group = self.groups.get(group_id)
            if group is None or group.is_in(GroupState.DEAD):
                results[group_id] = ErrorCode.group_id_not_found
                continue
            if (
                not group.is_in(GroupState.EMPTY)
                or group.pending_members
                or (group.consumer is not None and group.consumer.members)
            ):
                results[group_id] = ErrorCode.non_empty_group
                continue
            # Open transactions do not keep a group from deletion; their pending commits go
            # with it (as Kafka: a tombstone for each, which removes it on replay).
            pending = group.pending_partitions().difference(group.offsets)
            records: list[tuple[bytes, bytes | None]] = [
                self._offset_tombstone(group_id, tp) for tp in [*group.offsets, *pending]
            ]
            if group.consumer is not None:
                records.extend(self.consumer.delete_records(group))
            else:
                records.append((rec.encode_key(rec.GroupKey(group_id)), None))
            results[group_id] = ErrorCode.none
            self.write(
                group_id,
                records,
                partial(self._deleted, group),
                partial(self._not_deleted, results, group_id),
            )
        return results

    def _deleted(self, group: Group, _: int) -> None:
        if self.groups.get(group.group_id) is group:
            group.transition(GroupState.DEAD, self._wall())
            del self.groups[group.group_id]
            log.info("group %s deleted", group.group_id)

    def _not_deleted(self, results: dict[str, ErrorCode], group_id: str, code: ErrorCode) -> None:
        log.warning("group %s: could not delete it: %s", group_id, code.name)
        results[group_id] = write_error(code)

    def _maybe_forget(self, group: Group) -> None:
        """A group that never got anywhere (a join refused, its only pending member gone)
        leaves nothing behind."""
        if self.groups.get(group.group_id) is group and self._is_forgettable(group):
            del self.groups[group.group_id]
            self.timers.cancel(("join", group.group_id))

    # -- shutdown ------------------------------------------------------------------------------

    def shutdown(self) -> None:
        """Answer every waiting JoinGroup and SyncGroup: this coordinator is going away."""
        for group in self.groups.values():
            self._answer_waiting(group, ErrorCode.not_coordinator)

    def _answer_waiting(self, group: Group, error: ErrorCode) -> None:
        for member in group.members.values():
            if member.join_reply is not None:
                reply, member.join_reply = member.join_reply, None
                reply(JoinResult(error, member_id=member.member_id))
            if member.sync_reply is not None:
                sync_reply, member.sync_reply = member.sync_reply, None
                sync_reply(SyncResult(error))


def _numbered(
    offsets: dict[TopicPartition, CommittedOffset], first: int
) -> dict[TopicPartition, CommittedOffset]:
    """``offsets`` with the log offsets of their records, written in order from ``first``."""
    return {tp: replace(c, record_offset=first + i) for i, (tp, c) in enumerate(offsets.items())}
