"""``odradek partitions``: Kafka's reassignment JSON read and written, and every verb against a
real three-broker cluster (ZooKeeper and ``odradek serve`` processes), checked through
confluent-kafka's AdminClient."""

from __future__ import annotations

import json
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from odradek.cli.partitions import (
    PlanError,
    format_plan,
    parse_plan,
    parse_topics_to_move,
    throttled_replicas,
)
from odradek.client.data import TopicPartition
from odradek.testing import RunningCluster, wait_until

from .support import odradek, table_after

TIMEOUT_S = 15

KAFKA_PLAN = (
    '{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[2,3],'
    '"log_dirs":["any","any"]},{"topic":"t","partition":1,"replicas":[3,1]}]}'
)


def test_kafkas_reassignment_json_round_trips() -> None:
    plan = parse_plan(KAFKA_PLAN)
    assert plan == {TopicPartition("t", 0): (2, 3), TopicPartition("t", 1): (3, 1)}
    assert parse_plan(format_plan(plan)) == plan
    assert json.loads(format_plan(plan))["partitions"][1]["log_dirs"] == ["any", "any"]


@pytest.mark.parametrize(
    "text",
    [
        "nope",
        '{"partitions": []}',
        '{"partitions": [{"topic": "t", "partition": 0}]}',
        '{"partitions": [{"topic": "t", "partition": 0, "replicas": [1], "log_dirs": ["/d"]}]}',
        '{"partitions": [{"topic": "t", "partition": 0, "replicas": [1]},'
        ' {"topic": "t", "partition": 0, "replicas": [2]}]}',
    ],
)
def test_bad_reassignment_files_are_refused(text: str) -> None:
    with pytest.raises(PlanError):
        parse_plan(text)


def test_topics_to_move_file() -> None:
    assert parse_topics_to_move('{"version":1,"topics":[{"topic":"a"},{"topic":"b"}]}') == [
        "a",
        "b",
    ]
    with pytest.raises(PlanError):
        parse_topics_to_move('{"topics": "a"}')


def test_throttled_replicas_are_the_current_ones_and_the_added_ones_as_kafka_sets_them() -> None:
    plan = {TopicPartition("t", 0): (2, 3), TopicPartition("t", 1): (1, 2)}
    current = {TopicPartition("t", 0): (1, 2), TopicPartition("t", 1): (1, 2)}
    leaders, followers = throttled_replicas(plan, current)
    assert leaders == {"t": "0:1,0:2"}
    assert followers == {"t": "0:3"}


# -- against a cluster -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningCluster]:
    # A long session: a broker paused to hold a move in progress stays registered (alive).
    settings = {"zookeeper.session.timeout.ms": "30000"}
    with RunningCluster(tmp_path_factory.mktemp("cli-partitions"), settings=settings) as running:
        yield running


def make_topic(cluster: RunningCluster, assignment: list[list[int]]) -> str:
    name = f"move-{uuid.uuid4().hex[:8]}"
    client = AdminClient({"bootstrap.servers": cluster.bootstrap})
    futures = client.create_topics(
        [NewTopic(name, num_partitions=len(assignment), replica_assignment=assignment)],
        operation_timeout=TIMEOUT_S,
        request_timeout=TIMEOUT_S,
    )
    futures[name].result(timeout=TIMEOUT_S)
    wait_until(lambda: replicas(cluster, name) == assignment, what=f"{name} created")
    return name


def replicas(cluster: RunningCluster, topic: str) -> list[list[int]]:
    client = AdminClient({"bootstrap.servers": cluster.bootstrap})
    found = client.list_topics(topic, timeout=TIMEOUT_S).topics[topic].partitions
    return [list(found[p].replicas) for p in sorted(found)]


def bootstrap_args(cluster: RunningCluster) -> list[str]:
    return ["--bootstrap-server", cluster.bootstrap]


def reassign(
    cluster: RunningCluster, plan: Path, *options: str, check: bool = True
) -> subprocess.CompletedProcess[str]:
    """``odradek partitions reassign <options> --reassignment-json-file <plan>`` on the cluster."""
    return odradek(
        "partitions",
        "reassign",
        *options,
        "--reassignment-json-file",
        str(plan),
        *bootstrap_args(cluster),
        check=check,
    )


THROTTLE_RATES = {"leader.replication.throttled.rate", "follower.replication.throttled.rate"}
THROTTLED_REPLICAS = {
    "leader.replication.throttled.replicas",
    "follower.replication.throttled.replicas",
}


def dynamic_configs(cluster: RunningCluster, entity_type: str, name: str) -> dict[str, str]:
    """The configs set on a topic or broker (its dynamic ones), as ``odradek configs`` lists."""
    listed = odradek(
        "configs",
        "describe",
        "--entity-type",
        entity_type,
        "--entity-name",
        name,
        "--output",
        "json",
        *bootstrap_args(cluster),
    ).stdout
    return {
        c["name"]: c["value"]
        for c in json.loads(listed)
        if c["source"] in ("DYNAMIC_TOPIC_CONFIG", "DYNAMIC_BROKER_CONFIG")
    }


