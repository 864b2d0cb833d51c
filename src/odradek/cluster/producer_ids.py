"""Producer ids for InitProducerId, unique across restarts.

Ids are taken from blocks reserved in the metadata store (Kafka's controller hands out blocks the
same way), so a restart skips the rest of a block instead of writing on every id.
"""

from __future__ import annotations

from odradek.cluster.metadata_store import MetadataStore

BLOCK_SIZE = 1000


class ProducerIdManager:
    def __init__(self, store: MetadataStore) -> None:
        self._store = store
        self._next = 0
        self._block_end = 0

    def next_id(self) -> int:
        if self._next >= self._block_end:
            self._next = self._store.reserve_producer_ids(BLOCK_SIZE)
            self._block_end = self._next + BLOCK_SIZE
        producer_id = self._next
        self._next += 1
        return producer_id
