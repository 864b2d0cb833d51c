"""One partition as the broker serves it: its log, high watermark, and readers waiting for data."""

from __future__ import annotations

import contextlib
from collections.abc import Callable

from odradek.cluster.producer_state import NO_PRODUCER_ID, ProducerStateTable
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.protocol.record_batch import BatchHeader
from odradek.storage import AppendInfo, PartitionLog
from odradek.storage.validator import validate_for_leader

# Producer state is rebuilt from this many newest segments; a producer whose last batch is older
# is treated as new, as Kafka treats one whose state expired.
_PRODUCER_STATE_SEGMENTS = 2


class Partition:
    """A partition led by this broker.

    The append policy of a leader lives here, as in Kafka's ``Partition.appendRecordsToLeader``:
    ``min.insync.replicas`` for acks=all, validation by the topic's policy
    (:func:`~odradek.storage.validator.validate_for_leader`), idempotent producers' sequences, then
    the log. With one replica the in-sync set is this broker alone and the high watermark is the
    log end offset; replication moves it only when the in-sync replicas have a record. Requests
    parked in the purgatory (Fetch long-polls, acks=all produces) register a callback that the
    next append or high watermark move calls once. Called on the broker's event loop only.
    """

    def __init__(
        self,
        topic: str,
        index: int,
        log: PartitionLog,
        leader_epoch: int = 0,
        min_insync_replicas: int = 1,
    ) -> None:
        self.topic = topic
        self.index = index
        self.log = log
        self.leader_epoch = leader_epoch
        self.min_insync_replicas = min_insync_replicas
        self.high_watermark = log.log_end_offset
        self._waiters: list[Callable[[], None]] = []
        self._producers: ProducerStateTable | None = None

    @property
    def in_sync_replicas(self) -> int:
        """How many replicas are in sync: this broker only, until partitions are replicated."""
        return 1

    def append_as_leader(
        self, records: bytes | memoryview | None, required_acks: int, now_ms: int
    ) -> AppendInfo:
        """Validate and append a producer's record set; raises :class:`KafkaError` (or its
        subclass :class:`~odradek.storage.validator.RecordsRejected`) when it is refused."""
        if required_acks == -1 and self.in_sync_replicas < self.min_insync_replicas:
            raise KafkaError(
                ErrorCode.not_enough_replicas,
                f"{self.in_sync_replicas} in-sync replica(s) of {self.topic}-{self.index} is "
                f"below min.insync.replicas={self.min_insync_replicas}",
            )
        valid = validate_for_leader(records, self.log.config, now_ms, f"{self.topic}-{self.index}")
        return self.append(valid.buffer, valid.headers, valid.log_append_time)

    def replicated(self, required_offset: int) -> ErrorCode | None:
        """An acks=all produce's answer once the high watermark reached ``required_offset`` (the
        offset after its last record), None while it has not: as Kafka's
        ``checkEnoughReplicasReachOffset``, the in-sync set may have shrunk below
        ``min.insync.replicas`` meanwhile."""
        if self.high_watermark < required_offset:
            return None
        if self.in_sync_replicas < self.min_insync_replicas:
            return ErrorCode.not_enough_replicas_after_append
        return ErrorCode.none

    def append(
        self,
        records: bytearray | memoryview,
        headers: list[BatchHeader],
        log_append_time: int | None,
    ) -> AppendInfo:
        """Append batches already validated (by :meth:`append_as_leader`, or by the coordinator
        that wrote them); a retried idempotent batch gets its first offsets back.

        Raises :class:`KafkaError` for an idempotent producer's sequence gap or fenced epoch.
        """
        producers = None
        if any(h.producer_id != NO_PRODUCER_ID for h in headers):
            producers = self._producer_state()
            earlier = [producers.check(h) for h in headers]
            if earlier[0] is not None and all(e is not None for e in earlier):
                last = earlier[-1]
                assert last is not None
                return AppendInfo(
                    earlier[0].first_offset, last.last_offset, None, self.log.log_start_offset
                )
        info = self.log.append(
            records, headers, log_append_time=log_append_time, leader_epoch=self.leader_epoch
        )
        if producers is not None:
            offset = info.first_offset
            for header in headers:
                producers.record(header, offset)
                offset += header.last_offset_delta + 1
        self.high_watermark = self.log.log_end_offset
        self._wake()
        return info

    def _producer_state(self) -> ProducerStateTable:
        if self._producers is None:
            # Built on the first idempotent append, so partitions without such producers
            # open without reading their segments.
            self._producers = ProducerStateTable()
            self._producers.rebuild(self.log.recent_batch_headers(_PRODUCER_STATE_SEGMENTS))
        return self._producers

    def add_waiter(self, callback: Callable[[], None]) -> None:
        self._waiters.append(callback)

    def remove_waiter(self, callback: Callable[[], None]) -> None:
        with contextlib.suppress(ValueError):
            self._waiters.remove(callback)

    def _wake(self) -> None:
        waiters, self._waiters = self._waiters, []
        for callback in waiters:
            callback()

    def wake_all(self) -> None:
        """Release every waiting reader (the partition is going away)."""
        self._wake()
