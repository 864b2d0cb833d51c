"""Partition reassignment with real brokers and a real ZooKeeper: a partition moved from
brokers {1,2} to {2,3} under an acks=all producer keeps every acknowledged record, the old
replica's directory goes, ZooKeeper ends with the new assignment and ISR; a move cancelled goes
back; a move survives a controller failover; an unclean election brings an offline partition
back."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Coroutine, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import pytest
from confluent_kafka.admin import NewTopic
from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError

from odradek.client.reassignment import UNCLEAN, PartitionAdmin
from odradek.protocol.errors import ErrorCode
from odradek.testing import RunningCluster, wait_until

from .support import ProducerLoad, admin, leader_of, partition_view, read_partition

pytestmark = pytest.mark.slow

TOPIC = "moving"
T = TypeVar("T")


def run(coro: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(coro)


async def _with_admin(bootstrap: str, method: str, *args: Any) -> Any:
    async with await PartitionAdmin.connect(bootstrap, timeout_s=30) as client:
        return await getattr(client, method)(*args)


def reassign(bootstrap: str, targets: dict[tuple[str, int], Any]) -> dict[Any, Any]:
    return run(_with_admin(bootstrap, "alter_reassignments", targets))  # type: ignore[no-any-return]


def ongoing(bootstrap: str) -> dict[Any, Any]:
    return run(_with_admin(bootstrap, "list_reassignments"))  # type: ignore[no-any-return]


def create_on(bootstrap: str, name: str, replicas: list[int], **configs: str) -> None:
    client = admin(bootstrap)
    futures = client.create_topics(
        [NewTopic(name, num_partitions=1, replica_assignment=[replicas], config=configs)],
        operation_timeout=30,
    )
    for future in futures.values():
        future.result(30)
    views: list[Any] = []

    def in_sync() -> bool:
        views[:] = [partition_view(bootstrap, name)]
        return set(views[0].isr) == set(replicas)

    try:
        wait_until(in_sync, 60, what=f"{name} in sync on {replicas}")
    except AssertionError as e:
        raise AssertionError(f"{e}; the last Metadata answer: {views}") from None


@contextmanager
def zookeeper(cluster: RunningCluster) -> Iterator[KazooClient]:
    client = KazooClient(hosts=cluster.zookeeper_connect, timeout=10)
    client.start(timeout=15)
    try:
        yield client
    finally:
        client.stop()
        client.close()


def topic_znode(zk: KazooClient, topic: str) -> dict[str, Any]:
    data, _ = zk.get(f"/brokers/topics/{topic}")
    return json.loads(data)  # type: ignore[no-any-return]


def state_znode(zk: KazooClient, topic: str, partition: int = 0) -> dict[str, Any]:
    data, _ = zk.get(f"/brokers/topics/{topic}/partitions/{partition}/state")
    return json.loads(data)  # type: ignore[no-any-return]


def replica_dir(cluster: RunningCluster, broker: int, topic: str, partition: int = 0) -> Path:
    return cluster.brokers[broker].data_dir / f"{topic}-{partition}"


def test_a_partition_moves_from_1_2_to_2_3_under_load(tmp_path: Path) -> None:
    with RunningCluster(tmp_path) as cluster, zookeeper(cluster) as zk:
        bootstrap = cluster.bootstrap
        create_on(bootstrap, TOPIC, [1, 2], **{"min.insync.replicas": "2"})
        assert replica_dir(cluster, 1, TOPIC).is_dir()
        assert not replica_dir(cluster, 3, TOPIC).exists()
        load = ProducerLoad(bootstrap, TOPIC).start()
        try:
            load.wait_for_more(500)
            results = reassign(bootstrap, {(TOPIC, 0): [2, 3]})
            assert results[(TOPIC, 0)].error == ErrorCode.none
            wait_until(lambda: not ongoing(bootstrap), 90, what="the move to finish")
            load.wait_for_more(500)
        finally:
            load.stop()
        assert not load.errors, load.errors[:3]

        znode = topic_znode(zk, TOPIC)
        assert znode["partitions"] == {"0": [2, 3]}
        assert not znode["adding_replicas"] and not znode["removing_replicas"]
        state = state_znode(zk, TOPIC)
        assert state["leader"] in (2, 3)
        assert set(state["isr"]) <= {2, 3}
        wait_until(lambda: sorted(state_znode(zk, TOPIC)["isr"]) == [2, 3], 60, what="ISR [2, 3]")
        wait_until(
            lambda: not replica_dir(cluster, 1, TOPIC).exists(), 30, what="broker 1's copy gone"
        )
        assert replica_dir(cluster, 3, TOPIC).is_dir()
        wait_until(
            lambda: sorted(partition_view(bootstrap, TOPIC).replicas) == [2, 3],
            30,
            what="Metadata naming the new replicas",
        )

        # Every acknowledged record is there, read from the new replicas only (the leader is
        # 2 or 3), and broker 3's copy holds them all.
        end = max(load.acked) + 1
        read = read_partition(bootstrap, TOPIC, end)
        assert all(read.get(o) == v for o, v in load.acked.items())
        cluster.terminate(2)
        wait_until(lambda: leader_of(bootstrap, TOPIC) == 3, 60, what="broker 3 leading")
        from_three = read_partition(cluster.brokers[3].bootstrap, TOPIC, end)
        missing = [o for o, v in load.acked.items() if from_three.get(o) != v]
        assert not missing, f"{len(missing)} acknowledged records not on broker 3"


def test_a_cancelled_move_goes_back_and_drops_the_new_replica(tmp_path: Path) -> None:
    # Broker 3 is paused, so the move cannot finish: it is still in progress when cancelled.
    # A long session keeps it registered (alive) meanwhile.
    settings = {"zookeeper.session.timeout.ms": "30000"}
    with RunningCluster(tmp_path, settings=settings) as cluster, zookeeper(cluster) as zk:
        bootstrap = cluster.bootstrap
        create_on(bootstrap, TOPIC, [1, 2])
        cluster.pause(3)
        try:
            assert reassign(bootstrap, {(TOPIC, 0): [2, 3]})[(TOPIC, 0)].error == ErrorCode.none
        except AssertionError:
            cluster.resume(3)
            raise
        moving = ongoing(bootstrap)[(TOPIC, 0)]
        assert (moving.replicas, moving.adding, moving.removing) == ((2, 3, 1), (3,), (1,))
        assert topic_znode(zk, TOPIC)["adding_replicas"] == {"0": [3]}
        cancelled = reassign(bootstrap, {(TOPIC, 0): None})
        assert cancelled[(TOPIC, 0)].error == ErrorCode.none
        cluster.resume(3)
        assert not ongoing(bootstrap)
        znode = topic_znode(zk, TOPIC)
        assert znode["partitions"] == {"0": [1, 2]} and not znode["adding_replicas"]
        wait_until(
            lambda: not replica_dir(cluster, 3, TOPIC).exists(), 30, what="broker 3's copy gone"
        )
        assert sorted(state_znode(zk, TOPIC)["isr"]) == [1, 2]
        again = reassign(bootstrap, {(TOPIC, 0): None})
        assert again[(TOPIC, 0)].error == ErrorCode.no_reassignment_in_progress


def _live(bootstrap: str) -> set[int]:
    return set(admin(bootstrap).list_topics(timeout=10).brokers)


def controller_of(zk: KazooClient) -> int | None:
    """The broker id in /controller; None while there is none (the znode may go between a look
    and a read: it is the ephemeral node of a session that is ending)."""
    try:
        return int(json.loads(zk.get("/controller")[0])["brokerid"])
    except NoNodeError:
        return None


def test_a_move_survives_a_controller_failover(tmp_path: Path) -> None:
    with RunningCluster(tmp_path, size=4) as cluster, zookeeper(cluster) as zk:
        bootstrap = cluster.bootstrap
        controller = controller_of(zk)
        others = [b for b in (1, 2, 3, 4) if b != controller]
        source, target = others[:2], [others[1], others[2]]
        create_on(bootstrap, TOPIC, source)
        newcomer = others[2]
        cluster.pause(newcomer)  # the move cannot finish while the new replica is away
        try:
            result = reassign(bootstrap, {(TOPIC, 0): target})
            assert result[(TOPIC, 0)].error == ErrorCode.none
            assert topic_znode(zk, TOPIC)["adding_replicas"] == {"0": [newcomer]}
            cluster.kill(controller)
            wait_until(
                lambda: controller_of(zk) not in (None, controller),
                60,
                what="a new controller",
            )
        finally:
            cluster.resume(newcomer)
        survivors = ",".join(cluster.brokers[b].bootstrap for b in others)
        wait_until(lambda: not ongoing(survivors), 90, what="the new controller to finish it")
        assert topic_znode(zk, TOPIC)["partitions"] == {"0": target}
        wait_until(
            lambda: not replica_dir(cluster, source[0], TOPIC).exists(),
            30,
            what="the removed replica's copy gone",
        )


def test_an_unclean_election_brings_an_offline_partition_back(tmp_path: Path) -> None:
    settings = {"replica.lag.time.max.ms": "2000"}
    with RunningCluster(tmp_path, settings=settings) as cluster, zookeeper(cluster) as zk:
        bootstrap = cluster.bootstrap
        create_on(bootstrap, TOPIC, [1, 2])
        cluster.pause(2)  # out of the ISR once the leader notices
        wait_until(lambda: state_znode(zk, TOPIC)["isr"] == [1], 60, what="ISR [1]")
        cluster.kill(1)  # before broker 2 can catch up again
        cluster.resume(2)
        wait_until(lambda: state_znode(zk, TOPIC)["leader"] == -1, 60, what="no leader")
        survivors = ",".join(cluster.brokers[b].bootstrap for b in (2, 3))
        wait_until(lambda: 2 in _live(survivors), 60, what="broker 2 registered")

        async def elect() -> Any:
            async with await PartitionAdmin.connect(survivors, timeout_s=30) as client:
                return await client.elect_leaders(UNCLEAN, [(TOPIC, 0)])

        results = run(elect())
        assert results[(TOPIC, 0)].error == ErrorCode.none
        state = state_znode(zk, TOPIC)
        assert state["leader"] == 2 and state["isr"] == [2]
        again = run(elect())
        assert again[(TOPIC, 0)].error == ErrorCode.election_not_needed


def _log_bytes(directory: Path) -> int:
    return sum(f.stat().st_size for f in directory.glob("*.log")) if directory.is_dir() else 0


def test_a_throttled_move_copies_no_faster_than_its_rate(tmp_path: Path) -> None:
    """``--throttle`` as Kafka's tool sets it: rates on the brokers, throttled replicas on the
    topic; the new replica copies at most the rate's worth (plus a fetch) while it holds, and
    ``--verify`` clears it all once the move is done."""
    from confluent_kafka import Producer

    from tests.cli.support import odradek

    rate = 100_000
    fetch_bytes = 65_536
    settings = {"replica.fetch.max.bytes": str(fetch_bytes)}
    with RunningCluster(tmp_path, settings=settings) as cluster, zookeeper(cluster) as zk:
        bootstrap = cluster.bootstrap
        create_on(bootstrap, TOPIC, [1, 2])
        # Batches of one record: a fetch returns at least one whole batch, whatever its size.
        producer = Producer(
            {"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 20, "batch.size": 16384}
        )
        for i in range(800):
            producer.produce(TOPIC, value=b"%06d" % i + b"x" * 10_000, partition=0)
            producer.poll(0)
        assert producer.flush(60) == 0
        total = _log_bytes(replica_dir(cluster, 1, TOPIC))
        assert total > 8_000_000

        plan = tmp_path / "plan.json"
        plan.write_text(
            json.dumps(
                {"version": 1, "partitions": [{"topic": TOPIC, "partition": 0, "replicas": [2, 3]}]}
            )
        )
        args = ["--reassignment-json-file", str(plan), "--bootstrap-server", bootstrap]
        started = time.monotonic()
        executed = odradek("partitions", "reassign", "--execute", "--throttle", str(rate), *args)
        assert f"The inter-broker throttle limit was set to {rate} B/s" in executed.stdout
        for broker in (1, 2, 3):
            configs = json.loads(zk.get(f"/config/brokers/{broker}")[0])["config"]
            assert configs == {
                "leader.replication.throttled.rate": str(rate),
                "follower.replication.throttled.rate": str(rate),
            }
        topic_configs = json.loads(zk.get(f"/config/topics/{TOPIC}")[0])["config"]
        assert topic_configs["leader.replication.throttled.replicas"] == "0:1,0:2"
        assert topic_configs["follower.replication.throttled.replicas"] == "0:3"

        # The quota measures its rate over at least 10 s (all but one of its 11 samples): by
        # now at most that many seconds' worth (or as many as have passed) got through, and one
        # fetch more (the quota counts what was sent).
        copied = _log_bytes(replica_dir(cluster, 3, TOPIC))
        seconds = max(10.0, time.monotonic() - started) + 1
        assert copied <= rate * seconds + 2 * fetch_bytes < total
        assert (TOPIC, 0) in ongoing(bootstrap)

        # Lifting the broker rates lets the move finish.
        async def lift() -> None:
            async with await PartitionAdmin.connect(bootstrap) as client:
                for broker in (1, 2, 3):
                    await client.alter_configs(
                        4,
                        str(broker),
                        {},
                        [
                            "leader.replication.throttled.rate",
                            "follower.replication.throttled.rate",
                        ],
                    )

        run(lift())
        wait_until(lambda: not ongoing(bootstrap), 120, what="the move to finish")
        verified = odradek("partitions", "reassign", "--verify", *args).stdout
        assert f"Reassignment of partition {TOPIC}-0 is completed." in verified
        assert "Clearing broker-level throttles on brokers 1,2,3" in verified
        topic_configs = json.loads(zk.get(f"/config/topics/{TOPIC}")[0])["config"]
        assert "leader.replication.throttled.replicas" not in topic_configs
        assert "follower.replication.throttled.replicas" not in topic_configs
        assert all(
            zk.exists(f"/config/brokers/{b}") is None
            or not json.loads(zk.get(f"/config/brokers/{b}")[0])["config"]
            for b in (1, 2, 3)
        )
        assert _log_bytes(replica_dir(cluster, 3, TOPIC)) == total


def test_kafka_2x_tools_znode_admin_reassign_partitions_is_honoured(tmp_path: Path) -> None:
    """Kafka 2.x's ``kafka-reassign-partitions --zookeeper`` writes the moves to
    ``/admin/reassign_partitions``; the controller carries them out and removes the znode."""
    with RunningCluster(tmp_path) as cluster, zookeeper(cluster) as zk:
        bootstrap = cluster.bootstrap
        create_on(bootstrap, TOPIC, [1, 2])
        request = {
            "version": 1,
            "partitions": [{"topic": TOPIC, "partition": 0, "replicas": [3, 2]}],
        }
        zk.create("/admin/reassign_partitions", json.dumps(request).encode(), makepath=True)
        wait_until(
            lambda: zk.exists("/admin/reassign_partitions") is None, 90, what="the znode to go"
        )
        assert topic_znode(zk, TOPIC)["partitions"] == {"0": [3, 2]}
        wait_until(
            lambda: sorted(partition_view(bootstrap, TOPIC).replicas) == [2, 3],
            30,
            what="Metadata naming the new replicas",
        )
        wait_until(
            lambda: not replica_dir(cluster, 1, TOPIC).exists(), 30, what="broker 1's copy gone"
        )
