"""``odradek serve`` as users run it: a properties file, ``-o`` overrides, SIGTERM, restart."""

from __future__ import annotations

import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Producer, TopicPartition

from odradek.testing import BrokerProcess

TIMEOUT_S = 15


def produce(bootstrap: str, topic: str, values: list[bytes]) -> list[KafkaError | None]:
    """Produce ``values`` one by one; the delivery error of each (None when stored)."""
    results: list[KafkaError | None] = []
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "message.timeout.ms": TIMEOUT_S * 1000,
            "partitioner": "consistent_random",
        }
    )
    for value in values:
        producer.produce(topic, value, on_delivery=lambda err, _msg: results.append(err))
    assert producer.flush(TIMEOUT_S) == 0
    return results


def partition_count(bootstrap: str, topic: str) -> int:
    producer = Producer({"bootstrap.servers": bootstrap})
    metadata = producer.list_topics(topic, timeout=TIMEOUT_S)
    assert metadata.topics[topic].error is None, metadata.topics[topic].error
    return len(metadata.topics[topic].partitions)


def consume_all(bootstrap: str, topic: str, partitions: int, expected: int) -> list[bytes]:
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "cli-test", "enable.auto.commit": False}
    )
    try:
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
        values: list[bytes] = []
        while len(values) < expected:
            message = consumer.poll(TIMEOUT_S)
            assert message is not None, f"only {len(values)} of {expected} records came back"
            assert message.error() is None, message.error()
            values.append(message.value())
        return values
    finally:
        consumer.close()


def serve(data_dir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "odradek", "serve", "--data-dir", str(data_dir), *args],
        capture_output=True,
        text=True,
        timeout=30,
    )


def test_serve_with_config_file_and_overrides(tmp_path: Path) -> None:
    config = tmp_path / "server.properties"
    config.write_text(
        "# a Kafka-style properties file\n"
        "num.partitions=2\n"
        "message.max.bytes: 2000\n"
        "auto.create.topics.enable=true\n"
    )
    data_dir = tmp_path / "data"
    broker = BrokerProcess(data_dir, "--config", str(config), "-o", "num.partitions=3").start()
    try:
        listening = [line for line in broker.output if "listening on" in line]
        assert len(listening) == 1, broker.output
        topic = f"cli-{uuid.uuid4().hex[:8]}"
        # The override beats the file for num.partitions of an auto-created topic...
        assert partition_count(broker.bootstrap, topic) == 3
        # ... and the file's message.max.bytes holds.
        assert produce(broker.bootstrap, topic, [b"fits"]) == [None]
        (error,) = produce(broker.bootstrap, topic, [b"x" * 5000])
        assert error is not None and error.code() == KafkaError.MSG_SIZE_TOO_LARGE
        assert produce(broker.bootstrap, topic, [b"one", b"two"]) == [None, None]
        assert broker.terminate() == 0
    except BaseException:
        if broker.process is not None and broker.process.poll() is None:
            broker.kill()
        raise
    assert any("stopped cleanly" in line for line in broker.output), broker.output
    assert data_dir.is_dir()

    restarted = BrokerProcess(data_dir, "--config", str(config), "-o", "num.partitions=3").start()
    try:
        assert partition_count(restarted.bootstrap, topic) == 3
        values = consume_all(restarted.bootstrap, topic, 3, expected=3)
        assert sorted(values) == [b"fits", b"one", b"two"]
        assert restarted.terminate() == 0
    finally:
        if restarted.process is not None and restarted.process.poll() is None:
            restarted.kill()


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["-o", "num.partitions=abc"], ["num.partitions", "abc"]),
        (["-o", "num.partitions=0"], ["num.partitions", ">= 1"]),
        (["-o", "num.partitions"], ["key=value"]),
        (["--config", "/nonexistent/server.properties"], ["/nonexistent/server.properties"]),
    ],
)
def test_bad_configuration_exits_non_zero_with_a_clear_message(
    tmp_path: Path, args: list[str], expected: list[str]
) -> None:
    result = serve(tmp_path / "data", "--listen", "127.0.0.1:0", *args)
    assert result.returncode != 0
    assert "listening on" not in result.stderr + result.stdout
    assert "bad configuration" in result.stderr
    for fragment in expected:
        assert fragment in result.stderr, result.stderr


def test_bad_value_in_the_properties_file(tmp_path: Path) -> None:
    config = tmp_path / "server.properties"
    config.write_text("num.partitions=three\n")
    result = serve(tmp_path / "data", "--listen", "127.0.0.1:0", "--config", str(config))
    assert result.returncode != 0
    assert "num.partitions" in result.stderr and "three" in result.stderr, result.stderr