def test_generate_execute_verify_and_list(cluster: RunningCluster, tmp_path: Path) -> None:
    topic = make_topic(cluster, [[1, 2], [2, 1]])
    generated = odradek(
        "partitions",
        "reassign",
        "--generate",
        "--topics",
        topic,
        "--broker-list",
        "2,3",
        *bootstrap_args(cluster),
    ).stdout
    lines = generated.splitlines()
    current = parse_plan(lines[lines.index("Current partition replica assignment") + 1])
    assert current == {TopicPartition(topic, 0): (1, 2), TopicPartition(topic, 1): (2, 1)}
    proposed = parse_plan(lines[lines.index("Proposed partition reassignment configuration") + 1])
    assert set(proposed) == set(current)
    assert all(sorted(r) == [2, 3] for r in proposed.values())

    plan = tmp_path / "plan.json"
    plan.write_text(
        format_plan({TopicPartition(topic, 0): (2, 3), TopicPartition(topic, 1): (3, 2)})
    )
    executed = reassign(cluster, plan, "--execute", "--wait").stdout
    assert f"Successfully started partition reassignments for {topic}-0,{topic}-1" in executed
    rollback = executed.splitlines()[2]
    assert parse_plan(rollback) == current
    assert executed.rstrip().endswith("2 of 2 partitions moved")
    # Every broker's Metadata follows once it has seen the topic znode change.
    wait_until(lambda: replicas(cluster, topic) == [[2, 3], [3, 2]], what="metadata moved")

    verified = reassign(cluster, plan, "--verify").stdout
    assert f"Reassignment of partition {topic}-0 is completed." in verified
    assert f"Reassignment of partition {topic}-1 is completed." in verified
    assert "Clearing topic-level throttles" in verified

    listed = odradek("partitions", "list-reassignments", *bootstrap_args(cluster)).stdout
    assert "No partition reassignments in progress." in listed

    cancelled = reassign(cluster, plan, "--cancel").stdout
    assert "None of the specified partition moves are active" in cancelled


def test_a_bad_target_is_reported_with_kafkas_error(
    cluster: RunningCluster, tmp_path: Path
) -> None:
    topic = make_topic(cluster, [[1, 2]])
    plan = tmp_path / "bad.json"
    plan.write_text(format_plan({TopicPartition(topic, 0): (2, 9)}))
    result = reassign(cluster, plan, "--execute", check=False)
    assert result.returncode == 1
    assert f"{topic}-0: invalid_replica_assignment" in result.stderr


def test_a_move_in_progress_is_listed_and_cancelled(
    cluster: RunningCluster, tmp_path: Path
) -> None:
    topic = make_topic(cluster, [[1, 2]])
    plan = tmp_path / "plan.json"
    plan.write_text(format_plan({TopicPartition(topic, 0): (2, 3)}))
    cluster.pause(3)  # the new replica cannot catch up: the move stays in progress
    try:
        reassign(cluster, plan, "--execute", "--throttle", "1000000")
        assert set(dynamic_configs(cluster, "brokers", "1")) == THROTTLE_RATES
        assert set(dynamic_configs(cluster, "topics", topic)) == THROTTLED_REPLICAS
        listed = odradek(
            "partitions", "list-reassignments", "--topic", topic, *bootstrap_args(cluster)
        ).stdout
        rows = table_after(listed, "TOPIC")
        assert rows == [
            {"TOPIC": topic, "PARTITION": "0", "REPLICAS": "2,3,1", "ADDING": "3", "REMOVING": "1"}
        ]
        as_json = odradek(
            "partitions",
            "list-reassignments",
            "--topic",
            topic,
            "--output",
            "json",
            *bootstrap_args(cluster),
        ).stdout
        assert json.loads(as_json) == [
            {
                "topic": topic,
                "partition": 0,
                "replicas": [2, 3, 1],
                "adding_replicas": [3],
                "removing_replicas": [1],
            }
        ]
        verified = reassign(cluster, plan, "--verify").stdout
        assert f"Reassignment of partition {topic}-0 is still in progress." in verified
        assert "Clearing" not in verified
        assert set(dynamic_configs(cluster, "topics", topic)) == THROTTLED_REPLICAS
        cancelled = reassign(cluster, plan, "--cancel").stdout
        assert f"Successfully cancelled partition reassignments for: {topic}-0" in cancelled
        # As Kafka's tool: a cancelled move leaves no throttle behind.
        assert f"Clearing topic-level throttles on topic {topic}" in cancelled
        assert not set(dynamic_configs(cluster, "brokers", "1")) & THROTTLE_RATES
        assert not set(dynamic_configs(cluster, "topics", topic)) & THROTTLED_REPLICAS
    finally:
        cluster.resume(3)
    wait_until(lambda: replicas(cluster, topic) == [[1, 2]], what="metadata moved back")


def test_elect_leaders_preferred(cluster: RunningCluster) -> None:
    topic = make_topic(cluster, [[1, 2]])
    result = odradek(
        "partitions",
        "elect-leaders",
        "--topic",
        topic,
        "--partition",
        "0",
        *bootstrap_args(cluster),
    ).stdout
    assert f"Valid replica already elected for partitions {topic}-0" in result
    unclean = odradek(
        "partitions",
        "elect-leaders",
        "--election-type",
        "unclean",
        "--topic",
        topic,
        *bootstrap_args(cluster),
    ).stdout
    assert f"Valid replica already elected for partitions {topic}-0" in unclean
