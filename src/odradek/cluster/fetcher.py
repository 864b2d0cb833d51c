"""Followers copying their leaders' logs: one fetcher task per leader (Kafka's
``ReplicaFetcherThread``), over the Kafka protocol with the project's asyncio client.

A partition this broker follows is handed to the fetcher of its leader. Before its first fetch
(and after every leader change) the fetcher finds where the local log diverges from the
leader's: OffsetForLeaderEpoch for the log's latest epoch, truncation to the end of that epoch as
the leader has it, again while the answer names an epoch this log lacks (KIP-101, KIP-279); the
log manager checkpoints before the partition is appended to again (recovery trusts what lies below
a checkpointed recovery point). Then it fetches with ``replica_id`` set to this broker's id from
each partition's log end offset, appends the leader's batches as they are, and takes the leader's
high watermark. The leader learns the follower's log end offset from the next fetch.

Errors: a partition whose leader answers NOT_LEADER_OR_FOLLOWER, FENCED_LEADER_EPOCH,
UNKNOWN_LEADER_EPOCH or UNKNOWN_TOPIC_OR_PARTITION waits ``replica.fetch.backoff.ms`` (the
partition's state in the metadata store, not the fetcher, decides who leads); OFFSET_OUT_OF_RANGE
sends it back to truncation, and a log that ends before the leader's starts is emptied and
restarted at the leader's log start offset. A lost connection is opened again after the backoff.

Throttling (``cluster/quota.py``): while the follower quota is exceeded, throttled partitions
this broker is not in the ISR of are left out of the fetch, and what is copied for throttled
partitions is recorded.

Runs on the broker's event loop; partitions are added and removed by the replica manager there.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import logging
from collections.abc import Callable
from dataclasses import dataclass

from odradek.client.aio import AsyncConnection
from odradek.client.core import ClientError
from odradek.client.security import ClientSecurity
from odradek.cluster.partition import Partition
from odradek.cluster.quota import ReplicationQuotas
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.storage import UnexpectedAppendOffset

log = logging.getLogger(__name__)

FETCH = 1
LIST_OFFSETS = 2
OFFSET_FOR_LEADER_EPOCH = 23
_FETCH_VERSION = 12  # topics by name; replica_id in the request (v15 moved it)
_EARLIEST = -2
# How long a fetcher whose every partition is held back by its quota waits before looking again.
_THROTTLED_PAUSE_S = 0.1

TopicPartition = tuple[str, int]

_WAIT_FOR_METADATA = frozenset(
    {
        ErrorCode.not_leader_or_follower,
        ErrorCode.fenced_leader_epoch,
        ErrorCode.unknown_leader_epoch,
        ErrorCode.unknown_topic_or_partition,
        ErrorCode.kafka_storage_error,
    }
)


@dataclass(frozen=True, slots=True)
class FetcherConfig:
    """The follower's ``replica.fetch.*`` settings."""

    local_id: int
    max_wait_ms: int = 500
    min_bytes: int = 1
    max_bytes: int = 10 * 1024 * 1024
    partition_max_bytes: int = 1024 * 1024
    backoff_ms: int = 1000
    socket_timeout_ms: int = 30_000
    # TLS and SASL of the inter-broker listener (None: PLAINTEXT).
    security: ClientSecurity | None = None


