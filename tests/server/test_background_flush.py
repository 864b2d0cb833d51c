"""The broker fsyncs off its event loop: flushes on roll, flush.ms, checkpoints, shutdown."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest

from odradek.clock import ManualClock
from odradek.protocol.errors import ErrorCode
from odradek.storage import PartitionLog
from odradek.testing import RunningBroker, running_broker
from tests.storage.conftest import held

from .conftest import KafkaConnection, assert_broker_serves, batch_of, unique_topic

WAIT_S = 30
DELETE_TOPICS = 20
VALUE = b"v" * 300  # a batch of one is ~370 bytes: a 1024-byte segment holds two


@pytest.fixture
def fsync_threads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names of the threads that call os.fsync from now on."""
    names: list[str] = []
    real_fsync = os.fsync

    def recording_fsync(fd: int) -> None:
        names.append(threading.current_thread().name)
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", recording_fsync)
    return names


def partition_log(broker: RunningBroker, topic: str) -> PartitionLog:
    assert broker.broker is not None
    found = broker.broker.logs.get(topic, 0)
    assert found is not None
    return found


def wait_for_flushes(broker: RunningBroker) -> None:
    assert broker.broker is not None
    assert broker.broker.logs.wait_for_flushes(WAIT_S)


def recovery_point(broker: RunningBroker, topic: str) -> int:
    """Read on the broker's loop, the thread that owns the log."""
    log = partition_log(broker, topic)

    async def read() -> int:
        return log.recovery_point

    return broker.call(read())


def produce(connection: KafkaConnection, topic: str, count: int) -> None:
    for _ in range(count):
        assert connection.produce(topic, 0, batch_of(VALUE)).error_code == ErrorCode.none


def clock_now() -> ManualClock:
    return ManualClock(start_ms=int(time.time() * 1000))  # records carry real timestamps


def test_rolls_flush_off_the_loop_and_a_clean_stop_checkpoints_the_log_end(
    fsync_threads: list[str], tmp_path: Path
) -> None:
    topic = unique_topic("roll")
    with (
        running_broker(tmp_path, clock=clock_now()) as broker,
        KafkaConnection(broker.bootstrap) as connection,
    ):
        connection.create_topic(topic, **{"segment.bytes": "1024"})
        del fsync_threads[:]  # creating the topic fsyncs its metadata on the loop
        produce(connection, topic, 9)
        wait_for_flushes(broker)
        log = partition_log(broker, topic)
        assert log.segment_count() == 5
        assert recovery_point(broker, topic) == log.segments[-1].base_offset == 8
        assert fsync_threads and set(fsync_threads) == {"odradek-log-flusher"}
    checkpoint = (tmp_path / "recovery-point-offset-checkpoint").read_text()
    assert f"{topic} 0 9\n" in checkpoint
    assert (tmp_path / ".kafka_cleanshutdown").exists()


def test_flush_ms_and_the_retention_checkpoint_fsync_off_the_loop(
    fsync_threads: list[str], tmp_path: Path
) -> None:
    clock = clock_now()
    topic = unique_topic("flushms")
    with running_broker(tmp_path, clock=clock, log_retention_check_interval_ms="1000") as broker:
        assert broker.broker is not None
        with KafkaConnection(broker.bootstrap) as connection:
            connection.create_topic(
                topic, **{"segment.bytes": "1024", "flush.ms": "1000", "retention.bytes": "1024"}
            )
            del fsync_threads[:]
            produce(connection, topic, 7)
            clock.advance(1000)

            async def tick() -> None:
                assert broker.broker is not None
                broker.broker.housekeeping_tick()

            broker.call(tick())
            wait_for_flushes(broker)
            assert recovery_point(broker, topic) == 7  # flush.ms: the whole log
            log = partition_log(broker, topic)
            assert log.log_start_offset == 4  # retention ran, and checkpointed in the background
            assert f"{topic} 0 4\n" in (tmp_path / "log-start-offset-checkpoint").read_text()
            assert set(fsync_threads) == {"odradek-log-flusher"}


def test_deleting_a_topic_while_its_flushes_wait(tmp_path: Path) -> None:
    topic = unique_topic("doomed")
    with running_broker(tmp_path, clock=clock_now()) as broker:
        assert broker.broker is not None
        with KafkaConnection(broker.bootstrap) as connection:
            connection.create_topic(topic, **{"segment.bytes": "1024"})
            directory = partition_log(broker, topic).directory
            with held(broker.broker.logs.flusher):
                produce(connection, topic, 7)
                assert partition_log(broker, topic).flushes_pending == 3
                response = connection.request(DELETE_TOPICS, 4, topic_names=[topic], timeout=10_000)
                assert response.responses[0].error_code == ErrorCode.none
                assert not directory.exists()
            wait_for_flushes(broker)
            assert not directory.exists()
            assert not [p for p in tmp_path.iterdir() if p.name.startswith(topic)]
            assert_broker_serves(broker, connection)


def test_deleting_a_topic_takes_it_out_of_the_checkpoint_at_once(tmp_path: Path) -> None:
    topic = unique_topic("gone")
    checkpoint = tmp_path / "recovery-point-offset-checkpoint"
    with (
        running_broker(tmp_path, clock=clock_now()) as broker,
        KafkaConnection(broker.bootstrap) as connection,
    ):
        assert broker.broker is not None
        connection.create_topic(topic, **{"segment.bytes": "1024"})
        produce(connection, topic, 5)
        wait_for_flushes(broker)
        assert broker.broker.logs.checkpoint_in_background().wait(WAIT_S)
        assert f"{topic} 0 4\n" in checkpoint.read_text()
        response = connection.request(DELETE_TOPICS, 4, topic_names=[topic], timeout=10_000)
        assert response.responses[0].error_code == ErrorCode.none
        # A topic created again under this name must not start from the old recovery point.
        assert topic not in checkpoint.read_text()


def test_a_clean_stop_with_flushes_queued_ends_with_everything_flushed(tmp_path: Path) -> None:
    topic = unique_topic("stop")
    broker = RunningBroker(tmp_path, clock=clock_now()).start()
    assert broker.broker is not None
    flusher = broker.broker.logs.flusher
    with KafkaConnection(broker.bootstrap) as connection:
        connection.create_topic(topic, **{"segment.bytes": "1024"})
        stopping = threading.Thread(target=broker.stop)
        with held(flusher):
            produce(connection, topic, 7)
            stopping.start()  # while the flushes of three rolls are still queued
        stopping.join(WAIT_S)
        assert not stopping.is_alive()
    assert flusher.wait_idle(0)
    assert f"{topic} 0 7\n" in (tmp_path / "recovery-point-offset-checkpoint").read_text()
    assert (tmp_path / ".kafka_cleanshutdown").exists()
