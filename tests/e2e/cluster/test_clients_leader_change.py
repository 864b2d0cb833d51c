"""Every client through a leader change: confluent-kafka, kafka-python, aiokafka and kcat each
produce to and consume from an RF=3 topic of a three-broker cluster while the partition's leader
is killed with kill -9 and, once another broker leads, started again.

The producer is idempotent with acks=all and the consumer reads by assignment (no group); both are
made once and never restarted. A few seconds of load run before the kill, under the new leader,
and again once the old leader is back in the ISR. Then every record the client saw acknowledged
must be read back by the same client at the offset its acknowledgement named (kcat shows no
offsets when producing: there, everything it sent must be read back in order from offset 0).
"""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.structs import TopicPartition as AioTopicPartition
from kafka import KafkaConsumer, KafkaProducer
from kafka import TopicPartition as KafkaPythonTopicPartition

from odradek.testing import RunningCluster, ZooKeeperServer, wait_until

from .failover_support import (
    DELIVERY_TIMEOUT_MS,
    PACE_S,
    READ_BACK_TIMEOUT_S,
    STEP,
    Ledger,
    Load,
    assert_read_back,
    confluent_consumer,
    confluent_producer,
    create_replicated_topic,
    started_cluster,
    unique_name,
    wait_for_leader,
    wait_for_progress,
)

KCAT = shutil.which("kcat")


def kill_leader_under_load(cluster: RunningCluster, topic: str, progress: Callable[[], int]):
    """With a client's load running: kill -9 the partition's leader, see the client go on under
    the new leader, start the old leader again and see the client go on once it is in sync.
    Returns (the old leader, the leader elected meanwhile)."""
    before = wait_for_leader(cluster, topic, isr_size=3)
    wait_for_progress(progress, STEP, "progress before the kill")
    cluster.kill(before.leader)
    during = wait_for_leader(cluster, topic, not_on=(before.leader,))
    assert during.leader_epoch > before.leader_epoch
    wait_for_progress(progress, STEP, "progress under the new leader")
    cluster.start_broker(before.leader)
    wait_for_leader(cluster, topic, isr_size=3)
    wait_for_progress(progress, STEP, "progress with the old leader back in the ISR")
    return before.leader, during.leader


Loop = Callable[[threading.Event], None]


def through_a_leader_change(
    cluster: RunningCluster, topic: str, ledger: Ledger, client: str, produce: Loop, consume: Loop
) -> None:
    """The client's consumer and producer loops run (each a :class:`Load`) while the leader is
    killed and comes back; then every record acknowledged to the producer must be read back."""
    consumer = Load(f"{client}-consumer", ledger, consume)
    producer = Load(f"{client}-producer", ledger, produce)
    try:
        kill_leader_under_load(cluster, topic, ledger.acks)
    finally:
        producer.stop()
    try:
        assert_read_back(ledger, cluster, topic)
    finally:
        consumer.stop()


@pytest.fixture
def cluster(zookeeper: ZooKeeperServer, tmp_path) -> Iterator[RunningCluster]:
    with started_cluster(tmp_path, zookeeper=zookeeper) as running:
        yield running


@pytest.fixture
def topic(cluster: RunningCluster, request: pytest.FixtureRequest) -> str:
    name = unique_name(request.node.name)
    create_replicated_topic(cluster, name)
    return name


def test_confluent_kafka_through_a_leader_change(cluster, topic):
    ledger = Ledger()
    bootstrap = cluster.bootstrap
    through_a_leader_change(
        cluster,
        topic,
        ledger,
        "confluent",
        produce=confluent_producer(bootstrap, topic, ledger),
        consume=confluent_consumer(bootstrap, topic, ledger),
    )


def test_kafka_python_through_a_leader_change(cluster, topic):
    ledger = Ledger()

    def produce(stopping: threading.Event) -> None:
        producer = KafkaProducer(
            bootstrap_servers=cluster.bootstrap,
            acks="all",
            enable_idempotence=True,
            linger_ms=5,
            delivery_timeout_ms=DELIVERY_TIMEOUT_MS,
            request_timeout_ms=10_000,
            max_block_ms=DELIVERY_TIMEOUT_MS,
        )
        try:
            i = 0
            while not stopping.is_set():
                value = b"k%d" % i
                i += 1
                future = producer.send(topic, value=value, partition=0)
                future.add_callback(lambda metadata, v=value: ledger.ack(metadata.offset, v))
                future.add_errback(lambda e: ledger.fail(f"delivery: {e!r}"))
                time.sleep(PACE_S)
            producer.flush(timeout=DELIVERY_TIMEOUT_MS / 1000)
        finally:
            producer.close(timeout=10)

    def consume(stopping: threading.Event) -> None:
        consumer = KafkaConsumer(
            bootstrap_servers=cluster.bootstrap,
            group_id=None,
            enable_auto_commit=False,
            fetch_max_wait_ms=100,
            request_timeout_ms=10_000,
        )
        partition = KafkaPythonTopicPartition(topic, 0)
        consumer.assign([partition])
        consumer.seek_to_beginning(partition)
        try:
            while not stopping.is_set():
                for records in consumer.poll(timeout_ms=200).values():
                    for record in records:
                        ledger.consume(record.offset, record.value)
        finally:
            consumer.close()

    through_a_leader_change(cluster, topic, ledger, "kafka-python", produce, consume)


