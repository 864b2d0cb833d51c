"""A coordinator's internal topic (``__consumer_offsets``, ``__transaction_state``): compacted,
created on first need as Kafka creates it, and written one RecordBatch v2 at a time through the
broker's own append path (``Partition.append`` on the leader, synchronously, as Kafka's
``appendRecords``). Reading back is :mod:`odradek.coordinator.log_reader`'s.

A crash after an append leaves the batch in the log (replayed on the next load) or not at all
(the coordinator answered nothing yet). Called on the broker's event loop only.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from odradek.clock import Clock
from odradek.cluster.partition import Partition
from odradek.cluster.topics import TopicManager
from odradek.config import BrokerConfig
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.protocol.record_batch import InvalidBatch, validate_batches
from odradek.protocol.records import NewRecord, encode_batch
from odradek.storage import AppendInfo

NO_PRODUCER_ID = -1


class InternalTopic:
    """One internal topic: ``<prefix>.num.partitions``, ``<prefix>.replication.factor`` (fewer
    while fewer brokers are live, as Kafka's tests run it; Kafka itself refuses until enough
    brokers are up) and ``<prefix>.segment.bytes`` from the broker's settings, plus ``configs``
    of its own."""

    def __init__(
        self,
        name: str,
        prefix: str,
        topics: TopicManager,
        config: BrokerConfig,
        clock: Clock,
        configs: Mapping[str, str],
    ) -> None:
        self.name = name
        self.prefix = prefix
        self.topics = topics
        self.config = config
        self.clock = clock
        self._configs = dict(configs)

    @property
    def partitions(self) -> int:
        """The topic's partition count, or the one it will be created with."""
        existing = self.topics.topic(self.name)
        if existing is not None:
            return existing.partitions
        return self.config.get_int(f"{self.prefix}.num.partitions")

    def replication(self) -> int:
        return min(
            self.config.get_int(f"{self.prefix}.replication.factor"),
            self.topics.live_broker_count(),
        )

    def ensure(self) -> None:
        if self.topics.topic(self.name) is not None:
            return
        self.topics.create_topic(
            self.name,
            self.config.get_int(f"{self.prefix}.num.partitions"),
            self.replication(),
            {
                "cleanup.policy": "compact",
                "segment.bytes": str(self.config.get_int(f"{self.prefix}.segment.bytes")),
                **self.topic_configs(),
            },
        )

    def topic_configs(self) -> dict[str, str]:
        """The topic's own configs beyond compaction and segment size."""
        return dict(self._configs)

    def partition(self, index: int) -> Partition | None:
        return self.topics.partition(self.name, index)

    def append(
        self,
        index: int,
        records: Sequence[tuple[bytes, bytes | None]],
        *,
        producer_id: int = NO_PRODUCER_ID,
        producer_epoch: int = -1,
        transactional: bool = False,
    ) -> tuple[Partition, AppendInfo]:
        """Append ``records`` as one batch to partition ``index`` as its leader; the partition
        and where the batch went. Raises :class:`KafkaError` (UNKNOWN_TOPIC_OR_PARTITION,
        NOT_LEADER_OR_FOLLOWER, RECORD_LIST_TOO_LARGE, KAFKA_STORAGE_ERROR, …)."""
        self.ensure()
        target = self.partition(index)
        if target is None:
            raise KafkaError(
                ErrorCode.unknown_topic_or_partition, f"{self.name}-{index} is missing"
            )
        batch = bytearray(
            encode_batch(
                [NewRecord(key, value) for key, value in records],
                producer_id=producer_id,
                producer_epoch=producer_epoch,
                # A coordinator's transactional batch is Kafka's: base sequence 0, checked for
                # the producer's epoch only, never for its sequence.
                base_sequence=0 if transactional else -1,
                transactional=transactional,
                now_ms=self.clock.time_ms(),
            )
        )
        max_bytes = self.topics.topic_config(self.name).get_int("max.message.bytes")
        try:
            headers = validate_batches(batch, max_bytes)
        except InvalidBatch as e:
            code = (
                ErrorCode.record_list_too_large
                if e.error == "message_too_large"
                else ErrorCode.corrupt_message
            )
            raise KafkaError(code, str(e)) from e
        try:
            return target, target.append(batch, headers, None)
        except OSError as e:
            raise KafkaError(ErrorCode.kafka_storage_error, str(e)) from e
