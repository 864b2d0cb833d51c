"""Kafka transactions end to end with real clients: confluent-kafka, kafka-python and aiokafka
producers committing and aborting, a consume-transform-produce loop committing its offsets in
the transaction, zombie fencing, and read_committed / read_uncommitted consumers."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

from odradek.testing import RunningBroker, running_broker, wait_until

from .conftest import create_topics

TIMEOUT_S = 20


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningBroker]:
    with running_broker(
        tmp_path_factory.mktemp("txn"),
        offsets_topic_num_partitions="4",
        transaction_state_log_num_partitions="4",
        group_initial_rebalance_delay_ms="0",
    ) as running:
        yield running


def _topic(bootstrap: str, partitions: int = 1) -> str:
    name = f"txn-{uuid.uuid4().hex[:10]}"
    create_topics(bootstrap, {name: partitions})
    return name


def read_all(
    bootstrap: str, topic: str, isolation: str, expect: int, partitions: int = 1
) -> list[bytes]:
    """Every record value of ``topic`` a consumer with ``isolation.level`` sees, once it has
    seen ``expect`` (or the partitions' ends, as the broker answers for that isolation)."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"reader-{uuid.uuid4().hex[:8]}",
            "isolation.level": isolation,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "enable.partition.eof": True,
        }
    )
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        values: list[bytes] = []
        at_end: set[int] = set()
        deadline = time.monotonic() + TIMEOUT_S
        while time.monotonic() < deadline:
            message = consumer.poll(0.2)
            if message is None:
                continue
            if message.error():
                if message.error().code() == -191:  # _PARTITION_EOF
                    at_end.add(message.partition())
                    if len(values) >= expect and len(at_end) == partitions:
                        break
                    continue
                raise KafkaException(message.error())
            at_end.discard(message.partition())
            values.append(message.value())
        return values
    finally:
        consumer.close()


def _txn_producer(bootstrap: str, tid: str, **extra: object) -> Producer:
    producer = Producer(
        {"bootstrap.servers": bootstrap, "transactional.id": tid, "linger.ms": 5, **extra}
    )
    producer.init_transactions(TIMEOUT_S)
    return producer


def test_confluent_commit_and_abort(broker: RunningBroker) -> None:
    topic = _topic(broker.bootstrap, 2)
    producer = _txn_producer(broker.bootstrap, f"tx-{topic}")
    producer.begin_transaction()
    for i in range(10):
        producer.produce(topic, value=b"c%d" % i, partition=i % 2)
    producer.commit_transaction(TIMEOUT_S)
    producer.begin_transaction()
    for i in range(6):
        producer.produce(topic, value=b"a%d" % i, partition=i % 2)
    producer.flush()
    producer.abort_transaction(TIMEOUT_S)
    producer.begin_transaction()
    producer.produce(topic, value=b"last", partition=0)
    producer.commit_transaction(TIMEOUT_S)

    committed = read_all(broker.bootstrap, topic, "read_committed", 11, partitions=2)
    assert sorted(committed) == sorted([b"c%d" % i for i in range(10)] + [b"last"])
    everything = read_all(broker.bootstrap, topic, "read_uncommitted", 17, partitions=2)
    assert sorted(everything) == sorted(
        [b"c%d" % i for i in range(10)] + [b"a%d" % i for i in range(6)] + [b"last"]
    )


def test_an_open_transaction_holds_read_committed_readers_back(broker: RunningBroker) -> None:
    topic = _topic(broker.bootstrap)
    plain = Producer({"bootstrap.servers": broker.bootstrap})
    plain.produce(topic, value=b"before")
    plain.flush()
    producer = _txn_producer(broker.bootstrap, f"tx-{topic}")
    producer.begin_transaction()
    producer.produce(topic, value=b"open")
    producer.flush()
    plain.produce(topic, value=b"after")
    plain.flush()
    # The last stable offset stops at the open transaction's first record.
    assert read_all(broker.bootstrap, topic, "read_committed", 1) == [b"before"]
    assert read_all(broker.bootstrap, topic, "read_uncommitted", 3) == [
        b"before",
        b"open",
        b"after",
    ]
    producer.commit_transaction(TIMEOUT_S)
    assert read_all(broker.bootstrap, topic, "read_committed", 3) == [b"before", b"open", b"after"]


