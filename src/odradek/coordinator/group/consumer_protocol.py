"""The coordinator's side of the KIP-848 consumer group protocol: ConsumerGroupHeartbeat and
ConsumerGroupDescribe, and what the classic operations must know of consumer groups.

A consumer group lives in the coordinator's ``groups`` like a classic one — the same
:class:`~odradek.coordinator.group.group.Group`, which keeps the committed offsets — with its
KIP-848 state in ``Group.consumer``
(:class:`~odradek.coordinator.group.consumer_group.ConsumerGroup`). A heartbeat works as Kafka's
``GroupMetadataManager.consumerGroupHeartbeat``: update the member (a new one, changed subscriptions
or partition counts bump the group epoch), compute a new target assignment with the server-side
assignor when the group epoch is past the assignment epoch, move the member's current assignment one
step towards its target (``reconcile``), write every record of the step as one batch, and only then
apply them to the state (the same :meth:`ConsumerGroup.apply` a load replays with).

Timers (in the coordinator's :class:`~odradek.coordinator.common.timers.Timers`): a member missing
``group.consumer.session.timeout.ms`` is fenced (removed, the group epoch bumped, its
partitions reassigned); one that has not revoked its partitions within its rebalance timeout is
fenced too. An empty classic group is converted by the first consumer-protocol member (Kafka's
``group.consumer.migration.policy`` upgrade of an empty group); a classic member joining an
empty consumer group converts it back. A non-empty classic group answers GROUP_ID_NOT_FOUND to a
consumer-protocol heartbeat.

Classic members of a consumer group (Kafka 4's online migration): a classic consumer (JoinGroup,
SyncGroup, Heartbeat, LeaveGroup with protocol type ``consumer``) joining a non-empty consumer
group becomes one of its members. Its JoinGroup is a full heartbeat (its subscription's topics,
rack and owned partitions, read from its protocol metadata), answered with its member epoch as
the generation, its first protocol's name, and no leader (so it does not assign); its SyncGroup
is answered with its current assignment; its Heartbeat answers REBALANCE_IN_PROGRESS until it
is reconciled to the group epoch, so that it rejoins to get (or give up) partitions; LeaveGroup
fences it. Its JoinGroup protocols are remembered here only (not written): after a coordinator
move its next SyncGroup is answered with the protocol name of its subscription's first choice
being unknown (null), and classic clients then rejoin.

Runs on the broker's event loop thread, called through the
:class:`~odradek.coordinator.group.coordinator.GroupCoordinator`.
"""

from __future__ import annotations

import logging
import re
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Protocol

from odradek.coordinator.group import consumer_records as crec
from odradek.coordinator.group.assignors import ASSIGNORS, TopicInfo
from odradek.coordinator.group.classic_protocol import (
    BadSubscription,
    decode_assignment_partitions,
    decode_subscription,
    encode_assignment,
)
from odradek.coordinator.group.consumer_group import (
    JOIN_EPOCH,
    LEAVE_EPOCH,
    STATIC_LEAVE_EPOCH,
    ConsumerGroup,
    ConsumerGroupSettings,
    ConsumerGroupState,
    ConsumerMember,
    FencedMember,
    MemberState,
    reconcile,
)
from odradek.coordinator.group.group import CONSUMER_PROTOCOL_TYPE, Group, GroupState
from odradek.coordinator.group.messages import (
    UNKNOWN_MEMBER_ID,
    ConsumerGroupDescription,
    ConsumerHeartbeatRequest,
    ConsumerHeartbeatResult,
    DescribedConsumerMember,
    HeartbeatRequest,
    JoinRequest,
    JoinResult,
    LeaveResult,
    MemberIdentity,
    SyncRequest,
    SyncResult,
)
from odradek.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from odradek.coordinator.group.coordinator import GroupCoordinator

log = logging.getLogger(__name__)

CONSUMER_GROUP_TYPE = "consumer"
# The heartbeat interval answered while a group's assignment is moving (see _interval).
RECONCILING_HEARTBEAT_INTERVAL_MS = 200


class TopicCatalog(Protocol):
    """The cluster's topics as the assignors see them."""

    def topic_info(self, name: str) -> TopicInfo | None: ...

    def topic_names(self) -> list[str]: ...


class NoTopics:
    """A catalog without topics (a coordinator built without a broker, in tests)."""

    def topic_info(self, name: str) -> TopicInfo | None:
        return None

    def topic_names(self) -> list[str]:
        return []


class _Refused(Exception):
    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


Record = tuple[crec.ConsumerGroupKey, crec.ConsumerGroupValue | None]


@dataclass(slots=True)
class _Step:
    """The records of one operation on one group, in the order Kafka writes them."""

    group_id: str
    records: list[Record]

    def put(self, value: crec.ConsumerGroupValue, member_id: str | None = None) -> None:
        kind = crec.kind_of(value)
        self.records.append((crec.ConsumerGroupKey(kind, self.group_id, member_id), value))

    def delete(self, kind: int, member_id: str | None = None) -> None:
        self.records.append((crec.ConsumerGroupKey(kind, self.group_id, member_id), None))

    def remove_member(self, member_id: str) -> None:
        self.delete(crec.CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT_KEY, member_id)
        self.delete(crec.CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER_KEY, member_id)
        self.delete(crec.CONSUMER_GROUP_MEMBER_METADATA_KEY, member_id)

    def encoded(self) -> list[tuple[bytes, bytes | None]]:
        return [
            (crec.encode_key(k), None if v is None else crec.encode_value(v))
            for k, v in self.records
        ]


