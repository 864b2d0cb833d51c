"""The cluster controller's decisions: facts in, partition-state writes out (no ZooKeeper, no I/O).

In a ZooKeeper cluster one broker, elected through ``/controller``, decides every partition's
leader and ISR and writes them to ``/brokers/topics/<topic>/partitions/<p>/state``, a JSON object
``{"controller_epoch": int, "leader": int, "version": 1, "leader_epoch": int, "isr": [int]}``,
with a compare-and-set on the znode's version. This module is that controller's logic in Kafka's
ZooKeeper-era shape (``KafkaController``, ``PartitionStateMachine``, ``ReplicaStateMachine``,
``PartitionLeaderElectionAlgorithms``); the shell that owns the ZooKeeper session reads the facts,
feeds them in as events, and applies the returned ``PartitionStateWrite``s:

- a write with ``expected_version=None`` creates the znode (it must not exist yet); any other
  write is a ``set`` conditional on that version. ``write.state`` is exactly what the znode holds
  afterwards, its ``version`` included (ZooKeeper's: 0 on create, +1 per set).
- on success the shell calls ``write_applied``; on a version conflict (a leader changed the ISR
  meanwhile, or the znode already exists) it reads the znode again and calls ``write_conflicted``
  with what it read, which answers the writes to try instead (the same decision taken again on
  the fresh state, as Kafka's controller retries on BADVERSION).
- events are handled one at a time, and every write of one event applied (with its retries)
  before the next event is fed: Kafka's controller has a single event thread for the same reason.
  Each event gives at most one write per partition.

The controller bumps ``leader_epoch`` with every leader or ISR change it makes; a leader's own
ISR change (``alter_partition``) keeps the epoch and only moves the znode version, as in Kafka.
Partition reassignment (AlterPartitionReassignments, KIP-455, as Kafka's ZooKeeper controller
does it): a partition moving from its original replicas ORS to target replicas TRS is assigned
RS = TRS + (ORS - TRS) with the adding replicas AR = TRS - ORS and the removing replicas
RR = ORS - TRS, all three in its topic znode (an :class:`AssignmentWrite`). The brokers in AR open
the partition and fetch from its leader. Once every target replica is in the ISR,
:meth:`ControllerState.reassignment_steps` moves the leader into TRS if it is not there (leader
epoch bumped), then answers the assignment write RS = TRS; the brokers left out delete their
replicas when they see it, and :meth:`ControllerState.assignment_applied` takes them out of the
ISR (epoch bumped). A cancellation (a null target) is a reassignment back to ORS. A new
controller finds reassignments in progress from the topic znodes' adding and removing replicas.

A broker whose log dir fails (KIP-112) names the partitions it held there
(:meth:`ControllerState.log_dir_failed`): those replicas are offline, as if their broker were
dead for those partitions alone, until the broker registers again (a restart, which Kafka also
requires to bring a dir back): leaders move to other in-sync replicas and the replicas leave the
ISRs. A new controller does not learn of offline replicas; it need not, since they are out of
the ISRs already and their broker neither fetches nor leads them until it restarts.

Kafka never empties an ISR: when the last in-sync replica dies the partition goes offline
(leader -1) with that replica still listed, so that it, and only it (unless
``unclean.leader.election.enable``), can lead again.

Crash: nothing here is durable. A controller that dies loses its cache; the next one is built
with ``ControllerState.elected`` from what ZooKeeper holds, with the controller epoch one higher
(the shell stores it in ``/controller_epoch``), and answers the writes that bring the cluster back
in line (leaders on brokers that died meanwhile, dead ISR members). A write of a controller with
an older epoch is refused: the state read back carries a higher ``controller_epoch``.

Who calls: the controller shell, on its one event loop, never from kazoo's threads.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import Enum

from odradek.clock import Clock
from odradek.cluster.metadata.store import PartitionState
from odradek.config import TOPIC_CONFIGS
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.topic_partition import TopicPartition

NO_LEADER = -1
UNCLEAN_LEADER_ELECTION = "unclean.leader.election.enable"
MIN_INSYNC_REPLICAS = "min.insync.replicas"
# Kafka schedules the first automatic leader rebalance this long after a controller takes over.
FIRST_REBALANCE_DELAY_MS = 5_000


class Reason(Enum):
    """Why the controller writes: on a version conflict the same decision is taken again."""

    NEW_PARTITION = "new partition"
    BROKER_CHANGE = "brokers came or went"
    PREFERRED_ELECTION = "preferred replica election"
    CONTROLLED_SHUTDOWN = "controlled shutdown"
    ALTER_PARTITION = "leader's ISR change"
    REASSIGNMENT = "partition reassignment"
    UNCLEAN_ELECTION = "unclean leader election"
    LOG_DIR_FAILURE = "log dir failure"


@dataclass(frozen=True, slots=True)
class PartitionStateWrite:
    """One znode write: create (``expected_version`` None) or set if at ``expected_version``."""

    partition: TopicPartition
    state: PartitionState
    expected_version: int | None
    reason: Reason


@dataclass(frozen=True, slots=True)
class Reassignment:
    """A partition moving from its ``original`` replicas (ORS) to its ``target`` ones (TRS)."""

    original: tuple[int, ...]
    target: tuple[int, ...]

    @property
    def replicas(self) -> tuple[int, ...]:
        """RS, what the topic znode assigns meanwhile: the target first (its first replica is
        the preferred leader), then the replicas on their way out."""
        return self.target + tuple(r for r in self.original if r not in self.target)

    @property
    def adding(self) -> tuple[int, ...]:
        return tuple(r for r in self.target if r not in self.original)

    @property
    def removing(self) -> tuple[int, ...]:
        return tuple(r for r in self.original if r not in self.target)

    @classmethod
    def from_assignment(
        cls, replicas: Sequence[int], adding: Sequence[int], removing: Sequence[int]
    ) -> Reassignment:
        """What a topic znode's ``replicas``, ``adding_replicas`` and ``removing_replicas``
        say (how a new controller picks up a reassignment)."""
        return cls(
            tuple(r for r in replicas if r not in adding),
            tuple(r for r in replicas if r not in removing),
        )


@dataclass(frozen=True, slots=True)
class AssignmentWrite:
    """One partition's entry in its topic znode: ``replicas`` (RS) and, while it moves, the
    replicas being added and removed (both empty once it is done)."""

    partition: TopicPartition
    replicas: tuple[int, ...]
    adding: tuple[int, ...] = ()
    removing: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class ReassignmentResult:
    """AlterPartitionReassignments' answer for one partition."""

    error: ErrorCode
    message: str | None = None


