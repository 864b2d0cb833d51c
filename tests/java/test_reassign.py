"""Kafka's own ``kafka-reassign-partitions`` and ``kafka-leader-election`` tools (kafka-tools
4.x, by the main classes their ``bin/`` scripts run) against a three-broker cluster: generate,
execute with a throttle, verify (which clears it), and a preferred election; checked through
confluent-kafka and ZooKeeper."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

from odradek.testing import RunningCluster, wait_until

from .support import classpath, run_java

pytestmark = pytest.mark.slow

REASSIGN_TOOL = "org.apache.kafka.tools.reassign.ReassignPartitionsCommand"
ELECTION_TOOL = "org.apache.kafka.tools.LeaderElectionCommand"
TOPIC = "java-moving"


def replicas(bootstrap: str) -> list[list[int]]:
    found = AdminClient({"bootstrap.servers": bootstrap}).list_topics(TOPIC, timeout=10)
    partitions = found.topics[TOPIC].partitions
    return [list(partitions[p].replicas) for p in sorted(partitions)]


def test_kafkas_reassign_tool_moves_partitions_with_a_throttle(tmp_path: Path) -> None:
    classpath()
    with RunningCluster(tmp_path) as cluster:
        bootstrap = cluster.bootstrap
        admin = AdminClient({"bootstrap.servers": bootstrap})
        futures = admin.create_topics(
            [NewTopic(TOPIC, num_partitions=2, replica_assignment=[[1, 2], [2, 1]])]
        )
        futures[TOPIC].result(30)
        wait_until(lambda: replicas(bootstrap) == [[1, 2], [2, 1]], what="topic created")

        topics = tmp_path / "topics.json"
        topics.write_text(json.dumps({"version": 1, "topics": [{"topic": TOPIC}]}))
        generated = run_java(
            REASSIGN_TOOL,
            "--bootstrap-server",
            bootstrap,
            "--generate",
            "--topics-to-move-json-file",
            str(topics),
            "--broker-list",
            "2,3",
        )
        proposed = json.loads(generated.split("Proposed partition reassignment configuration")[1])
        assert all(sorted(p["replicas"]) == [2, 3] for p in proposed["partitions"])

        plan = tmp_path / "plan.json"
        plan.write_text(
            json.dumps(
                {
                    "version": 1,
                    "partitions": [
                        {"topic": TOPIC, "partition": 0, "replicas": [2, 3]},
                        {"topic": TOPIC, "partition": 1, "replicas": [3, 2]},
                    ],
                }
            )
        )
        common = ["--bootstrap-server", bootstrap, "--reassignment-json-file", str(plan)]
        executed = run_java(REASSIGN_TOOL, *common, "--execute", "--throttle", "50000000")
        assert "Successfully started partition reassignments" in executed

        def verified() -> str:
            return run_java(REASSIGN_TOOL, *common, "--verify")

        wait_until(
            lambda: verified().count("is completed") == 2, 90, what="the tool to see it done"
        )
        wait_until(lambda: replicas(bootstrap) == [[2, 3], [3, 2]], what="metadata moved")
        # The last --verify cleared the throttles the --execute set.
        described = admin.describe_configs([ConfigResource("topic", TOPIC)])
        configs = next(iter(described.values())).result(10)
        assert not configs["leader.replication.throttled.replicas"].value
        assert not configs["follower.replication.throttled.replicas"].value

        elected = run_java(
            ELECTION_TOOL,
            "--bootstrap-server",
            bootstrap,
            "--election-type",
            "preferred",
            "--topic",
            TOPIC,
            "--partition",
            "1",
        )
        assert "Valid replica already elected for partitions" in elected or (
            "Successfully completed leader election" in elected
        )