class ConsumerProtocol:
    """The consumer-group operations of one :class:`GroupCoordinator` (see the module doc)."""

    def __init__(self, coordinator: GroupCoordinator) -> None:
        self.coordinator = coordinator
        self.topics: TopicCatalog = NoTopics()
        # Monotonic ms of each group's last epoch bump here (not stored: see _interval).
        self._changed_at: dict[str, int] = {}
        # The JoinGroup protocol names of classic members of consumer groups, by (group, member).
        self._classic: dict[tuple[str, str], tuple[str, ...]] = {}

    @property
    def _config(self) -> ConsumerGroupSettings:
        return self.coordinator.config.consumer

    # -- replay --------------------------------------------------------------------------------

    def replay(self, key: bytes, value: bytes | None) -> None:
        """Apply one consumer group record read back from ``__consumer_offsets``."""
        decoded = crec.decode_key(key)
        body = None if value is None else crec.decode_value(decoded.kind, value)
        groups = self.coordinator.groups
        group = groups.get(decoded.group)
        if group is None or group.consumer is None:
            if body is None:
                return
            group = _consumer_group(decoded.group, group, self.coordinator.clock.time_ms())
            groups[decoded.group] = group
        assert group.consumer is not None
        group.consumer.apply(decoded, body)
        if decoded.kind == crec.CONSUMER_GROUP_METADATA_KEY and body is None:
            # The group's tombstone: it was deleted (or converted back to a classic group).
            group.consumer = None

    def start_sessions(self, group: Group) -> None:
        """After a load: every member has a session again, from now."""
        if group.consumer is not None:
            for member_id in group.consumer.members:
                self._schedule_session(group.group_id, member_id)

    # -- ConsumerGroupHeartbeat ----------------------------------------------------------------

    def heartbeat(self, request: ConsumerHeartbeatRequest) -> ConsumerHeartbeatResult:
        try:
            self._validate(request)
            status = self.coordinator.status(request.group_id)
            if status is not ErrorCode.none:
                return ConsumerHeartbeatResult(status)
            if request.member_epoch in (LEAVE_EPOCH, STATIC_LEAVE_EPOCH):
                return self._leave(request)
            return self._heartbeat(request)
        except _Refused as e:
            return ConsumerHeartbeatResult(e.code, e.message)

    def _validate(self, request: ConsumerHeartbeatRequest) -> None:
        def invalid(message: str) -> _Refused:
            return _Refused(ErrorCode.invalid_request, message)

        if not request.group_id:
            raise invalid("GroupId can't be empty.")
        if request.instance_id == "":
            raise invalid("InstanceId can't be empty.")
        if request.rack_id == "":
            raise invalid("RackId can't be empty.")
        epoch = request.member_epoch
        if epoch > 0 or epoch == LEAVE_EPOCH:
            if not request.member_id:
                raise invalid("MemberId can't be empty.")
        elif epoch == JOIN_EPOCH:
            if request.rebalance_timeout_ms == -1:
                raise invalid("RebalanceTimeoutMs must be provided in first request.")
            if request.owned is None or request.owned:
                raise invalid("TopicPartitions must be empty when (re-)joining.")
            if request.subscribed_topic_names is None and request.subscribed_topic_regex is None:
                raise invalid(
                    "SubscribedTopicNames or SubscribedTopicRegex must be set in first request."
                )
        elif epoch == STATIC_LEAVE_EPOCH:
            if not request.member_id:
                raise invalid("MemberId can't be empty.")
            if request.instance_id is None:
                raise invalid("InstanceId can't be null.")
        else:
            raise invalid("MemberEpoch is invalid.")
        if request.subscribed_topic_regex is not None:
            try:
                re.compile(request.subscribed_topic_regex)
            except re.error as e:
                raise invalid(f"SubscribedTopicRegex is not a valid regular expression: {e}") from e
        assignors = self._config.assignors
        if request.server_assignor is not None and request.server_assignor not in assignors:
            raise _Refused(
                ErrorCode.unsupported_assignor,
                f"ServerAssignor {request.server_assignor} is not supported. "
                f"Supported assignors: {', '.join(assignors)}.",
            )

    def _group_for(self, request: ConsumerHeartbeatRequest, step: _Step) -> Group:
        """The consumer group of a heartbeat; for a join, a new one or a converted empty
        classic group (not yet in ``groups``: installed once the step is written)."""
        if request.group_id in self.coordinator.share.groups:
            raise _Refused(
                ErrorCode.group_id_not_found, f"Group {request.group_id} is not a consumer group."
            )
        group = self.coordinator.groups.get(request.group_id)
        joining = request.member_epoch == JOIN_EPOCH
        if group is not None and group.consumer is not None:
            return group
        if group is not None and group.streams is not None:
            raise _Refused(
                ErrorCode.group_id_not_found, f"Group {request.group_id} is not a consumer group."
            )
        if not joining:
            raise _Refused(
                ErrorCode.group_id_not_found, f"Consumer group {request.group_id} not found."
            )
        now = self.coordinator.clock.time_ms()
        if group is None:
            return _consumer_group(request.group_id, None, now)
        if group.is_in(GroupState.EMPTY) and not group.members and not group.pending_members:
            log.info("group %s: an empty classic group becomes a consumer group", group.group_id)
            if group.generation > 0 or group.protocol_type is not None:
                step.records.append((crec.ConsumerGroupKey(2, group.group_id), None))
            return _consumer_group(request.group_id, group, now)
        upgraded = self._upgraded(group) if self._config.upgrades else None
        if upgraded is not None:
            return upgraded
        raise _Refused(
            ErrorCode.group_id_not_found, f"Group {request.group_id} is not a consumer group."
        )

    def _upgraded(self, group: Group) -> Group | None:
        """A stable classic group of the consumer protocol, converted to a consumer group whose
        members are its members, each keeping its assignment at its generation (Kafka 4's
        online upgrade); they are classic members of it from now on, and rejoin when the
        group epoch moves. The conversion is written (and applied) now; None when the group
        cannot be converted (rebalancing, another protocol type, unreadable metadata)."""
        if (
            not group.is_in(GroupState.STABLE)
            or group.protocol_type != CONSUMER_PROTOCOL_TYPE
            or group.pending_members
            or any(m.awaiting_join for m in group.members.values())
        ):
            return None
        group_id = group.group_id
        epoch = group.generation
        members: list[tuple[ConsumerMember, tuple[str, ...]]] = []
        topics: set[str] = set()
        try:
            for m in group.members.values():
                subscription = decode_subscription(m.metadata(group.protocol_name))
                assigned: dict[uuid.UUID, set[int]] = {}
                for topic, index in decode_assignment_partitions(m.assignment):
                    info = self.topics.topic_info(topic)
                    if info is not None:
                        assigned.setdefault(info.topic_id, set()).add(index)
                topics.update(subscription.topics)
                member = ConsumerMember(
                    m.member_id,
                    instance_id=m.group_instance_id,
                    rack_id=subscription.rack_id or None,
                    client_id=m.client_id,
                    client_host=m.client_host,
                    subscribed_topic_names=subscription.topics,
                    rebalance_timeout_ms=m.rebalance_timeout_ms,
                    member_epoch=epoch,
                    previous_member_epoch=epoch,
                    assigned={t: frozenset(ps) for t, ps in assigned.items()},
                )
                members.append((member, tuple(m.protocol_names)))
        except BadSubscription as e:
            log.info("group %s: cannot convert it to a consumer group: %s", group_id, e)
            return None
        converted = _consumer_group(group_id, group, self.coordinator.clock.time_ms())
        step = _Step(group_id, [(crec.ConsumerGroupKey(2, group_id), None)])
        for member, _ in members:
            step.put(member.metadata_value(), member.member_id)
            step.put(crec.TargetAssignmentMemberValue(member.assigned), member.member_id)
            step.put(member.assignment_value(), member.member_id)
        step.put(crec.PartitionMetadataValue(tuple(self._subscribed_topics_named(topics).values())))
        step.put(crec.TargetAssignmentEpochValue(epoch))
        step.put(crec.GroupEpochValue(epoch))
        coordinator = self.coordinator
        coordinator.timers.cancel_where(
            lambda key: isinstance(key, tuple) and len(key) > 2 and key[1] == group_id
        )

        def restored() -> None:
            for m in group.members.values():
                coordinator.schedule_session(group, m)

        self._commit(converted, step, restored)
        for member, protocols in members:
            self._classic[(group_id, member.member_id)] = protocols
            self._schedule_session(group_id, member.member_id)
        log.info(
            "group %s: a classic group of %d members becomes a consumer group at epoch %d",
            group_id,
            len(members),
            epoch,
        )
        return converted

    def _heartbeat(self, request: ConsumerHeartbeatRequest) -> ConsumerHeartbeatResult:
        step = _Step(request.group_id, [])
        group = self._group_for(request, step)
        cg = group.consumer
        assert cg is not None
        member_id = request.member_id or str(uuid.uuid4())
        self._check_capacity(cg, request)
        member, replaced = self._member(cg, request, member_id, step)
        updated = _updated(member, request)
        members = {m.member_id: m for m in cg.members.values() if m.member_id != replaced}
        members[member_id] = updated
        topics = self._subscribed_topics(members.values())
        bump = _put_member(cg, step, member, updated, replaced)
        if topics != cg.subscribed_topics:
            step.put(crec.PartitionMetadataValue(tuple(topics.values())))
            bump = True
        group_epoch = cg.group_epoch + 1 if bump else cg.group_epoch
        if bump:
            self._changed_at[request.group_id] = self.coordinator.clock.monotonic_ms()
            step.put(crec.GroupEpochValue(group_epoch))
            log.info("group %s: group epoch %d", request.group_id, group_epoch)
        if group_epoch > cg.assignment_epoch:
            target = self._assign(cg, members, topics, updated, replaced, group_epoch, step)
            target_epoch = group_epoch
        else:
            target = cg.target.get(member_id, {})
            target_epoch = cg.assignment_epoch
        reconciled = _reconciled(updated, target_epoch, target, cg, request)
        if reconciled.assignment_value() != member.assignment_value() or replaced is not None:
            step.put(reconciled.assignment_value(), member_id)

        def restored() -> None:
            if replaced is not None:  # the replaced static member is back, with its session
                self._schedule_session(request.group_id, replaced)

        self._commit(group, step, restored)
        self._reschedule(request.group_id, member, reconciled, replaced)
        full = request.member_epoch == JOIN_EPOCH or (
            request.rebalance_timeout_ms != -1
            and request.subscribed_topic_names is not None
            and request.owned is not None
        )
        changed = reconciled.assigned != member.assigned
        return ConsumerHeartbeatResult(
            ErrorCode.none,
            member_id=member_id,
            member_epoch=reconciled.member_epoch,
            heartbeat_interval_ms=self._interval(cg, reconciled),
            assignment=dict(reconciled.assigned) if full or changed else None,
        )

    def _check_capacity(self, cg: ConsumerGroup, request: ConsumerHeartbeatRequest) -> None:
        """A new member of a group at ``group.consumer.max.size`` is refused."""
        if len(cg.members) >= self._config.max_size and (
            not request.member_id or request.member_id not in cg.members
        ):
            raise _Refused(
                ErrorCode.group_max_size_reached,
                f"The consumer group has reached its maximum capacity of "
                f"{self._config.max_size} members.",
            )

    def _reschedule(
        self,
        group_id: str,
        member: ConsumerMember,
        reconciled: ConsumerMember,
        replaced: str | None,
    ) -> None:
        """The member's timers after a written heartbeat: its session, and the rebalance
        timeout while it still owes partitions it was asked to revoke."""
        if replaced is not None:
            self._cancel_timers(group_id, replaced)
        if reconciled.state is MemberState.UNREVOKED_PARTITIONS:
            if reconciled.assignment_value() != member.assignment_value():
                self._schedule_rebalance(group_id, reconciled)
        else:
            self.coordinator.timers.cancel(("consumer-rebalance", group_id, reconciled.member_id))
        self._schedule_session(group_id, reconciled.member_id)

    def _interval(self, cg: ConsumerGroup, member: ConsumerMember) -> int:
        """The heartbeat interval to answer with: ``group.consumer.heartbeat.interval.ms``,
        shortened while the group's assignment is still moving.

        Choice (not Kafka's, which always answers the setting): a partition moves only when
        its owner's heartbeat says it let it go, and its new owner hears of it only at its own
        next heartbeat, so at Kafka's 5 s a group of three forming at once takes 5-10 s. The
        clients take the interval of every answer, so members of a group that is not yet
        stable, or whose epoch moved less than an interval ago (more members tend to follow
        the first, as ``group.initial.rebalance.delay.ms`` assumes), come back within
        :data:`RECONCILING_HEARTBEAT_INTERVAL_MS`, and a group forms in well under a second;
        a settled group heartbeats at the setting."""
        interval = self._config.heartbeat_interval_ms
        changed_at = self._changed_at.get(cg.group_id)
        now = self.coordinator.clock.monotonic_ms()
        settled = (
            member.is_reconciled_to(cg.assignment_epoch)
            and cg.state is ConsumerGroupState.STABLE
            and (changed_at is None or now - changed_at >= interval)
        )
        if settled:
            self._changed_at.pop(cg.group_id, None)
        return interval if settled else min(interval, RECONCILING_HEARTBEAT_INTERVAL_MS)

    def _member(
        self, cg: ConsumerGroup, request: ConsumerHeartbeatRequest, member_id: str, step: _Step
    ) -> tuple[ConsumerMember, str | None]:
        """The member a heartbeat is from, and the member id of a static member it replaces."""
        joining = request.member_epoch == JOIN_EPOCH
        if request.instance_id is None:
            member = cg.members.get(member_id)
            if member is None:
                if not joining:
                    raise _Refused(
                        ErrorCode.unknown_member_id,
                        f"Member {member_id} is not a member of group {cg.group_id}.",
                    )
                log.info("group %s: member %s joins", cg.group_id, member_id)
                return ConsumerMember(member_id), None
            _check_epoch(member, request)
            return member, None
        existing = cg.static_member(request.instance_id)
        if joining:
            if existing is None:
                log.info("group %s: static member %s joins", cg.group_id, request.instance_id)
                return ConsumerMember(member_id, instance_id=request.instance_id), None
            if existing.member_id == member_id:
                _check_epoch(existing, request)
                return existing, None
            if existing.member_epoch != STATIC_LEAVE_EPOCH:
                raise _Refused(
                    ErrorCode.unreleased_instance_id,
                    f"Static member {member_id} with instance id {request.instance_id} cannot "
                    f"join the group because the instance id is owned by {existing.member_id}.",
                )
            # The static member comes back under a new member id: the same member, its
            # assignment kept (KIP-345).
            step.remove_member(existing.member_id)
            new = replace(existing, member_id=member_id, member_epoch=0, previous_member_epoch=0)
            step.put(
                crec.TargetAssignmentMemberValue(cg.target.get(existing.member_id, {})), member_id
            )
            log.info(
                "group %s: static member %s rejoins as %s",
                cg.group_id,
                request.instance_id,
                member_id,
            )
            return new, existing.member_id
        if existing is None:
            raise _Refused(
                ErrorCode.unknown_member_id, f"Instance id {request.instance_id} is unknown."
            )
        if existing.member_id != member_id:
            raise _Refused(
                ErrorCode.fenced_instance_id,
                f"Static member {member_id} with instance id {request.instance_id} was "
                f"fenced by member {existing.member_id}.",
            )
        _check_epoch(existing, request)
        return existing, None

    def _subscribed_topics(
        self, members: Iterable[ConsumerMember]
    ) -> dict[str, crec.SubscribedTopic]:
        names: set[str] = set()
        regexes: set[str] = set()
        for m in members:
            names.update(m.subscribed_topic_names)
            if m.subscribed_topic_regex:
                regexes.add(m.subscribed_topic_regex)
        if regexes:
            names.update(self._matching(regexes))
        return self._subscribed_topics_named(names)

    def _subscribed_topics_named(self, names: Iterable[str]) -> dict[str, crec.SubscribedTopic]:
        found = {}
        for name in sorted(names):
            info = self.topics.topic_info(name)
            if info is not None:
                found[name] = crec.SubscribedTopic(info.topic_id, name, info.partitions, info.racks)
        return found

    def _matching(self, regexes: set[str]) -> set[str]:
        """Topic names a subscription regex matches in full (internal topics excluded, as
        the Java consumer's pattern subscription)."""
        patterns = [re.compile(r) for r in regexes]
        return {
            name
            for name in self.topics.topic_names()
            if not name.startswith("__") and any(p.fullmatch(name) for p in patterns)
        }

    def subscribed_topics(self, cg: ConsumerGroup) -> set[str]:
        """The topics some member of ``cg`` subscribes to (by name or regex)."""
        return {t for m in cg.members.values() for t in self.member_topics(m)}

    def member_topics(self, member: ConsumerMember) -> set[str]:
        names = set(member.subscribed_topic_names)
        if member.subscribed_topic_regex:
            names.update(self._matching({member.subscribed_topic_regex}))
        return names

    def _assign(
        self,
        cg: ConsumerGroup,
        members: dict[str, ConsumerMember],
        topics: dict[str, crec.SubscribedTopic],
        updated: ConsumerMember,
        replaced: str | None,
        epoch: int,
        step: _Step,
    ) -> crec.Assignment:
        """A new target assignment of ``epoch`` (its records into ``step``); the member's."""
        name = self._preferred_assignor(members.values())
        assignor = ASSIGNORS[name]
        previous = dict(cg.target)
        if replaced is not None:
            previous[updated.member_id] = previous.pop(replaced, {})
        infos = {n: TopicInfo(t.topic_id, t.partitions, t.racks) for n, t in topics.items()}
        subscriptions = {m.member_id: self.member_topics(m) for m in members.values()}
        racks = {m.member_id: m.rack_id for m in members.values()}
        result = assignor(subscriptions, infos, previous, racks)
        for member_id, assignment in sorted(result.items()):
            if assignment != previous.get(member_id) or member_id not in cg.target:
                step.put(crec.TargetAssignmentMemberValue(assignment), member_id)
        step.put(crec.TargetAssignmentEpochValue(epoch))
        log.info("group %s: target assignment of epoch %d by %s", cg.group_id, epoch, name)
        return result.get(updated.member_id, {})

    def _preferred_assignor(self, members: Iterable[ConsumerMember]) -> str:
        """The assignor most members ask for, else the first of ``group.consumer.assignors``."""
        counts: dict[str, int] = {}
        for m in members:
            if m.server_assignor:
                counts[m.server_assignor] = counts.get(m.server_assignor, 0) + 1
        if counts:
            return max(sorted(counts), key=lambda n: counts[n])
        return self._config.assignors[0]

    # -- classic members (KIP-848's online migration) --------------------------------------------

    def classic_join(self, group: Group, request: JoinRequest) -> JoinResult:
        """A classic member's JoinGroup to the non-empty consumer group ``group``."""
        cg = group.consumer
        assert cg is not None
        names = tuple(p.name for p in request.protocols)
        member_id = request.member_id
        if request.protocol_type != CONSUMER_PROTOCOL_TYPE or not names:
            return JoinResult(ErrorCode.inconsistent_group_protocol, member_id=member_id)
        if self._protocols_differ(group, member_id, names):
            return JoinResult(ErrorCode.inconsistent_group_protocol, member_id=member_id)
        if member_id == UNKNOWN_MEMBER_ID:
            member_id = str(uuid.uuid4())
            if request.require_known_member_id and request.group_instance_id is None:
                return JoinResult(ErrorCode.member_id_required, member_id=member_id)
        try:
            subscription = decode_subscription(request.protocols[0].metadata)
        except BadSubscription as e:
            log.info("group %s: member %s: %s", group.group_id, member_id, e)
            return JoinResult(ErrorCode.inconsistent_group_protocol, member_id=member_id)
        member = cg.members.get(member_id)
        if member is None and request.group_instance_id is not None:
            member = cg.static_member(request.group_instance_id)
            if member is not None and member.member_id != member_id:
                member = None  # a static member back under a new id: a join
        result = self.heartbeat(
            ConsumerHeartbeatRequest(
                group.group_id,
                member_id,
                JOIN_EPOCH if member is None else member.member_epoch,
                instance_id=request.group_instance_id,
                rack_id=subscription.rack_id or None,
                rebalance_timeout_ms=request.rebalance_timeout_ms,
                subscribed_topic_names=subscription.topics,
                owned=() if member is None else self._topic_ids(subscription.owned),
                client_id=request.client_id,
                client_host=request.client_host,
            )
        )
        if result.error is not ErrorCode.none:
            code = result.error
            if code is ErrorCode.fenced_member_epoch:
                code = ErrorCode.unknown_member_id  # what a classic client rejoins on
            return JoinResult(code, member_id=member_id)
        self._classic[(group.group_id, member_id)] = names
        log.info(
            "group %s: classic member %s joined at epoch %s",
            group.group_id,
            member_id,
            result.member_epoch,
        )
        return JoinResult(
            ErrorCode.none,
            member_id=member_id,
            generation_id=result.member_epoch if result.member_epoch is not None else 0,
            protocol_type=CONSUMER_PROTOCOL_TYPE,
            protocol_name=names[0],
        )

    def _protocols_differ(self, group: Group, member_id: str, names: tuple[str, ...]) -> bool:
        """Whether another classic member of ``group`` supports none of ``names``."""
        cg = group.consumer
        assert cg is not None
        return any(
            group_id == group.group_id
            and other != member_id
            and other in cg.members
            and not set(protocols) & set(names)
            for (group_id, other), protocols in self._classic.items()
        )

    def _topic_ids(
        self, partitions: Iterable[tuple[str, int]]
    ) -> tuple[tuple[uuid.UUID, int], ...]:
        """Partitions by topic id (those of topics the cluster has)."""
        found = []
        for topic, index in partitions:
            info = self.topics.topic_info(topic)
            if info is not None:
                found.append((info.topic_id, index))
        return tuple(found)

    def _classic_member(
        self, group: Group, member_id: str, generation_id: int
    ) -> tuple[ConsumerMember | None, ErrorCode]:
        cg = group.consumer
        assert cg is not None
        member = cg.members.get(member_id)
        if member is None:
            return None, ErrorCode.unknown_member_id
        if generation_id != member.member_epoch:
            return None, ErrorCode.illegal_generation
        return member, ErrorCode.none

    def classic_sync(self, group: Group, request: SyncRequest) -> SyncResult:
        """A classic member's SyncGroup: its current assignment (what it gave its leader to
        assign is not used: the group's assignor decided)."""
        member, error = self._classic_member(group, request.member_id, request.generation_id)
        if member is None:
            return SyncResult(error)
        cg = group.consumer
        assert cg is not None
        protocols = self._classic.get((group.group_id, member.member_id), ())
        name = protocols[0] if protocols else None
        if (
            request.protocol_type is not None and request.protocol_type != CONSUMER_PROTOCOL_TYPE
        ) or (
            request.protocol_name is not None and name is not None and request.protocol_name != name
        ):
            return SyncResult(ErrorCode.inconsistent_group_protocol)
        names = {t.topic_id: t.name for t in cg.subscribed_topics.values()}
        assigned = [
            (names[topic_id], index)
            for topic_id, indexes in member.assigned.items()
            if topic_id in names
            for index in indexes
        ]
        self._schedule_session(group.group_id, member.member_id)
        return SyncResult(ErrorCode.none, encode_assignment(assigned), CONSUMER_PROTOCOL_TYPE, name)

    def classic_heartbeat(self, group: Group, request: HeartbeatRequest) -> ErrorCode:
        """A classic member's Heartbeat: REBALANCE_IN_PROGRESS while it is not reconciled to
        the group epoch (it then rejoins, which moves it on)."""
        member, error = self._classic_member(group, request.member_id, request.generation_id)
        if member is None:
            return error
        cg = group.consumer
        assert cg is not None
        self._schedule_session(group.group_id, member.member_id)
        if not member.is_reconciled_to(cg.group_epoch):
            return ErrorCode.rebalance_in_progress
        return ErrorCode.none

    def classic_leave(self, group: Group, members: Iterable[MemberIdentity]) -> LeaveResult:
        """LeaveGroup from classic members of a consumer group: each is fenced."""
        cg = group.consumer
        assert cg is not None
        results = []
        for identity in members:
            member = (
                cg.static_member(identity.group_instance_id)
                if identity.group_instance_id is not None
                else cg.members.get(identity.member_id)
            )
            if member is None:
                results.append((identity, ErrorCode.unknown_member_id))
                continue
            if identity.member_id not in (UNKNOWN_MEMBER_ID, member.member_id):
                results.append((identity, ErrorCode.fenced_instance_id))
                continue
            log.info("group %s: classic member %s leaves", group.group_id, member.member_id)
            self._classic.pop((group.group_id, member.member_id), None)
            self._fence(group, member.member_id)
            results.append((identity, ErrorCode.none))
        return LeaveResult(ErrorCode.none, tuple(results))

    # -- leaving and fencing -------------------------------------------------------------------

    def _leave(self, request: ConsumerHeartbeatRequest) -> ConsumerHeartbeatResult:
        group = self.coordinator.groups.get(request.group_id)
        if group is None or group.consumer is None:
            raise _Refused(
                ErrorCode.group_id_not_found, f"Consumer group {request.group_id} not found."
            )
        cg = group.consumer
        if request.instance_id is None:
            member = cg.members.get(request.member_id)
            if member is None:
                raise _Refused(
                    ErrorCode.unknown_member_id,
                    f"Member {request.member_id} is not a member of group {cg.group_id}.",
                )
        else:
            found = cg.static_member(request.instance_id)
            if found is None:
                raise _Refused(
                    ErrorCode.unknown_member_id, f"Instance id {request.instance_id} is unknown."
                )
            if found.member_id != request.member_id:
                raise _Refused(
                    ErrorCode.fenced_instance_id,
                    f"Static member {request.member_id} with instance id "
                    f"{request.instance_id} was fenced by member {found.member_id}.",
                )
            member = found
            if request.member_epoch == STATIC_LEAVE_EPOCH:
                # Gone for now, back within its session: its partitions wait for it.
                step = _Step(cg.group_id, [])
                step.put(
                    replace(
                        member, member_epoch=STATIC_LEAVE_EPOCH, pending_revocation={}
                    ).assignment_value(),
                    member.member_id,
                )
                self._commit(group, step)
                log.info("group %s: static member %s leaves for now", cg.group_id, member.member_id)
                return ConsumerHeartbeatResult(
                    ErrorCode.none, member_id=member.member_id, member_epoch=STATIC_LEAVE_EPOCH
                )
        log.info("group %s: member %s leaves", cg.group_id, member.member_id)
        self._fence(group, member.member_id)
        return ConsumerHeartbeatResult(
            ErrorCode.none, member_id=request.member_id, member_epoch=request.member_epoch
        )

    def _fence(self, group: Group, member_id: str) -> None:
        """Remove a member: its records deleted, the subscribed topics recomputed, the group
        epoch bumped (the next heartbeat of any member computes the new target)."""
        cg = group.consumer
        assert cg is not None
        step = _Step(group.group_id, [])
        step.remove_member(member_id)
        topics = self._subscribed_topics(
            [m for m in cg.members.values() if m.member_id != member_id]
        )
        if topics != cg.subscribed_topics:
            step.put(crec.PartitionMetadataValue(tuple(topics.values())))
        step.put(crec.GroupEpochValue(cg.group_epoch + 1))
        # Should the records not be written, the member is back, its session with it.
        self._commit(group, step, lambda: self._schedule_session(group.group_id, member_id))
        self._changed_at[group.group_id] = self.coordinator.clock.monotonic_ms()
        self._cancel_timers(group.group_id, member_id)

    def _fence_on_timer(self, group_id: str, member_id: str, why: str, epoch: int | None) -> None:
        group = self.coordinator.groups.get(group_id)
        if group is None or group.consumer is None:
            return
        member = group.consumer.members.get(member_id)
        if member is None or (epoch is not None and member.member_epoch != epoch):
            return
        log.info("group %s: member %s fenced: %s", group_id, member_id, why)
        self._fence(group, member_id)

    def _schedule_session(self, group_id: str, member_id: str) -> None:
        coordinator = self.coordinator
        coordinator.timers.schedule(
            ("consumer-session", group_id, member_id),
            coordinator.clock.monotonic_ms() + self._config.session_timeout_ms,
            lambda: self._fence_on_timer(group_id, member_id, "its session expired", None),
        )

    def _schedule_rebalance(self, group_id: str, member: ConsumerMember) -> None:
        coordinator = self.coordinator
        epoch = member.member_epoch
        timeout = max(member.rebalance_timeout_ms, 0)
        coordinator.timers.schedule(
            ("consumer-rebalance", group_id, member.member_id),
            coordinator.clock.monotonic_ms() + timeout,
            lambda: self._fence_on_timer(
                group_id,
                member.member_id,
                f"it did not revoke its partitions of epoch {epoch} within {timeout} ms",
                epoch,
            ),
        )

    def _cancel_timers(self, group_id: str, member_id: str) -> None:
        self.coordinator.timers.cancel(("consumer-session", group_id, member_id))
        self.coordinator.timers.cancel(("consumer-rebalance", group_id, member_id))

    # -- writing -------------------------------------------------------------------------------

    def _commit(
        self, group: Group, step: _Step, restored: Callable[[], None] = lambda: None
    ) -> None:
        """Apply the step's records now (installing a new or converted group) and ask for
        them to be written as one batch. Should the log refuse them, the group goes back to
        what it was — a copy taken before (Kafka's snapshot of its timeline structures) — and
        ``restored`` runs."""
        if not step.records:
            return
        groups = self.coordinator.groups
        group_id = group.group_id
        previous = groups.get(group_id)
        cg = group.consumer
        assert cg is not None
        before = cg.snapshot()
        state_timestamp = group.state_timestamp

        def refused(code: ErrorCode) -> None:
            log.warning("group %s: could not write its records: %s", group_id, code.name)
            cg.restore(before)
            group.state_timestamp = state_timestamp
            if groups.get(group_id) is group and previous is not group:
                if previous is None:
                    del groups[group_id]
                else:
                    groups[group_id] = previous
            restored()

        if previous is not group:
            groups[group_id] = group
        for key, value in step.records:
            if key.kind in crec.CONSUMER_GROUP_KEY_TYPES:
                cg.apply(key, value)
        if cg.state is ConsumerGroupState.EMPTY:
            group.state_timestamp = self.coordinator.clock.time_ms()
        self.coordinator.write(group_id, step.encoded(), failed=refused)

    def delete_records(self, group: Group) -> list[tuple[bytes, bytes | None]]:
        """Tombstones for everything of an empty consumer group (deletion or conversion)."""
        cg = group.consumer
        assert cg is not None
        step = _Step(group.group_id, [])
        for member_id in cg.target:
            step.delete(crec.CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER_KEY, member_id)
        step.delete(crec.CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA_KEY)
        step.delete(crec.CONSUMER_GROUP_PARTITION_METADATA_KEY)
        step.delete(crec.CONSUMER_GROUP_METADATA_KEY)
        return step.encoded()

    # -- ConsumerGroupDescribe -----------------------------------------------------------------

    def describe(self, group_id: str) -> ConsumerGroupDescription:
        status = self.coordinator.status(group_id)
        if status is not ErrorCode.none:
            return ConsumerGroupDescription(status, group_id)
        group = self.coordinator.groups.get(group_id)
        if group is None or group.consumer is None:
            message = (
                f"Group {group_id} not found."
                if group is None
                else f"Group {group_id} is not a consumer group."
            )
            return ConsumerGroupDescription(ErrorCode.group_id_not_found, group_id, message)
        cg = group.consumer
        names = {t.topic_id: n for n, t in cg.subscribed_topics.items()}

        def listed(
            assignment: crec.Assignment,
        ) -> tuple[tuple[uuid.UUID, str, tuple[int, ...]], ...]:
            return tuple(
                (t, names.get(t, ""), tuple(sorted(p))) for t, p in sorted(assignment.items()) if p
            )

        return ConsumerGroupDescription(
            ErrorCode.none,
            group_id,
            state=cg.state.value,
            group_epoch=cg.group_epoch,
            assignment_epoch=cg.assignment_epoch,
            assignor_name=self._preferred_assignor(cg.members.values()),
            members=tuple(
                DescribedConsumerMember(
                    m.member_id,
                    m.instance_id,
                    m.rack_id,
                    m.member_epoch,
                    m.client_id,
                    m.client_host,
                    m.subscribed_topic_names,
                    m.subscribed_topic_regex,
                    listed(m.assigned),
                    listed(cg.target.get(m.member_id, {})),
                )
                for m in cg.members.values()
            ),
        )

    # -- offsets -------------------------------------------------------------------------------

    def check_fetch(self, group_id: str, member_id: str | None, member_epoch: int) -> ErrorCode:
        """An OffsetFetch v9+ naming a member (Kafka's ``validateOffsetFetch``): only a
        consumer or streams group checks it — the member must be there, with its current
        epoch."""
        group = self.coordinator.groups.get(group_id)
        if group is None or (member_epoch < 0 and member_id is None):
            return ErrorCode.none
        epochs: dict[str, int]
        if group.consumer is not None:
            epochs = {m.member_id: m.member_epoch for m in group.consumer.members.values()}
        elif group.streams is not None:
            epochs = {m.member_id: m.member_epoch for m in group.streams.members.values()}
        else:
            return ErrorCode.none
        epoch = epochs.get(member_id or "")
        if epoch is None:
            return ErrorCode.unknown_member_id
        if member_epoch != epoch:
            return ErrorCode.stale_member_epoch
        return ErrorCode.none

    def check_commit(self, cg: ConsumerGroup, member_id: str, member_epoch: int) -> ErrorCode:
        """An OffsetCommit to a consumer group (Kafka's ``ConsumerGroup.validateOffsetCommit``):
        a commit from outside the group (epoch < 0, no member id) is taken only while it is
        empty; a member's must carry its current epoch."""
        if member_epoch < 0 and not member_id:
            return ErrorCode.none if not cg.members else ErrorCode.unknown_member_id
        member = cg.members.get(member_id)
        if member is None:
            return ErrorCode.unknown_member_id
        if member_epoch != member.member_epoch:
            return ErrorCode.stale_member_epoch
        return ErrorCode.none