@dataclass(frozen=True, slots=True)
class ReassignOutcome:
    """What :meth:`ControllerState.reassign` decided: each partition's answer, and the topic
    znode assignments to write before answering."""

    results: Mapping[TopicPartition, ReassignmentResult]
    assignments: list[AssignmentWrite]


@dataclass(frozen=True, slots=True)
class ReassignmentSteps:
    """What moves reassignments on: leaders to move into their targets first (``states``),
    then the assignments of the partitions whose targets are all in sync (``assignments``)."""

    states: list[PartitionStateWrite]
    assignments: list[AssignmentWrite]


@dataclass(frozen=True, slots=True)
class TopicDeletion:
    """A deleted topic's partitions and, per broker, the replicas it hosted."""

    topic: str
    partitions: tuple[TopicPartition, ...]
    replicas: Mapping[int, tuple[TopicPartition, ...]]


@dataclass(frozen=True, slots=True)
class ElectionResult:
    """ElectLeaders' answer for one partition: NONE with the new leader, or Kafka's error."""

    error: ErrorCode
    leader: int = NO_LEADER
    message: str | None = None


@dataclass(frozen=True, slots=True)
class ElectLeadersOutcome:
    results: Mapping[TopicPartition, ElectionResult]
    writes: list[PartitionStateWrite]


@dataclass(frozen=True, slots=True)
class ControlledShutdownOutcome:
    """The writes moving leadership away, and the partitions with other replicas that the broker
    will still lead after them (ControlledShutdown's answer: the broker retries while this is not
    empty; a partition with no other replica cannot move, and is not named, as in Kafka)."""

    writes: list[PartitionStateWrite]
    still_led: frozenset[TopicPartition]


@dataclass(frozen=True, slots=True)
class AlterPartitionOutcome:
    """A leader's ISR change: refused with ``error``, or accepted as ``write`` (None when the
    state already is the one proposed; ``state`` is then the current one)."""

    error: ErrorCode
    write: PartitionStateWrite | None = None
    state: PartitionState | None = None


@dataclass(slots=True)
class _Batch:
    """The writes of one event, at most one per partition."""

    writes: dict[TopicPartition, PartitionStateWrite] = field(default_factory=dict)

    def result(self) -> list[PartitionStateWrite]:
        return [self.writes[tp] for tp in sorted(self.writes)]


Decision = Callable[[TopicPartition, PartitionState], "PartitionState | None"]


