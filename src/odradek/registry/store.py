"""The registry's state kept in the cluster: :class:`SchemaStore` writes the records a change
plans to the compacted ``_schemas`` topic and replays the topic into a
:class:`~odradek.registry.state.RegistryState`.

It is a Kafka client of the cluster like Confluent's registry (the project's blocking
:class:`~odradek.client.data.DataClient`), so it needs nothing of the broker that serves it:
every broker's registry replays the same topic and answers reads from its replay. A change reads
the topic to its end, plans against that state, writes with acks=all (answered once the in-sync
replicas have it) and reads the topic again up to its own records before answering, so an id is
allocated from everything committed before it. Two brokers that change the registry at once are
settled by the replay rules of :mod:`.state` (the first record of a version or an id wins); the
loser writes again so that a compaction keeps the winner, and plans again.

On a crash nothing is lost that was answered: the answer followed the commit. A crash between a
losing write and its repair can leave the loser's record last for its key.

Threads: one thread only (the registry's store thread) calls it; the state is its own.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, TypeVar

from odradek.client.core import ClientError, ConnectionFailed, RequestTimeout
from odradek.client.data import EARLIEST, DataClient, KafkaClientError, data_batches
from odradek.clock import Clock, SystemClock
from odradek.protocol.errors import ErrorCode
from odradek.protocol.records import NewRecord, RecordDecodeError, decode_batch, encode_batch
from odradek.registry import errors
from odradek.registry.errors import RegistryError
from odradek.registry.records import Record, SchemaVersion, schema_key, schema_record
from odradek.registry.state import Change, RegistryState, SchemaIdUse, SchemaRequest
from odradek.security.client_settings import ClientSecurity
from odradek.topic_partition import TopicPartition

if TYPE_CHECKING:
    from odradek.registry.metrics import RegistryMetrics

log = logging.getLogger(__name__)

T = TypeVar("T")

SCHEMAS_TOPIC = "_schemas"
CREATE_TOPICS = 19
# Confluent's kafkastore.topic.replication.factor; fewer when the cluster has fewer brokers.
_REPLICATION_FACTOR = 3
_WRITE_ATTEMPTS = 5
_READ_BACK_ATTEMPTS = 50
_STALE_AFTER_MS = 1000
_RETRY_BACKOFF_S = 0.05
_MAX_RETRY_BACKOFF_S = 1.0
_RETRIABLE = frozenset(
    {
        ErrorCode.not_leader_or_follower,
        ErrorCode.leader_not_available,
        ErrorCode.unknown_topic_or_partition,
        ErrorCode.not_enough_replicas,
        ErrorCode.not_enough_replicas_after_append,
        ErrorCode.fenced_leader_epoch,
        ErrorCode.unknown_leader_epoch,
        ErrorCode.request_timed_out,
        ErrorCode.offset_not_available,
        ErrorCode.not_controller,
    }
)


class SchemaStore:
    """The registry's records in ``topic`` of the cluster at ``bootstrap`` (see the module doc).

    Reads answer from the replay, caught up first when it is older than a second, and again when
    what is asked is not found (another broker may have just registered it)."""

    def __init__(
        self,
        bootstrap: str,
        security: ClientSecurity | None = None,
        *,
        topic: str = SCHEMAS_TOPIC,
        timeout_s: float = 30.0,
        clock: Clock | None = None,
        metrics: RegistryMetrics | None = None,
    ) -> None:
        self.state = RegistryState()
        self._metrics = metrics
        self.topic = topic
        self._partition = TopicPartition(topic, 0)
        self._client = DataClient(
            bootstrap, client_id="odradek-schema-registry", timeout_s=timeout_s, security=security
        )
        self._timeout_ms = int(timeout_s * 1000)
        self._clock = clock or SystemClock()
        self._next_offset: int | None = None
        self._caught_up_ms: int | None = None
        # The ids of the replay and their subjects, republished (a new mapping, one reference
        # assignment) as they change: the broker's event loop reads it to validate records'
        # schema ids.
        self.known_ids: Mapping[int, SchemaIdUse] = {}
        self._ids_generation = 0

    def close(self) -> None:
        self._client.close()

    # -- the topic ---------------------------------------------------------------------------

    def _ensure_topic(self) -> None:
        if self.topic in self._client.describe([self.topic]):
            return
        for replication_factor in range(_REPLICATION_FACTOR, 0, -1):
            response = self._client.any_connection().request(
                CREATE_TOPICS,
                {
                    "topics": [
                        {
                            "name": self.topic,
                            "num_partitions": 1,
                            "replication_factor": replication_factor,
                            "assignments": [],
                            "configs": [{"name": "cleanup.policy", "value": "compact"}],
                        }
                    ],
                    "timeout": self._timeout_ms,
                    "validate_only": False,
                },
                highest=7,
            )
            code = response.topics[0].error_code
            if code in (ErrorCode.none, ErrorCode.topic_already_exists):
                log.info("schema registry: topic %s created", self.topic)
                return
            if code != ErrorCode.invalid_replication_factor:
                raise KafkaClientError(code, f"creating {self.topic}")
        raise KafkaClientError(ErrorCode.invalid_replication_factor, f"creating {self.topic}")

    def catch_up(self) -> None:
        """Replay the topic up to its high watermark."""
        if self._next_offset is None:
            self._ensure_topic()
            self._next_offset = self._client.list_offsets([self._partition], EARLIEST)[
                self._partition
            ]
        end = self._client.latest([self._partition])[self._partition]
        replayed = self._caught_up_ms is None
        while self._next_offset < end:
            progressed = False
            for fetched in self._client.fetch_range(self._partition, self._next_offset, end):
                for batch in data_batches(fetched):
                    for record in decode_batch(batch):
                        if record.offset >= self._next_offset:
                            self.state.apply(record.key, record.value)
                            self._next_offset = record.offset + 1
                            progressed = replayed = True
                # Offsets a compaction removed are skipped.
                if fetched.next_offset > self._next_offset:
                    self._next_offset = fetched.next_offset
                    progressed = True
            if not progressed:
                break
        self._caught_up_ms = self._clock.monotonic_ms()
        if self.state.ids_generation != self._ids_generation:
            self._ids_generation = self.state.ids_generation
            self.known_ids = self.state.schema_ids()
        if replayed and self._metrics is not None:
            self._metrics.replayed(*self.state.counts())

    def write(self, records: tuple[Record, ...]) -> None:
        """Append ``records`` with acks=all and replay the topic past them."""
        batch = encode_batch(
            [NewRecord(key, value) for key, value in records], now_ms=self._clock.time_ms()
        )
        base = self._client.produce({self._partition: batch}, acks=-1, timeout_ms=self._timeout_ms)[
            self._partition
        ]
        last = base + len(records) - 1
        for _ in range(_READ_BACK_ATTEMPTS):
            self.catch_up()
            if self._next_offset is not None and self._next_offset > last:
                return
        raise errors.store_timeout(f"reading back offset {last} of {self.topic}")

    # -- operations (each a request of the HTTP API) ----------------------------------------

    def read(self, query: Callable[[RegistryState], T]) -> T:
        """``query`` of the state, caught up when stale or when it finds nothing. Once the
        topic has been read, a cluster that does not answer leaves the replay as it is: reads
        are answered from it, as Confluent's registry answers from its cache."""
        now = self._clock.monotonic_ms()
        if self._caught_up_ms is None or now - self._caught_up_ms >= _STALE_AFTER_MS:
            self._refresh()
        try:
            return query(self.state)
        except RegistryError as e:
            if e.status != 404:
                raise
        self._refresh()
        return query(self.state)

    def refresh(self) -> None:
        """Replay the topic up to its end now (the broker asks, for an id it does not know);
        a cluster that does not answer leaves the replay as it is."""
        self._refresh()

    def _refresh(self) -> None:
        if self._caught_up_ms is None:
            self._guarded(self.catch_up)
            return
        try:
            self.catch_up()
        except (ClientError, RecordDecodeError) as e:
            log.warning("schema registry: answering from the replay as it is: %s", e)
            self._client.close()

    def change(self, plan: Callable[[RegistryState], Change]) -> object:
        """Plan a change on the state caught up, write its records, answer."""

        def run() -> object:
            self.catch_up()
            change = plan(self.state)
            if change.records:
                self.write(change.records)
            return change.answer

        return self._guarded(run)

    def register(
        self, subject: str, request: SchemaRequest, *, normalize: bool = False
    ) -> SchemaVersion:
        """Register (or find) the schema under ``subject``; its version once committed."""

        def run() -> SchemaVersion:
            for _ in range(_WRITE_ATTEMPTS):
                self.catch_up()
                plan = self.state.plan_register(subject, request, normalize=normalize)
                if not plan.records:
                    self._registered(created=False)
                    return plan.version
                self.write(plan.records)
                planned = plan.version
                now = self.state.subjects.get(subject, {}).get(planned.version)
                if now == planned:
                    self._registered(created=True)
                    return planned
                # Another broker's write came first: make a compaction keep the winner.
                repair = (
                    schema_record(now)
                    if now is not None
                    else (schema_key(subject, planned.version), None)
                )
                self.write((repair,))
            raise errors.store_error("too many concurrent registrations, try again")

        return self._guarded(run)

    def _registered(self, *, created: bool) -> None:
        if self._metrics is not None:
            self._metrics.registered(created)

    def _guarded(self, call: Callable[[], T]) -> T:
        """``call``, again while the cluster answers what a moment may mend (a broker down, a
        leadership moving, the topic just created), for up to the store's timeout; other
        client errors are the registry's store errors."""
        # Real time, as the waits between tries are real sleeps.
        deadline = time.monotonic() + self._timeout_ms / 1000
        backoff_s = _RETRY_BACKOFF_S
        while True:
            try:
                return call()
            except RequestTimeout as e:
                raise errors.store_timeout(str(e)) from e
            except (ConnectionFailed, KafkaClientError) as e:
                retriable = isinstance(e, ConnectionFailed) or e.code in _RETRIABLE
                if not retriable or time.monotonic() >= deadline:
                    raise errors.store_error(str(e)) from e
                log.info("schema registry: %s; trying again", e)
                # Fresh connections and metadata: the leader may have moved.
                self._client.close()
            except (ClientError, RecordDecodeError) as e:
                raise errors.store_error(str(e)) from e
            time.sleep(backoff_s)
            backoff_s = min(backoff_s * 2, _MAX_RETRY_BACKOFF_S)
