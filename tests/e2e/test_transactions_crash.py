"""Transactions when processes die for real: a producer killed with SIGKILL in the middle of a
transaction (the coordinator aborts it at its timeout and read_committed readers move on), and a
broker killed with SIGKILL again and again while a producer commits transaction after
transaction (after each restart every transaction is wholly committed or wholly aborted)."""

from __future__ import annotations

import collections
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from odradek.testing import BrokerProcess, RunningBroker, running_broker, wait_until

from .conftest import create_topics
from .test_transactions import read_all

TIMEOUT_S = 30

# A transactional producer in its own process: transaction after transaction, each of
# RECORDS_PER_TXN records "<txn>:<n>" over three partitions, printing "committed <txn>".
# With "hang" it opens one transaction, prints "open" and waits to be killed.
PRODUCER = textwrap.dedent(
    """
    import sys, time
    from confluent_kafka import Producer, KafkaException
    bootstrap, topic, tid, mode, timeout_ms, start = sys.argv[1:7]
    producer = Producer({
        "bootstrap.servers": bootstrap, "transactional.id": tid, "linger.ms": 2,
        "transaction.timeout.ms": int(timeout_ms), "message.timeout.ms": int(timeout_ms),
    })
    producer.init_transactions(60)
    txn = int(start)
    while True:
        producer.begin_transaction()
        for n in range(5):
            producer.produce(topic, value=f"{txn}:{n}".encode(), partition=n % 3)
        if mode == "hang":
            producer.flush(30)
            print("open", flush=True)
            time.sleep(3600)
        try:
            producer.commit_transaction(60)
        except KafkaException as e:
            print("failed", txn, e, flush=True)
            sys.exit(1)
        print("committed", txn, flush=True)
        txn += 1
    """
)


def start_producer(
    bootstrap: str, topic: str, tid: str, mode: str, timeout_ms: int = 10_000, start: int = 0
) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", PRODUCER, bootstrap, topic, tid, mode, str(timeout_ms), str(start)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[RunningBroker]:
    with running_broker(
        tmp_path,
        transaction_abort_timed_out_transaction_cleanup_interval_ms="200",
        transaction_state_log_num_partitions="2",
        offsets_topic_num_partitions="2",
    ) as running:
        yield running


def lso_reached_end(bootstrap: str, topic: str, partitions: int) -> bool:
    """Whether the last stable offset is the high watermark everywhere: no open transaction."""
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "lso", "isolation.level": "read_committed"}
    )
    try:
        for p in range(partitions):
            _, lso = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
            plain = Consumer({"bootstrap.servers": bootstrap, "group.id": "hw"})
            try:
                _, hw = plain.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
            finally:
                plain.close()
            if lso != hw:
                return False
        return True
    finally:
        consumer.close()


def test_a_killed_producers_transaction_is_aborted_at_its_timeout(broker: RunningBroker) -> None:
    topic = "killed-producer"
    create_topics(broker.bootstrap, {topic: 3})
    producer = start_producer(broker.bootstrap, topic, "killed", "hang", timeout_ms=2_000)
    try:
        assert producer.stdout is not None
        assert producer.stdout.readline().strip() == "open"
    finally:
        producer.kill()
        producer.wait()
    plain = Producer({"bootstrap.servers": broker.bootstrap})
    plain.produce(topic, value=b"after", partition=0)
    plain.flush(TIMEOUT_S)
    # The open transaction holds read_committed readers before "after" until it is aborted.
    wait_until(
        lambda: read_all(broker.bootstrap, topic, "read_committed", 1, partitions=3) == [b"after"],
        timeout_s=TIMEOUT_S,
        what="the coordinator's abort of the killed producer's transaction",
    )
    assert lso_reached_end(broker.bootstrap, topic, 3)
    everything = read_all(broker.bootstrap, topic, "read_uncommitted", 6, partitions=3)
    assert sorted(everything) == sorted([b"after"] + [b"0:%d" % n for n in range(5)])


def test_a_broker_killed_again_and_again_leaves_no_half_transaction(tmp_path: Path) -> None:
    topic = "broker-kills"
    data = tmp_path / "data"
    broker = BrokerProcess(
        data,
        "-o", "transaction.state.log.num.partitions=2",
        "-o", "offsets.topic.num.partitions=2",
        "-o", "transaction.abort.timed.out.transaction.cleanup.interval.ms=200",
    ).start()  # fmt: skip
    port = broker.port
    committed: list[int] = []
    next_txn = 0
    try:
        create_topics(broker.bootstrap, {topic: 3})
        for _ in range(3):
            producer = start_producer(broker.bootstrap, topic, "crash", "loop", start=next_txn)
            assert producer.stdout is not None
            # Let some transactions commit, then kill the broker while the next ones run.
            lines: list[str] = []
            while len([x for x in lines if x.startswith("committed")]) < 5:
                line = producer.stdout.readline()
                assert line, f"producer exited: {lines}"
                lines.append(line)
            broker.kill()
            producer.kill()
            producer.wait()
            rest = producer.stdout.read()
            lines += rest.splitlines()
            committed += [int(x.split()[1]) for x in lines if x.startswith("committed")]
            next_txn = max(committed) + 100  # transactions of the next round are new numbers
            broker = BrokerProcess(data, *broker.extra_args, port=port).start()
        # The last round's open transaction, if any, ends by the next producer's fencing or
        # by its timeout: wait until nothing is open.
        wait_until(
            lambda: lso_reached_end(broker.bootstrap, topic, 3),
            timeout_s=TIMEOUT_S,
            what="the last stable offset reaching the log end",
        )
        seen = read_all(broker.bootstrap, topic, "read_committed", 5 * len(committed), 3)
        by_txn = collections.Counter(int(v.split(b":")[0]) for v in seen)
        assert all(n == 5 for n in by_txn.values()), by_txn  # never half a transaction
        assert set(committed) <= set(by_txn), set(committed) - set(by_txn)  # acknowledged: kept
        assert len(seen) == 5 * len(by_txn)
    finally:
        if broker.process is not None and broker.process.poll() is None:
            broker.terminate()
