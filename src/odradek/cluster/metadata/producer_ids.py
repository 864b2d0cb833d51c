"""Producer ids for InitProducerId, unique across restarts.

Ids are taken from blocks reserved in the metadata store (Kafka's controller hands out blocks the
same way), so a restart skips the rest of a block instead of writing on every id.

Reserving a block in a cluster waits for ZooKeeper, so it never happens inside
:meth:`ProducerIdManager.next_id`: the next block is reserved in the background once most of the
current one is used, as Kafka's ``RPCProducerIdManager`` prefetches, and :meth:`ready` awaits a
block for callers that can wait. A store that answers at once (a single broker's) is asked when
a block runs out. Called on the broker's event loop only.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from odradek.cluster.metadata.store import MetadataStore, result_now
from odradek.protocol.errors import ErrorCode, KafkaError

log = logging.getLogger(__name__)

BLOCK_SIZE = 1000
# The share of a block used when the next one is asked for.
PREFETCH_AT = 0.9


class ProducerIdManager:
    def __init__(self, store: MetadataStore) -> None:
        self._store = store
        self._next = 0
        self._block_end = 0
        self._prefetched: int | None = None
        self._reserving: asyncio.Task[None] | None = None

    async def ready(self, timeout_s: float) -> bool:
        """Whether an id is at hand within ``timeout_s`` (reserving a block if none is)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        if self._store.answers_at_once:
            return True
        while self._next >= self._block_end and self._prefetched is None:
            self._reserve()
            assert self._reserving is not None
            remaining = deadline - loop.time()
            if remaining <= 0:
                return False
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(self._reserving), remaining)
        return True

    def next_id(self) -> int:
        """The next id; COORDINATOR_LOAD_IN_PROGRESS (retriable, as Kafka answers) while the
        next block is still being reserved."""
        if self._next >= self._block_end:
            if self._prefetched is None and self._store.answers_at_once:
                self._prefetched = result_now(self._store.reserve_producer_ids(BLOCK_SIZE))
            if self._prefetched is None:
                self._reserve()
                raise KafkaError(
                    ErrorCode.coordinator_load_in_progress,
                    "the next block of producer ids is being reserved",
                )
            self._next, self._prefetched = self._prefetched, None
            self._block_end = self._next + BLOCK_SIZE
        producer_id = self._next
        self._next += 1
        # A store that answers at once is asked when the block runs out instead.
        running_low = self._block_end - self._next < BLOCK_SIZE * (1 - PREFETCH_AT)
        if running_low and not self._store.answers_at_once:
            self._reserve()
        return producer_id

    def _reserve(self) -> None:
        if self._prefetched is None and (self._reserving is None or self._reserving.done()):
            self._reserving = asyncio.get_running_loop().create_task(
                self._fetch_block(), name="producer-id-block"
            )

    async def _fetch_block(self) -> None:
        try:
            self._prefetched = await self._store.reserve_producer_ids(BLOCK_SIZE)
        except Exception as e:
            log.warning("could not reserve a block of producer ids: %r", e)