def _check_epoch(member: ConsumerMember, request: ConsumerHeartbeatRequest) -> None:
    """Kafka's ``throwIfConsumerGroupMemberEpochIsInvalid``: a member may come with its
    previous epoch (the answer that moved it on may have been lost) if what it owns is part of
    its current assignment; any other epoch than its own fences it."""
    epoch = request.member_epoch
    if epoch > member.member_epoch:
        raise _Refused(
            ErrorCode.fenced_member_epoch,
            f"The consumer group member has a greater member epoch ({epoch}) than the one "
            f"known by the group coordinator ({member.member_epoch}). The member must abandon "
            "all its partitions and rejoin.",
        )
    if epoch < member.member_epoch:
        owned = _owned(request)
        subset = owned is not None and all(p in member.assigned.get(t, ()) for t, p in owned)
        if epoch != member.previous_member_epoch or not subset:
            raise _Refused(
                ErrorCode.fenced_member_epoch,
                f"The consumer group member has a smaller member epoch ({epoch}) than the one "
                f"known by the group coordinator ({member.member_epoch}). The member must "
                "abandon all its partitions and rejoin.",
            )


def _owned(request: ConsumerHeartbeatRequest) -> list[tuple[uuid.UUID, int]] | None:
    return None if request.owned is None else list(request.owned)


