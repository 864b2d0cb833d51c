"""``odradek acls``: add, list and remove ACLs with kafka-acls.sh's options against a broker
running Kafka's authorizer (the CLI connects as User:ANONYMOUS, made a super user here)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from odradek.security.acl import AclOperation, ResourceType
from odradek.testing import RunningBroker, running_broker
from tests.security.support import may

from .support import odradek


@pytest.fixture(scope="module")
def broker() -> Iterator[RunningBroker]:
    with running_broker(
        authorizer_class_name="kafka.security.authorizer.AclAuthorizer",
        super_users="User:ANONYMOUS",
    ) as running:
        yield running


def test_add_list_remove(broker: RunningBroker) -> None:
    server = ["--bootstrap-server", broker.bootstrap]
    added = odradek(
        "acls",
        "add",
        *server,
        "--allow-principal",
        "User:alice",
        "--consumer",
        "--topic",
        "orders",
        "--group",
        "billing",
    ).stdout
    assert (
        "Adding ACLs for resource `ResourcePattern(resourceType=TOPIC, name=orders, "
        "patternType=LITERAL)`:" in added
    )
    odradek(
        "acls",
        "add",
        *server,
        "--deny-principal",
        "User:bob",
        "--operation",
        "Write",
        "--topic",
        "fin-",
        "--resource-pattern-type",
        "prefixed",
    )
    assert may(broker, "User:alice", AclOperation.READ, ResourceType.TOPIC, "orders")
    assert may(broker, "User:alice", AclOperation.READ, ResourceType.GROUP, "billing")
    assert not may(broker, "User:alice", AclOperation.WRITE, ResourceType.TOPIC, "orders")

    listed = odradek("acls", "list", *server).stdout
    assert (
        "Current ACLs for resource `ResourcePattern(resourceType=TOPIC, name=fin-, "
        "patternType=PREFIXED)`:\n \t(principal=User:bob, host=*, operation=WRITE, "
        "permissionType=DENY) \n" in listed
    )
    assert "operation=READ" in listed and "name=billing" in listed
    only_orders = odradek("acls", "list", *server, "--topic", "orders").stdout
    assert "name=orders" in only_orders and "name=fin-" not in only_orders
    by_principal = odradek("acls", "list", *server, "--principal", "User:bob").stdout
    assert "User:alice" not in by_principal and "User:bob" in by_principal

    removed = odradek(
        "acls",
        "remove",
        *server,
        "--allow-principal",
        "User:alice",
        "--operation",
        "Read",
        "--topic",
        "orders",
    ).stdout
    assert "Removed ACLs for resource" in removed
    assert not may(broker, "User:alice", AclOperation.READ, ResourceType.TOPIC, "orders")
    assert may(broker, "User:alice", AclOperation.DESCRIBE, ResourceType.TOPIC, "orders")


def test_a_broker_without_an_authorizer_says_so() -> None:
    with running_broker() as plain:
        done = odradek(
            "acls",
            "add",
            "--bootstrap-server",
            plain.bootstrap,
            "--allow-principal",
            "User:a",
            "--topic",
            "t",
            check=False,
        )
    assert done.returncode == 1
    assert "failed: security_disabled (No Authorizer is configured.)" in done.stderr
