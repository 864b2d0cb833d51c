"""Kafka transactions across a three-broker cluster on a real ZooKeeper.

The transaction coordinator of a transactional id is the leader of its ``__transaction_state``
partition; the partitions a transaction writes are led by other brokers, which get their
COMMIT/ABORT markers over WriteTxnMarkers and ask the coordinator (AddPartitionsToTxn v4
``verify_only``, KIP-890) whether a transactional producer's first batch belongs to its
transaction. These tests drive a confluent-kafka transactional producer through that, then kill
-9 the coordinator and a partition leader under a producer looping transactions, hold a
transaction in PrepareCommit (a partition offline) while its coordinator dies, and run a
consume-transform-produce loop whose group coordinator is another broker: every transaction is
wholly there or wholly absent for read_committed readers, and every acknowledged commit is kept.

The brokers are processes of their own (librdkafka must not share a process with a broker).
"""

from __future__ import annotations

import asyncio
import collections
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

from odradek.client.admin import ProducerInfo, TransactionAdmin, TransactionInfo
from odradek.protocol.errors import ErrorCode
from odradek.protocol.records import NewRecord, encode_batch
from odradek.testing import RunningCluster, wait_until
from tests.server.conftest import CREATE_TOPICS, PRODUCE, PRODUCE_VERSION, KafkaConnection, now_ms

from .failover_support import address, live_ids, started_cluster, wait_for_leader

pytestmark = pytest.mark.slow

FIND_COORDINATOR = 10
GROUP_KEY, TRANSACTION_KEY = 0, 1
PARTITIONS = 3
TIMEOUT_S = 45
SETTINGS = {
    "transaction.state.log.num.partitions": "3",
    "offsets.topic.num.partitions": "3",
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": "200",
    "replica.lag.time.max.ms": "4000",
    "group.min.session.timeout.ms": "500",
}


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[RunningCluster]:
    with started_cluster(tmp_path, settings=SETTINGS) as running:
        yield running


def create_spread_topic(cluster: RunningCluster, topic: str) -> None:
    """RF=3, partition i led by broker i+1 (each partition's leader a different broker)."""
    create_assigned_topic(
        cluster, topic, [[(i + k) % 3 + 1 for k in range(3)] for i in range(PARTITIONS)]
    )


def create_assigned_topic(cluster: RunningCluster, topic: str, replicas: list[list[int]]) -> None:
    """A topic whose partition i has the replicas ``replicas[i]``, the first its leader."""
    assignments = [{"partition_index": i, "broker_ids": r} for i, r in enumerate(replicas)]

    def create() -> Any:
        with KafkaConnection(address(cluster, live_ids(cluster)[0])) as connection:
            response = connection.request(
                CREATE_TOPICS,
                5,
                timeout=15_000,
                topics=[
                    {
                        "name": topic,
                        "num_partitions": -1,
                        "replication_factor": -1,
                        "assignments": assignments,
                        "configs": [],
                    }
                ],
            )
        # Just after the cluster starts, the broker asked may not have seen every other
        # broker's registration yet (Unknown broker(s) in replica assignment): ask again.
        if response.topics[0].error_code == ErrorCode.invalid_replica_assignment:
            return None
        return response

    response = wait_until(create, TIMEOUT_S, 0.2, "every broker known to the one asked")
    assert response.topics[0].error_code == ErrorCode.none, response
    for i, r in enumerate(replicas):
        assert wait_for_leader(cluster, topic, i, isr_size=len(r)).leader == r[0]


def find_coordinator(cluster: RunningCluster, key: str, key_type: int) -> int:
    """The coordinator's broker id as a live broker answers FindCoordinator; -1 for none."""

    def ask() -> int | None:
        for broker_id in live_ids(cluster):
            try:
                with KafkaConnection(address(cluster, broker_id), timeout=5) as connection:
                    found = connection.request(FIND_COORDINATOR, 3, key=key, key_type=key_type)
            except Exception:
                continue
            if found.error_code == ErrorCode.none and cluster.is_running(int(found.node_id)):
                return int(found.node_id)
        return None

    coordinator: int = wait_until(ask, TIMEOUT_S, 0.2, f"a coordinator for {key!r}")
    return coordinator


