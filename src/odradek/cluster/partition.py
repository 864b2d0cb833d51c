"""One partition as the broker serves it: its log, high watermark, and readers waiting for data."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable

from odradek.cluster.producer_state import NO_PRODUCER_ID, ProducerStateTable
from odradek.protocol.record_batch import BatchHeader
from odradek.storage import AppendInfo, PartitionLog

# Producer state is rebuilt from this many newest segments; a producer whose last batch is older
# is treated as new, as Kafka treats one whose state expired.
_PRODUCER_STATE_SEGMENTS = 2


class Partition:
    """A partition led by this broker.

    With one replica the high watermark is the log end offset; replication will move it only when
    the in-sync replicas have a record. Fetches waiting for data register a callback that the next
    append (or high watermark move) calls once.
    """

    def __init__(self, topic: str, index: int, log: PartitionLog, leader_epoch: int = 0) -> None:
        self.topic = topic
        self.index = index
        self.log = log
        self.leader_epoch = leader_epoch
        self.high_watermark = log.log_end_offset
        self._waiters: list[Callable[[], None]] = []
        self._producers: ProducerStateTable | None = None

    def append(
        self,
        records: bytearray | memoryview,
        headers: list[BatchHeader],
        log_append_time: int | None,
    ) -> AppendInfo:
        """Append validated batches; a retried idempotent batch gets its first offsets back.

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


def future_waker(future: asyncio.Future[None]) -> Callable[[], None]:
    def wake() -> None:
        if not future.done():
            future.set_result(None)

    return wake
