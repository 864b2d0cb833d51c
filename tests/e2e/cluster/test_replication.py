"""Replication with real brokers and a real ZooKeeper: no acknowledged record is lost when
brokers die, stop, pause, or are cut off from ZooKeeper (Kafka's replication system tests)."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, TopicPartition

from odradek.clock import SystemClock
from odradek.protocol.errors import ErrorCode
from odradek.protocol.records import iter_records
from odradek.storage import LogConfig, PartitionLog
from odradek.testing import RunningCluster, wait_until
from tests.server.conftest import KafkaConnection, batch_of

from .support import (
    ProducerLoad,
    create_topic,
    leader_of,
    partition_view,
    read_partition,
    wait_back_in_isr,
)

pytestmark = pytest.mark.slow

# Answers that leave nothing written: the write is sent again.
RETRIABLE = (ErrorCode.not_leader_or_follower, ErrorCode.not_enough_replicas)
TOPIC = "replicated"


class FollowingConsumer:
    """A consumer reading the partition from offset 0 for the whole test, never restarted."""

    def __init__(self, bootstrap: str) -> None:
        self.seen: dict[int, bytes] = {}
        self.duplicates: list[int] = []
        self._stop = threading.Event()
        self._consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": "follower-of-the-test",
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
                "topic.metadata.refresh.interval.ms": 1000,
            }
        )
        self._consumer.assign([TopicPartition(TOPIC, 0, 0)])
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            message = self._consumer.poll(0.2)
            if message is None or message.error():
                continue
            offset, value = message.offset(), message.value()
            if offset in self.seen and self.seen[offset] != value:
                self.duplicates.append(offset)
            self.seen[offset] = value

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)
        self._consumer.close()


def assert_everything_acknowledged_is_there(
    cluster: RunningCluster, load: ProducerLoad, consumer: FollowingConsumer | None = None
) -> None:
    assert load.acked, "nothing was acknowledged"
    end = max(load.acked) + 1
    read = read_partition(cluster.bootstrap, TOPIC, end)
    missing = sorted(o for o in load.acked if o not in read)
    changed = sorted(o for o, v in load.acked.items() if o in read and read[o] != v)
    assert not missing, f"{len(missing)} acknowledged offsets missing, first {missing[:5]}"
    assert not changed, f"{len(changed)} offsets hold another record, first {changed[:5]}"
    values = list(read.values())
    assert len(values) == len(set(values)), "a record is in the log twice"
    if consumer is not None:
        wait_until(
            lambda: all(o in consumer.seen for o in load.acked), 60, what="consumer caught up"
        )
        assert not consumer.duplicates
        assert all(consumer.seen[o] == v for o, v in load.acked.items())


def test_hard_bounce_of_the_leader_loses_nothing_acknowledged(tmp_path: Path) -> None:
    """RF=3, min.insync.replicas=2, an idempotent acks=all producer under load; kill -9 the
    leader three times, restarting it each time (each round waits out a ZooKeeper session and
    a broker start)."""
    settings = {"zookeeper.session.timeout.ms": "4000", "replica.lag.time.max.ms": "3000"}
    with RunningCluster(tmp_path, settings=settings) as cluster:
        create_topic(cluster.bootstrap, TOPIC, 1, 3, **{"min.insync.replicas": "2"})
        load = ProducerLoad(cluster.bootstrap, TOPIC).start()
        consumer = FollowingConsumer(cluster.bootstrap)
        try:
            for _ in range(3):
                load.wait_for_more(300)
                leader = leader_of(cluster.bootstrap, TOPIC)
                cluster.kill(leader)
                wait_until(
                    lambda old=leader: leader_of(cluster.bootstrap, TOPIC) not in (-1, old),
                    what="a new leader",
                )
                load.wait_for_more(300)  # acks=all produces succeed on the new leader
                cluster.start_broker(leader)
                wait_back_in_isr(cluster, TOPIC, leader, 60)
        finally:
            load.stop()
        assert not load.errors, load.errors[:3]
        assert_everything_acknowledged_is_there(cluster, load, consumer)
        consumer.stop()


def test_rolling_restart_moves_leaders_and_loses_nothing(tmp_path: Path) -> None:
    """SIGTERM each broker in turn under load: a controlled shutdown moves its leaderships
    first, so the producer sees no error at all."""
    with RunningCluster(tmp_path) as cluster:
        create_topic(cluster.bootstrap, TOPIC, 1, 3, **{"min.insync.replicas": "2"})
        load = ProducerLoad(cluster.bootstrap, TOPIC).start()
        try:
            for broker_id in sorted(cluster.brokers):
                load.wait_for_more(300)
                assert cluster.terminate(broker_id) == 0
                assert "controlled shutdown of broker" in cluster.output(broker_id)
                load.wait_for_more(300)
                cluster.start_broker(broker_id)
                wait_back_in_isr(cluster, TOPIC, broker_id, 60)
        finally:
            load.stop()
        assert not load.errors, load.errors[:3]
        assert_everything_acknowledged_is_there(cluster, load)


def produce_directly(bootstrap: str, acks: int, value: bytes) -> Any:
    with KafkaConnection(bootstrap) as connection:
        return connection.produce(TOPIC, 0, batch_of(value), acks=acks)


def test_a_paused_follower_leaves_the_isr_and_returns(tmp_path: Path) -> None:
    """SIGSTOP a follower past replica.lag.time.max.ms (not past its ZooKeeper session): the
    leader shrinks the ISR, and after SIGCONT the follower catches up and rejoins. With two of
    three brokers down, acks=all is refused with NOT_ENOUGH_REPLICAS and acks=1 still works."""
    settings = {"replica.lag.time.max.ms": "1500", "zookeeper.session.timeout.ms": "20000"}
    with RunningCluster(tmp_path, settings=settings) as cluster:
        create_topic(cluster.bootstrap, TOPIC, 1, 3, **{"min.insync.replicas": "2"})
        leader = leader_of(cluster.bootstrap, TOPIC)
        follower, other = (b for b in sorted(cluster.brokers) if b != leader)
        leader_address = cluster.brokers[leader].bootstrap
        # The broker Metadata names as leader may apply its partition state a moment later
        # (UNKNOWN_TOPIC_OR_PARTITION until then, which clients retry): so does this.
        first = wait_until(
            lambda: (
                answer
                if (answer := produce_directly(leader_address, -1, b"first")).error_code
                != ErrorCode.unknown_topic_or_partition
                else None
            ),
            30,
            what="the leader serving the new partition",
        )
        assert first.error_code == ErrorCode.none
        cluster.pause(follower)
        try:
            for i in range(20):  # writes the paused follower misses
                produce_directly(leader_address, 1, b"while-paused-%d" % i)
            wait_until(
                lambda: (
                    partition_view(cluster.bootstrap, TOPIC).isr == (leader, other)
                    or set(partition_view(cluster.bootstrap, TOPIC).isr) == {leader, other}
                ),
                30,
                what=f"broker {follower} out of the ISR",
            )
            response = produce_directly(leader_address, -1, b"acks-all-without-it")
            assert response.error_code == ErrorCode.none  # two in-sync replicas remain
        finally:
            cluster.resume(follower)
        wait_until(
            lambda: follower in partition_view(cluster.bootstrap, TOPIC).isr,
            30,
            what=f"broker {follower} back in the ISR",
        )
        cluster.kill(follower)
        cluster.kill(other)
        wait_until(
            lambda: partition_view(cluster.bootstrap, TOPIC).isr == (leader,),
            60,
            what="the leader alone in the ISR",
        )
        refused = produce_directly(leader_address, -1, b"refused")
        assert refused.error_code == ErrorCode.not_enough_replicas
        accepted = produce_directly(leader_address, 1, b"accepted")
        assert accepted.error_code == ErrorCode.none


def batches_of(directory: Path) -> list[tuple[int, int, list[bytes | None]]]:
    """(base offset, leader epoch, values) of every batch of a partition directory."""
    log = PartitionLog.open(directory, LogConfig(), SystemClock(), needs_recovery=True)
    try:
        found = []
        offset = log.log_start_offset
        while (piece := log.read(offset, 1 << 20)) is not None:
            for header, records in iter_records(piece.read_bytes()):
                found.append(
                    (header.base_offset, header.partition_leader_epoch, [r.value for r in records])
                )
                offset = header.next_offset
        return found
    finally:
        log.close()


def test_a_leader_cut_off_from_zookeeper_truncates_its_divergent_tail(tmp_path: Path) -> None:
    """KIP-101: the leader is paused until its ZooKeeper session expires; a new leader is
    elected and takes writes. The old leader's writes made meanwhile (acks=1, sent while it was
    paused) are never acknowledged with acks=all, and on its return it truncates them by leader
    epoch and follows: every replica ends with the same log."""
    settings = {"zookeeper.session.timeout.ms": "3000", "replica.lag.time.max.ms": "2000"}
    with RunningCluster(tmp_path, settings=settings) as cluster:
        create_topic(cluster.bootstrap, TOPIC, 1, 3, **{"min.insync.replicas": "2"})
        old = leader_of(cluster.bootstrap, TOPIC)
        old_address = cluster.brokers[old].bootstrap
        for i in range(10):
            assert produce_directly(old_address, -1, b"before-%d" % i).error_code == 0
        late_acks_1 = KafkaConnection(old_address)
        late_acks_all = KafkaConnection(old_address)
        cluster.pause(old)
        try:
            # Requests the paused leader will find in its socket when it wakes up.
            sent_1 = late_acks_1.send(
                0, 9, acks=1, timeout=5000, topic_data=_topic_data(b"late-acks-1")
            )
            sent_all = late_acks_all.send(
                0, 9, acks=-1, timeout=3000, topic_data=_topic_data(b"late-acks-all")
            )
            others = [b for b in cluster.brokers if b != old]
            bootstrap = ",".join(cluster.brokers[b].bootstrap for b in others)

            def new_leader() -> int:
                leader = leader_of(bootstrap, TOPIC)
                return leader if leader in others else 0

            new = wait_until(new_leader, 30, what="a new leader")
            new_address = cluster.brokers[new].bootstrap
            for i in range(10):
                assert produce_directly(new_address, -1, b"after-%d" % i).error_code == 0
        finally:
            cluster.resume(old)
        acks_all = _partition_response(late_acks_all.receive(0, 9, sent_all))
        assert acks_all.error_code != ErrorCode.none, "a late write was acknowledged as committed"
        _partition_response(late_acks_1.receive(0, 9, sent_1))
        late_acks_1.close()
        late_acks_all.close()
        wait_until(
            lambda: old in partition_view(cluster.bootstrap, TOPIC).isr,
            60,
            what=f"broker {old} back in the ISR",
        )
        # Under load a 3 s ZooKeeper session can expire again (here the new leader's), and the
        # controller moves the leadership once more: the last writes go to whoever leads now.
        for i in range(5):

            def written(value: bytes = b"end-%d" % i) -> bool:
                leader = leader_of(cluster.bootstrap, TOPIC)
                if leader not in cluster.brokers:
                    return False
                answer = produce_directly(cluster.brokers[leader].bootstrap, -1, value)
                assert answer.error_code in (0, *RETRIABLE), answer
                return answer.error_code == 0

            wait_until(written, 30, what=f"end-{i} written with acks=all")
    logs = {b: batches_of(tmp_path / f"broker-{b}" / f"{TOPIC}-0") for b in (1, 2, 3)}
    assert logs[1] == logs[2] == logs[3]
    values = [v for _, _, vs in logs[1] for v in vs]
    assert b"late-acks-all" not in values and b"late-acks-1" not in values
    assert values[:10] == [b"before-%d" % i for i in range(10)]
    assert b"after-9" in values and b"end-4" in values
    epochs = [epoch for _, epoch, _ in logs[1]]
    assert epochs == sorted(epochs) and epochs[-1] > epochs[0]


def _topic_data(value: bytes) -> list[dict[str, Any]]:
    return [{"name": TOPIC, "partition_data": [{"index": 0, "records": batch_of(value)}]}]


def _partition_response(response: Any) -> Any:
    (topic,) = response.responses
    (partition,) = topic.partition_responses
    return partition


def test_brokers_stop_on_sigterm_while_zookeeper_is_down(tmp_path: Path) -> None:
    """With ZooKeeper gone, no controller can move leaderships: a stopping broker gives up the
    controlled shutdown and stops (ZooKeeper calls made on its loop are bounded by
    zookeeper.connection.timeout.ms instead of waiting for a connection forever)."""
    settings = {"zookeeper.connection.timeout.ms": "2000"}
    with RunningCluster(tmp_path, settings=settings) as cluster:
        create_topic(cluster.bootstrap, TOPIC, 3, 3)
        cluster.zookeeper.kill()
        for broker_id in sorted(cluster.brokers):
            assert cluster.terminate(broker_id, timeout=45) == 0
            assert "stopped cleanly" in cluster.output(broker_id)


def test_partitions_spread_over_several_fetchers_are_all_replicated(tmp_path: Path) -> None:
    """num.replica.fetchers=2: a follower copies each leader's partitions over two fetchers
    (Kafka's fetcher id of each); acks=all with min.insync.replicas=3 is answered on every
    partition, so every follower copies every partition."""
    partitions = 4
    with RunningCluster(tmp_path, settings={"num.replica.fetchers": "2"}) as cluster:
        create_topic(cluster.bootstrap, TOPIC, partitions, 3, **{"min.insync.replicas": "3"})
        for index in range(partitions):
            address = cluster.brokers[leader_of(cluster.bootstrap, TOPIC, index)].bootstrap

            def produced(index: int = index, address: str = address) -> Any:
                with KafkaConnection(address) as connection:
                    answer = connection.produce(TOPIC, index, batch_of(b"v"), acks=-1)
                return answer if answer.error_code != ErrorCode.unknown_topic_or_partition else None

            answer = wait_until(produced, 30, what=f"partition {index} served")
            assert answer.error_code == ErrorCode.none, index
