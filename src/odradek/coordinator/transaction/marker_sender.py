"""What follows a transaction's Prepare record (the marker half of Kafka's
``TransactionMarkerChannelManager``): its COMMIT or ABORT marker written to every partition of the
transaction (:class:`~odradek.coordinator.transaction.markers.MarkerChannel`), then its Complete
record written to ``__transaction_state`` through the coordinator runtime.

A Complete record that cannot be written yet (too few in-sync replicas of
``__transaction_state`` while a broker is down, a commit timeout) leaves the transaction prepared,
and its producer answered CONCURRENT_TRANSACTIONS, until it is written: it is retried with
backoff (50 ms doubling to 1 s) for as long as this broker coordinates the transaction, as Kafka
retries its append.

Crash: nothing of its own; a transaction without its Complete record is still prepared in the
log, and its markers are sent again by the next load. Runs on the broker's event loop.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from odradek.coordinator.transaction.coordinator import MarkerJob, TransactionCoordinator, TxnWrite
from odradek.coordinator.transaction.markers import RETRY_FIRST_S, RETRY_MAX_S, MarkerChannel
from odradek.protocol.errors import ErrorCode

log = logging.getLogger(__name__)


class MarkerSender:
    """Completes ending transactions of ``coordinator``: markers through ``channel``, then the
    Complete record through ``write_record`` (NONE once committed, else the error);
    ``stopping`` says when to give up."""

    def __init__(
        self,
        channel: MarkerChannel,
        coordinator: TransactionCoordinator,
        write_record: Callable[[TxnWrite], Awaitable[ErrorCode]],
        stopping: Callable[[], bool],
    ) -> None:
        self.channel = channel
        self._coordinator = coordinator
        self._write_record = write_record
        self._stopping = stopping

    async def complete(self, job: MarkerJob) -> None:
        """Write ``job``'s markers to every partition, then the Complete record."""
        try:
            await self.channel.send(job, lambda: self._still_owned(job))
            delay = RETRY_FIRST_S
            while (write := self._coordinator.markers_done(job)) is not None:
                error = await self._write_record(write)
                if error == ErrorCode.none:
                    break
                log.info(
                    "completing transaction %s failed (%s); retrying",
                    job.transactional_id,
                    error.name,
                )
                await asyncio.sleep(delay)
                delay = min(delay * 2, RETRY_MAX_S)
                if self._stopping():
                    break
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("sending the markers of transaction %s failed", job.transactional_id)

    def _still_owned(self, job: MarkerJob) -> bool:
        """Whether this broker still coordinates ``job``'s transaction in the epoch that
        started it (a new epoch fences the old markers)."""
        coordinator = self._coordinator
        index = coordinator.partition_for(job.transactional_id)
        return coordinator.coordinator_epoch(index) == job.coordinator_epoch
