"""One partition as the broker serves it: its log, high watermark, and readers waiting for data."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable

from odradek.protocol.record_batch import BatchHeader
from odradek.storage import AppendInfo, PartitionLog


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

    def append(
        self, records: bytearray, headers: list[BatchHeader], log_append_time: int | None
    ) -> AppendInfo:
        info = self.log.append(
            records, headers, log_append_time=log_append_time, leader_epoch=self.leader_epoch
        )
        self.high_watermark = self.log.log_end_offset
        self._wake()
        return info

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