def txn_producer(bootstrap: str, tid: str, **extra: Any) -> Producer:
    producer = Producer(
        {"bootstrap.servers": bootstrap, "transactional.id": tid, "linger.ms": 2, **extra}
    )
    producer.init_transactions(TIMEOUT_S)
    return producer


def read_all(
    bootstrap: str, topic: str, isolation: str, partitions: int = PARTITIONS
) -> list[bytes]:
    """Every value of ``topic`` a consumer with ``isolation.level`` reads up to the ends the
    brokers give for that isolation (the last stable offset for read_committed)."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"reader-{uuid.uuid4().hex[:8]}",
            "isolation.level": isolation,
            "enable.auto.commit": False,
            "enable.partition.eof": True,
        }
    )
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        values: list[bytes] = []
        at_end: set[int] = set()
        deadline = time.monotonic() + TIMEOUT_S
        while len(at_end) < partitions:
            assert time.monotonic() < deadline, f"{topic} not read to its end: {sorted(at_end)}"
            message = consumer.poll(0.2)
            if message is None:
                continue
            if message.error():
                if message.error().code() == KafkaError._PARTITION_EOF:
                    at_end.add(message.partition())
                    continue
                if message.error().retriable():
                    continue
                raise KafkaException(message.error())
            at_end.discard(message.partition())
            values.append(message.value())
        return values
    finally:
        consumer.close()


def stable_everywhere(bootstrap: str, topic: str) -> bool:
    """Whether each partition's last stable offset is its high watermark: nothing open."""
    committed = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "lso", "isolation.level": "read_committed"}
    )
    uncommitted = Consumer({"bootstrap.servers": bootstrap, "group.id": "hw"})
    try:
        for p in range(PARTITIONS):
            tp = TopicPartition(topic, p)
            if (
                committed.get_watermark_offsets(tp, timeout=10)[1]
                != uncommitted.get_watermark_offsets(tp, timeout=10)[1]
            ):
                return False
        return True
    except KafkaException:
        return False
    finally:
        committed.close()
        uncommitted.close()


def describe_transaction(bootstrap: str, tid: str) -> TransactionInfo | None:
    async def ask() -> TransactionInfo | None:
        async with await TransactionAdmin.connect(bootstrap) as admin:
            return await admin.describe_transaction(tid)

    return asyncio.run(ask())


def describe_producers(bootstrap: str, topic: str, partition: int) -> list[ProducerInfo]:
    async def ask() -> list[ProducerInfo]:
        async with await TransactionAdmin.connect(bootstrap) as admin:
            return await admin.describe_producers(topic, partition)

    return asyncio.run(ask())


def assert_whole_transactions(seen: list[bytes], committed: set[int], per_txn: int) -> None:
    """Values are ``<txn>:<n>``: each transaction read is whole, each acknowledged one read."""
    by_txn = collections.Counter(int(v.split(b":")[0]) for v in seen)
    half = {txn: count for txn, count in by_txn.items() if count != per_txn}
    assert not half, f"transactions partly read: {half}"
    assert committed <= set(by_txn), f"acknowledged commits missing: {committed - set(by_txn)}"
    assert len(seen) == len(set(seen)), "a record read twice"


# -- 1: commit and abort across leaders ---------------------------------------------------------


