"""A log dir on a 64 MB file system filled by a real producer (KIP-112).

The broker has two log dirs: its usual one, and a 64 MB tmpfs mounted for the test. A
confluent-kafka producer fills the partition kept on the tmpfs until the disk is full: that
produce is answered KAFKA_STORAGE_ERROR, the partition is no longer served, and the partition in
the other dir (and a consumer of it) goes on as before. Then the tmpfs grows, the broker is
restarted, and every record acknowledged before the failure is read back at its offset, and the
partition takes new records.

Mounting needs root (CAP_SYS_ADMIN); without it the test is skipped, saying so.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Message, Producer
from confluent_kafka import TopicPartition as KafkaTopicPartition

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
        assert {code for _, code in deliveries.errors} == {KafkaError.KAFKA_STORAGE_ERROR}
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