def _consumer_group(group_id: str, previous: Group | None, now_ms: int) -> Group:
    """A new :class:`Group` of the consumer type, keeping ``previous``'s committed offsets."""
    group = Group(group_id, now_ms)
    if previous is not None:
        group.offsets = previous.offsets
        group.pending_offsets = previous.pending_offsets
    group.consumer = ConsumerGroup(group_id)
    return group


def is_consumer_group_key(key: bytes) -> bool:
    return len(key) >= 2 and int.from_bytes(key[:2], "big", signed=True) in (
        crec.CONSUMER_GROUP_KEY_TYPES
    )


def _updated(member: ConsumerMember, request: ConsumerHeartbeatRequest) -> ConsumerMember:
    """The member as this heartbeat describes it: a field the request leaves out (null, or -1
    for the rebalance timeout) keeps its value."""
    return replace(
        member,
        instance_id=request.instance_id or member.instance_id,
        rack_id=request.rack_id or member.rack_id,
        rebalance_timeout_ms=(
            request.rebalance_timeout_ms
            if request.rebalance_timeout_ms != -1
            else member.rebalance_timeout_ms
        ),
        server_assignor=request.server_assignor or member.server_assignor,
        subscribed_topic_names=(
            tuple(request.subscribed_topic_names)
            if request.subscribed_topic_names is not None
            else member.subscribed_topic_names
        ),
        subscribed_topic_regex=(
            request.subscribed_topic_regex
            if request.subscribed_topic_regex is not None
            else member.subscribed_topic_regex
        ),
        client_id=request.client_id,
        client_host=request.client_host,
    )


