"""The group coordinator of Kafka's classic group protocol, as a state machine.

Requests come in as value objects (:mod:`odradek.coordinator.group.messages`); answers go out as
return values or, for JoinGroup and SyncGroup, which wait for the rest of the group, through a reply
callback called later. Every change that must survive a restart becomes records of
``__consumer_offsets`` (:mod:`odradek.coordinator.group.records`): an operation does not write them,
it asks for them (:class:`CoordinatorWrite`, taken by the runtime with :meth:`take_writes` once the
operation returns), with the change to make once the log took them (``applied``) and what to do when
it refused them (``failed``) — Kafka's ``CoordinatorResult``, records and what follows.
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

Committed offsets (OffsetCommit, TxnOffsetCommit and its transaction markers, OffsetFetch,
OffsetDelete, expiry) are :mod:`odradek.coordinator.group.offsets`'
(:attr:`GroupCoordinator.offsets`, Kafka's ``OffsetMetadataManager``); the KIP-848 consumer groups'
:mod:`odradek.coordinator.group.consumer_protocol`'s (:attr:`GroupCoordinator.consumer`).

The coordinator does no I/O of its own and is called from one thread (the broker's event loop).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from functools import partial

from odradek.clock import Clock
from odradek.coordinator.common.internal_topic import write_error
from odradek.coordinator.common.runtime import CoordinatorWrite
from odradek.coordinator.common.timers import Timers
from odradek.coordinator.group import records as rec
from odradek.coordinator.group.consumer_group import ConsumerGroupSettings
from odradek.coordinator.group.consumer_protocol import ConsumerProtocol, is_consumer_group_key
from odradek.coordinator.group.group import CONSUMER_PROTOCOL_TYPE, Group, GroupState, Member
from odradek.coordinator.group.messages import (
    NO_PRODUCER_ID,
    UNKNOWN_MEMBER_ID,
    DescribedMember,
    GroupDescription,
    HeartbeatRequest,
    JoinedMember,
    JoinReply,
    JoinRequest,
    JoinResult,
    LeaveResult,
    ListedGroup,
    MemberIdentity,
    Protocol,
    SyncReply,
    SyncRequest,
    SyncResult,
)
from odradek.coordinator.group.offsets import EXPIRE_OFFSETS, OffsetManager
from odradek.coordinator.group.share_group import (
    SHARE_GROUP_TYPE,
    SHARE_PROTOCOL_TYPE,
    ShareGroups,
    ShareGroupSettings,
    is_share_group_key,
)
from odradek.coordinator.group.streams_group import (
    STREAMS_GROUP_TYPE,
    STREAMS_PROTOCOL_TYPE,
    StreamsGroups,
    StreamsGroupSettings,
)
from odradek.coordinator.group.streams_records import is_streams_group_key
from odradek.protocol.errors import ErrorCode

log = logging.getLogger(__name__)


def _ignore(_: object) -> None:
    """What a write does when nothing follows from it."""


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
    # The share groups' settings (group.share.*).
    share: ShareGroupSettings = field(default_factory=ShareGroupSettings)
    # The streams groups' settings (group.streams.*).
    streams: StreamsGroupSettings = field(default_factory=StreamsGroupSettings)


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
        # The KIP-848 consumer groups' operations (their state is in ``Group.consumer``).
        self.consumer = ConsumerProtocol(self)
        # The committed offsets' operations (they are kept in each ``Group``).
        self.offsets = OffsetManager(self)
        # The share groups (KIP-932), kept apart from ``groups``: they have no offsets here.
        self.share = ShareGroups(self, config.share)
        # The streams groups (KIP-1071; their state is in ``Group.streams``).
        self.streams = StreamsGroups(self, config.streams)

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
        if is_share_group_key(key):
            try:
                self.share.replay(key, value)
            except rec.RecordFormatError as e:
                log.warning("skipping an unreadable record in __consumer_offsets: %s", e)
            return
        if is_streams_group_key(key):
            try:
                self.streams.replay(key, value)
            except rec.RecordFormatError as e:
                log.warning("skipping an unreadable record in __consumer_offsets: %s", e)
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
            assert decoded is None or isinstance(decoded, rec.OffsetValue)
            self.offsets.replay(group, decoded_key, decoded, offset, producer_id)
            return
        previous = group
        group = self.groups[decoded_key.group] = Group(decoded_key.group, self._wall())
        group.offsets = previous.offsets
        group.pending_offsets = previous.pending_offsets
        group.streams = previous.streams
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
                self.schedule_session(group, member)
            self.consumer.start_sessions(group)
            self.streams.start_sessions(group)
        self.loading -= done
        self.owned |= done
        if EXPIRE_OFFSETS not in self.timers:
            self.offsets.schedule_expiry()
        # A lone broker loads its partitions one by one at start: the empty ones say nothing.
        log.log(
            logging.INFO if loaded else logging.DEBUG,
            "group coordinator loaded %d groups of partitions %s",
            loaded,
            sorted(done),
        )

    def unload(self, partition: int) -> int:
        """This broker no longer leads ``partition``: its groups leave memory, their waiting
        JoinGroup and SyncGroup requests are answered NOT_COORDINATOR (the members find the new
        coordinator) and their timers are cancelled. Returns how many groups were dropped."""
        self.owned.discard(partition)
        self.loading.discard(partition)
        self.offsets.forget_transactions(partition)
        self.share.unload(partition)
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

    def active_groups(self) -> list[Group]:
        return [g for g in self.groups.values() if self.partition_for(g.group_id) in self.owned]

    def _is_forgettable(self, group: Group) -> bool:
        return (
            group.state is GroupState.EMPTY
            and group.consumer is None
            and group.streams is None
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

    def schedule_session(self, group: Group, member: Member, timeout_ms: int | None = None) -> None:
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
            self.maybe_forget(group)
            return
        member = group.members.get(member_id)
        if member is None:
            return
        # A member inside a JoinGroup or SyncGroup cannot heartbeat; the rebalance timeout
        # bounds those waits instead. A new member gets only the join timeout.
        if (member.awaiting_join and not member.is_new) or member.sync_reply is not None:
            self.schedule_session(group, member)
            return
        log.info(
            "group %s: member %s %s; removing it",
            group_id,
            member_id,
            "did not finish joining" if member.is_new else "missed its session timeout",
        )
        self._remove_member_and_update_group(group, member)

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
        if request.group_id in self.share.groups:
            # The id names a share group: a classic member cannot join it (Kafka's answer).
            return fail(ErrorCode.group_id_not_found)
        group = self.groups.get(request.group_id)
        if group is not None and group.streams is not None:
            # A streams group: no classic member joins it (Kafka's answer).
            return fail(ErrorCode.inconsistent_group_protocol)
        if group is None:
            if request.member_id != UNKNOWN_MEMBER_ID:
                return fail(ErrorCode.unknown_member_id)
            group = Group(request.group_id, self._wall())
            self.groups[request.group_id] = group
        if group.consumer is not None:
            if group.consumer.members:
                return reply(self.consumer.classic_join(group, request))
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
            self.maybe_forget(group)

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
        error = self.check_member(group, member_id, request.group_instance_id)
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
            self.schedule_session(group, member)
            return reply(self._join_result(group, member))
        return reply(JoinResult(ErrorCode.unknown_member_id, member_id=member_id))

    def check_member(self, group: Group, member_id: str, instance_id: str | None) -> ErrorCode:
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
        self.schedule_session(group, member, self.config.new_member_join_timeout_ms)
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
        self.schedule_session(group, member)
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
                self.schedule_session(group, member)
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
            self.schedule_session(group, member)
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
        if group is not None and group.consumer is not None:
            return reply(self.consumer.classic_sync(group, request))
        if group is None:
            return reply(SyncResult(ErrorCode.unknown_member_id))
        if group.is_in(GroupState.DEAD):
            return reply(SyncResult(ErrorCode.coordinator_not_available))
        error = self.check_member(group, request.member_id, request.group_instance_id)
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
        self.schedule_session(group, member)
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
        if group is not None and group.consumer is not None:
            return self.consumer.classic_heartbeat(group, request)
        if group is None or group.is_in(GroupState.EMPTY):
            return ErrorCode.unknown_member_id
        if group.is_in(GroupState.DEAD):
            return ErrorCode.coordinator_not_available
        error = self.check_member(group, request.member_id, request.group_instance_id)
        if error is not ErrorCode.none:
            return error
        if request.generation_id != group.generation:
            return ErrorCode.illegal_generation
        self.schedule_session(group, group.members[request.member_id])
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
        if group is not None and group.consumer is not None:
            return self.consumer.classic_leave(group, members)
        if group is None or group.is_in(GroupState.DEAD):
            return LeaveResult(ErrorCode.unknown_member_id)
        results = []
        for identity in members:
            results.append((identity, self._leave(group, identity)))
        self.maybe_forget(group)
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

    # -- admin ---------------------------------------------------------------------------------

    def list_groups(
        self, states: Iterable[str] = (), types: Iterable[str] = ()
    ) -> list[ListedGroup]:
        wanted_states = {s.lower() for s in states}
        wanted_types = {t.lower() for t in types}
        listed = []
        for g in self.active_groups():
            if g.consumer is not None:
                entry = ListedGroup(
                    g.group_id, CONSUMER_PROTOCOL_TYPE, g.consumer.state.value, "consumer"
                )
            elif g.streams is not None:
                entry = ListedGroup(
                    g.group_id, STREAMS_PROTOCOL_TYPE, g.streams.state.value, STREAMS_GROUP_TYPE
                )
            else:
                entry = ListedGroup(g.group_id, g.protocol_type or "", g.state.value)
            if wanted_states and entry.state.lower() not in wanted_states:
                continue
            if wanted_types and entry.group_type not in wanted_types:
                continue
            listed.append(entry)
        for share in self.share.active():
            entry = ListedGroup(
                share.group_id, SHARE_PROTOCOL_TYPE, share.state.value, SHARE_GROUP_TYPE
            )
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
        if group is None or group.consumer is not None or group.streams is not None:
            # A consumer (streams) group is described by ConsumerGroupDescribe
            # (StreamsGroupDescribe), as in Kafka 4.
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
            share = self.share.delete(group_id) if group is None else None
            if share is not None:
                results[group_id] = share
                continue
            if group is None or group.is_in(GroupState.DEAD):
                results[group_id] = ErrorCode.group_id_not_found
                continue
            if (
                not group.is_in(GroupState.EMPTY)
                or group.pending_members
                or (group.consumer is not None and group.consumer.members)
                or (group.streams is not None and group.streams.members)
            ):
                results[group_id] = ErrorCode.non_empty_group
                continue
            # Open transactions do not keep a group from deletion; their pending commits go
            # with it (as Kafka: a tombstone for each, which removes it on replay).
            pending = group.pending_partitions().difference(group.offsets)
            records: list[tuple[bytes, bytes | None]] = [
                self.offsets.tombstone(group_id, tp) for tp in [*group.offsets, *pending]
            ]
            if group.consumer is not None:
                records.extend(self.consumer.delete_records(group))
            elif group.streams is not None:
                records.extend(self.streams.delete_records(group))
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

    def maybe_forget(self, group: Group) -> None:
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
