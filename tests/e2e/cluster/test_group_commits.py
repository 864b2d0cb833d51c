"""An offset commit is answered only once the in-sync followers of the group's
``__consumer_offsets`` partition have it: three brokers and a real ZooKeeper,
``__consumer_offsets`` with replication factor 3 and ``min.insync.replicas=2``, and both
followers of the group's partition paused (SIGSTOP). No commit succeeds while they are paused —
the first is appended and waits, then fails; the later ones are refused before the append — and
once one follower resumes and is back in the ISR, a commit succeeds and is read back."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from odradek.coordinator.group.records import partition_for
from odradek.protocol.errors import ErrorCode
from odradek.testing import RunningCluster, wait_until
from tests.server.conftest import KafkaConnection

from .support import create_topic, partition_view

pytestmark = pytest.mark.slow

OFFSET_COMMIT, OFFSET_FETCH, FIND_COORDINATOR = 8, 9, 10
OFFSETS_TOPIC = "__consumer_offsets"
OFFSETS_PARTITIONS = 3
GROUP = "paused-followers"
TOPIC = "t"


def find_coordinator(bootstrap: str) -> int | None:
    with KafkaConnection(bootstrap) as connection:
        response = connection.request(FIND_COORDINATOR, 3, key=GROUP, key_type=0)
    return int(response.node_id) if response.error_code == ErrorCode.none else None


def commit(address: str, offset: int) -> ErrorCode:
    with KafkaConnection(address) as connection:
        response = connection.request(
            OFFSET_COMMIT,
            8,
            group_id=GROUP,
            generation_id_or_member_epoch=-1,
            member_id="",
            group_instance_id=None,
            topics=[
                {
                    "name": TOPIC,
                    "partitions": [
                        {
                            "partition_index": 0,
                            "committed_offset": offset,
                            "committed_leader_epoch": -1,
                            "committed_metadata": "",
                        }
                    ],
                }
            ],
        )
    ((partition,),) = [t.partitions for t in response.topics]
    return ErrorCode(partition.error_code)


def fetched(address: str) -> tuple[ErrorCode, Any]:
    with KafkaConnection(address) as connection:
        response = connection.request(
            OFFSET_FETCH,
            7,
            group_id=GROUP,
            topics=[{"name": TOPIC, "partition_indexes": [0]}],
            require_stable=False,
        )
    if response.error_code != ErrorCode.none:
        return ErrorCode(response.error_code), None
    ((partition,),) = [t.partitions for t in response.topics]
    return ErrorCode.none, partition.committed_offset


def test_a_commit_is_answered_only_once_a_follower_has_it(tmp_path: Path) -> None:
    settings = {
        "min.insync.replicas": "2",
        "offsets.topic.num.partitions": str(OFFSETS_PARTITIONS),
        "replica.lag.time.max.ms": "1500",
        "offsets.commit.timeout.ms": "3000",
        # Longer than the pause: the paused brokers keep their registrations.
        "zookeeper.session.timeout.ms": "40000",
    }
    with RunningCluster(tmp_path, settings=settings) as cluster:
        create_topic(cluster.bootstrap, TOPIC, 1, 3)
        coordinator = wait_until(
            lambda: find_coordinator(cluster.brokers[1].bootstrap),
            60,
            what="the group's coordinator",
        )
        index = partition_for(GROUP, OFFSETS_PARTITIONS)
        wait_until(
            lambda: (
                (view := partition_view(cluster.bootstrap, OFFSETS_TOPIC, index)).leader
                == coordinator
                and len(view.isr) == 3
            ),
            60,
            what=f"{OFFSETS_TOPIC}-{index} led by broker {coordinator} with three in sync",
        )
        address = cluster.brokers[coordinator].bootstrap
        # The coordinator may still be loading the partition (COORDINATOR_LOAD_IN_PROGRESS).
        wait_until(lambda: commit(address, 1) == ErrorCode.none, 60, what="a first commit")
        assert fetched(address) == (ErrorCode.none, 1)

        followers = [b for b in sorted(cluster.brokers) if b != coordinator]
        for follower in followers:
            cluster.pause(follower)
        try:
            # Appended to the leader, but no follower takes it: never answered NONE (it waits
            # until offsets.commit.timeout.ms or until the ISR shrinks below the minimum).
            assert commit(address, 2) == ErrorCode.coordinator_not_available
            wait_until(
                lambda: partition_view(address, OFFSETS_TOPIC, index).isr == (coordinator,),
                30,
                what="the coordinator alone in the ISR",
            )
            # Below min.insync.replicas the append is refused before it is made.
            assert commit(address, 3) == ErrorCode.coordinator_not_available
            back = followers[0]
            cluster.resume(back)
            # A commit succeeds again only once the resumed follower is in sync.
            wait_until(
                lambda: commit(address, 4) == ErrorCode.none,
                30,
                what=f"a commit once broker {back} is back",
            )
            assert back in partition_view(address, OFFSETS_TOPIC, index).isr
            assert fetched(address) == (ErrorCode.none, 4)
        finally:
            for follower in followers:
                cluster.resume(follower)
