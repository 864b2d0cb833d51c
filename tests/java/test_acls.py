"""Kafka's kafka-acls tool (AclCommand, through the admin client: --bootstrap-server) against a
broker running Kafka's authorizer; what it did is checked in the broker's authorizer. The tool
connects as User:ANONYMOUS, a super user here."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from odradek.security.acl import AclOperation, ResourceType
from odradek.testing import RunningBroker, running_broker
from tests.security.support import may

from .support import ACLS_TOOL, classpath, run_java


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningBroker]:
    classpath()
    with running_broker(
        tmp_path_factory.mktemp("java-acls"),
        authorizer_class_name="org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        super_users="User:ANONYMOUS",
    ) as running:
        yield running


def test_kafka_acls_add_list_remove(broker: RunningBroker) -> None:
    server = ("--bootstrap-server", broker.bootstrap)
    added = run_java(
        ACLS_TOOL,
        *server,
        "--add",
        "--allow-principal",
        "User:alice",
        "--producer",
        "--topic",
        "java-orders",
        "--transactional-id",
        "java-tx",
    )
    assert "Adding ACLs for resource `ResourcePattern(resourceType=TOPIC, name=java-orders" in added
    run_java(
        ACLS_TOOL,
        *server,
        "--add",
        "--deny-principal",
        "User:bob",
        "--operation",
        "Read",
        "--group",
        "java-",
        "--resource-pattern-type",
        "prefixed",
    )
    assert may(broker, "User:alice", AclOperation.WRITE, ResourceType.TOPIC, "java-orders")
    assert may(broker, "User:alice", AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, "java-tx")
    assert not may(broker, "User:bob", AclOperation.READ, ResourceType.GROUP, "java-group")

    listed = run_java(ACLS_TOOL, *server, "--list", "--topic", "java-orders")
    assert "ResourcePattern(resourceType=TOPIC, name=java-orders, patternType=LITERAL)" in listed
    for operation in ("WRITE", "DESCRIBE", "CREATE"):
        assert (
            f"(principal=User:alice, host=*, operation={operation}, permissionType=ALLOW)" in listed
        )
    every = run_java(ACLS_TOOL, *server, "--list")
    assert "name=java-, patternType=PREFIXED" in every and "User:bob" in every

    run_java(
        ACLS_TOOL,
        *server,
        "--remove",
        "--force",
        "--allow-principal",
        "User:alice",
        "--operation",
        "Write",
        "--topic",
        "java-orders",
    )
    assert not may(broker, "User:alice", AclOperation.WRITE, ResourceType.TOPIC, "java-orders")
    assert may(broker, "User:alice", AclOperation.CREATE, ResourceType.TOPIC, "java-orders")
