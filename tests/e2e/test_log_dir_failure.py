"""Log dirs that fail, on a real broker process (KIP-112).

A log dir on a 64 MB file system filled by a real producer:
The broker has two log dirs: its usual one, and a 64 MB tmpfs mounted for the test. A
confluent-kafka producer fills the partition kept on the tmpfs until the disk is full: that
produce is answered KAFKA_STORAGE_ERROR, the partition is no longer served, and the partition in
the other dir (and a consumer of it) goes on as before. Then the tmpfs grows, the broker is
restarted, and every record acknowledged before the failure is read back at its offset, and the
partition takes new records.

Mounting needs root (CAP_SYS_ADMIN); without it the test is skipped, saying so.

Dirs that fail as the broker starts (a file where the dir should be, a checkpoint that cannot be
read): the dir is offline and its partitions answer KAFKA_STORAGE_ERROR (they are not unknown),
the other dirs serve; with every dir offline, or a lone broker's first dir (its metadata), the
broker does not start, and a broker whose last dir fails while it serves halts.
"""

from __future__ import annotations

import asyncio
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Message, Producer
from confluent_kafka import TopicPartition as KafkaTopicPartition

from odradek.client.aio import AsyncConnection
from odradek.client.core import METADATA, PRODUCE
from odradek.protocol.errors import ErrorCode
from odradek.protocol.records import NewRecord, encode_batch
from odradek.testing import BrokerProcess

from .conftest import create_topics

TOPIC = "filled"
VALUE_BYTES = 100_000
IN_FLIGHT = 40  # records: a few batches, so the disk fills while the producer still sends
TIMEOUT_S = 60


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 64 MB tmpfs, unmounted at the end."""
    mount_point = tmp_path / "small-disk"
    mount_point.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=64m", "tmpfs", str(mount_point)],
        capture_output=True,
        text=True,
        check=False,
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a 64 MB tmpfs here (needs root): {mounted.stderr.strip()}")
    try:
        yield mount_point
    finally:
        subprocess.run(["umount", "-l", str(mount_point)], check=False)


class Deliveries:
    """What the broker acknowledged, per partition, and the errors it answered."""

    def __init__(self) -> None:
        self.acked: dict[int, dict[int, bytes]] = {}
        self.errors: list[tuple[int, int]] = []  # (partition, error code)

    def __call__(self, err: KafkaError | None, message: Message) -> None:
        partition = message.partition()
        assert partition is not None
        if err is not None:
            self.errors.append((partition, err.code()))
            return
        offset, value = message.offset(), message.value()
        assert offset is not None and value is not None
        self.acked.setdefault(partition, {})[offset] = value


def producer(bootstrap: str) -> Producer:
    # No retries: the first answer to a produce is the one this test looks at (a client with
    # retries would retry KAFKA_STORAGE_ERROR, a retriable error, until its timeout).
    return Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": "all",
            "retries": 0,
            "enable.idempotence": False,
            "linger.ms": 5,
            "message.timeout.ms": 20_000,
        }
    )


def read_partition(bootstrap: str, partition: int) -> dict[int, bytes]:
    """Every (offset, value) of the partition from offset 0 to its end."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "log-dir-check",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
        }
    )
    found: dict[int, bytes] = {}
    try:
        consumer.assign([KafkaTopicPartition(TOPIC, partition, OFFSET_BEGINNING)])
        deadline = time.monotonic() + TIMEOUT_S
        while time.monotonic() < deadline:
            message = consumer.poll(1)
            if message is None:
                continue
            error = message.error()
            if error is not None:
                if error.code() == KafkaError._PARTITION_EOF:
                    return found
                raise AssertionError(f"reading {TOPIC}-{partition}: {error}")
            offset, value = message.offset(), message.value()
            assert offset is not None and value is not None
            found[offset] = value
        raise AssertionError(f"{TOPIC}-{partition}: no end after {len(found)} records")
    finally:
        consumer.close()


def partition_in(log_dir: Path) -> int:
    [partition] = [int(p.name.rsplit("-", 1)[1]) for p in log_dir.glob(f"{TOPIC}-*")]
    return partition


