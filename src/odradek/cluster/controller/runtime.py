"""The controller's shell: drives :class:`~odradek.cluster.controller.state.ControllerState` with
ZooKeeper, in every broker of a ZooKeeper cluster, active only while this broker is the controller.

What it reads and writes (Kafka's ZooKeeper layout, see ``cluster/metadata/zookeeper/store.py`` and
``cluster/metadata/zookeeper/membership.py``): ``/brokers/ids/<id>`` (live brokers, their racks,
and the znode's creation zxid as the broker epoch), ``/controller_epoch`` (its value is the
controller's epoch, its znode version fences every write), the topics under ``/brokers/topics`` and
``/config/topics`` through the metadata store's cache, and the partition-state znodes, which it
alone creates and moves (leaders only change their ISR, and it reads those changes back).

Becoming controller (``/controller`` holds this broker's id with a new epoch): read the live
brokers, every topic and partition state, build ``ControllerState.elected`` and apply the writes
it answers. While active, each fact is an event: broker registrations appearing or going
(:class:`~odradek.cluster.metadata.zookeeper.membership.MembershipChange`), the store's
notifications (``topics``: re-read the store's cache and diff it against what the controller knows;
``partition_state``: read the znode and hand it to ``state_read``), the automatic preferred-leader
rebalance on the injected clock, and the calls :meth:`ControllerRuntime.elect_preferred`,
:meth:`ControllerRuntime.elect_unclean`, :meth:`ControllerRuntime.alter_reassignments` and
:meth:`ControllerRuntime.controlled_shutdown`. Events run one at a time from a queue, each with
all its writes (compare-and-set, conflicts retried through ``write_conflicted``) before the next;
the writes of one event are issued together and awaited together (one round trip for a broker's
hundred partitions, not a hundred).

Reassignment: a move's assignment (with ``adding_replicas`` / ``removing_replicas``) is written to
the topic znode by compare-and-set on its version, fenced by ``/controller_epoch`` like the
partition states. Each ISR change of a moving partition (the leader writes it; the watch brings it
here), each broker change and each new request moves the reassignments on
(``reassignment_steps``); a new controller picks them up from the topic znodes. The moves Kafka
2.x's tools write to ``/admin/reassign_partitions`` are started too, and taken out of that znode
as they finish (it is deleted with the last).

Topic deletion: the metadata store removes a topic's znodes itself (``remove`` marks
``/admin/delete_topics/<t>``, deletes, unmarks; an interrupted deletion is finished when a store
opens), and the controller only forgets the topic when the store's cache no longer has it. The
controller's first write of a partition state never recreates a deleted topic's znodes (see
``ZooKeeperMetadataStore.write_partition_state``), so the two never race into a half topic.

Fencing: every write is a multi-op checking ``/controller_epoch``'s version as this controller's
election left it. On losing the controllership (another broker in ``/controller``, the session
lost, a write refused by that check, or a partition state written by a newer controller) the
runtime stops at once: state dropped, timer cancelled, queued calls answered NOT_CONTROLLER.

Crash: nothing here is durable; the next controller rebuilds everything from ZooKeeper.

Threads: everything runs on the broker's event loop. kazoo's threads only reach it through
``call_soon_threadsafe`` (the membership's and the store's listeners, the session-lost hook).
Every ZooKeeper call is one of the store's named coroutines, run off the loop: an event awaits
its reads and writes while the loop serves everything else; events still run one at a time.
A partition-state notification carries the state the watch read, so it needs no read here.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from odradek.clock import Clock
from odradek.cluster import features
from odradek.cluster.controller.state import (
    AssignmentWrite,
    ControllerState,
    ElectionResult,
    PartitionStateWrite,
    Reassignment,
    ReassignmentResult,
)
from odradek.cluster.metadata.store import (
    MetadataChange,
    PartitionState,
    StaleVersionError,
    TopicMetadata,
)
from odradek.cluster.metadata.zookeeper.membership import (
    BrokerMembership,
    BrokerRegistration,
    MembershipChange,
)
from odradek.cluster.metadata.zookeeper.store import (
    ADMIN_REASSIGN_PATH,
    ControllerMovedError,
    ZooKeeperMetadataStore,
)
from odradek.config import BrokerConfig
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.topic_partition import TopicPartition

log = logging.getLogger(__name__)

T = TypeVar("T")

UNKNOWN_BROKER_EPOCH = -1
# An event's writes conflicting this many rounds in a row are given up (logged): the next event
# about those partitions decides again on what ZooKeeper then holds.
MAX_WRITE_ROUNDS = 20
# The controller starts the moves ADMIN_REASSIGN_PATH asks for, and takes each partition out of
# the znode once its move is done (the znode goes with the last one), as Kafka's controller does.


@dataclass(frozen=True, slots=True)
class LiveBroker:
    """A registered broker as the controller knows it; ``epoch`` is its registration znode's
    creation zxid (Kafka's broker epoch), new with every session."""

    registration: BrokerRegistration
    epoch: int

    @property
    def rack(self) -> str | None:
        return self.registration.rack


class ControllerRuntime:
    """This broker's controller, active while ``membership`` says it is the controller.

    Wiring: call :meth:`start` on the loop, then pass :meth:`membership_changed` to
    ``BrokerMembership.start`` (or call it with every change); :meth:`stop` at shutdown.
    """

    def __init__(
        self,
        store: ZooKeeperMetadataStore,
        membership: BrokerMembership,
        config: BrokerConfig,
        clock: Clock,
    ) -> None:
        self.store = store
        self.membership = membership
        self.clock = clock
        self.broker_id = membership.broker_id
        self._settings: dict[str, Any] = {
            "unclean_leader_election_enable": config.get_bool("unclean.leader.election.enable"),
            "auto_leader_rebalance_enable": config.get_bool("auto.leader.rebalance.enable"),
            "leader_imbalance_per_broker_percentage": config.get_int(
                "leader.imbalance.per.broker.percentage"
            ),
            "leader_imbalance_check_interval_seconds": config.get_int(
                "leader.imbalance.check.interval.seconds"
            ),
            "min_insync_replicas": config.get_int("min.insync.replicas"),
        }
        self._controller: ControllerState | None = None
        self._epoch_zk_version = -1
        self._brokers: dict[int, LiveBroker] = {}
        self._topics: dict[str, TopicMetadata] = {}
        self._queue: asyncio.Queue[_Event[Any]] | None = None
        self._worker: asyncio.Task[None] | None = None
        self._timer: asyncio.Task[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        # Notifications already queued and not yet handled: more of the same add nothing.
        self._topics_pending = False
        # The latest state each partition's notifications brought, not yet handled.
        self._reads_pending: dict[TopicPartition, PartitionState | None] = {}
        self._activation_pending: int | None = None
        self._stopped = False
        # The partitions /admin/reassign_partitions asked to move, until their moves are done.
        self._zk_requested: set[TopicPartition] = set()

    # -- what others read --------------------------------------------------------------------

    @property
    def active(self) -> bool:
        return self._controller is not None

    @property
    def controller(self) -> ControllerState | None:
        """The controller's state while active (read it, never feed it: events go through here)."""
        return self._controller

    @property
    def controller_epoch(self) -> int | None:
        return None if self._controller is None else self._controller.controller_epoch

    @property
    def live_brokers(self) -> Mapping[int, LiveBroker]:
        """The registered brokers with their racks, while active."""
        return dict(self._brokers)

    # -- lifecycle ---------------------------------------------------------------------------

    def start(self) -> None:
        """On the loop: listen to the store and to the session; events start flowing."""
        loop = asyncio.get_running_loop()
        self._loop = loop
        self._queue = asyncio.Queue()
        self._worker = loop.create_task(self._run_events(), name="controller-events")
        self.store.add_listener(loop, self._metadata_changed)
        self.membership.session.on_session_lost(
            lambda: self._to_loop(self._resign, "the ZooKeeper session was lost")
        )
        self.store.watch_admin_reassignments(self._admin_reassign_changed)
        self.store.watch_log_dir_events(self._log_dir_events_listed)

    def _admin_reassign_changed(self) -> None:
        if self._controller is not None and not self._stopped:
            self._enqueue(_Event("/admin/reassign_partitions", self._read_admin_reassignments))

    def _log_dir_events_listed(self) -> None:
        if self._controller is not None and not self._stopped:
            self._enqueue(_Event("/log_dir_event_notification", self._read_log_dir_failures))

    async def stop(self) -> None:
        """Step down if active and handle nothing more (calls waiting get NOT_CONTROLLER)."""
        self._stopped = True
        self._resign(None)
        for task in (self._worker, self._timer):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        self._worker = self._timer = None
        if self._queue is not None:
            while not self._queue.empty():
                self._queue.get_nowait().refuse()

    async def idle(self) -> None:
        """Wait until every event queued so far has been handled (tests, shutdown)."""
        await self._submit("idle", _nothing, needs_controller=False)

    def _to_loop(self, fn: Callable[..., object], *args: object) -> None:
        loop = self._loop
        if loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(fn, *args)

    # -- events in ---------------------------------------------------------------------------

    def membership_changed(self, change: MembershipChange) -> None:
        """On the loop: the controller or the registered brokers changed."""
        if self._stopped:
            return
        if change.controller_id == self.broker_id:
            epoch = change.controller_epoch
            if epoch != self.controller_epoch and epoch != self._activation_pending:
                self._activation_pending = epoch
                self._enqueue(_Event("take over", lambda: self._take_over(epoch), False))
        elif self._controller is not None or self._activation_pending is not None:
            self._resign(f"broker {change.controller_id} is the controller now")
            return
        if self._controller is not None:
            brokers = change.brokers
            self._enqueue(_Event("brokers changed", lambda: self._brokers_changed(brokers)))

    def _metadata_changed(self, change: MetadataChange) -> None:
        if self._controller is None:
            return
        if change.kind == "topics":
            if not self._topics_pending:
                self._topics_pending = True
                self._enqueue(_Event("topics changed", self._topics_changed))
        elif change.kind == "partition_state" and change.topic is not None:
            assert change.partition is not None
            tp = TopicPartition(change.topic, change.partition)
            queued = tp in self._reads_pending
            self._reads_pending[tp] = change.state
            if not queued:
                self._enqueue(_Event("partition state changed", lambda: self._state_changed(tp)))

    async def elect_preferred(
        self, partitions: Iterable[TopicPartition] | None = None
    ) -> dict[TopicPartition, ElectionResult]:
        """ElectLeaders (preferred) on ``partitions`` (every partition when None), written.
        Raises ``KafkaError(NOT_CONTROLLER)`` when this broker is not the controller."""
        targets = None if partitions is None else list(partitions)

        async def elect() -> dict[TopicPartition, ElectionResult]:
            outcome = self._active().elect_preferred(targets)
            await self._apply(outcome.writes)
            return dict(outcome.results)

        return await self._submit("preferred election", elect)

    async def elect_unclean(
        self, partitions: Iterable[TopicPartition] | None = None
    ) -> dict[TopicPartition, ElectionResult]:
        """ElectLeaders (unclean, KIP-460) on ``partitions`` (every partition when None)."""
        targets = None if partitions is None else list(partitions)

        async def elect() -> dict[TopicPartition, ElectionResult]:
            outcome = self._active().elect_unclean(targets)
            await self._apply(outcome.writes)
            return dict(outcome.results)

        return await self._submit("unclean election", elect)

    async def alter_reassignments(
        self,
        targets: Mapping[TopicPartition, tuple[int, ...] | None],
        *,
        allow_replication_factor_change: bool = True,
    ) -> dict[TopicPartition, ReassignmentResult]:
        """AlterPartitionReassignments: start (or cancel, None) each partition's move, its
        assignment written before the answer, as Kafka's controller does."""
        asked = dict(targets)

        async def reassign() -> dict[TopicPartition, ReassignmentResult]:
            outcome = self._active().reassign(
                asked, allow_replication_factor_change=allow_replication_factor_change
            )
            await self._write_assignments(outcome.assignments)
            await self._progress_reassignments()
            return dict(outcome.results)

        return await self._submit("partition reassignment", reassign)

    async def list_reassignments(
        self, partitions: Iterable[TopicPartition] | None = None
    ) -> dict[TopicPartition, Reassignment]:
        """The reassignments in progress (of ``partitions`` only, when given)."""
        wanted = None if partitions is None else set(partitions)

        async def listed() -> dict[TopicPartition, Reassignment]:
            ongoing = self._active().reassignments
            return {tp: r for tp, r in ongoing.items() if wanted is None or tp in wanted}

        return await self._submit("list reassignments", listed)

    async def controlled_shutdown(
        self, broker_id: int, broker_epoch: int = UNKNOWN_BROKER_EPOCH
    ) -> frozenset[TopicPartition]:
        """ControlledShutdown: move leadership off ``broker_id`` and take it out of the ISRs;
        answers the partitions with another replica it still leads (it retries while any).
        ``broker_epoch`` (request v2+) older than its registration's is STALE_BROKER_EPOCH."""

        async def shut_down() -> frozenset[TopicPartition]:
            controller = self._active()
            known = self._brokers.get(broker_id)
            if broker_epoch != UNKNOWN_BROKER_EPOCH and known and broker_epoch < known.epoch:
                raise KafkaError(
                    ErrorCode.stale_broker_epoch,
                    f"broker epoch {broker_epoch} of broker {broker_id} is older than "
                    f"{known.epoch}",
                )
            await self._apply(controller.controlled_shutdown(broker_id).writes)
            return self._active().replicated_partitions_led_by(broker_id)

        return await self._submit("controlled shutdown", shut_down)

    async def check_rebalance(self) -> None:
        """The periodic preferred-leader rebalance, if due on the clock (the timer calls this;
        tests move a ManualClock and call it)."""
        await self._submit(
            "leader rebalance", lambda: self._apply(self._active().rebalance_if_due())
        )

    # -- the event queue ---------------------------------------------------------------------

    def _enqueue(self, event: _Event[Any]) -> None:
        if self._queue is None:
            raise RuntimeError("ControllerRuntime.start was not called")
        if self._stopped:
            event.refuse()
        else:
            self._queue.put_nowait(event)

    async def _submit(
        self, name: str, fn: Callable[[], Awaitable[T]], *, needs_controller: bool = True
    ) -> T:
        event: _Event[T] = _Event(name, fn, needs_controller)
        event.future = asyncio.get_running_loop().create_future()
        self._enqueue(event)
        return await event.future

    async def _run_events(self) -> None:
        assert self._queue is not None
        while True:
            event = await self._queue.get()
            if event.needs_controller and self._controller is None:
                event.refuse()
                continue
            try:
                result = await event.fn()
            except ControllerMovedError as e:
                self._resign(f"a write was refused: {e}")
                event.refuse()
            except KafkaError as e:
                if e.code == ErrorCode.not_controller:
                    self._resign(e.message)
                elif event.future is None:
                    log.warning("controller event %r failed: %s", event.name, e.message)
                event.fail(e)
            except Exception as e:
                log.exception("controller event %r failed", event.name)
                event.fail(e)
            else:
                event.succeed(result)
            # Other work of the loop (requests, replication) gets its turn between events.
            await asyncio.sleep(0)

    def _active(self) -> ControllerState:
        if self._controller is None:
            raise KafkaError(
                ErrorCode.not_controller, f"broker {self.broker_id} is not the controller"
            )
        return self._controller

    # -- taking over and stepping down -------------------------------------------------------

    async def _take_over(self, epoch: int) -> None:
        self._activation_pending = None
        if self.membership.controller_id != self.broker_id or self.controller_epoch == epoch:
            return
        if self._controller is not None:
            self._resign(f"elected again, with epoch {epoch}")
        read = await self.store.controller_epoch()
        if read is None or read[0] != epoch:
            log.info("controller epoch %d is already over (read %s): not taking over", epoch, read)
            return
        self._brokers = await self._read_brokers(await self.store.registered_brokers())
        await self.store.reload()
        self._topics = dict(self.store.topics)
        partitions = [
            TopicPartition(t.name, p) for t in self._topics.values() for p in range(t.partitions)
        ]
        read_states = await asyncio.gather(
            *(self.store.partition_state(tp.topic, tp.partition) for tp in partitions)
        )
        states = {
            tp: state
            for tp, state in zip(partitions, read_states, strict=True)
            if state is not None
        }
        if self.membership.controller_id != self.broker_id:
            return  # the term ended while the cluster was read
        self._epoch_zk_version = read[1]
        controller, writes = ControllerState.elected(
            epoch - 1,
            self.clock,
            live_brokers=self._brokers,
            assignments={t.name: dict(enumerate(t.replicas)) for t in self._topics.values()},
            states=states,
            broker_epochs={b: info.epoch for b, info in self._brokers.items()},
            topic_configs={t.name: t.configs for t in self._topics.values()},
            reassignments={
                TopicPartition(t.name, p): Reassignment.from_assignment(
                    t.replicas_of(p), t.adding.get(p, ()), t.removing.get(p, ())
                )
                for t in self._topics.values()
                for p in set(t.adding) | set(t.removing)
            },
            **self._settings,
            # KIP-966 as the cluster finalized it when this controller took over.
            eligible_leader_replicas=features.finalized(self.store.finalized_features).level(
                features.ELIGIBLE_LEADER_REPLICAS_VERSION
            )
            >= 1,
        )
        self._controller = controller
        log.info(
            "broker %d is the active controller (epoch %d): %d brokers, %d topics, %d writes",
            self.broker_id,
            epoch,
            len(self._brokers),
            len(self._topics),
            len(writes),
        )
        await self._apply(writes)
        if controller.reassignments:
            log.info("resuming %d partition reassignments", len(controller.reassignments))
        await self._progress_reassignments()
        await self._read_admin_reassignments()
        await self._read_log_dir_failures()
        if self._controller is controller:
            self._timer = asyncio.get_running_loop().create_task(
                self._run_rebalance_timer(controller), name="controller-rebalance"
            )

    def _resign(self, reason: str | None) -> None:
        """Stop being the controller at once (a no-op when not active)."""
        self._activation_pending = None
        controller, self._controller = self._controller, None
        if controller is None:
            return
        if reason is not None:
            log.warning(
                "broker %d stops as controller (epoch %d): %s",
                self.broker_id,
                controller.controller_epoch,
                reason,
            )
        self._brokers = {}
        self._topics = {}
        self._zk_requested = set()
        self._epoch_zk_version = -1
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    async def _run_rebalance_timer(self, controller: ControllerState) -> None:
        while self._controller is controller:
            delay_ms = controller.next_rebalance_check_ms - self.clock.monotonic_ms()
            if delay_ms > 0:
                await asyncio.sleep(delay_ms / 1000)
                continue
            with contextlib.suppress(KafkaError):
                await self.check_rebalance()

    # -- the events --------------------------------------------------------------------------

    async def _brokers_changed(self, listed: frozenset[int]) -> None:
        brokers = await self._read_brokers(listed)
        controller = self._active()
        bounced = [
            b
            for b, known in self._brokers.items()
            if b in brokers and brokers[b].epoch != known.epoch
        ]
        self._brokers = brokers
        epochs = {b: info.epoch for b, info in brokers.items()}
        await self._apply(controller.brokers_changed(brokers, bounced, epochs))
        await self._progress_reassignments()

    async def _topics_changed(self) -> None:
        self._topics_pending = False
        controller = self._active()
        current = dict(self.store.topics)
        for name, known in list(self._topics.items()):
            topic = current.get(name)
            if topic is None or topic.topic_id != known.topic_id:
                deletion = controller.delete_topic(name)
                del self._topics[name]
                log.info("topic %s was deleted (%d partitions)", name, len(deletion.partitions))
        for name, topic in sorted(current.items()):
            known_topic = self._topics.get(name)
            if known_topic is None:
                writes = controller.add_topic(name, dict(enumerate(topic.replicas)), topic.configs)
            else:
                writes = []
                if topic.partitions > known_topic.partitions:
                    added = dict(enumerate(topic.replicas))
                    writes += controller.add_partitions(
                        name, {p: r for p, r in added.items() if p >= known_topic.partitions}
                    )
                if topic.configs != known_topic.configs:
                    writes += controller.set_topic_configs(name, topic.configs)
            self._topics[name] = topic
            await self._apply(writes)

    async def _state_changed(self, tp: TopicPartition) -> None:
        state = self._reads_pending.pop(tp, None)
        controller = self._active()
        if tp.topic in self._topics:
            controller.state_read(tp, state)
            if tp in controller.reassignments:
                await self._progress_reassignments()

    # -- reassignment ------------------------------------------------------------------------

    async def _progress_reassignments(self) -> None:
        """Move every reassignment on as far as its ISR allows: leaders into their targets,
        then the final assignments (each followed by the ISR change it asks for)."""
        controller = self._active()
        for _ in range(MAX_WRITE_ROUNDS):
            steps = controller.reassignment_steps()
            if not steps.states and not steps.assignments:
                break
            await self._apply(steps.states)
            await self._write_assignments(steps.assignments)
            for write in steps.assignments:
                log.info("reassignment of %s done: replicas %s", write.partition, write.replicas)
        await self._update_admin_reassignments()

    async def _read_admin_reassignments(self) -> None:
        """Start the moves ``/admin/reassign_partitions`` lists (a partition already moving
        to the same target is left alone); entries that cannot start are dropped from it."""
        read = await self.store.admin_reassignments()
        controller = self._active()
        if read is None:
            return
        data, _ = read
        try:
            entries = json.loads(data)["partitions"]
            asked = {
                TopicPartition(str(e["topic"]), int(e["partition"])): tuple(
                    int(r) for r in e["replicas"]
                )
                for e in entries
            }
        except (ValueError, KeyError, TypeError) as e:
            log.warning("ignoring %s, which is not a reassignment: %s", ADMIN_REASSIGN_PATH, e)
            await self.store.set_admin_reassignments(None, -1)
            return
        ongoing = controller.reassignments
        fresh = {
            tp: target
            for tp, target in asked.items()
            if tp not in ongoing or ongoing[tp].target != target
        }
        outcome = controller.reassign(fresh)
        for tp, result in outcome.results.items():
            if result.error != ErrorCode.none:
                log.warning(
                    "%s: cannot move %s to %s: %s",
                    ADMIN_REASSIGN_PATH,
                    tp,
                    list(asked[tp]),
                    result.message or result.error.name,
                )
        refused = {tp for tp, r in outcome.results.items() if r.error != ErrorCode.none}
        self._zk_requested = set(asked) - refused
        await self._write_assignments(outcome.assignments)
        await self._progress_reassignments()

    async def _read_log_dir_failures(self) -> None:
        """Act on the log dir failures brokers reported (KIP-112): their replicas in the failed
        dirs go offline, leaderships move away; each event is deleted once its writes are in."""
        events = await self.store.log_dir_failures()
        if events:
            # A broker that failed as it started registered before it wrote the event: the
            # registration must be known first, or a late "broker came back" would clear
            # the replicas the event takes offline.
            await self._brokers_changed(await self.store.registered_brokers())
        for name, broker, partitions in events:
            controller = self._active()
            known = [tp for tp in partitions if tp.topic in self._topics]
            log.info(
                "broker %d lost a log dir holding %d partitions: they move off it",
                broker,
                len(known),
            )
            await self._apply(controller.log_dir_failed(broker, known))
            await self.store.delete_log_dir_events([name])

    async def _update_admin_reassignments(self) -> None:
        """Take the partitions whose moves are done out of ``/admin/reassign_partitions``."""
        controller = self._active()
        done = {tp for tp in self._zk_requested if tp not in controller.reassignments}
        if not done:
            return
        self._zk_requested -= done
        for _ in range(MAX_WRITE_ROUNDS):
            read = await self.store.admin_reassignments()
            if read is None:
                return
            data, version = read
            try:
                entries = [
                    e
                    for e in json.loads(data)["partitions"]
                    if TopicPartition(str(e["topic"]), int(e["partition"])) not in done
                ]
            except (ValueError, KeyError, TypeError):
                entries = []
            body = json.dumps({"version": 1, "partitions": entries}).encode() if entries else None
            if await self.store.set_admin_reassignments(body, version):
                return
            # The tool wrote it again meanwhile: read it again.

    async def _write_assignments(self, writes: list[AssignmentWrite]) -> None:
        """Write the topic znodes' assignments (one write per topic, all in flight together),
        then apply the ISR changes each asks for."""
        by_topic: dict[str, list[AssignmentWrite]] = {}
        for write in writes:
            by_topic.setdefault(write.partition.topic, []).append(write)
        topics = sorted(by_topic)
        results = await asyncio.gather(
            *(
                self.store.write_assignments(
                    topic,
                    {
                        w.partition.partition: (w.replicas, w.adding, w.removing)
                        for w in by_topic[topic]
                    },
                    controller_epoch_zk_version=self._epoch_zk_version,
                )
                for topic in topics
            ),
            return_exceptions=True,
        )
        controller = self._active()
        failure: BaseException | None = None
        for topic, result in zip(topics, results, strict=True):
            if isinstance(result, StaleVersionError):
                log.warning("assignment of topic %s not written: %s", topic, result)
                if not await self.store.topic_exists(topic):
                    self._forget_topic(topic)
                continue
            if isinstance(result, BaseException):
                failure = failure or result
                continue
            if topic in self._topics:
                self._topics[topic] = result
            for write in by_topic[topic]:
                await self._apply(controller.assignment_applied(write))
        if failure is not None:
            raise failure

    # -- ZooKeeper ---------------------------------------------------------------------------

    async def _apply(self, writes: list[PartitionStateWrite]) -> None:
        """Write each state by compare-and-set, fenced by the controller epoch, all in flight
        together; a conflict is read back and decided again, until nothing is left to write.
        Every write that landed is applied before a failure (ZooKeeper unreachable, the
        controller moved) is raised."""
        pending = writes
        for _ in range(MAX_WRITE_ROUNDS):
            if not pending:
                return
            results = await asyncio.gather(
                *(
                    self.store.write_partition_state(
                        w.partition.topic,
                        w.partition.partition,
                        w.state,
                        w.expected_version,
                        controller_epoch_zk_version=self._epoch_zk_version,
                    )
                    for w in pending
                ),
                return_exceptions=True,
            )
            controller = self._active()
            failure: BaseException | None = None
            conflicted: list[PartitionStateWrite] = []
            for write, result in zip(pending, results, strict=True):
                if isinstance(result, StaleVersionError):
                    conflicted.append(write)
                elif isinstance(result, BaseException):
                    failure = failure or result
                else:
                    controller.write_applied(write, result.version)
            if failure is not None:
                raise failure
            currents = await asyncio.gather(
                *(
                    self.store.partition_state(w.partition.topic, w.partition.partition)
                    for w in conflicted
                )
            )
            controller = self._active()
            retries: list[PartitionStateWrite] = []
            for write, current in zip(conflicted, currents, strict=True):
                topic = write.partition.topic
                gone = current is None and topic in self._topics
                if gone and not await self.store.topic_exists(topic):
                    self._forget_topic(topic)
                retries += controller.write_conflicted(write, current)
            pending = retries
        log.warning(
            "controller writes still conflicting after %d rounds, left to the next event: %s",
            MAX_WRITE_ROUNDS,
            ", ".join(str(w.partition) for w in pending),
        )

    def _forget_topic(self, topic: str) -> None:
        """A topic found deleted before the store's watch told: forget it now."""
        if self._topics.pop(topic, None) is not None:
            self._active().delete_topic(topic)
            log.info("topic %s was deleted", topic)

    async def _read_brokers(self, ids: Iterable[int]) -> dict[int, LiveBroker]:
        """The registrations of ``ids`` (a broker whose znode is gone meanwhile is left out)."""
        found = await self.store.broker_registrations(ids)
        return {
            broker_id: LiveBroker(BrokerRegistration.from_json(broker_id, data), czxid)
            for broker_id, (data, czxid) in sorted(found.items())
        }


async def _nothing() -> None:
    return None


class _Event(Generic[T]):
    """A queued event: ``fn`` awaited on the loop, its answer (if anyone awaits it) in
    ``future``.
    ``needs_controller`` events are answered NOT_CONTROLLER when the controllership is gone."""

    __slots__ = ("fn", "future", "name", "needs_controller")

    def __init__(
        self, name: str, fn: Callable[[], Awaitable[T]], needs_controller: bool = True
    ) -> None:
        self.name = name
        self.fn = fn
        self.needs_controller = needs_controller
        self.future: asyncio.Future[T] | None = None

    def succeed(self, result: T) -> None:
        if self.future is not None and not self.future.done():
            self.future.set_result(result)

    def fail(self, error: BaseException) -> None:
        if self.future is not None and not self.future.done():
            self.future.set_exception(error)

    def refuse(self) -> None:
        self.fail(KafkaError(ErrorCode.not_controller, "this broker is not the controller"))