def test_transactions_span_partitions_led_by_every_broker(cluster: RunningCluster) -> None:
    topic = f"spread-{uuid.uuid4().hex[:8]}"
    create_spread_topic(cluster, topic)
    tid = f"tx-{topic}"
    producer = txn_producer(cluster.bootstrap, tid)
    coordinator = find_coordinator(cluster, tid, TRANSACTION_KEY)
    for internal in ("__transaction_state", "__consumer_offsets"):
        if internal == "__consumer_offsets":
            find_coordinator(cluster, "any-group", GROUP_KEY)  # creates it
        for i in range(3):
            assert len(wait_for_leader(cluster, internal, i, isr_size=3).replicas) == 3

    producer.begin_transaction()
    for i in range(30):
        producer.produce(topic, value=b"c%d" % i, partition=i % PARTITIONS)
    producer.commit_transaction(TIMEOUT_S)
    producer.begin_transaction()
    for i in range(9):
        producer.produce(topic, value=b"a%d" % i, partition=i % PARTITIONS)
    producer.flush(TIMEOUT_S)
    producer.abort_transaction(TIMEOUT_S)
    producer.begin_transaction()
    producer.produce(topic, value=b"last", partition=coordinator - 1)  # led by it
    producer.commit_transaction(TIMEOUT_S)

    expected = sorted([b"c%d" % i for i in range(30)] + [b"last"])
    for broker_id in cluster.brokers:  # bootstrapped from each broker alone
        got = read_all(address(cluster, broker_id), topic, "read_committed")
        assert sorted(got) == expected, f"read_committed through broker {broker_id}"
    everything = read_all(cluster.bootstrap, topic, "read_uncommitted")
    assert sorted(everything) == sorted(expected + [b"a%d" % i for i in range(9)])
    assert stable_everywhere(cluster.bootstrap, topic)

    info = wait_until(
        lambda: (
            (i := describe_transaction(cluster.bootstrap, tid))
            and i.state == "CompleteCommit"
            and i
        ),
        TIMEOUT_S,
        what="the Complete record",
    )
    assert info.coordinator_id == coordinator
    for p in range(PARTITIONS):
        # Each leader (two of them not the coordinator) wrote the markers: the producer has no
        # open transaction there, and the marker's coordinator epoch is recorded.
        producers = describe_producers(cluster.bootstrap, topic, p)
        (known,) = [x for x in producers if x.producer_id == info.producer_id]
        assert known.producer_epoch == info.producer_epoch
        assert known.current_txn_start_offset == -1
        assert known.coordinator_epoch >= 0

    # KIP-890 between brokers: a transactional batch to a partition not in the transaction,
    # at a leader that is not the coordinator, is refused after asking the coordinator.
    producer.begin_transaction()
    producer.produce(topic, value=b"open", partition=coordinator - 1)
    producer.flush(TIMEOUT_S)
    ongoing = wait_until(
        lambda: (i := describe_transaction(cluster.bootstrap, tid)) and i.state == "Ongoing" and i,
        TIMEOUT_S,
        what="an ongoing transaction",
    )
    other = coordinator % PARTITIONS  # led by broker other + 1, not the coordinator
    batch = encode_batch(
        [NewRecord(None, b"sneaked")],
        producer_id=ongoing.producer_id,
        producer_epoch=ongoing.producer_epoch,
        base_sequence=0,
        transactional=True,
        now_ms=now_ms(),
    )
    with KafkaConnection(address(cluster, other + 1)) as connection:
        response = connection.request(
            PRODUCE,
            PRODUCE_VERSION,
            transactional_id=tid,
            acks=-1,
            timeout_ms=10_000,
            topic_data=[{"name": topic, "partition_data": [{"index": other, "records": batch}]}],
        )
    (answer,) = response.responses[0].partition_responses
    assert answer.error_code == ErrorCode.invalid_txn_state
    producer.commit_transaction(TIMEOUT_S)
    got = read_all(cluster.bootstrap, topic, "read_committed")
    assert sorted(got) == sorted([*expected, b"open"])


# -- 2 and 3: kill -9 under a producer looping transactions ----------------------------------


