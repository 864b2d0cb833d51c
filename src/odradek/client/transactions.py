"""A blocking transactional producer's control plane: Kafka's transaction protocol (KIP-98).

:class:`TransactionalProducer` does what a Kafka producer with a ``transactional.id`` does around
its data, over a :class:`~odradek.client.data.DataClient`'s connections: InitProducerId at the
id's transaction coordinator (which bumps the epoch, aborts whatever an earlier producer of the
id left open and fences it), AddPartitionsToTxn before the first batch to a partition,
AddOffsetsToTxn and TxnOffsetCommit to commit a group's offsets inside the transaction, EndTxn.
It hands out the sequence numbers of the batches the caller encodes (per partition from 0 after
each InitProducerId, as the epoch bump resets them) and reads committed offsets back with
OffsetFetch ``require_stable``, which waits out a transaction still committing offsets.

The data itself goes out through :meth:`DataClient.send_produce` with ``transactional_id`` set:
the caller encodes transactional batches (producer id, epoch, sequence, transactional bit).

Retries: answers that mean "not now" — CONCURRENT_TRANSACTIONS (the previous transaction's
markers are still being written), COORDINATOR_LOAD_IN_PROGRESS, NOT_COORDINATOR /
COORDINATOR_NOT_AVAILABLE (look the coordinator up again), UNSTABLE_OFFSET_COMMIT, a broken
connection — are retried with a growing pause until ``timeout_s``; anything else raises
:class:`~odradek.client.data.KafkaClientError` (PRODUCER_FENCED or INVALID_PRODUCER_EPOCH when a
newer producer of the id took over). Not thread-safe; the clock and the pause are injected.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from odradek.client.blocking import BlockingConnection
from odradek.client.core import ConnectionFailed
from odradek.client.data import DataClient, KafkaClientError, TopicPartition
from odradek.protocol.errors import ErrorCode

T = TypeVar("T")

OFFSET_FETCH, FIND_COORDINATOR = 9, 10
INIT_PRODUCER_ID, ADD_PARTITIONS_TO_TXN, ADD_OFFSETS_TO_TXN, END_TXN = 22, 24, 25, 26
TXN_OFFSET_COMMIT = 28

GROUP_KEY, TRANSACTION_KEY = 0, 1
NO_OFFSET = -1

_RETRIABLE = frozenset(
    {
        ErrorCode.concurrent_transactions,
        ErrorCode.coordinator_load_in_progress,
        ErrorCode.not_coordinator,
        ErrorCode.coordinator_not_available,
        ErrorCode.unstable_offset_commit,
    }
)
_COORDINATOR_MOVED = frozenset({ErrorCode.not_coordinator, ErrorCode.coordinator_not_available})
_FIRST_PAUSE_S = 0.01
_MAX_PAUSE_S = 0.25


class _Retry(Exception):
    def __init__(self, code: ErrorCode) -> None:
        super().__init__(code.name)
        self.code = code


@dataclass(frozen=True, slots=True)
class CommittedOffset:
    offset: int
    metadata: str


class TransactionalProducer:
    """One ``transactional_id``'s producer session against the cluster of ``client``.

    Call :meth:`init` once (and again after a failure), then per transaction :meth:`begin`,
    :meth:`add_partitions` before producing to a partition, :meth:`next_sequence` for each batch,
    optionally :meth:`send_offsets`, and :meth:`commit` or :meth:`abort`.
    """

    def __init__(
        self,
        client: DataClient,
        transactional_id: str,
        *,
        transaction_timeout_ms: int = 60_000,
        timeout_s: float = 60.0,
        clock: Callable[[], float] = time.monotonic,
        pause: Callable[[float], None] = time.sleep,
    ) -> None:
        self.client = client
        self.transactional_id = transactional_id
        self.transaction_timeout_ms = transaction_timeout_ms
        self.timeout_s = timeout_s
        self._clock = clock
        self._pause = pause
        self.producer_id = -1
        self.producer_epoch = -1
        self._coordinators: dict[tuple[int, str], str] = {}
        self._sequences: dict[TopicPartition, int] = {}
        self._partitions: set[TopicPartition] = set()
        self._groups: set[str] = set()
        self.in_transaction = False

    # -- plumbing --------------------------------------------------------------------------------

    def _coordinator(self, key_type: int, key: str) -> BlockingConnection:
        address = self._coordinators.get((key_type, key))
        if address is None:
            response = self.client.any_connection().request(
                FIND_COORDINATOR, {"key": key, "key_type": key_type}, highest=3
            )
            code = ErrorCode(response.error_code)
            if code != ErrorCode.none:
                raise (_Retry(code) if code in _RETRIABLE else KafkaClientError(code, key))
            address = self._coordinators[(key_type, key)] = f"{response.host}:{response.port}"
        return self.client.connection_to(address)

    def _call(self, what: str, call: Callable[[], T]) -> T:
        """``call`` until it stops answering "not now", within ``timeout_s``."""
        deadline = self._clock() + self.timeout_s
        pause = _FIRST_PAUSE_S
        while True:
            try:
                return call()
            except _Retry as e:
                last: Exception = KafkaClientError(e.code, what)
                if e.code in _COORDINATOR_MOVED:
                    self._coordinators.clear()
            except ConnectionFailed as e:
                last = e
                self._coordinators.clear()
                self.client.close()
            if self._clock() + pause > deadline:
                raise last
            self._pause(pause)
            pause = min(pause * 2, _MAX_PAUSE_S)

    @staticmethod
    def _check(code: Any, what: str) -> None:
        error = ErrorCode(code)
        if error in _RETRIABLE:
            raise _Retry(error)
        if error != ErrorCode.none:
            raise KafkaClientError(error, what)

    def _txn_request(self, api_key: int, fields: Mapping[str, Any], highest: int) -> Any:
        connection = self._coordinator(TRANSACTION_KEY, self.transactional_id)
        return connection.request(api_key, fields, highest=highest)

    # -- the session -----------------------------------------------------------------------------

    def init(self) -> None:
        """InitProducerId: this producer's id and a new epoch; an earlier producer of the id is
        fenced and its open transaction aborted (the call waits until that abort completes)."""

        def call() -> None:
            response = self._txn_request(
                INIT_PRODUCER_ID,
                {
                    "transactional_id": self.transactional_id,
                    "transaction_timeout": self.transaction_timeout_ms,
                    "producer_id": -1,
                    "producer_epoch": -1,
                },
                highest=4,
            )
            self._check(response.error_code, f"InitProducerId for {self.transactional_id!r}")
            self.producer_id = int(response.producer_id)
            self.producer_epoch = int(response.producer_epoch)

        self._call("InitProducerId", call)
        self._sequences.clear()
        self._partitions.clear()
        self._groups.clear()
        self.in_transaction = False

    def begin(self) -> None:
        if self.producer_id < 0:
            raise RuntimeError("init() first")
        if self.in_transaction:
            raise RuntimeError("a transaction is already open")
        self.in_transaction = True
        self._partitions.clear()
        self._groups.clear()

    def add_partitions(self, partitions: Iterable[TopicPartition]) -> None:
        """AddPartitionsToTxn for those of ``partitions`` not yet in the transaction."""
        self._require_transaction()
        new = sorted(set(partitions) - self._partitions)
        if not new:
            return
        topics: dict[str, list[int]] = {}
        for tp in new:
            topics.setdefault(tp.topic, []).append(tp.partition)

        def call() -> None:
            response = self._txn_request(
                ADD_PARTITIONS_TO_TXN,
                {
                    "v3_and_below_transactional_id": self.transactional_id,
                    "v3_and_below_producer_id": self.producer_id,
                    "v3_and_below_producer_epoch": self.producer_epoch,
                    "v3_and_below_topics": [
                        {"name": t, "partitions": ps} for t, ps in topics.items()
                    ],
                },
                highest=3,
            )
            for topic in response.results_by_topic_v3_and_below:
                for p in topic.results_by_partition:
                    self._check(
                        p.partition_error_code,
                        f"AddPartitionsToTxn {topic.name}-{p.partition_index}",
                    )

        self._call("AddPartitionsToTxn", call)
        self._partitions.update(new)

    def next_sequence(self, partition: TopicPartition, records: int) -> int:
        """The base sequence of the next batch of ``records`` records to ``partition``."""
        base = self._sequences.get(partition, 0)
        self._sequences[partition] = (base + records) & 0x7FFFFFFF
        return base

    def send_offsets(
        self, group_id: str, offsets: Mapping[TopicPartition, tuple[int, str]]
    ) -> None:
        """Commit ``offsets`` (offset, metadata) of ``group_id`` as part of the transaction:
        AddOffsetsToTxn at the transaction coordinator, then TxnOffsetCommit at the group's."""
        self._require_transaction()
        if group_id not in self._groups:

            def add() -> None:
                response = self._txn_request(
                    ADD_OFFSETS_TO_TXN,
                    {
                        "transactional_id": self.transactional_id,
                        "producer_id": self.producer_id,
                        "producer_epoch": self.producer_epoch,
                        "group_id": group_id,
                    },
                    highest=3,
                )
                self._check(response.error_code, f"AddOffsetsToTxn {group_id!r}")

            self._call("AddOffsetsToTxn", add)
            self._groups.add(group_id)
        topics: dict[str, list[dict[str, Any]]] = {}
        for tp, (offset, metadata) in sorted(offsets.items()):
            topics.setdefault(tp.topic, []).append(
                {
                    "partition_index": tp.partition,
                    "committed_offset": offset,
                    "committed_leader_epoch": -1,
                    "committed_metadata": metadata,
                }
            )

        def commit() -> None:
            response = self._coordinator(GROUP_KEY, group_id).request(
                TXN_OFFSET_COMMIT,
                {
                    "transactional_id": self.transactional_id,
                    "group_id": group_id,
                    "producer_id": self.producer_id,
                    "producer_epoch": self.producer_epoch,
                    "generation_id": -1,
                    "member_id": "",
                    "group_instance_id": None,
                    "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()],
                },
                highest=3,
            )
            for topic in response.topics:
                for p in topic.partitions:
                    where = f"{topic.name}-{p.partition_index}"
                    self._check(p.error_code, f"TxnOffsetCommit {group_id!r} {where}")

        self._call("TxnOffsetCommit", commit)

    def commit(self) -> None:
        self._end(True)

    def abort(self) -> None:
        self._end(False)

    def _end(self, committed: bool) -> None:
        self._require_transaction()

        def call() -> None:
            response = self._txn_request(
                END_TXN,
                {
                    "transactional_id": self.transactional_id,
                    "producer_id": self.producer_id,
                    "producer_epoch": self.producer_epoch,
                    "committed": committed,
                },
                highest=3,
            )
            self._check(response.error_code, "EndTxn")

        self._call("EndTxn", call)
        self.in_transaction = False

    def _require_transaction(self) -> None:
        if not self.in_transaction:
            raise RuntimeError("begin() first")

    # -- reading offsets back --------------------------------------------------------------------

    def committed(
        self, group_id: str, partitions: Iterable[TopicPartition]
    ) -> dict[TopicPartition, CommittedOffset]:
        """The offsets ``group_id`` has committed for ``partitions`` (those without one are
        absent), waiting while a transaction that commits offsets of the group is ending."""
        wanted: dict[str, list[int]] = {}
        for tp in sorted(set(partitions)):
            wanted.setdefault(tp.topic, []).append(tp.partition)

        def call() -> dict[TopicPartition, CommittedOffset]:
            response = self._coordinator(GROUP_KEY, group_id).request(
                OFFSET_FETCH,
                {
                    "group_id": group_id,
                    "topics": [{"name": t, "partition_indexes": ps} for t, ps in wanted.items()],
                    "require_stable": True,
                },
                lowest=7,
                highest=7,
            )
            self._check(response.error_code, f"OffsetFetch {group_id!r}")
            found = {}
            for topic in response.topics:
                for p in topic.partitions:
                    self._check(p.error_code, f"OffsetFetch {group_id!r}")
                    if int(p.committed_offset) != NO_OFFSET:
                        found[TopicPartition(topic.name, int(p.partition_index))] = CommittedOffset(
                            int(p.committed_offset), p.metadata or ""
                        )
            return found

        return self._call("OffsetFetch", call)
