"""Log compaction with real clients: the latest value of every key stays at its offset,
tombstones go after delete.retention.ms, keyless records are refused, readers see a consistent
log while the cleaner works, and ``__consumer_offsets`` is compacted like any compacted topic.

The broker runs on a manual clock that starts at the real time; its cleaner looks for work
every 50 ms of real time.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator

import pytest
from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    Message,
    Producer,
    TopicPartition,
)
from kafka import KafkaConsumer
from kafka import TopicPartition as KafkaTopicPartition

from odradek.clock import ManualClock
from odradek.storage import PartitionLog
from odradek.testing import RunningBroker, running_broker, wait_until

TIMEOUT_S = 15
POLL_S = 0.05
DAY_MS = 86_400_000
Record = tuple[int, bytes | None, bytes | None]


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory, clock: ManualClock) -> Iterator[RunningBroker]:
    with running_broker(
        tmp_path_factory.mktemp("compaction"),
        clock=clock,
        log_cleaner_backoff_ms="50",
        log_cleaner_min_cleanable_ratio="0.01",
        offsets_topic_num_partitions="1",
        offsets_topic_segment_bytes="2000",
        group_initial_rebalance_delay_ms="0",
    ) as running:
        yield running


def compacted_topic(make_topic: Callable[..., str], name: str, **configs: str) -> str:
    settings = {
        "cleanup_policy": "compact",
        "segment_bytes": "1000",
        "min_cleanable_dirty_ratio": "0.01",
        "delete_retention_ms": str(DAY_MS),
    }
    settings.update(configs)
    return make_topic(name, **settings)


class Acks:
    """Delivery reports: offset → (key, value) of what the broker stored, and any errors."""

    def __init__(self) -> None:
        self.stored: dict[int, tuple[bytes | None, bytes | None]] = {}
        self.errors: list[KafkaError] = []

    def __call__(self, err: KafkaError | None, message: Message) -> None:
        if err is not None:
            self.errors.append(err)
            return
        offset = message.offset()
        assert offset is not None
        self.stored[offset] = (message.key(), message.value())

    def latest(self) -> dict[bytes | None, Record]:
        last: dict[bytes | None, Record] = {}
        for offset in sorted(self.stored):
            key, value = self.stored[offset]
            last[key] = (offset, key, value)
        return last


def produce_rounds(
    bootstrap: str, topic: str, acks: Acks, rounds: int, keys: int, start: int = 0
) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    for r in range(start, start + rounds):
        for k in range(keys):
            producer.produce(
                topic, f"value-{k}-{r}".encode(), key=f"key-{k}".encode(), on_delivery=acks
            )
        producer.flush(TIMEOUT_S)
    assert not acks.errors


def read_all(bootstrap: str, topic: str) -> list[Record]:
    """Every record from the log start to the high watermark, as a consumer gets them."""
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "reader", "enable.partition.eof": True}
    )
    try:
        _, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=TIMEOUT_S)
        consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        records: list[Record] = []
        deadline = time.monotonic() + TIMEOUT_S
        while True:
            assert time.monotonic() < deadline, "the partition was not read to its end"
            message = consumer.poll(0.5)
            if message is None:
                continue
            if message.error() is not None:
                assert message.error().code() == KafkaError._PARTITION_EOF, message.error()
                if message.offset() >= high:
                    return records
                continue
            offset = message.offset()
            assert offset is not None
            records.append((offset, message.key(), message.value()))
            if offset + 1 >= high:
                return records
    finally:
        consumer.close()


def partition_log(broker: RunningBroker, topic: str) -> PartitionLog:
    assert broker.broker is not None
    found = broker.broker.logs.get(topic, 0)
    assert found is not None
    return found


def active_base(broker: RunningBroker, topic: str) -> int:
    async def look() -> int:
        return partition_log(broker, topic).segments[-1].base_offset

    return broker.call(look())


def partition_log_end(broker: RunningBroker, topic: str) -> int:
    async def look() -> int:
        return partition_log(broker, topic).log_end_offset

    return broker.call(look())


def is_compacted(records: list[Record], below: int) -> bool:
    keys = [key for offset, key, _ in records if offset < below]
    return len(keys) == len(set(keys))


def check_against_acks(records: list[Record], acks: Acks) -> None:
    offsets = [offset for offset, _, _ in records]
    assert offsets == sorted(set(offsets)), "offsets repeat or go back"
    for offset, key, value in records:
        assert acks.stored[offset] == (key, value), f"offset {offset} changed"
    present = set(records)
    for key, record in acks.latest().items():
        if record[2] is not None:
            assert record in present, f"the latest value of {key!r} is gone"


def test_compaction_keeps_the_latest_value_per_key_then_drops_tombstones(
    broker: RunningBroker,
    bootstrap: str,
    clock: ManualClock,
    make_topic: Callable[..., str],
    topic_name: str,
) -> None:
    compacted_topic(make_topic, topic_name)
    acks = Acks()
    produce_rounds(bootstrap, topic_name, acks, rounds=15, keys=10)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    for k in (3, 7):  # tombstones: delete two keys
        producer.produce(topic_name, None, key=f"key-{k}".encode(), on_delivery=acks)
    producer.flush(TIMEOUT_S)
    produce_rounds(bootstrap, topic_name, acks, rounds=10, keys=2, start=100)  # roll past them
    tombstones = {offset for offset, (_, value) in acks.stored.items() if value is None}
    assert len(tombstones) == 2

    end = active_base(broker, topic_name)
    assert end > max(tombstones)
    wait_until(
        lambda: is_compacted(read_all(bootstrap, topic_name), end), TIMEOUT_S, POLL_S, "compaction"
    )
    records = read_all(bootstrap, topic_name)
    check_against_acks(records, acks)
    assert {offset for offset, _, value in records if value is None} == tombstones
    assert not [r for r in records if r[1] in (b"key-3", b"key-7") and r[2] is not None]
    assert len(records) < len(acks.stored) / 3

    clock.advance(DAY_MS)  # delete.retention.ms later the tombstones go, with no new writes
    wait_until(
        lambda: not [r for r in read_all(bootstrap, topic_name) if r[2] is None],
        TIMEOUT_S,
        POLL_S,
        "tombstone removal",
    )
    records = read_all(bootstrap, topic_name)
    check_against_acks(records, acks)
    assert not [r for r in records if r[1] in (b"key-3", b"key-7")]


def test_keyless_records_are_refused_on_a_compacted_topic(
    bootstrap: str, make_topic: Callable[..., str], topic_name: str
) -> None:
    compacted_topic(make_topic, topic_name)
    acks = Acks()
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    producer.produce(topic_name, b"no key", on_delivery=acks)
    producer.flush(TIMEOUT_S)
    producer.produce(topic_name, b"keyed", key=b"k", on_delivery=acks)
    producer.flush(TIMEOUT_S)
    assert [e.code() for e in acks.errors] == [KafkaError.INVALID_RECORD]
    assert acks.stored == {0: (b"k", b"keyed")}


def test_readers_see_a_consistent_log_while_the_cleaner_works(
    broker: RunningBroker,
    bootstrap: str,
    make_topic: Callable[..., str],
    topic_name: str,
) -> None:
    compacted_topic(make_topic, topic_name)
    assert broker.broker is not None and broker.broker.cleaner is not None
    cleaner = broker.broker.cleaner
    acks = Acks()
    reads: list[list[Record]] = []
    failures: list[BaseException] = []
    stop = threading.Event()

    def reader() -> None:
        try:
            while not stop.is_set():
                reads.append(read_all(bootstrap, topic_name))
        except BaseException as e:  # reported below, on the test's thread
            failures.append(e)

    produce_rounds(bootstrap, topic_name, acks, rounds=5, keys=20)
    passes = cleaner.passes
    thread = threading.Thread(target=reader)
    thread.start()
    # Writes go on until the reader has read the whole log several times while the cleaner
    # rewrote it: how many reads fit in a fixed number of rounds depends on the machine's load.
    deadline = time.monotonic() + 4 * TIMEOUT_S
    r = 5
    try:
        while (len(reads) <= 3 or cleaner.passes <= passes + 2) and not failures:
            assert time.monotonic() < deadline, (len(reads), cleaner.passes - passes)
            produce_rounds(bootstrap, topic_name, acks, rounds=5, keys=20, start=r)
            r += 5
    finally:
        stop.set()
        thread.join(TIMEOUT_S)
    assert not failures, failures
    assert cleaner.passes > passes + 2, "the cleaner did not run while the reader read"
    assert len(reads) > 3
    for records in reads:
        offsets = [offset for offset, _, _ in records]
        assert offsets == sorted(set(offsets))
        assert all(acks.stored[o] == (k, v) for o, k, v in records)
    check_against_acks(read_all(bootstrap, topic_name), acks)


def test_consumer_offsets_is_compacted_and_still_replays(
    broker: RunningBroker,
    bootstrap: str,
    make_topic: Callable[..., str],
    topic_name: str,
) -> None:
    make_topic(topic_name)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    for i in range(5):
        producer.produce(topic_name, f"v{i}".encode())
    producer.flush(TIMEOUT_S)
    group = f"{topic_name}-group"
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False}
    )
    try:
        for offset in range(1, 150):  # many commits of one partition: a compactable history
            consumer.commit(
                offsets=[TopicPartition(topic_name, 0, offset % 5 + 1)], asynchronous=False
            )
        consumer.commit(offsets=[TopicPartition(topic_name, 0, 4)], asynchronous=False)
    finally:
        consumer.close()
    offsets_log = partition_log(broker, "__consumer_offsets")
    assert offsets_log.config.compact

    def compacted() -> bool:
        async def look() -> bool:
            return offsets_log.size_bytes() < 2 * 2000 and offsets_log.segment_count() > 1

        return broker.call(look())

    wait_until(compacted, TIMEOUT_S, POLL_S, "__consumer_offsets compaction")

    broker.restart()  # the coordinator replays the compacted log
    consumer = Consumer(
        {"bootstrap.servers": broker.bootstrap, "group.id": group, "enable.auto.commit": False}
    )
    try:
        [committed] = consumer.committed([TopicPartition(topic_name, 0)], timeout=TIMEOUT_S)
        assert committed.offset == 4
    finally:
        consumer.close()


def test_clients_read_past_an_idempotent_producers_emptied_batch(
    broker: RunningBroker,
    bootstrap: str,
    make_topic: Callable[..., str],
    topic_name: str,
) -> None:
    compacted_topic(make_topic, topic_name)
    acks = Acks()
    idempotent = Producer(
        {"bootstrap.servers": bootstrap, "linger.ms": 0, "enable.idempotence": True}
    )
    for k in range(5):
        idempotent.produce(topic_name, b"first", key=f"key-{k}".encode(), on_delivery=acks)
    idempotent.flush(TIMEOUT_S)
    produce_rounds(bootstrap, topic_name, acks, rounds=12, keys=5)  # overwrites every key
    end = active_base(broker, topic_name)
    wait_until(
        lambda: is_compacted(read_all(bootstrap, topic_name), end), TIMEOUT_S, POLL_S, "compaction"
    )

    async def producer_batches() -> list[tuple[int, int]]:
        headers = partition_log(broker, topic_name).recent_batch_headers(100)
        return [(h.base_offset, h.record_count) for h in headers if h.producer_id >= 0]

    assert [count for _, count in broker.call(producer_batches())] == [0]  # kept, emptied
    records = read_all(bootstrap, topic_name)  # librdkafka reads past it
    check_against_acks(records, acks)
    assert not [r for r in records if r[2] == b"first"]

    reader = KafkaConsumer(
        bootstrap_servers=bootstrap, enable_auto_commit=False, consumer_timeout_ms=1500
    )
    try:
        partition = KafkaTopicPartition(topic_name, 0)
        reader.assign([partition])
        reader.seek_to_beginning(partition)
        read = [(m.offset, m.key, m.value) for m in reader]
    finally:
        reader.close()
    assert read == records  # and so does kafka-python


def test_compaction_removes_aborted_transactions_then_their_markers(
    broker: RunningBroker,
    bootstrap: str,
    clock: ManualClock,
    make_topic: Callable[..., str],
    topic_name: str,
) -> None:
    compacted_topic(make_topic, topic_name)
    producer = Producer(
        {"bootstrap.servers": bootstrap, "transactional.id": topic_name, "linger.ms": 0}
    )
    producer.init_transactions(TIMEOUT_S)
    filler = b"f" * 100

    def transaction(values: dict[int, bytes], commit: bool) -> int:
        """The offset of the transaction's marker, once it is in the log (the coordinator
        writes it after answering the producer)."""
        start = partition_log_end(broker, topic_name)
        producer.begin_transaction()
        for k, value in values.items():
            producer.produce(topic_name, value + filler, key=f"key-{k}".encode())
            producer.flush(TIMEOUT_S)  # a batch per record: segments roll (segment.bytes=1000)
        if commit:
            producer.commit_transaction(TIMEOUT_S)
        else:
            producer.abort_transaction(TIMEOUT_S)
        marker = start + len(values)
        wait_until(
            lambda: partition_log_end(broker, topic_name) > marker, TIMEOUT_S, POLL_S, "the marker"
        )
        return marker

    transaction({k: b"committed-%d" % k for k in range(6)}, commit=True)
    abort_marker = transaction({k: b"aborted-%d" % k for k in range(6)}, commit=False)
    transaction({k: b"later-%d" % k for k in range(6, 12)}, commit=True)
    end = active_base(broker, topic_name)

    def aborted_gone() -> bool:
        values = [v for offset, _, v in read_all(bootstrap, topic_name) if offset < end]
        return not any(v is not None and v.startswith(b"aborted") for v in values)

    wait_until(aborted_gone, TIMEOUT_S, POLL_S, "the cleaner removing the aborted transaction")
    records = read_all(bootstrap, topic_name)
    latest = {key: value for _, key, value in records if value is not None}
    # Compaction kept the committed value of every key, not the newer aborted one.
    assert {k: v[: -len(filler)] for k, v in latest.items()} == {
        **{f"key-{k}".encode(): b"committed-%d" % k for k in range(6)},
        **{f"key-{k}".encode(): b"later-%d" % k for k in range(6, 12)},
    }

    def control_batches() -> list[int]:
        async def look() -> list[int]:
            headers = partition_log(broker, topic_name).recent_batch_headers(1000)
            return [h.base_offset for h in headers if h.is_control and h.base_offset < end]

        return broker.call(look())

    assert abort_marker in control_batches(), "a marker stays until delete.retention.ms passed"
    # Kafka's rule: a pass that finds an ABORT marker's transaction gone stamps the marker's
    # batch with a delete horizon (now + delete.retention.ms); a pass after the horizon removes
    # it. (A COMMIT marker whose transaction still has data is kept.) Each round gives the
    # cleaner dirty data to run on, then lets the horizon pass.
    for round_ in range(4):
        clock.advance(DAY_MS + 1)
        transaction({k: b"again-%d" % k for k in range(12 + round_, 13 + round_)}, commit=True)
        try:
            wait_until(
                lambda: abort_marker not in control_batches(), 4, POLL_S, "the marker removed"
            )
            break
        except AssertionError:
            continue
    assert abort_marker not in control_batches(), "the ABORT marker outlived its horizon"
    committed = {
        key: value
        for _, key, value in read_all(bootstrap, topic_name)
        if value is not None and key in latest
    }
    assert committed == latest