def test_consume_transform_produce_commits_offsets_with_the_output(broker: RunningBroker) -> None:
    source, sink = _topic(broker.bootstrap), _topic(broker.bootstrap)
    group = f"ctp-{uuid.uuid4().hex[:8]}"
    plain = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(30):
        plain.produce(source, value=b"%d" % i)
    plain.flush()

    def run(batches: int, abort_last: bool) -> None:
        consumer = Consumer(
            {
                "bootstrap.servers": broker.bootstrap,
                "group.id": group,
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
                "isolation.level": "read_committed",
            }
        )
        producer = _txn_producer(broker.bootstrap, f"ctp-{group}")
        consumer.subscribe([source])
        try:
            for n in range(batches):
                messages = consumer.consume(10, timeout=5 if n else TIMEOUT_S)
                if not messages:
                    assert n, "no input within the timeout"
                    return  # the source ran dry
                producer.begin_transaction()
                for m in messages:
                    assert m.error() is None
                    producer.produce(sink, value=b"x" + m.value())
                producer.send_offsets_to_transaction(
                    consumer.position(consumer.assignment()),
                    consumer.consumer_group_metadata(),
                    TIMEOUT_S,
                )
                if abort_last and n == batches - 1:
                    producer.abort_transaction(TIMEOUT_S)
                else:
                    producer.commit_transaction(TIMEOUT_S)
        finally:
            consumer.close()

    run(2, abort_last=True)  # one batch committed, one aborted: its input is read again
    run(10, abort_last=False)  # ... until the source runs dry
    output = read_all(broker.bootstrap, sink, "read_committed", 30)
    assert sorted(output) == sorted(b"x%d" % i for i in range(30))
    checker = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group})
    try:
        (committed,) = checker.committed([TopicPartition(source, 0)], timeout=TIMEOUT_S)
        assert committed.offset == 30
    finally:
        checker.close()


def test_a_second_producer_fences_the_first(broker: RunningBroker) -> None:
    topic = _topic(broker.bootstrap)
    tid = f"zombie-{topic}"
    zombie = _txn_producer(broker.bootstrap, tid)
    zombie.begin_transaction()
    zombie.produce(topic, value=b"zombie")
    zombie.flush()
    successor = _txn_producer(broker.bootstrap, tid)  # aborts the zombie's transaction
    with pytest.raises(KafkaException) as raised:
        zombie.commit_transaction(TIMEOUT_S)
    assert raised.value.args[0].fatal() or raised.value.args[0].txn_requires_abort()
    successor.begin_transaction()
    successor.produce(topic, value=b"successor")
    successor.commit_transaction(TIMEOUT_S)
    assert read_all(broker.bootstrap, topic, "read_committed", 1) == [b"successor"]


def test_kafka_python_transactions(broker: RunningBroker) -> None:
    from kafka import KafkaProducer

    topic = _topic(broker.bootstrap)
    producer = KafkaProducer(
        bootstrap_servers=broker.bootstrap, transactional_id=f"kp-{topic}", enable_idempotence=True
    )
    try:
        producer.init_transactions()
        producer.begin_transaction()
        producer.send(topic, b"kept")
        producer.commit_transaction()
        producer.begin_transaction()
        producer.send(topic, b"dropped")
        producer.flush()
        producer.abort_transaction()
    finally:
        producer.close(timeout=TIMEOUT_S)
    assert read_all(broker.bootstrap, topic, "read_committed", 1) == [b"kept"]
    assert read_all(broker.bootstrap, topic, "read_uncommitted", 2) == [b"kept", b"dropped"]


def test_aiokafka_transactions(broker: RunningBroker) -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

    topic = _topic(broker.bootstrap)

    async def run() -> list[bytes]:
        producer = AIOKafkaProducer(
            bootstrap_servers=broker.bootstrap, transactional_id=f"aio-{topic}"
        )
        await producer.start()
        try:
            async with producer.transaction():
                await producer.send_and_wait(topic, b"kept")
            with pytest.raises(RuntimeError):
                async with producer.transaction():
                    await producer.send_and_wait(topic, b"dropped")
                    raise RuntimeError("abort")
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(
            topic,
            bootstrap_servers=broker.bootstrap,
            isolation_level="read_committed",
            auto_offset_reset="earliest",
        )
        await consumer.start()
        try:
            got: list[bytes] = []
            deadline = time.monotonic() + TIMEOUT_S
            while time.monotonic() < deadline:
                batch = await consumer.getmany(timeout_ms=300)
                for records in batch.values():
                    got += [r.value for r in records]
                assigned = list(consumer.assignment())
                if not assigned:
                    continue
                end = await consumer.end_offsets(assigned)
                position = await consumer.position(assigned[0])
                if got and position >= end[assigned[0]]:
                    break
            return got
        finally:
            await consumer.stop()

    assert asyncio.run(run()) == [b"kept"]
    assert read_all(broker.bootstrap, topic, "read_uncommitted", 2) == [b"kept", b"dropped"]


def test_transactions_are_listed_and_described(broker: RunningBroker) -> None:
    from odradek.client.admin import TransactionAdmin

    topic = _topic(broker.bootstrap)
    producer = _txn_producer(broker.bootstrap, f"listed-{topic}")
    producer.begin_transaction()
    producer.produce(topic, value=b"v")
    producer.flush()

    async def look() -> tuple[object, object]:
        async with await TransactionAdmin.connect(broker.bootstrap) as admin:
            listed = await admin.list_transactions(states=["Ongoing"])
            return listed, await admin.describe_transaction(f"listed-{topic}")

    listed, info = asyncio.run(look())
    assert f"listed-{topic}" in [t.transactional_id for t in listed]  # type: ignore[attr-defined]
    assert info is not None and info.state == "Ongoing"  # type: ignore[attr-defined]
    assert (topic, 0) in info.partitions  # type: ignore[attr-defined]
    producer.commit_transaction(TIMEOUT_S)
    wait_until(
        lambda: asyncio.run(look())[1].state == "CompleteCommit",  # type: ignore[attr-defined]
        timeout_s=TIMEOUT_S,
        what="the transaction's Complete record",
    )