class TransactionLoop:
    """A confluent-kafka transactional producer on a thread: transaction after transaction of
    one record ``<txn>:<p>`` per partition, every fourth aborted, noting each commit and abort
    acknowledged. A retriable error
    retries the commit, an abortable one aborts, a fatal one starts a new producer with the same
    transactional.id (which fences the old one and ends its transaction)."""

    def __init__(self, bootstrap: str, topic: str, tid: str) -> None:
        self.bootstrap, self.topic, self.tid = bootstrap, topic, tid
        self.committed: set[int] = set()
        self.aborted: set[int] = set()
        self.errors: list[str] = []
        self.producers = 0
        # Run on the loop's thread right after the next commit is acknowledged: the coordinator
        # has written PrepareCommit and is sending the markers.
        self.after_commit: Callable[[], None] | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="txn-loop", daemon=True)
        self._thread.start()

    def _new_producer(self) -> Producer:
        self.producers += 1
        return txn_producer(
            self.bootstrap, self.tid, **{"transaction.timeout.ms": 20_000, "linger.ms": 1}
        )

    def _run(self) -> None:
        producer = self._new_producer()
        txn = 0
        while not self._stop.is_set():
            txn += 1
            try:
                producer.begin_transaction()
                for p in range(PARTITIONS):
                    producer.produce(self.topic, value=b"%d:%d" % (txn, p), partition=p)
                if txn % 4 == 0:
                    producer.flush(TIMEOUT_S)  # the records are in the logs before the abort
                    producer.abort_transaction(TIMEOUT_S)
                    self.aborted.add(txn)
                    continue
                self._commit(producer)
                self.committed.add(txn)
                hook, self.after_commit = self.after_commit, None
                if hook is not None:
                    hook()
            except KafkaException as e:
                error = e.args[0]
                self.errors.append(str(error))
                if error.txn_requires_abort():
                    try:
                        producer.abort_transaction(TIMEOUT_S)
                        continue
                    except KafkaException as again:
                        self.errors.append(f"abort: {again.args[0]}")
                producer = self._new_producer()

    def _commit(self, producer: Producer) -> None:
        deadline = time.monotonic() + TIMEOUT_S
        while True:
            try:
                producer.commit_transaction(TIMEOUT_S)
                return
            except KafkaException as e:
                if not e.args[0].retriable() or time.monotonic() > deadline:
                    raise
                self.errors.append(f"retried: {e.args[0]}")

    def kill_after_next_commit(self, cluster: RunningCluster, broker_id: int) -> float:
        """kill -9 of ``broker_id`` just after a commit is acknowledged; when it died."""
        killed = threading.Event()

        def kill() -> None:
            cluster.kill(broker_id)
            killed.set()

        self.after_commit = kill
        wait_until(killed.is_set, TIMEOUT_S, 0.01, f"broker {broker_id} killed after a commit")
        return time.monotonic()

    def wait_for_more(self, count: int) -> None:
        target = len(self.committed) + count
        wait_until(lambda: len(self.committed) >= target, TIMEOUT_S, 0.05, f"{target} commits")

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(TIMEOUT_S * 3)
        assert not self._thread.is_alive(), "the transaction loop did not stop"


def check_end_state(cluster: RunningCluster, topic: str, loop: TransactionLoop) -> None:
    bootstrap = ",".join(address(cluster, b) for b in live_ids(cluster))
    wait_until(lambda: stable_everywhere(bootstrap, topic), TIMEOUT_S, 0.2, "LSO at the log end")
    seen = read_all(bootstrap, topic, "read_committed")
    assert_whole_transactions(seen, loop.committed, PARTITIONS)
    read = {int(v.split(b":")[0]) for v in seen}
    assert not read & loop.aborted, f"aborted transactions read: {read & loop.aborted}"
    # The leaders (one of them new, its producer state built as a follower) agree with the
    # coordinator (maybe new too) on the producer, and hold no transaction of it open.
    info = wait_until(
        lambda: (
            (i := describe_transaction(bootstrap, loop.tid))
            and i.state in ("CompleteCommit", "CompleteAbort", "Empty")
            and i
        ),
        TIMEOUT_S,
        0.2,
        "the last transaction complete",
    )
    for p in range(PARTITIONS):
        producers = describe_producers(bootstrap, topic, p)
        (known,) = [x for x in producers if x.producer_id == info.producer_id]
        assert known.producer_epoch <= info.producer_epoch
        assert known.current_txn_start_offset == -1
    print(
        f"{len(loop.committed)} commits and {len(loop.aborted)} aborts acknowledged, "
        f"{len(read)} transactions read, "
        f"{loop.producers} producers, errors: {loop.errors[:5]}"
    )