def test_aiokafka_through_a_leader_change(cluster, topic):
    ledger = Ledger()

    async def produce_async(stopping: threading.Event) -> None:
        producer = AIOKafkaProducer(
            bootstrap_servers=cluster.bootstrap,
            acks="all",
            enable_idempotence=True,
            linger_ms=5,
            request_timeout_ms=DELIVERY_TIMEOUT_MS,
        )
        await producer.start()
        try:
            i = 0
            while not stopping.is_set():
                value = b"a%d" % i
                i += 1
                future = await producer.send(topic, value=value, partition=0)
                future.add_done_callback(lambda f, v=value: _settled(f, v))
                await asyncio.sleep(PACE_S)
            await producer.flush()
        finally:
            await producer.stop()

    def _settled(future: asyncio.Future[Any], value: bytes) -> None:
        if future.cancelled():
            ledger.fail("delivery cancelled")
        elif future.exception() is not None:
            ledger.fail(f"delivery: {future.exception()!r}")
        else:
            ledger.ack(future.result().offset, value)

    async def consume_async(stopping: threading.Event) -> None:
        consumer = AIOKafkaConsumer(
            bootstrap_servers=cluster.bootstrap,
            group_id=None,
            enable_auto_commit=False,
            fetch_max_wait_ms=100,
            request_timeout_ms=10_000,
        )
        await consumer.start()
        partition = AioTopicPartition(topic, 0)
        consumer.assign([partition])
        await consumer.seek_to_beginning(partition)
        try:
            while not stopping.is_set():
                batches = await consumer.getmany(timeout_ms=200)
                for records in batches.values():
                    for record in records:
                        ledger.consume(record.offset, record.value)
        finally:
            await consumer.stop()

    through_a_leader_change(
        cluster,
        topic,
        ledger,
        "aiokafka",
        produce=lambda s: asyncio.run(produce_async(s)),
        consume=lambda s: asyncio.run(consume_async(s)),
    )


@pytest.mark.skipif(KCAT is None, reason="kcat is not installed")
def test_kcat_through_a_leader_change(cluster, topic):
    """kcat (Debian's, on its own librdkafka) as two long-running processes: ``-P`` fed lines on
    stdin, ``-C -J`` printing what it reads."""
    assert KCAT is not None
    ledger = Ledger()
    sent: list[bytes] = []
    base = [KCAT, "-b", cluster.bootstrap, "-t", topic, "-p", "0"]
    base += ["-X", "topic.metadata.refresh.interval.ms=1000"]
    idempotent = ["-X", "acks=all", "-X", "enable.idempotence=true", "-X", "linger.ms=5"]
    idempotent += ["-X", f"message.timeout.ms={DELIVERY_TIMEOUT_MS}"]
    producer = subprocess.Popen(
        [*base, "-P", *idempotent],
        stdin=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    # -u: kcat's stdout is a pipe, which it would otherwise buffer.
    consumer = subprocess.Popen(
        [*base, "-C", "-u", "-o", "beginning", "-J", "-X", "fetch.wait.max.ms=100"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )

    def feed(stopping: threading.Event) -> None:
        assert producer.stdin is not None
        i = 0
        while not stopping.is_set():
            line = b"kc%d" % i
            i += 1
            producer.stdin.write(line + b"\n")
            producer.stdin.flush()
            sent.append(line)
            time.sleep(PACE_S)
        producer.stdin.close()

    def read(stopping: threading.Event) -> None:
        assert consumer.stdout is not None
        for line in consumer.stdout:
            record = json.loads(line)
            ledger.consume(int(record["offset"]), record["payload"].encode())

    reader = Load("kcat-consumer", ledger, read)
    feeder = Load("kcat-producer", ledger, feed)
    try:
        # kcat prints no acknowledgements: progress is what its consumer reads, which is below
        # the high watermark, so acknowledged to an acks=all producer.
        kill_leader_under_load(cluster, topic, ledger.reads)
    finally:
        feeder.stop()
        try:
            code = producer.wait(DELIVERY_TIMEOUT_MS / 1000 + 30)
        finally:
            if producer.poll() is None:
                producer.kill()
    assert producer.stderr is not None
    errors = producer.stderr.read().decode(errors="replace")
    assert code == 0, errors
    # Transport errors while the leader is down are expected; a failed delivery is not.
    assert "delivery failed" not in errors.lower(), errors
    try:
        wait_until(
            lambda: ledger.reads() >= len(sent),
            READ_BACK_TIMEOUT_S,
            0.1,
            f"all {len(sent)} lines read (read {ledger.reads()}, consumer exit {consumer.poll()})",
        )
    finally:
        consumer.terminate()
        consumer.wait(10)
        reader.stop(10)
    assert ledger.conflicts == []
    assert ledger.failures == []
    assert len(sent) >= 3 * STEP
    assert [ledger.consumed.get(offset) for offset in range(len(sent))] == sent
    assert max(ledger.consumed) == len(sent) - 1
