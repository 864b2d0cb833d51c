"""The leader's tracking of its followers for one partition: the ISR and the high watermark.

:class:`IsrTracker` is a state machine with no I/O: the leader tells it what happens (a
follower's fetch, its own appends, the ISR as ZooKeeper now holds it) and asks it what follows
(the high watermark, which followers to drop from or add to the ISR, whether a produce may be
appended and when it is committed).  It follows Kafka 3.x's ``Partition`` and ``Replica``:

- A follower's fetch offset is its log end offset.  Its *last caught-up time* is the latest
  time at which its fetch offset reached the leader's log end offset: the time of this fetch if
  it reached the leader's log end as the fetch found it, else the time of the previous fetch if
  it reached the leader's log end as that one found it.  (So a follower that always fetches
  right behind a busy leader stays caught up.)
- A follower is caught up while its log end equals the leader's or its last caught-up time is
  at most ``replica.lag.time.max.ms`` ago.  An ISR member that is not is a shrink candidate.
- An ISR member that fetches from below the high watermark has lost committed records (its
  recovery truncated a corrupt tail after a crash): it is not caught up from that fetch on,
  whatever it was before, and the caller shrinks the ISR at once rather than at the next
  periodic check, so it cannot be elected with that log (the hazard of Kafka's KIP-903).
- A follower outside the ISR that has fetched in this leadership, and whose log end offset has
  reached both the high watermark and the start of the leader's current epoch, is an expand
  candidate (before that epoch, it could miss committed data if it became leader).
- The high watermark is the smallest log end offset among the leader and the followers in the
  *maximal* ISR (the ISR, plus a follower whose joining is proposed but not yet confirmed,
  KIP-497), and among the caught-up followers not yet in it (so one about to join is not left
  behind); it only moves forward.
- ``min.insync.replicas``: an ``acks=all`` produce is refused before the append when the ISR is
  smaller (NOT_ENOUGH_REPLICAS), and answered NOT_ENOUGH_REPLICAS_AFTER_APPEND when its records
  are committed but the maximal ISR has shrunk below it meanwhile.
- With eligible leader replicas (KIP-966, ``eligible_leader_replicas``) the high watermark does
  not move while the maximal ISR is smaller than ``min.insync.replicas`` (or the replication
  factor, if smaller): what left the ISR then still holds every committed record, which is
  what makes it electable.

ISR changes go through ZooKeeper, by the caller: :meth:`IsrTracker.propose_shrink` and
:meth:`IsrTracker.propose_expand` return the ISR to write, with the znode version to
compare-and-set against; while it is in flight no other change is proposed.  The caller then
reports the ISR ZooKeeper holds (:meth:`IsrTracker.isr_updated`, after its write or a watch) or
that the write lost (:meth:`IsrTracker.proposal_failed`).

Format: nothing on disk; the ISR lives in the partition's state znode
(``/brokers/topics/<topic>/partitions/<partition>/state``), which the caller reads and writes.
Crash: the state is lost with the process; the next leader starts from the ISR in ZooKeeper,
with every follower's log end unknown and the ISR members counted as caught up from that
moment.  Caller: the partition this broker leads, on the event-loop thread; times come from the
injected clock's ``monotonic_ms``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace

from odradek.clock import Clock
from odradek.protocol.errors import ErrorCode

UNKNOWN_OFFSET = -1


@dataclass(slots=True)
class FollowerState:
    """What the leader knows of one follower; times by the clock's ``monotonic_ms``, None for
    never. Updated in place by each of its fetches (one per partition per fetch: a new object
    each time cost a leader serving many partitions more than the rest of the update)."""

    log_end_offset: int = UNKNOWN_OFFSET
    # The leader's log end offset when the last fetch arrived, and when that was: the previous
    # fetch's share of the caught-up rule.
    last_fetch_leader_log_end_offset: int = UNKNOWN_OFFSET
    last_fetch_ms: int | None = None
    last_caught_up_ms: int | None = None


@dataclass(frozen=True, slots=True)
class IsrProposal:
    """An ISR to write to the partition's state znode, if its version is still ``zk_version``
    (and its leader epoch still ``leader_epoch``)."""

    isr: tuple[int, ...]
    leader_epoch: int
    zk_version: int


@dataclass(frozen=True, slots=True)
class AcksAllOutcome:
    """Where an ``acks=all`` produce stands: ``done`` once its records are committed, with
    ``error`` ``none`` or NOT_ENOUGH_REPLICAS_AFTER_APPEND."""

    done: bool
    error: ErrorCode = ErrorCode.none


WAITING = AcksAllOutcome(False)


class IsrTracker:
    """The leader's view of one partition's followers, ISR and high watermark (see the module
    doc).  Created when this broker becomes the partition's leader."""

    def __init__(
        self,
        clock: Clock,
        *,
        leader_id: int,
        replicas: Iterable[int],
        isr: Iterable[int],
        leader_epoch: int,
        zk_version: int,
        leader_epoch_start_offset: int,
        log_end_offset: int,
        high_watermark: int,
        replica_lag_time_max_ms: int,
        min_insync_replicas: int,
    ) -> None:
        """``leader_epoch_start_offset`` is the leader's log end offset when it took up
        ``leader_epoch`` (and assigned it in its epoch cache); ``high_watermark`` the one it
        had before (checkpointed, or the follower's)."""
        self._clock = clock
        self.leader_id = leader_id
        self.replica_lag_time_max_ms = replica_lag_time_max_ms
        self.min_insync_replicas = min_insync_replicas
        # KIP-966: set by the partition when the cluster finalizes eligible leader replicas.
        self.eligible_leader_replicas = False
        self._isr = frozenset(isr)
        self._leader_epoch = leader_epoch
        self._zk_version = zk_version
        self._leader_epoch_start_offset = leader_epoch_start_offset
        self._leader_log_end_offset = log_end_offset
        self._high_watermark = min(high_watermark, log_end_offset)
        self._pending: IsrProposal | None = None
        now = clock.monotonic_ms()
        # A new leader knows nothing of its followers' logs; the ISR members count as caught
        # up now, so that they have replica.lag.time.max.ms to show they still are.
        self._followers = {
            replica: FollowerState(last_caught_up_ms=now if replica in self._isr else None)
            for replica in replicas
            if replica != leader_id
        }
        self._advance_high_watermark()

    # -- state -----------------------------------------------------------------------------------

    @property
    def high_watermark(self) -> int:
        return self._high_watermark

    @property
    def isr(self) -> frozenset[int]:
        """The ISR as ZooKeeper last confirmed it."""
        return self._isr

    @property
    def maximal_isr(self) -> frozenset[int]:
        """The ISR and a proposed addition not yet confirmed (a proposed removal does not count
        until it is): what the high watermark and ``acks=all`` go by."""
        if self._pending is None:
            return self._isr
        return self._isr | frozenset(self._pending.isr)

    @property
    def pending(self) -> IsrProposal | None:
        """The ISR change in flight, if any."""
        return self._pending

    @property
    def leader_epoch(self) -> int:
        return self._leader_epoch

    @property
    def zk_version(self) -> int:
        return self._zk_version

    def follower(self, replica_id: int) -> FollowerState:
        return self._followers[replica_id]

    def _caught_up(self, state: FollowerState, now: int) -> bool:
        return state.log_end_offset == self._leader_log_end_offset or (
            state.last_caught_up_ms is not None
            and now - state.last_caught_up_ms <= self.replica_lag_time_max_ms
        )

    # -- events ----------------------------------------------------------------------------------

    def follower_fetched(
        self, replica_id: int, fetch_offset: int, leader_log_end_offset: int
    ) -> bool:
        """A fetch from follower ``replica_id`` at ``fetch_offset`` (its log end offset),
        arriving when the leader's log ended at ``leader_log_end_offset``.  Returns whether the
        high watermark moved.  KeyError for a replica not assigned to the partition."""
        state = self._followers[replica_id]
        now = self._clock.monotonic_ms()
        caught_up = state.last_caught_up_ms
        if fetch_offset >= leader_log_end_offset:
            caught_up = now
        elif self.has_lost_committed(replica_id, fetch_offset):
            # Its log ends below the high watermark, which no ISR member's log can do unless
            # it lost records since it was counted in sync (a crash whose recovery truncated a
            # corrupt tail). Its earlier catching up says nothing of the log it has now: it is
            # not caught up from this fetch on, and leaves the ISR at the next check, before it
            # can be elected with a log that misses committed records (KIP-903's case).
            caught_up = None
        elif (
            state.last_fetch_ms is not None
            and state.last_fetch_leader_log_end_offset != UNKNOWN_OFFSET
            and fetch_offset >= state.last_fetch_leader_log_end_offset
        ):
            caught_up = state.last_fetch_ms
        if (
            state.last_caught_up_ms is not None
            and caught_up is not None
            and fetch_offset >= self._high_watermark
        ):
            caught_up = max(caught_up, state.last_caught_up_ms)
        unmoved = (
            fetch_offset == state.log_end_offset
            and leader_log_end_offset <= self._leader_log_end_offset
        )
        state.log_end_offset = fetch_offset
        if leader_log_end_offset > state.last_fetch_leader_log_end_offset:
            state.last_fetch_leader_log_end_offset = leader_log_end_offset
        state.last_fetch_ms = now
        state.last_caught_up_ms = caught_up
        if leader_log_end_offset > self._leader_log_end_offset:
            self._leader_log_end_offset = leader_log_end_offset
        if unmoved and self._isr.issuperset(self._followers):
            # Nothing the high watermark depends on moved: every log end counts (all in the
            # ISR, so none by the clock) and none changed (the leader's own appends advanced
            # it already). A follower polling an idle partition, the common case of a fetch
            # over many partitions, costs no more (Kafka also looks only on a moved log end).
            return False
        return self._advance_high_watermark()

    def has_lost_committed(self, replica_id: int, fetch_offset: int) -> bool:
        """Whether ISR member ``replica_id``, fetching from ``fetch_offset``, misses records
        below the high watermark: committed records it once had, since the high watermark never
        passes an ISR member's log end."""
        return replica_id in self._isr and fetch_offset < self._high_watermark

    def leader_appended(self, log_end_offset: int) -> bool:
        """The leader's log now ends at ``log_end_offset``.  Returns whether the high watermark
        moved (it does when the leader is alone in the ISR)."""
        self._leader_log_end_offset = max(self._leader_log_end_offset, log_end_offset)
        if not self._followers:
            # One replica (every partition of a lone broker): the log end is the high
            # watermark, without the clock or the loop below (this runs on every produce).
            if log_end_offset > self._high_watermark:
                self._high_watermark = log_end_offset
                return True
            return False
        return self._advance_high_watermark()

    def isr_updated(self, isr: Iterable[int], *, leader_epoch: int, zk_version: int) -> bool:
        """The partition state znode now holds ``isr`` at ``zk_version`` (the caller's write
        went through, or a watch or re-read saw it).  A state older than the one known (a lower
        leader epoch or znode version) is ignored.  Ends any change in flight.  Returns whether
        the high watermark moved."""
        if (leader_epoch, zk_version) < (self._leader_epoch, self._zk_version):
            return False
        self._isr = frozenset(isr)
        self._leader_epoch = leader_epoch
        self._zk_version = zk_version
        self._pending = None
        return self._advance_high_watermark()

    def replicas_changed(self, replicas: Iterable[int]) -> bool:
        """The partition's assignment changed within a leadership (a reassignment adding or
        removing replicas): new followers start unknown, as never caught up, and the removed
        ones no longer count. Returns whether the high watermark moved."""
        followers: dict[int, FollowerState] = {}
        for replica in replicas:
            if replica != self.leader_id:
                followers[replica] = self._followers.get(replica, FollowerState())
        self._followers = followers
        return self._advance_high_watermark()

    def proposal_failed(self) -> None:
        """The proposed ISR was not written (the znode changed meanwhile): forget it.  The
        caller re-reads the znode and reports it with :meth:`isr_updated`, or gives up the
        leadership if it has passed on."""
        self._pending = None

    def reelected(
        self,
        *,
        replicas: Iterable[int],
        isr: Iterable[int],
        leader_epoch: int,
        zk_version: int,
        leader_epoch_start_offset: int,
        log_end_offset: int,
    ) -> bool:
        """This broker leads again, in a new ``leader_epoch``: followers keep their log end
        offsets, ISR members count as caught up (and as having fetched) now, the others as never
        caught up, so that none enters the ISR before it fetches again.  Returns whether the
        high watermark moved."""
        now = self._clock.monotonic_ms()
        self._isr = frozenset(isr)
        self._leader_epoch = leader_epoch
        self._zk_version = zk_version
        self._pending = None
        self._leader_epoch_start_offset = leader_epoch_start_offset
        self._leader_log_end_offset = max(self._leader_log_end_offset, log_end_offset)
        followers: dict[int, FollowerState] = {}
        for replica in replicas:
            if replica == self.leader_id:
                continue
            in_sync = replica in self._isr
            followers[replica] = replace(
                self._followers.get(replica, FollowerState()),
                last_fetch_leader_log_end_offset=self._leader_log_end_offset,
                last_fetch_ms=now if in_sync else None,
                last_caught_up_ms=now if in_sync else None,
            )
        self._followers = followers
        return self._advance_high_watermark()

    def _advance_high_watermark(self) -> bool:
        now = self._clock.monotonic_ms()
        maximal = self.maximal_isr
        if self.eligible_leader_replicas and len(maximal) < min(
            self.min_insync_replicas, 1 + len(self._followers)
        ):
            return False
        candidate = self._leader_log_end_offset
        for replica, state in self._followers.items():
            if state.log_end_offset < candidate and (
                replica in maximal or self._caught_up(state, now)
            ):
                candidate = state.log_end_offset
        if candidate > self._high_watermark:
            self._high_watermark = candidate
            return True
        return False

    # -- ISR changes -----------------------------------------------------------------------------

    def shrink_candidates(self) -> frozenset[int]:
        """ISR members not caught up for more than ``replica.lag.time.max.ms`` (none while a
        change is in flight)."""
        if self._pending is not None:
            return frozenset()
        now = self._clock.monotonic_ms()
        return frozenset(
            replica
            for replica in self._isr - {self.leader_id}
            if replica not in self._followers or not self._caught_up(self._followers[replica], now)
        )

    def expand_candidates(self) -> frozenset[int]:
        """Followers outside the ISR that have fetched since this leadership began and whose
        log end offset has reached the high watermark and the start of the leader's epoch (none
        while a change is in flight)."""
        if self._pending is not None:
            return frozenset()
        floor = max(self._high_watermark, self._leader_epoch_start_offset)
        # A log end offset known from an earlier leadership is no sign of life: the follower
        # may have died since (Kafka adds a follower only on a fetch of its own).
        return frozenset(
            replica
            for replica, state in self._followers.items()
            if replica not in self._isr
            and state.last_fetch_ms is not None
            and state.log_end_offset >= floor
        )

    def propose_shrink(self) -> IsrProposal | None:
        """The ISR without its shrink candidates, now in flight; None if there are none."""
        out = self.shrink_candidates()
        return self._propose(self._isr - out) if out else None

    def propose_expand(self) -> IsrProposal | None:
        """The ISR with its expand candidates, now in flight; None if there are none."""
        joining = self.expand_candidates()
        return self._propose(self._isr | joining) if joining else None

    def _propose(self, isr: frozenset[int]) -> IsrProposal:
        self._pending = IsrProposal(tuple(sorted(isr)), self._leader_epoch, self._zk_version)
        return self._pending

    # -- producing -------------------------------------------------------------------------------

    def append_error(self, required_acks: int) -> ErrorCode | None:
        """NOT_ENOUGH_REPLICAS for an ``acks=all`` produce while the ISR is smaller than
        ``min.insync.replicas`` (checked before the append), else None."""
        if required_acks == -1 and len(self._isr) < self.min_insync_replicas:
            return ErrorCode.not_enough_replicas
        return None

    def is_committed(self, offset: int) -> bool:
        """Whether the record at ``offset`` is below the high watermark."""
        return self._high_watermark > offset

    def acks_all_outcome(self, last_offset: int) -> AcksAllOutcome:
        """Where an ``acks=all`` produce whose records end at ``last_offset`` stands (Kafka's
        checkEnoughReplicasReachOffset): waiting until they are committed, then done, with
        NOT_ENOUGH_REPLICAS_AFTER_APPEND if the maximal ISR is below ``min.insync.replicas``."""
        if not self.is_committed(last_offset):
            return WAITING
        if len(self.maximal_isr) < self.min_insync_replicas:
            return AcksAllOutcome(True, ErrorCode.not_enough_replicas_after_append)
        return AcksAllOutcome(True)