def test_the_coordinators_death_leaves_no_half_transaction(cluster: RunningCluster) -> None:
    topic = f"coordinator-kill-{uuid.uuid4().hex[:8]}"
    create_spread_topic(cluster, topic)
    tid = f"tx-{topic}"
    loop = TransactionLoop(cluster.bootstrap, topic, tid)
    try:
        loop.wait_for_more(10)
        coordinator = find_coordinator(cluster, tid, TRANSACTION_KEY)
        killed_at = loop.kill_after_next_commit(cluster, coordinator)
        new = find_coordinator(cluster, tid, TRANSACTION_KEY)
        assert new != coordinator
        loop.wait_for_more(10)
        took = time.monotonic() - killed_at
        print(f"coordinator {coordinator} → {new}: commits again after {took:.1f} s")
    finally:
        loop.stop()
    check_end_state(cluster, topic, loop)
    info = describe_transaction(address(cluster, new), tid)
    assert info is not None and info.coordinator_id == new


def test_a_partition_leaders_death_leaves_no_half_transaction(cluster: RunningCluster) -> None:
    topic = f"leader-kill-{uuid.uuid4().hex[:8]}"
    create_spread_topic(cluster, topic)
    tid = f"tx-{topic}"
    loop = TransactionLoop(cluster.bootstrap, topic, tid)
    try:
        loop.wait_for_more(10)
        coordinator = find_coordinator(cluster, tid, TRANSACTION_KEY)
        victim = next(b for b in (1, 2, 3) if b != coordinator)  # leads partition victim-1
        loop.kill_after_next_commit(cluster, victim)
        wait_for_leader(cluster, topic, victim - 1, not_on=(victim,))
        loop.wait_for_more(10)
    finally:
        loop.stop()
    check_end_state(cluster, topic, loop)


def test_a_prepared_commit_is_completed_by_the_next_coordinator(cluster: RunningCluster) -> None:
    """A transaction held in PrepareCommit (one of its partitions has no leader, so its marker
    cannot be written) when its coordinator dies: the next coordinator loads it, and once the
    partition is back writes the marker there and the Complete record."""
    topic = f"prepared-{uuid.uuid4().hex[:8]}"
    create_spread_topic(cluster, topic)
    tid = f"tx-{topic}"
    producer = txn_producer(cluster.bootstrap, tid)
    coordinator = find_coordinator(cluster, tid, TRANSACTION_KEY)
    lone, heir = (b for b in (1, 2, 3) if b != coordinator)
    pinned = f"pinned-{topic}"
    create_assigned_topic(cluster, pinned, [[lone]])  # RF=1: offline while ``lone`` is down
    producer.begin_transaction()
    for p in range(PARTITIONS):
        producer.produce(topic, value=b"1:%d" % p, partition=p)
    producer.produce(pinned, value=b"1:pinned")
    producer.flush(TIMEOUT_S)

    cluster.kill(lone)
    wait_for_leader(cluster, topic, lone - 1, not_on=(lone,))
    txn_partition = next(
        i
        for i in range(3)
        if wait_for_leader(cluster, "__transaction_state", i).leader == coordinator
    )
    producer.commit_transaction(TIMEOUT_S)  # answered once PrepareCommit is replicated
    survivors = ",".join(address(cluster, b) for b in live_ids(cluster))
    assert describe_transaction(survivors, tid).state == "PrepareCommit"  # type: ignore[union-attr]

    cluster.kill(coordinator)
    wait_for_leader(cluster, "__transaction_state", txn_partition, not_on=(coordinator,))
    assert find_coordinator(cluster, tid, TRANSACTION_KEY) == heir
    loaded = wait_until(
        lambda: describe_transaction(address(cluster, heir), tid), TIMEOUT_S, 0.2, "a load"
    )
    assert loaded.state == "PrepareCommit"
    cluster.start_broker(lone)
    done = wait_until(
        lambda: (
            (i := describe_transaction(address(cluster, heir), tid))
            and i.state == "CompleteCommit"
            and i
        ),
        TIMEOUT_S,
        0.2,
        "the transaction completed by the new coordinator",
    )
    assert done.coordinator_id == heir
    bootstrap = ",".join(address(cluster, b) for b in live_ids(cluster))
    wait_until(lambda: stable_everywhere(bootstrap, topic), TIMEOUT_S, 0.2, "LSO at the end")
    assert sorted(read_all(bootstrap, topic, "read_committed")) == [b"1:0", b"1:1", b"1:2"]
    assert read_all(bootstrap, pinned, "read_committed", partitions=1) == [b"1:pinned"]
    # The producer carries on with the new coordinator.
    producer.begin_transaction()
    producer.produce(topic, value=b"2:0", partition=0)
    producer.commit_transaction(TIMEOUT_S)
    assert b"2:0" in read_all(bootstrap, topic, "read_committed")


