"""Tens of thousands of partitions on one broker under a descriptor limit, stopped cleanly and
killed, and a broker that runs out of descriptors (issue 21).

The suite runs the small form: 2,000 partitions under a limit of 2,000 descriptors (a broker that
kept its segments' three files open failed at about 660).  The issue's form, 20,000 partitions
(200 topics of 100) under 20,000, runs with ``ODRADEK_MANY_PARTITIONS=1``.
"""

from __future__ import annotations

import contextlib
import errno
import os
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from odradek.client.blocking import BlockingConnection
from odradek.protocol.errors import ErrorCode
from odradek.testing import BrokerProcess, wait_until

PER_TOPIC = 100
CREATE_TOPICS = 19
_TIMEOUT_S = 900


@contextlib.contextmanager
def broker_process(data_dir: Path, nofile: int) -> Iterator[BrokerProcess]:
    broker = BrokerProcess(data_dir, nofile=nofile)
    broker.start_timeout_s = _TIMEOUT_S
    try:
        yield broker
    finally:
        if broker.process is not None and broker.process.poll() is None:
            broker.kill()


def topic_name(i: int) -> str:
    return f"many-{i:03d}"


def create_all(bootstrap: str, topics: int) -> None:
    """In requests of 10 topics: the broker answers once a request's logs exist, and
    librdkafka waits socket.timeout.ms (5 min at most) for an answer."""
    admin = AdminClient({"bootstrap.servers": bootstrap, "socket.timeout.ms": 300_000})
    for first in range(0, topics, 10):
        futures = admin.create_topics(
            [NewTopic(topic_name(i), num_partitions=PER_TOPIC) for i in range(first, first + 10)],
            operation_timeout=_TIMEOUT_S,
            request_timeout=_TIMEOUT_S,
        )
        for future in futures.values():
            future.result(_TIMEOUT_S)


def produce_one_each(bootstrap: str, topics: int) -> None:
    producer = Producer(
        {"bootstrap.servers": bootstrap, "linger.ms": 50, "message.timeout.ms": _TIMEOUT_S * 1000}
    )
    failures: list[object] = []
    for i in range(topics):
        for p in range(PER_TOPIC):
            while True:
                try:
                    producer.produce(
                        topic_name(i),
                        f"{i}/{p}".encode(),
                        partition=p,
                        on_delivery=lambda err, _: failures.append(err) if err else None,
                    )
                    break
                except BufferError:
                    producer.poll(0.1)
    assert producer.flush(_TIMEOUT_S) == 0
    assert failures == []


def read_all(bootstrap: str, topics: int) -> dict[tuple[str, int], bytes]:
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "many", "enable.auto.commit": False}
    )
    consumer.assign(
        [TopicPartition(topic_name(i), p, 0) for i in range(topics) for p in range(PER_TOPIC)]
    )
    found: dict[tuple[str, int], bytes] = {}
    deadline = time.monotonic() + _TIMEOUT_S
    try:
        while len(found) < topics * PER_TOPIC and time.monotonic() < deadline:
            for message in consumer.consume(1000, 1.0):
                if message.error() is not None:
                    raise KafkaException(message.error())
                value = message.value()
                assert value is not None
                found[(message.topic(), message.partition())] = value
    finally:
        consumer.close()
    return found


@pytest.mark.parametrize(
    ("partitions", "nofile"),
    [
        pytest.param(2_000, 2_000, id="2000-partitions"),
        pytest.param(
            20_000,
            20_000,
            id="20000-partitions",
            marks=[
                pytest.mark.slow,
                pytest.mark.skipif(
                    not os.environ.get("ODRADEK_MANY_PARTITIONS"),
                    reason="set ODRADEK_MANY_PARTITIONS=1 for 20,000 partitions",
                ),
            ],
        ),
    ],
)
def test_partitions_by_the_thousand_under_a_descriptor_limit(
    tmp_path: Path, partitions: int, nofile: int
) -> None:
    topics = partitions // PER_TOPIC
    with broker_process(tmp_path / "data", nofile) as broker:
        broker.start()
        create_all(broker.bootstrap, topics)
        produce_one_each(broker.bootstrap, topics)
        assert broker.terminate(_TIMEOUT_S) == 0
        assert any("stopped cleanly" in line for line in broker.output)
        broker.start()
        found = read_all(broker.bootstrap, topics)
        assert len(found) == partitions
        assert all(found[(topic_name(i), p)] == f"{i}/{p}".encode() for i, p in _every(topics))
        # Killed, every log is recovered at the next start, with every record.
        broker.kill()
        broker.start()
        assert read_all(broker.bootstrap, topics) == found
        assert broker.terminate(_TIMEOUT_S) == 0


def _every(topics: int) -> Iterator[tuple[int, int]]:
    for i in range(topics):
        for p in range(PER_TOPIC):
            yield i, p


def hog(port: int, count: int) -> list[socket.socket]:
    """``count`` connections begun without waiting: the broker accepts what it can."""
    sockets = []
    for _ in range(count):
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setblocking(False)
        code = sock.connect_ex(("127.0.0.1", port))
        assert code in (0, errno.EINPROGRESS), os.strerror(code)
        sockets.append(sock)
    return sockets


def test_out_of_descriptors_the_client_is_told_the_log_stays_quiet_and_sigterm_stops(
    tmp_path: Path,
) -> None:
    with broker_process(tmp_path / "data", 256) as broker:
        broker.start()
        admin = BlockingConnection.open(broker.bootstrap)
        # Once, beforehand, so that the broker has imported the message schemas it needs: an
        # import needs descriptors too.
        assert create(admin, validate_only=True).error_code == ErrorCode.none
        began = time.monotonic()
        hogs = hog(broker.port, 600)
        try:
            wait_until(
                lambda: any("cannot accept connections" in line for line in broker.output),
                what="the broker reporting that it cannot accept",
            )
            result = create(admin, validate_only=False)
            assert result.error_code == ErrorCode.kafka_storage_error
            assert "Too many open files" in (result.error_message or "")
        finally:
            admin.close()
            for sock in hogs:
                sock.close()
        # With the descriptors back, the broker accepts again.
        wait_until(lambda: _connects(broker.bootstrap), what="a connection accepted again")
        assert broker.terminate(60) == 0
        elapsed = time.monotonic() - began
        reports = [line for line in broker.output if "cannot accept connections" in line]
        assert 1 <= len(reports) <= elapsed + 1, reports[:5]
        assert not any("Traceback" in line for line in broker.output)
        assert any("stopped cleanly" in line for line in broker.output)


def create(admin: BlockingConnection, *, validate_only: bool) -> Any:
    fields = {
        "topics": [
            {
                "name": "starved",
                "num_partitions": 50,
                "replication_factor": 1,
                "assignments": [],
                "configs": [],
            }
        ],
        "timeout": 30_000,
        "validate_only": validate_only,
    }
    (result,) = admin.request(CREATE_TOPICS, fields, version=5).topics
    return result


def _connects(bootstrap: str) -> bool:
    try:
        BlockingConnection.open(bootstrap, timeout_s=2).close()
    except Exception:
        return False
    return True