class LeaderFetcher:
    """Copies the partitions this broker follows from one leader (see the module doc)."""

    def __init__(
        self,
        leader_id: int,
        address: str,
        config: FetcherConfig,
        checkpoint: Callable[[], None],
        quotas: ReplicationQuotas | None = None,
    ) -> None:
        self.leader_id = leader_id
        self._quotas = quotas
        self.address = address
        self.config = config
        self._checkpoint = checkpoint
        self._partitions: dict[TopicPartition, Partition] = {}
        self._truncating: set[TopicPartition] = set()
        self._delayed: dict[TopicPartition, float] = {}  # until loop.time()
        self._changed = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._connection: AsyncConnection | None = None
        self._stopping = False

    @property
    def partitions(self) -> frozenset[TopicPartition]:
        return frozenset(self._partitions)

    def add(self, partition: Partition) -> None:
        """Follow ``partition`` from this leader, finding the divergence point first."""
        tp = (partition.topic, partition.index)
        self._partitions[tp] = partition
        self._truncating.add(tp)
        self._delayed.pop(tp, None)
        self._changed.set()

    def remove(self, topic: str, index: int) -> None:
        tp = (topic, index)
        self._partitions.pop(tp, None)
        self._truncating.discard(tp)
        self._delayed.pop(tp, None)

    def start(self) -> None:
        self._task = asyncio.create_task(
            self._run(), name=f"replica-fetcher-{self.config.local_id}-from-{self.leader_id}"
        )

    async def stop(self) -> None:
        self._stopping = True
        self._changed.set()
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        if self._connection is not None:
            await self._connection.close()
            self._connection = None

    # -- the loop ------------------------------------------------------------------------------

    async def _run(self) -> None:
        backoff_s = self.config.backoff_ms / 1000
        while not self._stopping:
            try:
                if not self._partitions:
                    # Nothing to follow from this leader (its partitions moved): no connection
                    # and no reconnecting to a leader that may be gone.
                    if self._connection is not None:
                        await self._connection.close()
                        self._connection = None
                    await self._idle()
                    continue
                if self._connection is None or self._connection.closed:
                    self._connection = await AsyncConnection.open(
                        self.address,
                        client_id=f"broker-{self.config.local_id}-fetcher-{self.leader_id}",
                        timeout_s=self.config.socket_timeout_ms / 1000,
                        security=self.config.security,
                    )
                await self._round(self._connection)
            except asyncio.CancelledError:
                raise
            except (ClientError, OSError) as e:
                log.info(
                    "broker %d cannot fetch from leader %d at %s: %s",
                    self.config.local_id,
                    self.leader_id,
                    self.address,
                    e,
                )
                if self._connection is not None:
                    await self._connection.close()
                    self._connection = None
                await asyncio.sleep(backoff_s)
            except Exception:
                log.exception("replica fetcher from leader %d failed", self.leader_id)
                await asyncio.sleep(backoff_s)

    async def _round(self, connection: AsyncConnection) -> None:
        ready = self._ready()
        if not ready:
            await self._idle()
            return
        truncating = [tp for tp in ready if tp in self._truncating]
        if truncating:
            await self._truncate(connection, truncating)
            return
        await self._fetch(connection, ready)

    def _ready(self) -> list[TopicPartition]:
        now = asyncio.get_running_loop().time()
        return [tp for tp in self._partitions if self._delayed.get(tp, 0.0) <= now]

    async def _idle(self) -> None:
        """Nothing to fetch: wait for a partition to be added or a backoff to end."""
        self._changed.clear()
        now = asyncio.get_running_loop().time()
        wake = min(self._delayed.values(), default=None)
        timeout = None if wake is None else max(wake - now, 0.0)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._changed.wait(), timeout)

    def _back_off(self, tp: TopicPartition, why: str) -> None:
        log.debug("%s-%d: waiting %d ms (%s)", *tp, self.config.backoff_ms, why)
        self._delayed[tp] = asyncio.get_running_loop().time() + self.config.backoff_ms / 1000

    # -- truncation ----------------------------------------------------------------------------

    async def _truncate(self, connection: AsyncConnection, tps: list[TopicPartition]) -> None:
        asked: dict[TopicPartition, Partition] = {}
        topics: dict[str, list[dict[str, int]]] = {}
        for tp in tps:
            hosted = self._partitions[tp]
            latest = hosted.log.latest_epoch
            if latest is None:
                # No epoch known (an empty log): nothing to compare, nothing to cut.
                self._truncating.discard(tp)
                continue
            asked[tp] = hosted
            topics.setdefault(tp[0], []).append(
                {
                    "partition": tp[1],
                    "current_leader_epoch": hosted.leader_epoch,
                    "leader_epoch": latest,
                }
            )
        if not asked:
            return
        response = await connection.request(
            OFFSET_FOR_LEADER_EPOCH,
            {
                "replica_id": self.config.local_id,
                "topics": [{"topic": t, "partitions": ps} for t, ps in topics.items()],
            },
            highest=4,
        )
        truncated = False
        for topic in response.topics:
            for answer in topic.partitions:
                tp = (topic.topic, int(answer.partition))
                asked_of = asked.get(tp)
                if asked_of is None or self._partitions.get(tp) is not asked_of:
                    continue  # removed meanwhile
                partition = asked_of
                if answer.error_code != ErrorCode.none:
                    self._back_off(tp, f"OffsetForLeaderEpoch: {ErrorCode(answer.error_code).name}")
                    continue
                before = partition.log.log_end_offset
                outcome = partition.log.truncate_to_epoch_end(
                    int(answer.leader_epoch),
                    int(answer.end_offset),
                    high_watermark=partition.high_watermark,
                )
                if partition.log.log_end_offset != before:
                    truncated = True
                    partition.truncated()
                    log.info(
                        "%s-%d: truncated from %d to %d to follow leader %d (epoch %d)",
                        *tp,
                        before,
                        partition.log.log_end_offset,
                        self.leader_id,
                        partition.leader_epoch,
                    )
                if outcome.complete:
                    self._truncating.discard(tp)
        if truncated:
            self._checkpoint()

    # -- fetching ------------------------------------------------------------------------------

    def _held_back(self, tp: TopicPartition) -> bool:
        quotas = self._quotas
        if quotas is None:
            return False
        in_sync = self.config.local_id in self._partitions[tp].isr
        return quotas.follower_holds_back(*tp, in_sync)

    async def _fetch(self, connection: AsyncConnection, tps: list[TopicPartition]) -> None:
        config = self.config
        tps = [tp for tp in tps if not self._held_back(tp)]
        if not tps:
            await asyncio.sleep(_THROTTLED_PAUSE_S)
            return
        sent: dict[TopicPartition, tuple[Partition, int]] = {}
        topics: dict[str, list[dict[str, int]]] = {}
        for tp in tps:
            partition = self._partitions[tp]
            offset = partition.log.log_end_offset
            sent[tp] = (partition, offset)
            topics.setdefault(tp[0], []).append(
                {
                    "partition": tp[1],
                    "current_leader_epoch": partition.leader_epoch,
                    "fetch_offset": offset,
                    "log_start_offset": partition.log.log_start_offset,
                    "partition_max_bytes": config.partition_max_bytes,
                }
            )
        response = await connection.request(
            FETCH,
            {
                "replica_id": config.local_id,
                "max_wait": datetime.timedelta(milliseconds=config.max_wait_ms),
                "min_bytes": config.min_bytes,
                "max_bytes": config.max_bytes,
                "isolation_level": 0,
                "session_id": 0,
                "session_epoch": -1,
                "topics": [{"topic": t, "partitions": ps} for t, ps in topics.items()],
                "forgotten_topics_data": [],
                "rack_id": "",
            },
            version=min(_FETCH_VERSION, connection.version_for(FETCH, _FETCH_VERSION)),
            timeout_s=(config.socket_timeout_ms + config.max_wait_ms) / 1000,
        )
        if response.error_code != ErrorCode.none:
            for tp in sent:
                self._back_off(tp, f"Fetch: {ErrorCode(response.error_code).name}")
            return
        out_of_range: list[TopicPartition] = []
        for topic in response.responses:
            for data in topic.partitions:
                tp = (topic.topic, int(data.partition_index))
                entry = sent.get(tp)
                if entry is None or self._partitions.get(tp) is not entry[0]:
                    continue  # removed, or handed to a new leader, meanwhile
                partition, offset = entry
                if partition.log.log_end_offset != offset:
                    continue  # truncated meanwhile: this data is stale
                code = ErrorCode(data.error_code)
                if code == ErrorCode.none:
                    self._take(tp, partition, data.records, int(data.high_watermark))
                    self._catch_up_log_start(partition, int(data.log_start_offset))
                elif code == ErrorCode.offset_out_of_range:
                    out_of_range.append(tp)
                elif code in _WAIT_FOR_METADATA:
                    self._back_off(tp, f"Fetch: {code.name}")
                else:
                    log.warning("%s-%d: leader %d answered %s", *tp, self.leader_id, code.name)
                    self._back_off(tp, f"Fetch: {code.name}")
        if out_of_range:
            await self._out_of_range(connection, out_of_range)

    def _take(
        self, tp: TopicPartition, partition: Partition, records: bytes | None, high_watermark: int
    ) -> None:
        if records and self._quotas is not None and self._quotas.follower_throttled(*tp):
            self._quotas.follower.record(len(records))
        try:
            partition.append_as_follower(records or b"")
        except UnexpectedAppendOffset as e:
            # The leader's log has a gap here (compaction) or the follower's is stale: find
            # the divergence point again.
            log.warning("%s-%d: %s; truncating again", *tp, e)
            self._truncating.add(tp)
            return
        except KafkaError as e:
            log.warning("%s-%d: leader %d sent %s", *tp, self.leader_id, e.message)
            self._back_off(tp, e.message)
            return
        partition.follow_high_watermark(high_watermark)

    def _catch_up_log_start(self, partition: Partition, leader_log_start: int) -> None:
        """Retention and DeleteRecords at the leader move the follower's log start too."""
        log_ = partition.log
        if log_.log_start_offset < leader_log_start <= log_.log_end_offset:
            log_.delete_records_before(leader_log_start)

    async def _out_of_range(self, connection: AsyncConnection, tps: list[TopicPartition]) -> None:
        """A fetch offset the leader does not have: past its end (truncate, by epoch) or before
        its start (this log is too old: start afresh at the leader's log start)."""
        response = await connection.request(
            LIST_OFFSETS,
            {
                "replica_id": self.config.local_id,
                "isolation_level": 0,
                "topics": [
                    {
                        "name": topic,
                        "partitions": [
                            {
                                "partition_index": index,
                                "current_leader_epoch": self._partitions[
                                    (topic, index)
                                ].leader_epoch,
                                "timestamp": _EARLIEST,
                            }
                            for t, index in tps
                            if t == topic
                        ],
                    }
                    for topic in {t for t, _ in tps}
                ],
            },
            highest=7,
        )
        for topic in response.topics:
            for answer in topic.partitions:
                tp = (topic.name, int(answer.partition_index))
                partition = self._partitions.get(tp)
                if partition is None:
                    continue
                if answer.error_code != ErrorCode.none:
                    self._back_off(tp, f"ListOffsets: {ErrorCode(answer.error_code).name}")
                    continue
                leader_start = int(answer.offset)
                if partition.log.log_end_offset < leader_start:
                    log.warning(
                        "%s-%d: log ends at %d, before leader %d's log start %d: starting "
                        "afresh there",
                        *tp,
                        partition.log.log_end_offset,
                        self.leader_id,
                        leader_start,
                    )
                    partition.log.truncate_fully_and_start_at(leader_start)
                    partition.truncated()
                    self._checkpoint()
                else:
                    self._truncating.add(tp)