def test_a_full_log_dir_answers_storage_errors_and_loses_nothing_acknowledged(
    tmp_path: Path, small_disk: Path
) -> None:
    normal = tmp_path / "normal"
    dirs = f"{normal},{small_disk}"
    broker = BrokerProcess(Path(dirs)).start()
    try:
        create_topics(broker.bootstrap, {TOPIC: 2})
        full, healthy = partition_in(small_disk), partition_in(normal)
        deliveries = Deliveries()
        client = producer(broker.bootstrap)
        deadline = time.monotonic() + TIMEOUT_S
        sent = 0
        while not deliveries.errors:
            assert time.monotonic() < deadline, f"{sent} records sent and no error yet"
            if len(client) >= IN_FLIGHT:
                client.poll(0.05)
                continue
            value = b"%07d" % sent + b"x" * VALUE_BYTES
            client.produce(TOPIC, value, partition=full, on_delivery=deliveries)
            sent += 1
            client.poll(0)
        client.flush(30)
        # Records still queued in the client when the partition went offline wait for a leader
        # that does not come, and time out there: never sent, never acknowledged.
        codes = {code for _, code in deliveries.errors}
        assert KafkaError.KAFKA_STORAGE_ERROR in codes
        assert codes <= {KafkaError.KAFKA_STORAGE_ERROR, KafkaError._MSG_TIMED_OUT}
        acknowledged = dict(deliveries.acked[full])
        assert sorted(acknowledged) == list(range(len(acknowledged)))
        assert len(acknowledged) * VALUE_BYTES > 32_000_000  # the disk was really filled
        assert "log dir" in "".join(broker.output) and "is offline" in "".join(broker.output)

        # The other dir, and other clients, are served as before.
        for i in range(20):
            client.produce(TOPIC, b"healthy-%d" % i, partition=healthy, on_delivery=deliveries)
        assert client.flush(30) == 0
        assert len(deliveries.acked[healthy]) == 20
        assert read_partition(broker.bootstrap, healthy) == deliveries.acked[healthy]

        # Space comes back (a bigger tmpfs); the broker sees the dir again only after a restart.
        subprocess.run(["mount", "-o", "remount,size=256m", str(small_disk)], check=True)
        assert broker.terminate() == 0
        broker = BrokerProcess(Path(dirs), port=broker.port).start()
        assert read_partition(broker.bootstrap, full) == acknowledged
        after = producer(broker.bootstrap)
        after.produce(TOPIC, b"after-restart", partition=full, on_delivery=deliveries)
        assert after.flush(30) == 0
        # The failed append left nothing behind: the next record follows the last acknowledged.
        assert deliveries.acked[full][len(acknowledged)] == b"after-restart"
    finally:
        if broker.process is not None and broker.process.poll() is None:
            broker.kill()


def test_a_broker_whose_every_log_dir_fails_at_start_says_so_and_exits(tmp_path: Path) -> None:
    # A checkpoint that cannot be read (here: a directory where the file should be) is an I/O
    # error of the dir, as EIO would be.
    (tmp_path / "data" / "recovery-point-offset-checkpoint").mkdir(parents=True)
    with pytest.raises(RuntimeError, match="exited before listening") as failed:
        BrokerProcess(tmp_path / "data").start()
    assert "cannot start: every log dir is offline" in str(failed.value)
    assert "Traceback" not in str(failed.value)


DESCRIBE_LOG_DIRS = 35


def _produce_fields(topic: str, partition: int, value: bytes) -> dict[str, Any]:
    batch = encode_batch([NewRecord(None, value)], now_ms=1_700_000_000_000)
    return {
        "transactional_id": None,
        "acks": -1,
        "timeout": 10_000,
        "topic_data": [{"name": topic, "partition_data": [{"index": partition, "records": batch}]}],
    }


def _as_the_broker_answers(bootstrap: str, topic: str, partitions: int) -> dict[str, Any]:
    """What Metadata, Produce (to each partition) and DescribeLogDirs answer."""

    async def ask() -> dict[str, Any]:
        async with await AsyncConnection.open(bootstrap) as connection:
            metadata = await connection.request(
                METADATA, {"topics": [{"name": topic}], "allow_auto_topic_creation": False}
            )
            (described,) = metadata.topics
            produced = {}
            for index in range(partitions):
                response = await connection.request(
                    PRODUCE, _produce_fields(topic, index, b"after"), highest=9
                )
                produced[index] = ErrorCode(response.responses[0].partition_responses[0].error_code)
            dirs = await connection.request(DESCRIBE_LOG_DIRS, {"topics": None}, highest=4)
            return {
                "topic_error": ErrorCode(described.error_code),
                "partitions": {
                    int(p.partition_index): (
                        ErrorCode(p.error_code),
                        int(p.leader_id),
                        list(p.offline_replicas),
                    )
                    for p in described.partitions
                },
                "produce": produced,
                "dirs": {str(r.log_dir): ErrorCode(r.error_code) for r in dirs.results},
            }

    return asyncio.run(ask())


