"""The roles of the partitions this broker hosts in a cluster, and the work each role brings
(Kafka's ``ReplicaManager``).

Every hosted partition's state (leader, leader epoch, ISR, written by the controller in
``/brokers/topics/<t>/partitions/<p>/state``) decides its role: this broker named leader → the
partition leads (:meth:`Partition.make_leader`) and stops fetching; another broker named →
the partition follows it, fetched by one of that leader's ``num.replica.fetchers``
:class:`~odradek.cluster.replication.fetcher.LeaderFetcher` (the partition's fetcher id, as
Kafka's); no leader → it follows nobody until
one is elected. A state older than the one applied (a lower leader epoch) changes nothing.

After each state applied, the leadership listeners hear the partition and whether it now leads
(the group coordinator loads or unloads the groups of a ``__consumer_offsets`` partition).

As leader, the partition's ISR changes are this broker's to write (as Kafka's ZooKeeper-era
leaders did): a follower caught up joins after its fetch, followers lagging past
``replica.lag.time.max.ms`` leave at the periodic check (every half of it, as Kafka), each by a
compare-and-set on the state's version; a lost race re-reads the state and applies it. Each
change is queued to the partition's ISR task and never awaited by the fetch or the check that
proposed it (Kafka's ``AlterPartitionManager``): while it is in flight the partition keeps
serving, its high watermark computed over the maximal ISR (KIP-497), and the written ISR is
applied when the write returns. A slow ZooKeeper delays ISR changes, never the fetches.

The data plane is here too, on every broker (a broker that is the whole cluster included):
:meth:`ReplicaManager.append_records` (a Produce's appends, each by its partition's leader
policy, and acks=all's wait for the high watermark, a :class:`~odradek.cluster.replication.
delayed.DelayedProduce`) and :meth:`ReplicaManager.fetch_records` (a Fetch's reads within each
partition's read bound, a follower's fetch reported to the leader's ISR, the long-poll a
:class:`~odradek.cluster.replication.delayed.DelayedFetch`), both parked in the broker's
purgatory. The handlers keep what is particular to a request: sessions, ACLs, old versions and
the encoding.

Crash: nothing here is on disk; the states are in the metadata store, the logs (with their leader
epochs and high watermarks) in storage. Threads: the broker's event loop; the store's writes
happen off it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Generator, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from odradek.clock import Clock
from odradek.cluster.metadata.store import MetadataStore, PartitionState, StaleVersionError
from odradek.cluster.replication.delayed import (
    DelayedFetch,
    DelayedProduce,
    FetchParams,
    FetchPosition,
    FetchResult,
    TopicPartitionKey,
)
from odradek.cluster.replication.fetcher import FetcherConfig, LeaderFetcher, fetcher_id
from odradek.cluster.replication.isr import IsrProposal
from odradek.cluster.replication.partition import NO_LEADER, Partition
from odradek.cluster.replication.purgatory import Purgatory
from odradek.cluster.replication.quota import ReplicationQuotas
from odradek.protocol.errors import ErrorCode, KafkaError, RecordsRejected
from odradek.storage import AppendInfo
from odradek.storage.validator import (
    InflatesPastInline,
    RecordsChecked,
    SchemaIds,
    SchemaIdsRefused,
    Step,
)

log = logging.getLogger(__name__)

# The longest a produce waits for the schema registry's replay when it names an id this
# broker's replay does not know yet (within its timeout, for acks=all).
_SCHEMA_IDS_WAIT_MS = 10_000


class SchemaIdSource(SchemaIds, Protocol):
    """The schema ids this broker's schema registry holds (``source.get(id)``: its subjects;
    see odradek.registry.ids), for topics that validate their records' ids."""

    def refreshed(self) -> Awaitable[None]:
        """Done once a replay of the registry begun after the call has ended."""
        ...


FetcherKey = tuple[int, int]  # leader id, fetcher id


@dataclass(frozen=True, slots=True)
class ProduceEntry:
    """One partition's record set in a Produce."""

    topic: str
    index: int
    records: bytes | memoryview | None


@dataclass(slots=True)
class AppendResult:
    """One partition's answer to a Produce: NONE with what the log took (``appended``), or an
    error with its message and, for records the validation refused, each batch's (index,
    message). An acks=all wait that ends in an error keeps ``appended``: the log has them."""

    error: ErrorCode = ErrorCode.none
    message: str | None = None
    appended: AppendInfo | None = None
    record_errors: list[tuple[int, str]] = field(default_factory=list)
    # The append woke requests parked on the partition (long polls waiting for records).
    woke: bool = False

    def fail(self, error: ErrorCode, message: str | None = None) -> None:
        self.error, self.message = error, message