def _put_member(
    cg: ConsumerGroup,
    step: _Step,
    member: ConsumerMember,
    updated: ConsumerMember,
    replaced: str | None,
) -> bool:
    """Write the member's metadata if it changed; whether the change bumps the group epoch
    (a new or replacing member, or a new subscription or assignor)."""
    member_id = updated.member_id
    if updated.metadata_value() == member.metadata_value() and member_id in cg.members:
        return False
    step.put(updated.metadata_value(), member_id)
    return (
        replaced is not None
        or member_id not in cg.members
        or updated.subscribed_topic_names != member.subscribed_topic_names
        or updated.subscribed_topic_regex != member.subscribed_topic_regex
        or updated.server_assignor != member.server_assignor
    )


def _reconciled(
    updated: ConsumerMember,
    target_epoch: int,
    target: crec.Assignment,
    cg: ConsumerGroup,
    request: ConsumerHeartbeatRequest,
) -> ConsumerMember:
    """The member moved as far towards its target assignment as its owned partitions allow."""
    if updated.is_reconciled_to(target_epoch):
        return updated
    try:
        return reconcile(updated, target_epoch, target, cg.partition_epoch, _owned(request))
    except FencedMember as e:
        raise _Refused(ErrorCode.fenced_member_epoch, str(e)) from e