# -- 4: consume-transform-produce ---------------------------------------------------------------


def test_consume_transform_produce_with_two_coordinators(cluster: RunningCluster) -> None:
    source, sink = (f"{n}-{uuid.uuid4().hex[:8]}" for n in ("source", "sink"))
    create_spread_topic(cluster, source)
    create_spread_topic(cluster, sink)
    tid = f"ctp-{source}"
    txn_coordinator = find_coordinator(cluster, tid, TRANSACTION_KEY)
    group = next(
        g
        for g in (f"group-{source}-{n}" for n in range(50))
        if find_coordinator(cluster, g, GROUP_KEY) != txn_coordinator
    )
    plain = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
    for i in range(60):
        plain.produce(source, value=b"%d" % i, partition=i % PARTITIONS)
    assert plain.flush(TIMEOUT_S) == 0

    consumer = Consumer(
        {
            "bootstrap.servers": cluster.bootstrap,
            "group.id": group,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "isolation.level": "read_committed",
        }
    )
    producer = txn_producer(cluster.bootstrap, tid)
    consumer.subscribe([source])
    aborted_once = False
    try:
        consumed = 0
        deadline = time.monotonic() + TIMEOUT_S
        while consumed < 60:
            assert time.monotonic() < deadline, f"only {consumed} of 60 transformed"
            messages = [m for m in consumer.consume(10, timeout=1) if m.error() is None]
            if not messages:
                continue
            producer.begin_transaction()
            for m in messages:
                producer.produce(sink, value=b"x" + m.value(), partition=m.partition())
            producer.send_offsets_to_transaction(
                consumer.position(consumer.assignment()),
                consumer.consumer_group_metadata(),
                TIMEOUT_S,
            )
            if not aborted_once:
                # The aborted batch's input is read again from the committed offsets.
                producer.abort_transaction(TIMEOUT_S)
                aborted_once = True
                committed = consumer.committed(consumer.assignment(), timeout=TIMEOUT_S)
                for tp in committed:
                    consumer.seek(TopicPartition(tp.topic, tp.partition, max(tp.offset, 0)))
                continue
            producer.commit_transaction(TIMEOUT_S)
            consumed += len(messages)
    finally:
        consumer.close()

    output = read_all(cluster.bootstrap, sink, "read_committed")
    assert sorted(output) == sorted(b"x%d" % i for i in range(60))
    checker = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": group})
    try:
        ends = checker.committed(
            [TopicPartition(source, p) for p in range(PARTITIONS)], timeout=TIMEOUT_S
        )
    finally:
        checker.close()
    assert [tp.offset for tp in ends] == [20] * PARTITIONS