class ReplicaManager:
    """Leader and follower roles of hosted partitions, the fetchers, and the leaders' ISR
    writes (see the module doc)."""

    def __init__(
        self,
        local_id: int,
        store: MetadataStore,
        hosted: Callable[[str, int], Partition | None],
        read_state: Callable[[str, int], PartitionState | None],
        state_written: Callable[[str, int, PartitionState], None],
        address_of: Callable[[int], str | None],
        checkpoint: Callable[[], None],
        fetcher_config: FetcherConfig,
        clock: Clock,
        replica_lag_time_max_ms: int,
        quotas: ReplicationQuotas | None = None,
        purgatory: Purgatory | None = None,
    ) -> None:
        self.local_id = local_id
        # Where acks=all produces and Fetch long-polls wait (the broker's, shared with the
        # coordinators' commit waits).
        self.purgatory = purgatory or Purgatory()
        # The replication throttles, as leader (the Fetch handler) and as follower (fetchers).
        self.quotas = quotas or ReplicationQuotas(local_id, clock)
        self.store = store
        self._hosted = hosted
        self._read_state = read_state
        self._state_written = state_written
        self._address_of = address_of
        self._checkpoint = checkpoint
        self.fetcher_config = fetcher_config
        self.clock = clock
        self.replica_lag_time_max_ms = replica_lag_time_max_ms
        self._states: dict[tuple[str, int], PartitionState] = {}
        # By (leader id, fetcher id): ``num.replica.fetchers`` fetchers for each leader.
        self._fetchers: dict[FetcherKey, LeaderFetcher] = {}
        self._following: dict[tuple[str, int], FetcherKey] = {}  # partition → its fetcher
        self._isr_task: asyncio.Task[None] | None = None
        # Each partition's ISR change in flight (at most one: the tracker proposes no other).
        self._isr_writes: dict[tuple[str, int], asyncio.Task[None]] = {}
        self._brokers_changing = asyncio.Lock()
        # Held while a big record set is checked in steps (see _check_in_steps).
        self._checking_in_steps = asyncio.Lock()
        # Called with a partition and whether it leads, after each state applied to it (so
        # also again for the same role: listeners must be idempotent).
        self.leadership_listeners: list[Callable[[Partition, bool], None]] = []
        # ISR changes this broker wrote as leader (Kafka's IsrShrinksPerSec, IsrExpandsPerSec),
        # for the metrics endpoint.
        self.isr_shrinks = 0
        self.isr_expands = 0
        # The schema registry's ids (set once the broker's registry serves): None refuses the
        # records of topics that validate schema ids.
        self.schema_ids: SchemaIdSource | None = None
        # Called with the topic of each produce that schema id validation refused (metrics).
        self.schema_refusal_listeners: list[Callable[[str], None]] = []
        # A broker that is the whole cluster: no follower ever holds up an acks=all answer.
        self.alone = False

    def start(self) -> None:
        self._isr_task = asyncio.create_task(self._check_isr_periodically(), name="isr-check")

    async def stop(self) -> None:
        if self._isr_task is not None:
            self._isr_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._isr_task
        for write in list(self._isr_writes.values()):
            write.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await write
        for fetcher in list(self._fetchers.values()):
            await fetcher.stop()
        self._fetchers.clear()
        self._following.clear()

    # -- the data plane --------------------------------------------------------------------------

    async def append_records(
        self,
        entries: Sequence[ProduceEntry],
        acks: int,
        timeout_ms: int,
        *,
        origin: str = "",
        api_key: int = -1,
        waiting: Callable[[], None] | None = None,
    ) -> list[AppendResult]:
        """Append each entry as its partition's leader and answer by ``acks`` (Kafka's
        ``appendRecords``): acks=all answers once the high watermark passes every append, or
        ``timeout_ms`` (REQUEST_TIMED_OUT). ``origin``: the client, for the log; ``api_key``:
        the request whose wait the purgatory measures; ``waiting``: called when, the appends
        done, the acks=all wait begins (the connection may take its next request)."""
        results: list[AppendResult] = []
        waits: list[tuple[AppendResult, Partition, int]] = []
        unknown_ids: list[tuple[Partition, ProduceEntry, AppendResult]] = []
        for entry in entries:
            result = AppendResult()
            results.append(result)
            if acks not in (-1, 0, 1):
                result.fail(ErrorCode.invalid_required_acks, f"acks={acks} is not -1, 0 or 1")
                continue
            partition, unknown = await self._append_entry(entry, acks, origin, result)
            if partition is None:
                result.fail(ErrorCode.unknown_topic_or_partition)
            elif unknown:
                unknown_ids.append((partition, entry, result))
            elif acks == -1 and result.appended is not None:
                waits.append((result, partition, result.appended.last_offset + 1))
        if unknown_ids:
            # Ids registered a moment ago (perhaps through another broker): once more, after a
            # replay of the registry begun now.
            wait_ms = min(timeout_ms, _SCHEMA_IDS_WAIT_MS) if acks == -1 else _SCHEMA_IDS_WAIT_MS
            await self._schema_ids_refreshed(wait_ms)
            now_ms = self.clock.time_ms()
            for partition, entry, result in unknown_ids:
                self._append_one(partition, entry, acks, now_ms, origin, result, first=False)
                if acks == -1 and result.appended is not None:
                    waits.append((result, partition, result.appended.last_offset + 1))
        parked = False
        if waits:
            delayed = DelayedProduce([(partition, offset) for _, partition, offset in waits])
            if not delayed.try_complete():
                if waiting is not None:
                    waiting()
                parked = True
                await self.purgatory.park(
                    delayed.watched(), delayed.try_complete, timeout_ms / 1000, api_key
                )
            for (result, _, _), outcome in zip(waits, delayed.outcomes(), strict=True):
                if outcome != ErrorCode.none:
                    result.fail(outcome)
        if not parked and any(result.woke for result in results):
            # The long polls the appends woke answer first, as Kafka completes its delayed
            # fetches in the thread that appended: a consumer waiting for these records gets
            # them before the producer hears they are in.
            await asyncio.sleep(0)
        return results

    async def _append_entry(
        self, entry: ProduceEntry, acks: int, origin: str, result: AppendResult
    ) -> tuple[Partition | None, bool]:
        """Append one partition's records (see :meth:`_append_one`), checking a big record set
        in steps first: one its headers show to be big, or one found to inflate past what the
        loop decompresses inline. The partition (None if not hosted here) and whether the
        records named schema ids to look for again."""
        partition = self._hosted(entry.topic, entry.index)
        if partition is None:
            return None, False
        now_ms = self.clock.time_ms()
        checked = None
        inflating = False
        while True:
            steps = partition.checking_records(entry.records, inflating=inflating)
            if steps is not None:
                checked = await self._check_in_steps(steps)
                # Other requests ran meanwhile: the partition may have gone.
                partition = self._hosted(entry.topic, entry.index)
                if partition is None:
                    return None, False
                now_ms = self.clock.time_ms()
            try:
                unknown = self._append_one(
                    partition, entry, acks, now_ms, origin, result, first=True, checked=checked
                )
            except InflatesPastInline:
                # Again after steps only when the topic's limit changed meanwhile.
                if inflating and steps is None:
                    raise
                inflating = True
                continue
            return partition, unknown

    async def _check_in_steps(
        self, steps: Generator[Step, bytes | RecordsRejected | None, RecordsChecked | None]
    ) -> RecordsChecked | None:
        """Run the steps of a big record set's check (see
        :func:`~odradek.storage.validator.checking_in_steps`) so that the loop serves others
        meanwhile: the decompression on a worker thread (cramjam releases the GIL), the scan on
        the loop, giving way after each part. One record set at a time, so the decompressed
        copies take no more memory than when the loop checked one set after the other."""
        async with self._checking_in_steps:
            sent: bytes | RecordsRejected | None = None
            try:
                while True:
                    step = steps.send(sent)
                    if step is None:
                        sent = None
                        await asyncio.sleep(0)
                    else:
                        sent = await asyncio.to_thread(step.run)
            except StopIteration as done:
                checked: RecordsChecked | None = done.value
                return checked

    async def _schema_ids_refreshed(self, timeout_ms: int) -> None:
        source = self.schema_ids
        if source is not None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(source.refreshed(), timeout_ms / 1000)

    def _append_one(
        self,
        partition: Partition,
        entry: ProduceEntry,
        acks: int,
        now_ms: int,
        origin: str,
        result: AppendResult,
        *,
        first: bool,
        checked: RecordsChecked | None = None,
    ) -> bool:
        """Append the entry, or fill ``result`` with why not; True (nothing filled yet) when
        this is the ``first`` try and it named schema ids the registry's replay may learn.
        ``checked``: its records' framing checks, made ahead in steps."""
        source = self.schema_ids
        waiters = partition.has_waiters
        try:
            result.appended = partition.append_as_leader(
                entry.records, acks, now_ms, source, checked
            )
            result.woke = waiters
        except SchemaIdsRefused as e:
            if first and e.unknown and source is not None:
                return True
            log.info("refused produce to %s from %s: %s", partition.name, origin, e.message)
            result.fail(e.code, e.message)
            result.record_errors = list(e.record_errors)
            for listener in self.schema_refusal_listeners:
                listener(partition.topic)
        except RecordsRejected as e:
            log.info("refused produce to %s from %s: %s", partition.name, origin, e.message)
            result.fail(e.code, e.message)
            result.record_errors = list(e.record_errors)
        except KafkaError as e:
            result.fail(e.code, e.message)
        return False

    async def fetch_records(
        self,
        params: FetchParams,
        partitions: Sequence[tuple[TopicPartitionKey, FetchPosition]],
        *,
        api_key: int = -1,
    ) -> FetchResult:
        """Read the partitions for a Fetch (Kafka's ``fetchMessages``): a follower's fetch
        first tells each led partition the follower's log end offset (so that the high
        watermark it gets back counts them); if fewer than ``min_bytes`` are there and no
        partition ends the wait, the fetch waits in the purgatory (a
        :class:`~odradek.cluster.replication.delayed.DelayedFetch`) for them or
        ``max_wait_ms``. A follower's bytes of throttled partitions count against the leader
        quota."""
        errors = None
        if params.from_follower and not params.denied:
            errors = self._followers_fetched(params.replica_id, partitions)
        delayed = DelayedFetch(params, partitions, self._hosted, self.quotas, errors)
        result = delayed.read()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + params.max_wait_ms / 1000
        while not delayed.satisfied(result) and (remaining := deadline - loop.time()) > 0:
            completed = await self.purgatory.park(
                delayed.watched(), delayed.try_complete, remaining, api_key
            )
            result = delayed.read()
            if not completed:
                break
        if params.from_follower:
            self._record_throttled(result)
        return result

    def _followers_fetched(
        self, replica_id: int, partitions: Sequence[tuple[TopicPartitionKey, FetchPosition]]
    ) -> dict[TopicPartitionKey, ErrorCode]:
        """A follower's fetch offsets told to the partitions led here; those it may not
        fetch, by error."""
        errors: dict[TopicPartitionKey, ErrorCode] = {}
        for key, position in partitions:
            partition = self._hosted(*key)
            if partition is None or not partition.is_leader:
                continue
            try:
                self.follower_fetched(partition, replica_id, position.fetch_offset)
            except KafkaError as e:
                errors[key] = e.code
        return errors

    def _record_throttled(self, result: FetchResult) -> None:
        """The bytes sent to a follower for throttled partitions count against the quota."""
        quotas = self.quotas
        size = sum(
            p.records_size
            for t in result.topics
            for p in t.partitions
            if p.records_size and quotas.leader_throttled(t.name, p.index)
        )
        if size:
            quotas.leader.record(size)

    # -- roles ---------------------------------------------------------------------------------

    def refresh(self, topic: str, index: int) -> None:
        """Read the partition's state and put the hosted partition in its role."""
        partition = self._hosted(topic, index)
        if partition is None:
            self.forget(topic, index)
            return
        state = self._read_state(topic, index)
        if state is not None:
            self.apply(partition, state)

    def log_dir_failed(self, partition: Partition) -> None:
        """The partition's log dir went offline (KIP-112): it stops fetching from its leader,
        the leadership listeners hear it leads no more (a coordinator unloads its groups), and
        :meth:`apply` leaves it without a role from now on."""
        self._unfollow((partition.topic, partition.index))
        for listener in self.leadership_listeners:
            try:
                listener(partition, False)
            except Exception:
                log.exception("%s: a leadership listener failed", partition.name)

    def apply(self, partition: Partition, state: PartitionState) -> None:
        tp = (partition.topic, partition.index)
        if partition.log.offline:
            self._states[tp] = state
            self._unfollow(tp)
            return
        known = self._states.get(tp)
        if known is not None and (state.leader_epoch, state.version) < (
            known.leader_epoch,
            known.version,
        ):
            return
        self._states[tp] = state
        replicas = self._replicas(partition, state)
        if state.leader == self.local_id:
            was_leading = partition.is_leader and partition.leader_epoch == state.leader_epoch
            if partition.make_leader(state.leader_epoch, replicas, state.isr, state.version):
                self._unfollow(tp)
                if not was_leading:
                    log.info(
                        "%s: leader in epoch %d, ISR %s",
                        partition.name,
                        state.leader_epoch,
                        state.isr,
                    )
                self._leadership_changed(partition)
            return
        changed = partition.make_follower(state.leader, state.leader_epoch, replicas, state.isr)
        self._leadership_changed(partition)
        if state.leader == NO_LEADER:
            self._unfollow(tp)
            return
        followed = self._following.get(tp)
        if changed or followed is None or followed[0] != state.leader:
            self._follow(partition, state.leader)

    def _leadership_changed(self, partition: Partition) -> None:
        for listener in self.leadership_listeners:
            try:
                listener(partition, partition.is_leader)
            except Exception:
                log.exception("%s: a leadership listener failed", partition.name)

    def _replicas(self, partition: Partition, state: PartitionState) -> tuple[int, ...]:
        topic = self.store.topics.get(partition.topic)
        assigned = topic.replicas_of(partition.index) if topic is not None else ()
        return tuple(assigned) or tuple(state.isr)

    def _follow(self, partition: Partition, leader_id: int) -> None:
        tp = (partition.topic, partition.index)
        self._unfollow(tp)
        key = (leader_id, fetcher_id(*tp, self.fetcher_config.fetchers_per_leader))
        fetcher = self._fetcher(key)
        if fetcher is None:
            log.warning("%s: leader %d has no known address yet", partition.name, leader_id)
            return
        fetcher.add(partition)
        self._following[tp] = key
        log.info(
            "%s: following leader %d in epoch %d from offset %d",
            partition.name,
            leader_id,
            partition.leader_epoch,
            partition.log.log_end_offset,
        )

    def _unfollow(self, tp: tuple[str, int]) -> None:
        key = self._following.pop(tp, None)
        if key is not None and key in self._fetchers:
            self._fetchers[key].remove(*tp)

    def _fetcher(self, key: FetcherKey) -> LeaderFetcher | None:
        fetcher = self._fetchers.get(key)
        if fetcher is not None:
            return fetcher
        leader_id, fetcher_index = key
        address = self._address_of(leader_id)
        if address is None:
            return None
        fetcher = LeaderFetcher(
            leader_id,
            address,
            self.fetcher_config,
            self._checkpoint,
            self.quotas,
            self.clock,
            fetcher_id=fetcher_index,
        )
        fetcher.start()
        self._fetchers[key] = fetcher
        return fetcher

    def forget(self, topic: str, index: int) -> None:
        """The partition is no longer hosted here (deleted, or reassigned away)."""
        self._states.pop((topic, index), None)
        self._unfollow((topic, index))

    async def brokers_changed(self) -> None:
        """Broker registrations changed: a leader may have come back at another address, or a
        partition may wait for a leader whose address was unknown. Calls run one at a time,
        and a fetcher leaves ``_fetchers`` before it is stopped, so that no partition is handed
        to a fetcher on its way out."""
        async with self._brokers_changing:
            stopping: list[LeaderFetcher] = []
            for key, fetcher in list(self._fetchers.items()):
                address = self._address_of(key[0])
                if address is not None and address != fetcher.address:
                    stopping.append(self._fetchers.pop(key))
                    for tp, followed in list(self._following.items()):
                        if followed == key:
                            del self._following[tp]
            for tp, state in list(self._states.items()):
                partition = self._hosted(*tp)
                if (
                    partition is not None
                    and state.leader not in (NO_LEADER, self.local_id)
                    and tp not in self._following
                    and not partition.log.offline
                ):
                    self._follow(partition, state.leader)
            for key, fetcher in list(self._fetchers.items()):
                if not fetcher.partitions:
                    stopping.append(self._fetchers.pop(key))
            for fetcher in stopping:
                await fetcher.stop()

    # -- the leader's ISR ----------------------------------------------------------------------

    def follower_fetched(self, partition: Partition, replica_id: int, fetch_offset: int) -> None:
        """A follower's fetch reached the leader: the high watermark may move, and a follower
        caught up joins the ISR."""
        if partition.follower_fetched(replica_id, fetch_offset):
            proposal = partition.propose_isr_shrink()
            if proposal is not None:
                log.warning(
                    "%s: in-sync follower %d fetches from %d, below the high watermark %d: it "
                    "lost committed records, so it leaves the ISR now",
                    partition.name,
                    replica_id,
                    fetch_offset,
                    partition.high_watermark,
                )
                self._write_isr(partition, proposal)
            return
        if replica_id not in partition.isr:
            proposal = partition.propose_isr_expand()
            if proposal is not None:
                self._write_isr(partition, proposal)

    async def _check_isr_periodically(self) -> None:
        interval = max(self.replica_lag_time_max_ms / 2, 1) / 1000
        while True:
            await asyncio.sleep(interval)
            try:
                self.check_isr()
            except Exception:
                log.exception("ISR check failed")

    def check_isr(self) -> None:
        """Shrink the ISR of every led partition with followers lagging too long."""
        for tp in list(self._states):
            partition = self._hosted(*tp)
            if partition is not None and partition.is_leader and not partition.log.offline:
                proposal = partition.propose_isr_shrink()
                if proposal is not None:
                    self._write_isr(partition, proposal)

    def _write_isr(self, partition: Partition, proposal: IsrProposal) -> None:
        """Queue the ISR change to the partition's ISR task; the caller goes on at once."""
        tp = (partition.topic, partition.index)
        if tp in self._isr_writes:
            partition.isr_write_failed()  # one in flight already: proposed again later
            return
        task = asyncio.get_running_loop().create_task(
            self._write_isr_now(partition, proposal), name=f"isr-{partition.name}"
        )
        self._isr_writes[tp] = task
        task.add_done_callback(lambda _: self._isr_writes.pop(tp, None))

    async def _write_isr_now(self, partition: Partition, proposal: IsrProposal) -> None:
        tp = (partition.topic, partition.index)
        known = self._states.get(tp)
        controller_epoch = known.controller_epoch if known is not None else 0
        state = PartitionState(
            self.local_id,
            proposal.leader_epoch,
            proposal.isr,
            controller_epoch,
            proposal.zk_version,
        )
        try:
            written = await self.store.write_partition_state(*tp, state, proposal.zk_version)
        except StaleVersionError:
            partition.isr_write_failed()
            log.info("%s: ISR change to %s lost a race; re-reading", partition.name, proposal.isr)
            await self._reread(partition)
            return
        except Exception:
            partition.isr_write_failed()
            log.exception("%s: could not write ISR %s", partition.name, proposal.isr)
            return
        log.info(
            "%s: ISR %s -> %s (epoch %d)",
            partition.name,
            known.isr if known is not None else "?",
            written.isr,
            written.leader_epoch,
        )
        before = set(known.isr) if known is not None else set()
        if before - set(written.isr):
            self.isr_shrinks += 1
        if set(written.isr) - before:
            self.isr_expands += 1
        if self._hosted(*tp) is not partition:
            return  # deleted or reassigned away meanwhile
        now = self._states.get(tp)
        if now is not None and (now.leader_epoch, now.version) > (
            written.leader_epoch,
            written.version,
        ):
            return  # a newer state (the controller's) was applied while the write was out
        self._states[tp] = written
        self._state_written(*tp, written)
        partition.isr_written(written.isr, written.leader_epoch, written.version)

    async def _reread(self, partition: Partition) -> None:
        """After a lost compare-and-set: the state as the store holds it now, applied."""
        tp = (partition.topic, partition.index)
        try:
            current = await self.store.partition_state(*tp)
        except Exception as e:
            log.warning("%s: could not re-read the partition state: %r", partition.name, e)
            return
        if current is not None and self._hosted(*tp) is partition:
            self._state_written(*tp, current)
            self.apply(partition, current)


def single_broker_replica_manager(
    local_id: int,
    store: MetadataStore,
    hosted: Callable[[str, int], Partition | None],
    checkpoint: Callable[[], None],
    clock: Clock,
    purgatory: Purgatory,
    replica_lag_time_max_ms: int = 30_000,
) -> ReplicaManager:
    """The replica manager of a broker that is the whole cluster: the topic manager makes each
    partition its own leader, nothing is followed and no partition state is read or written, so
    only the data plane works (never :meth:`ReplicaManager.start`)."""
    manager = ReplicaManager(
        local_id,
        store,
        hosted,
        lambda *_: None,
        lambda *_: None,
        lambda _: None,
        checkpoint,
        FetcherConfig(local_id),
        clock,
        replica_lag_time_max_ms,
        purgatory=purgatory,
    )
    manager.alone = True
    return manager