@pytest.mark.parametrize("failure", ["file-where-the-dir-is", "unreadable-checkpoint"])
def test_a_log_dir_that_fails_at_start_leaves_its_partitions_offline_not_unknown(
    tmp_path: Path, failure: str
) -> None:
    first, second = tmp_path / "first", tmp_path / "second"
    dirs = Path(f"{first},{second}")
    broker = BrokerProcess(dirs).start()
    try:
        create_topics(broker.bootstrap, {TOPIC: 2})
        in_first, in_second = partition_in(first), partition_in(second)
        client = producer(broker.bootstrap)
        deliveries = Deliveries()
        for partition in (in_first, in_second):
            client.produce(
                TOPIC, b"before-%d" % partition, partition=partition, on_delivery=deliveries
            )
        assert client.flush(30) == 0
        assert broker.terminate() == 0

        if failure == "file-where-the-dir-is":
            second.rename(tmp_path / "second-away")
            second.write_bytes(b"not a directory")
        else:
            checkpoint = second / "recovery-point-offset-checkpoint"
            checkpoint.unlink()
            checkpoint.mkdir()
        broker = BrokerProcess(dirs, port=broker.port).start()
        answers = _as_the_broker_answers(broker.bootstrap, TOPIC, 2)
        assert answers["topic_error"] == ErrorCode.none
        # Offline, with no leader (a lone broker), as Kafka's offline partitions: not unknown.
        assert answers["partitions"][in_second] == (ErrorCode.leader_not_available, -1, [1])
        assert answers["produce"][in_second] == ErrorCode.kafka_storage_error
        assert answers["partitions"][in_first] == (ErrorCode.none, 1, [])
        assert answers["produce"][in_first] == ErrorCode.none
        assert answers["dirs"] == {
            str(first.absolute()): ErrorCode.none,
            str(second.absolute()): ErrorCode.kafka_storage_error,
        }
        assert read_partition(broker.bootstrap, in_first) == {
            0: b"before-%d" % in_first,
            1: b"after",
        }

        # The dir healthy again: the partition's data is back at the next start.
        assert broker.terminate() == 0
        if failure == "file-where-the-dir-is":
            second.unlink()
            (tmp_path / "second-away").rename(second)
        else:
            checkpoint.rmdir()
        broker = BrokerProcess(dirs, port=broker.port).start()
        assert read_partition(broker.bootstrap, in_second) == {0: b"before-%d" % in_second}
    finally:
        if broker.process is not None and broker.process.poll() is None:
            broker.kill()


def test_a_lone_broker_whose_metadata_dir_fails_at_start_does_not_start(tmp_path: Path) -> None:
    first, second = tmp_path / "first", tmp_path / "second"
    first.write_bytes(b"not a directory")
    with pytest.raises(RuntimeError, match="exited before listening") as failed:
        BrokerProcess(Path(f"{first},{second}")).start()
    assert f"cannot start: log dir {first} holds this broker's metadata" in str(failed.value)
    assert "Traceback" not in str(failed.value)

    # Listable but failing as its logs open: the same.
    first.unlink()
    (first / "recovery-point-offset-checkpoint").mkdir(parents=True)
    with pytest.raises(RuntimeError, match="exited before listening") as failed:
        BrokerProcess(Path(f"{first},{second}")).start()
    assert f"cannot start: log dir {first} holds this broker's metadata" in str(failed.value)
    assert "Traceback" not in str(failed.value)


def test_a_broker_whose_last_log_dir_fails_while_serving_halts(small_disk: Path) -> None:
    broker = BrokerProcess(small_disk).start()
    try:
        create_topics(broker.bootstrap, {TOPIC: 1})
        deliveries = Deliveries()
        client = producer(broker.bootstrap)
        deadline = time.monotonic() + TIMEOUT_S
        sent = 0
        while not deliveries.errors and broker.process is not None:
            assert time.monotonic() < deadline, f"{sent} records sent and no error yet"
            if broker.process.poll() is not None:
                break
            if len(client) >= IN_FLIGHT:
                client.poll(0.05)
                continue
            client.produce(TOPIC, b"x" * VALUE_BYTES, partition=0, on_delivery=deliveries)
            sent += 1
            client.poll(0)
        assert broker.process is not None
        # Kafka's Exit.halt(1): no clean shutdown (nothing could be written), the process ends.
        assert broker.process.wait(TIMEOUT_S) == 1
        output = "".join(broker.output)
        assert f"halting broker: every log dir is offline ({small_disk}" in output
    finally:
        if broker.process is not None and broker.process.poll() is None:
            broker.kill()