class ControllerState:
    """The active controller's picture of the cluster and its decisions on every change.

    Holds the live brokers, those in controlled shutdown, every topic's assignment and config
    overrides, and the partition states as last read or written (a written state is cached as
    soon as it is decided, with the version it is expected to replace: -1 for a create).
    Settings are Kafka's broker configs of the same names; ``unclean.leader.election.enable``
    in a topic's configs overrides the broker's.
    """

    def __init__(
        self,
        controller_epoch: int,
        clock: Clock,
        *,
        live_brokers: Iterable[int] = (),
        unclean_leader_election_enable: bool = False,
        auto_leader_rebalance_enable: bool = True,
        leader_imbalance_per_broker_percentage: int = 10,
        leader_imbalance_check_interval_seconds: int = 300,
        eligible_leader_replicas: bool = False,
        min_insync_replicas: int = 1,
    ) -> None:
        self.controller_epoch = controller_epoch
        # KIP-966 (the eligible.leader.replicas.version feature), and the broker's
        # min.insync.replicas that topics without an override have.
        self.eligible_leader_replicas = eligible_leader_replicas
        self.min_insync_replicas = min_insync_replicas
        self._clock = clock
        self._live: set[int] = set(live_brokers)
        # Each live broker's epoch (its registration's zxid), where the shell knows them.
        self._broker_epochs: dict[int, int] = {}
        self._shutting_down: set[int] = set()
        self._assignments: dict[str, dict[int, tuple[int, ...]]] = {}
        self._topic_configs: dict[str, dict[str, str]] = {}
        self._states: dict[TopicPartition, PartitionState] = {}
        self._reassigning: dict[TopicPartition, Reassignment] = {}
        # Replicas in a failed log dir of a live broker, by partition (KIP-112).
        self._offline_replicas: dict[TopicPartition, frozenset[int]] = {}
        self.unclean_leader_election_enable = unclean_leader_election_enable
        self.auto_leader_rebalance_enable = auto_leader_rebalance_enable
        self.leader_imbalance_per_broker_percentage = leader_imbalance_per_broker_percentage
        self.leader_imbalance_check_interval_ms = leader_imbalance_check_interval_seconds * 1000
        self.next_rebalance_check_ms = clock.monotonic_ms() + FIRST_REBALANCE_DELAY_MS

    # -- taking over -------------------------------------------------------------------------

    @classmethod
    def elected(
        cls,
        previous_controller_epoch: int,
        clock: Clock,
        *,
        live_brokers: Iterable[int],
        assignments: Mapping[str, Mapping[int, Sequence[int]]],
        states: Mapping[TopicPartition, PartitionState],
        topic_configs: Mapping[str, Mapping[str, str]] | None = None,
        reassignments: Mapping[TopicPartition, Reassignment] | None = None,
        broker_epochs: Mapping[int, int] | None = None,
        unclean_leader_election_enable: bool = False,
        auto_leader_rebalance_enable: bool = True,
        leader_imbalance_per_broker_percentage: int = 10,
        leader_imbalance_check_interval_seconds: int = 300,
        eligible_leader_replicas: bool = False,
        min_insync_replicas: int = 1,
    ) -> tuple[ControllerState, list[PartitionStateWrite]]:
        """A new controller, from everything ZooKeeper holds, and the writes it must make first.

        ``previous_controller_epoch`` is ``/controller_epoch`` as read (0 when absent); the new
        controller's epoch is one higher. Partitions without a state znode get their first one,
        leaders on brokers that are gone are replaced and dead brokers leave the ISRs.
        ``reassignments`` are those the topic znodes show in progress (their ``replicas`` must
        be what ``assignments`` holds); :meth:`reassignment_steps` carries them on.

        ``broker_epochs`` (each live broker's registration zxid) with the states' written zxids
        tell the ISR members that registered again after their state was written: brokers that
        restarted while no controller watched, so nobody took them out of the ISR, and whose
        logs may have lost records in a truncating recovery. While another live member has been
        registered since before the write, they are no longer counted in sync (Kafka's KIP-903
        fences the same replicas by broker epoch).
        """
        controller = cls(
            previous_controller_epoch + 1,
            clock,
            live_brokers=live_brokers,
            unclean_leader_election_enable=unclean_leader_election_enable,
            auto_leader_rebalance_enable=auto_leader_rebalance_enable,
            leader_imbalance_per_broker_percentage=leader_imbalance_per_broker_percentage,
            leader_imbalance_check_interval_seconds=leader_imbalance_check_interval_seconds,
            eligible_leader_replicas=eligible_leader_replicas,
            min_insync_replicas=min_insync_replicas,
        )
        controller._broker_epochs = dict(broker_epochs or {})
        for topic, assignment in assignments.items():
            controller._assignments[topic] = {p: tuple(r) for p, r in assignment.items()}
            controller._topic_configs[topic] = dict((topic_configs or {}).get(topic, {}))
        for tp, state in states.items():
            if state.controller_epoch > controller.controller_epoch:
                raise KafkaError(
                    ErrorCode.not_controller,
                    f"{tp} was written by controller epoch {state.controller_epoch}",
                )
            if controller._replicas(tp):
                controller._states[tp] = state
        for tp, reassignment in (reassignments or {}).items():
            if controller._replicas(tp) == reassignment.replicas and (
                reassignment.adding or reassignment.removing
            ):
                controller._reassigning[tp] = reassignment
        batch = _Batch()
        controller._bring_online(batch, controller._all_partitions())
        return controller, batch.result()

    # -- what the controller knows -----------------------------------------------------------

    @property
    def live_brokers(self) -> frozenset[int]:
        return frozenset(self._live)

    @property
    def shutting_down(self) -> frozenset[int]:
        return frozenset(self._shutting_down)

    @property
    def topics(self) -> frozenset[str]:
        return frozenset(self._assignments)

    def assignment(self, topic: str) -> dict[int, tuple[int, ...]]:
        return dict(self._assignments[topic])

    def state(self, tp: TopicPartition) -> PartitionState | None:
        """The partition's state; None while it has none (created with no replica alive)."""
        return self._states.get(tp)

    def leader(self, tp: TopicPartition) -> int:
        state = self._states.get(tp)
        return NO_LEADER if state is None else state.leader

    def partitions_led_by(self, broker: int) -> frozenset[TopicPartition]:
        return frozenset(tp for tp, s in self._states.items() if s.leader == broker)

    def replicated_partitions_led_by(self, broker: int) -> frozenset[TopicPartition]:
        """What ``broker`` leads among the partitions whose leadership could move: another
        replica in the ISR is live and not shutting down. (Kafka also counts partitions whose
        other replicas are all down, and a stopping broker retries for them in vain: when a
        whole cluster stops, its last broker would wait out every retry.)"""
        movable = self._live - self._shutting_down - {broker}
        return frozenset(
            tp
            for tp, s in self._states.items()
            if s.leader == broker and movable.intersection(s.isr)
        )

    def offline_partitions(self) -> frozenset[TopicPartition]:
        return frozenset(tp for tp in self._all_partitions() if self.leader(tp) == NO_LEADER)

    # -- topics ------------------------------------------------------------------------------

    def add_topic(
        self,
        topic: str,
        assignment: Mapping[int, Sequence[int]],
        configs: Mapping[str, str] | None = None,
    ) -> list[PartitionStateWrite]:
        """A topic appeared under ``/brokers/topics``: first states for its partitions.

        Leader: the first live replica in assignment order; ISR: the live replicas; epoch 0. A
        partition with no live replica gets no state yet, as in Kafka; it is created when one of
        its replicas' brokers registers.
        """
        if topic in self._assignments:
            raise ValueError(f"topic {topic!r} is already known")
        self._assignments[topic] = {p: tuple(r) for p, r in assignment.items()}
        self._topic_configs[topic] = dict(configs or {})
        batch = _Batch()
        self._bring_online(batch, self._partitions_of(topic))
        return batch.result()

    def add_partitions(
        self, topic: str, added: Mapping[int, Sequence[int]]
    ) -> list[PartitionStateWrite]:
        """CreatePartitions extended the topic's assignment with ``added``."""
        current = self._assignments[topic]
        clash = sorted(set(added) & set(current))
        if clash:
            raise ValueError(f"partitions {clash} of {topic!r} already exist")
        current.update({p: tuple(r) for p, r in added.items()})
        batch = _Batch()
        self._bring_online(batch, [TopicPartition(topic, p) for p in sorted(added)])
        return batch.result()

    def set_topic_configs(
        self, topic: str, configs: Mapping[str, str]
    ) -> list[PartitionStateWrite]:
        """The topic's config overrides changed (``/config/topics/<topic>``).

        Enabling unclean leader election brings the topic's offline partitions back at once.
        """
        self._topic_configs[topic] = dict(configs)
        batch = _Batch()
        self._bring_online(batch, self._partitions_of(topic))
        return batch.result()

    def delete_topic(self, topic: str) -> TopicDeletion:
        """Forget a topic the store no longer holds (the metadata store removes the znodes, the
        brokers their replicas)."""
        if topic not in self._assignments:
            raise KafkaError(ErrorCode.unknown_topic_or_partition, f"no topic {topic!r}")
        partitions = tuple(self._partitions_of(topic))
        replicas: dict[int, list[TopicPartition]] = {}
        for tp in partitions:
            for broker in self._replicas(tp):
                replicas.setdefault(broker, []).append(tp)
            self._states.pop(tp, None)
            self._reassigning.pop(tp, None)
        del self._assignments[topic]
        self._topic_configs.pop(topic, None)
        return TopicDeletion(
            topic,
            partitions,
            {b: tuple(tps) for b, tps in sorted(replicas.items())},
        )

    # -- brokers -----------------------------------------------------------------------------

    def brokers_changed(
        self,
        live: Iterable[int],
        bounced: Iterable[int] = (),
        broker_epochs: Mapping[int, int] | None = None,
    ) -> list[PartitionStateWrite]:
        """``/brokers/ids`` now lists ``live``; ``bounced`` re-registered with a new session
        (they died and came back between two reads, so count as both). ``broker_epochs``: the
        live brokers' registration zxids, where known."""
        if broker_epochs is not None:
            self._broker_epochs = dict(broker_epochs)
        live_now = set(live)
        bounced_set = set(bounced) & live_now
        gone = (self._live - live_now) | bounced_set
        new = (live_now - self._live) | bounced_set
        if gone | new and self._offline_replicas:
            # A broker that died or registered again has its log dirs checked anew.
            self._offline_replicas = {
                tp: left
                for tp, brokers in self._offline_replicas.items()
                if (left := brokers - gone - new)
            }
        batch = _Batch()
        if gone:
            self._live -= gone
            self._shutting_down -= gone
            self._bring_online(batch, self._all_partitions())
        if new:
            self._live |= new
            self._shutting_down -= new
            self._bring_online(batch, self._all_partitions())
        return batch.result()

    def brokers_failed(self, brokers: Iterable[int]) -> list[PartitionStateWrite]:
        """Registrations gone: new leaders from the ISR for what they led, and out of every ISR."""
        return self.brokers_changed(self._live - set(brokers))

    def brokers_started(self, brokers: Iterable[int]) -> list[PartitionStateWrite]:
        """Registrations appeared: offline partitions whose replicas came back get a leader."""
        return self.brokers_changed(self._live | set(brokers))

    def log_dir_failed(
        self, broker: int, partitions: Iterable[TopicPartition]
    ) -> list[PartitionStateWrite]:
        """A log dir of ``broker`` failed, holding its replicas of ``partitions`` (Kafka's
        ``onBrokerLogDirFailure``): they are offline until the broker registers again, so
        another in-sync replica leads what it led, and they leave the ISRs (a partition with
        no other in-sync replica has no leader, its ISR keeping its last member)."""
        batch = _Batch()
        for tp in partitions:
            if broker not in self._replicas(tp) or broker not in self._live:
                continue
            self._offline_replicas[tp] = self._offline_replicas.get(tp, frozenset()) | {broker}
            state = self._states.get(tp)
            if state is not None:
                self._decide(batch, tp, state, self._reconciled, Reason.LOG_DIR_FAILURE)
        return batch.result()

    def offline_replicas(self, tp: TopicPartition) -> frozenset[int]:
        """The replicas of ``tp`` in a failed log dir of a live broker."""
        return self._offline_replicas.get(tp, frozenset())

    def controlled_shutdown(self, broker: int) -> ControlledShutdownOutcome:
        """A broker asks to stop: leadership moves to other live ISR members, and it leaves the
        ISRs it follows in. It no longer counts as live for elections or ISRs until it stops
        (its registration goes) or registers again."""
        if broker not in self._live:
            raise KafkaError(ErrorCode.broker_not_available, f"Broker id {broker} does not exist.")
        self._shutting_down.add(broker)
        batch = _Batch()
        for tp in self._all_partitions():
            state = self._states.get(tp)
            if state is not None and broker in (state.leader, *state.isr):
                self._decide(
                    batch, tp, state, self._moved_off_shutting_down, Reason.CONTROLLED_SHUTDOWN
                )
        return ControlledShutdownOutcome(batch.result(), self.replicated_partitions_led_by(broker))

    # -- preferred replicas ------------------------------------------------------------------

    def elect_preferred(
        self, partitions: Iterable[TopicPartition] | None = None
    ) -> ElectLeadersOutcome:
        """ElectLeaders (preferred) on ``partitions``, every partition when None."""
        return self._elect(
            partitions,
            lambda state, replicas: state.leader == replicas[0],
            self._preferred,
            Reason.PREFERRED_ELECTION,
            lambda tp, replicas: ElectionResult(
                ErrorCode.preferred_leader_not_available,
                message=f"preferred replica {replicas[0]} of {tp} is not alive and in sync",
            ),
        )

    def elect_unclean(
        self, partitions: Iterable[TopicPartition] | None = None
    ) -> ElectLeadersOutcome:
        """ElectLeaders (unclean, KIP-460) on ``partitions``, every partition when None: a
        partition without a leader gets the first live replica of its ISR, else the first live
        replica at all, whatever the topic's ``unclean.leader.election.enable`` says. A partition
        with a leader needs no election."""
        return self._elect(
            partitions,
            lambda state, _: state.leader != NO_LEADER,
            self._unclean_leader,
            Reason.UNCLEAN_ELECTION,
            lambda tp, replicas: ElectionResult(
                ErrorCode.eligible_leaders_not_available,
                message=f"no replica of {tp} ({list(replicas)}) is alive",
            ),
        )

    def _elect(
        self,
        partitions: Iterable[TopicPartition] | None,
        not_needed: Callable[[PartitionState, Sequence[int]], bool],
        choose: Callable[[TopicPartition, PartitionState], PartitionState | None],
        reason: Reason,
        unavailable: Callable[[TopicPartition, Sequence[int]], ElectionResult],
    ) -> ElectLeadersOutcome:
        """One ElectLeaders pass: per partition, unknown, not needed, no eligible leader
        (``unavailable``), or the state ``choose`` makes, written in one batch."""
        targets = self._all_partitions() if partitions is None else list(partitions)
        results: dict[TopicPartition, ElectionResult] = {}
        batch = _Batch()
        for tp in targets:
            replicas = self._replicas(tp)
            state = self._states.get(tp)
            if not replicas:
                results[tp] = ElectionResult(
                    ErrorCode.unknown_topic_or_partition, message="The partition does not exist."
                )
            elif state is not None and not_needed(state, replicas):
                results[tp] = ElectionResult(ErrorCode.election_not_needed, state.leader)
            elif state is None or (new := choose(tp, state)) is None:
                results[tp] = unavailable(tp, replicas)
            else:
                self._put(batch, tp, new, reason)
                results[tp] = ElectionResult(ErrorCode.none, new.leader)
        return ElectLeadersOutcome(results, batch.result())

    def _unclean_leader(self, tp: TopicPartition, state: PartitionState) -> PartitionState | None:
        if state.leader != NO_LEADER:
            return None
        replicas = self._replicas(tp)
        in_sync = [r for r in replicas if r in state.isr and self._eligible(r, tp)]
        if in_sync:
            return self._next(
                tp, state, in_sync[0], tuple(r for r in state.isr if self._eligible(r, tp))
            )
        live = [r for r in replicas if self._eligible(r, tp)]
        if not live:
            return None
        return self._next(tp, state, live[0], (live[0],))

    # -- reassignment ------------------------------------------------------------------------

    @property
    def reassignments(self) -> Mapping[TopicPartition, Reassignment]:
        """The partitions being reassigned."""
        return dict(self._reassigning)

    def reassign(
        self,
        targets: Mapping[TopicPartition, Sequence[int] | None],
        *,
        allow_replication_factor_change: bool = True,
    ) -> ReassignOutcome:
        """AlterPartitionReassignments: move each partition to its target replicas (None:
        cancel its reassignment). Answers the assignments to write to the topic znodes; a
        partition whose target is its replica set reordered (or a cancellation) is done at
        once. A new target for a partition already moving keeps its original replicas, and
        replicas added for the old target but not in the new one leave at once, as in Kafka."""
        results: dict[TopicPartition, ReassignmentResult] = {}
        writes: list[AssignmentWrite] = []
        for tp, asked in targets.items():
            current = self._replicas(tp)
            ongoing = self._reassigning.get(tp)
            if not current:
                results[tp] = ReassignmentResult(
                    ErrorCode.unknown_topic_or_partition, "The partition does not exist."
                )
                continue
            original = ongoing.original if ongoing is not None else current
            if asked is None:
                if ongoing is None:
                    results[tp] = ReassignmentResult(
                        ErrorCode.no_reassignment_in_progress,
                        f"no reassignment of {tp} is in progress",
                    )
                    continue
                target = original
            else:
                target = tuple(asked)
                refusal = self._check_target(target, original, allow_replication_factor_change)
                if refusal is not None:
                    results[tp] = refusal
                    continue
            results[tp] = ReassignmentResult(ErrorCode.none)
            if ongoing is None and target == current:
                continue  # nothing to move, as Kafka answers it
            reassignment = Reassignment(original, target)
            if set(target) == set(original):
                self._reassigning.pop(tp, None)
                write = AssignmentWrite(tp, target)
            else:
                self._reassigning[tp] = reassignment
                write = AssignmentWrite(
                    tp, reassignment.replicas, reassignment.adding, reassignment.removing
                )
            self._assignments[tp.topic][tp.partition] = write.replicas
            writes.append(write)
        return ReassignOutcome(results, writes)

    def _check_target(
        self, target: tuple[int, ...], original: tuple[int, ...], allow_rf_change: bool
    ) -> ReassignmentResult | None:
        if not target:
            return ReassignmentResult(
                ErrorCode.invalid_replica_assignment, "The replica list is empty."
            )
        if len(set(target)) != len(target):
            return ReassignmentResult(
                ErrorCode.invalid_replica_assignment,
                f"The replica list {list(target)} names a broker twice.",
            )
        # As Kafka: the replicas to add must be alive (an existing one may be down meanwhile).
        dead = sorted(set(target) - set(original) - self._live)
        if dead:
            return ReassignmentResult(
                ErrorCode.invalid_replica_assignment,
                f"The replicas to add are on brokers that are not alive: {dead}.",
            )
        if not allow_rf_change and len(target) != len(original):
            return ReassignmentResult(
                ErrorCode.invalid_replication_factor,
                f"The replication factor would change from {len(original)} to {len(target)}.",
            )
        return None

    def reassignment_steps(self) -> ReassignmentSteps:
        """For each partition being reassigned whose target replicas are all in its ISR: a
        leader outside the target hands over to the first target replica in sync (a state
        write, leader epoch bumped; call again once it is written), and a partition led from
        within its target is done (its assignment becomes the target alone)."""
        batch = _Batch()
        done: list[AssignmentWrite] = []
        for tp in sorted(self._reassigning):
            reassignment = self._reassigning[tp]
            state = self._states.get(tp)
            if (
                state is None
                or state.leader == NO_LEADER
                or not set(reassignment.target) <= set(state.isr)
            ):
                continue
            if state.leader in reassignment.target:
                del self._reassigning[tp]
                self._assignments[tp.topic][tp.partition] = reassignment.target
                done.append(AssignmentWrite(tp, reassignment.target))
            else:
                self._decide(batch, tp, state, self._reassigned, Reason.REASSIGNMENT)
        return ReassignmentSteps(batch.result(), done)

    def assignment_applied(self, write: AssignmentWrite) -> list[PartitionStateWrite]:
        """The topic znode now assigns ``write.replicas``: the replicas no longer assigned
        leave the ISR (leader epoch bumped), as Kafka's controller takes removed replicas
        offline."""
        state = self._states.get(write.partition)
        if state is None:
            return []
        batch = _Batch()
        self._decide(batch, write.partition, state, self._reassigned, Reason.REASSIGNMENT)
        return batch.result()

    def _reassigned(self, tp: TopicPartition, state: PartitionState) -> PartitionState | None:
        """ISR members no longer assigned leave it; a reassignment whose target replicas are
        all in sync but whose leader is not one of them gets a leader from the target."""
        replicas = self._replicas(tp)
        isr = tuple(r for r in state.isr if r in replicas)
        leader = state.leader
        reassignment = self._reassigning.get(tp)
        if (
            reassignment is not None
            and leader not in reassignment.target
            and set(reassignment.target) <= set(state.isr)
        ):
            candidates = [r for r in reassignment.target if r in isr and self._eligible(r, tp)]
            if candidates:
                leader = candidates[0]
                isr = tuple(r for r in isr if r not in reassignment.removing)
        if leader != NO_LEADER and leader not in isr:
            in_sync = [r for r in replicas if r in isr and self._eligible(r, tp)]
            leader = in_sync[0] if in_sync else NO_LEADER
        if not isr or (leader, isr) == (state.leader, state.isr):
            return None
        return self._next(tp, state, leader, isr)

    def rebalance_if_due(self) -> list[PartitionStateWrite]:
        """The periodic check of ``auto.leader.rebalance.enable``, due every
        ``leader.imbalance.check.interval.seconds`` (``next_rebalance_check_ms``, on the clock's
        monotonic scale, says when the shell should call again)."""
        now = self._clock.monotonic_ms()
        if not self.auto_leader_rebalance_enable or now < self.next_rebalance_check_ms:
            return []
        self.next_rebalance_check_ms = now + self.leader_imbalance_check_interval_ms
        return self.rebalance_leaders()

    def rebalance_leaders(self) -> list[PartitionStateWrite]:
        """Per preferred broker: when more than ``leader.imbalance.per.broker.percentage`` % of
        the partitions preferring it are led elsewhere, give it back those it can lead (it is
        live and in their ISR)."""
        preferring: dict[int, list[TopicPartition]] = {}
        for tp in self._all_partitions():
            preferring.setdefault(self._replicas(tp)[0], []).append(tp)
        batch = _Batch()
        for broker, partitions in sorted(preferring.items()):
            elsewhere = [
                tp
                for tp in partitions
                if (s := self._states.get(tp)) is not None and s.leader != broker
            ]
            ratio = len(elsewhere) / len(partitions)
            if ratio > self.leader_imbalance_per_broker_percentage / 100:
                for tp in elsewhere:
                    self._decide(
                        batch, tp, self._states[tp], self._preferred, Reason.PREFERRED_ELECTION
                    )
        return batch.result()

    # -- a leader's ISR change ---------------------------------------------------------------

    def alter_partition(
        self,
        broker: int,
        tp: TopicPartition,
        leader_epoch: int,
        isr: Sequence[int],
        version: int,
    ) -> AlterPartitionOutcome:
        """A leader proposes a new ISR for the state it knows (its leader epoch, znode version).

        Accepted only from the current leader at the current leader epoch and version; every
        member must be a live, not shutting down, assigned replica (KIP-841), the leader among
        them. A proposal equal to the current ISR succeeds without a write, so a retry after a
        lost answer is harmless. On a conflict of the write the shell answers the leader
        INVALID_UPDATE_VERSION (``write_conflicted`` retries nothing for it).
        """
        state = self._states.get(tp)
        if state is None:
            return AlterPartitionOutcome(ErrorCode.unknown_topic_or_partition)
        if broker != state.leader:
            return AlterPartitionOutcome(ErrorCode.not_leader_or_follower)
        if leader_epoch > state.leader_epoch or version > state.version:
            # The leader has seen a newer state than ours: we are a stale controller.
            return AlterPartitionOutcome(ErrorCode.not_controller)
        if leader_epoch < state.leader_epoch:
            return AlterPartitionOutcome(ErrorCode.fenced_leader_epoch)
        proposed = tuple(isr)
        if proposed == state.isr:
            return AlterPartitionOutcome(ErrorCode.none, None, state)
        if version < state.version:
            return AlterPartitionOutcome(ErrorCode.invalid_update_version)
        replicas = self._replicas(tp)
        if (
            broker not in proposed
            or len(set(proposed)) != len(proposed)
            or any(r not in replicas for r in proposed)
        ):
            return AlterPartitionOutcome(ErrorCode.invalid_request)
        if any(not self._eligible(r, tp) for r in proposed):
            return AlterPartitionOutcome(ErrorCode.ineligible_replica)
        new = PartitionState(
            broker,
            state.leader_epoch,
            proposed,
            self.controller_epoch,
            elr=self._elr(tp, state, proposed),
        )
        batch = _Batch()
        self._put(batch, tp, new, Reason.ALTER_PARTITION)
        return AlterPartitionOutcome(ErrorCode.none, batch.writes[tp], None)

    # -- applying writes ---------------------------------------------------------------------

    def write_applied(self, write: PartitionStateWrite, new_version: int) -> None:
        """The shell's compare-and-set (or create) succeeded; the znode is at ``new_version``."""
        cached = self._states.get(write.partition)
        if cached is not None and _same_leadership(cached, write.state):
            self._states[write.partition] = replace(cached, version=new_version)

    def state_read(self, tp: TopicPartition, state: PartitionState | None) -> None:
        """The shell read the znode after someone else wrote it (a leader writing its ISR
        itself, as ZooKeeper-era Kafka leaders did, or a watch after any change): the cache
        follows. Refused, like any conflict, if a newer controller wrote it."""
        if not self._replicas(tp):
            return
        if state is None:
            self._states.pop(tp, None)
            return
        if state.controller_epoch > self.controller_epoch:
            raise KafkaError(
                ErrorCode.not_controller,
                f"{tp} was written by controller epoch {state.controller_epoch}",
            )
        self._states[tp] = state

    def write_conflicted(
        self, write: PartitionStateWrite, current: PartitionState | None
    ) -> list[PartitionStateWrite]:
        """The znode was not at ``write.expected_version`` (or already existed); ``current`` is
        what the shell read back (None: no znode). Returns the writes to try instead."""
        tp = write.partition
        if not self._replicas(tp):
            return []  # the topic was deleted meanwhile
        self.state_read(tp, current)
        if write.reason is Reason.ALTER_PARTITION:
            return []
        batch = _Batch()
        if current is None:
            if write.expected_version is not None:
                return []  # the znode went away under us: the topic is being deleted
            self._bring_online(batch, [tp])
        elif write.reason is Reason.PREFERRED_ELECTION:
            self._decide(batch, tp, current, self._preferred, write.reason)
        elif write.reason is Reason.CONTROLLED_SHUTDOWN:
            self._decide(batch, tp, current, self._moved_off_shutting_down, write.reason)
        elif write.reason is Reason.REASSIGNMENT:
            self._decide(batch, tp, current, self._reassigned, write.reason)
        elif write.reason is Reason.UNCLEAN_ELECTION:
            self._decide(batch, tp, current, self._unclean_leader, write.reason)
        else:
            self._decide(batch, tp, current, self._reconciled, Reason.BROKER_CHANGE)
        return batch.result()

    # -- decisions, one partition at a time --------------------------------------------------

    def _bring_online(self, batch: _Batch, partitions: Iterable[TopicPartition]) -> None:
        """First states for partitions without one, leaders for leaderless ones, no dead ISR
        members: what every change of brokers or configs asks of each partition."""
        for tp in partitions:
            state = self._states.get(tp)
            if state is None:
                initial = self._initial(tp)
                if initial is not None:
                    self._put(batch, tp, initial, Reason.NEW_PARTITION)
            else:
                self._decide(batch, tp, state, self._reconciled, Reason.BROKER_CHANGE)

    def _initial(self, tp: TopicPartition) -> PartitionState | None:
        live = tuple(r for r in self._replicas(tp) if self._eligible(r, tp))
        if not live:
            return None
        return PartitionState(live[0], 0, live, self.controller_epoch)

    def _reconciled(self, tp: TopicPartition, state: PartitionState) -> PartitionState | None:
        members = self._trusted_isr(tp, state)
        if (
            state.leader in self._live
            and state.leader in members
            and state.leader not in self.offline_replicas(tp)
        ):
            # A shutting-down leader keeps what controlled shutdown could not move.
            leader = state.leader
            isr = tuple(r for r in members if r == leader or self._eligible(r, tp))
        else:
            leader, isr = self._new_leadership(tp, state, members)
        if leader == state.leader and isr == state.isr and self._elr(tp, state, isr) == state.elr:
            return None
        return self._next(tp, state, leader, isr)

    def _new_leadership(
        self, tp: TopicPartition, state: PartitionState, members: tuple[int, ...]
    ) -> tuple[int, tuple[int, ...]]:
        """Leader and ISR of a partition whose leader is gone: an in-sync replica, else an
        eligible one (KIP-966), else (unclean) any live one, else none."""
        replicas = self._replicas(tp)
        in_sync = [r for r in replicas if r in members and self._eligible(r, tp)]
        if in_sync:
            return in_sync[0], tuple(r for r in members if self._eligible(r, tp))
        electable = [r for r in replicas if r in state.elr and self._eligible(r, tp)]
        if electable and self.eligible_leader_replicas:
            # KIP-966: a clean election from the ELR, where only an unclean one would do.
            return electable[0], (electable[0],)
        live = [r for r in replicas if self._eligible(r, tp)]
        if live and self._unclean(tp.topic):
            # Unclean: the new leader's log becomes the truth; nobody else is in sync with it.
            return live[0], (live[0],)
        return NO_LEADER, tuple(r for r in state.isr if self._eligible(r, tp)) or _last_member(
            state
        )

    def _trusted_isr(self, tp: TopicPartition, state: PartitionState) -> tuple[int, ...]:
        """The ISR without the members registered again since ``state`` was written (see
        :meth:`elected`), as long as an eligible member registered before the write remains;
        the whole ISR otherwise (when every survivor restarted, the last in sync is still the
        best there is, as after a full cluster restart)."""
        if state.written_zxid < 0:
            return state.isr
        kept = tuple(r for r in state.isr if self._broker_epochs.get(r, -1) <= state.written_zxid)
        if len(kept) == len(state.isr) or not any(self._eligible(r, tp) for r in kept):
            return state.isr
        return kept

    def _preferred(self, tp: TopicPartition, state: PartitionState) -> PartitionState | None:
        preferred = self._replicas(tp)[0]
        if (
            state.leader == preferred
            or preferred not in state.isr
            or not self._eligible(preferred, tp)
        ):
            return None
        return self._next(tp, state, preferred, state.isr)

    def _moved_off_shutting_down(
        self, tp: TopicPartition, state: PartitionState
    ) -> PartitionState | None:
        leaving = self._shutting_down
        leader = state.leader
        if leader in leaving:
            candidates = [r for r in self._replicas(tp) if r in state.isr and self._eligible(r, tp)]
            if not candidates:
                return None  # nobody to hand over to: it keeps leading until it stops
            leader = candidates[0]
        isr = tuple(r for r in state.isr if r not in leaving) or state.isr
        if leader == state.leader and isr == state.isr:
            return None
        return self._next(tp, state, leader, isr)

    def _decide(
        self,
        batch: _Batch,
        tp: TopicPartition,
        state: PartitionState,
        decision: Decision,
        reason: Reason,
    ) -> None:
        new = decision(tp, state)
        if new is not None:
            self._put(batch, tp, new, reason)

    def _next(
        self, tp: TopicPartition, state: PartitionState, leader: int, isr: tuple[int, ...]
    ) -> PartitionState:
        new = PartitionState(leader, state.leader_epoch + 1, isr, self.controller_epoch)
        return replace(new, elr=self._elr(tp, state, isr))

    def _elr(
        self, tp: TopicPartition, state: PartitionState, isr: tuple[int, ...]
    ) -> tuple[int, ...]:
        """KIP-966: the eligible leader replicas after the ISR becomes ``isr``. While the ISR
        is below ``min.insync.replicas`` nothing is committed without all of it, so a member
        that leaves it then still holds every committed record: it joins the ELR. A replica
        back in the ISR leaves the ELR, and an ISR at min.insync.replicas again empties it."""
        if not self.eligible_leader_replicas:
            return ()
        if len(isr) >= self._min_insync(tp.topic):
            return ()
        replicas = self._replicas(tp)
        elr = [r for r in state.elr if r not in isr and r in replicas]
        elr += [r for r in state.isr if r not in isr and r not in elr and r in replicas]
        return tuple(elr)

    def _min_insync(self, topic: str) -> int:
        raw = self._topic_configs.get(topic, {}).get(MIN_INSYNC_REPLICAS)
        if raw is None:
            return self.min_insync_replicas
        try:
            return int(raw)
        except ValueError:
            return self.min_insync_replicas

    def _put(self, batch: _Batch, tp: TopicPartition, new: PartitionState, reason: Reason) -> None:
        """Queue the write and cache ``new`` at once, still at the version it is to replace."""
        earlier = batch.writes.get(tp)
        if earlier is not None:
            expected = earlier.expected_version
        else:
            current = self._states.get(tp)
            expected = None if current is None or current.version < 0 else current.version
        written = replace(new, version=0 if expected is None else expected + 1)
        batch.writes[tp] = PartitionStateWrite(tp, written, expected, reason)
        self._states[tp] = replace(new, version=-1 if expected is None else expected)

    # -- facts -------------------------------------------------------------------------------

    def _eligible(self, broker: int, tp: TopicPartition) -> bool:
        """Whether ``broker`` may lead ``tp`` or be in its ISR."""
        return (
            broker in self._live
            and broker not in self._shutting_down
            and broker not in self._offline_replicas.get(tp, ())
        )

    def _unclean(self, topic: str) -> bool:
        raw = self._topic_configs.get(topic, {}).get(UNCLEAN_LEADER_ELECTION)
        if raw is None:
            return self.unclean_leader_election_enable
        return bool(TOPIC_CONFIGS[UNCLEAN_LEADER_ELECTION][0].parse(raw))

    def _replicas(self, tp: TopicPartition) -> tuple[int, ...]:
        return self._assignments.get(tp.topic, {}).get(tp.partition, ())

    def _partitions_of(self, topic: str) -> list[TopicPartition]:
        return [TopicPartition(topic, p) for p in sorted(self._assignments.get(topic, {}))]

    def _all_partitions(self) -> list[TopicPartition]:
        return [tp for topic in sorted(self._assignments) for tp in self._partitions_of(topic)]


def _same_leadership(a: PartitionState, b: PartitionState) -> bool:
    return (a.leader, a.leader_epoch, a.isr, a.controller_epoch) == (
        b.leader,
        b.leader_epoch,
        b.isr,
        b.controller_epoch,
    )


def _last_member(state: PartitionState) -> tuple[int, ...]:
    """The one replica an ISR keeps when every member is gone: the last leader if it was in sync
    (it has every committed record and more), else the first listed."""
    if state.leader in state.isr:
        return (state.leader,)
    return state.isr[:1]
