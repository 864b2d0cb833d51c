"""ACLs in a two-broker cluster: created through one broker, they are in ZooKeeper and every
broker applies them; deleted through the other, every broker stops applying them.

Brokers replicate as User:ANONYMOUS over PLAINTEXT (until an inter-broker listener with its own
principal exists), so ``allow.everyone.if.no.acl.found=true`` lets them and the admin client use
the cluster, and the topic's own ACLs decide for it.
"""

from __future__ import annotations

from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    ResourcePatternType,
    ResourceType,
)

from odradek.testing import wait_until

from .failover_support import address, started_cluster, unique_name
from .support import admin, create_topic

TIMEOUT_S = 15


def _filter(topic: str) -> AclBindingFilter:
    return AclBindingFilter(
        ResourceType.TOPIC,
        topic,
        ResourcePatternType.LITERAL,
        None,
        None,
        AclOperation.ANY,
        AclPermissionType.ANY,
    )


def described_by(broker: str, topic: str) -> int:
    client = admin(broker)  # kept while its future is pending
    return len(client.describe_acls(_filter(topic)).result(timeout=TIMEOUT_S))


def produce_error(bootstrap: str, topic: str) -> int | None:
    producer = Producer({"bootstrap.servers": bootstrap, "message.timeout.ms": 5000})
    errors: list[KafkaError | None] = []
    producer.produce(topic, b"v", on_delivery=lambda err, _m: errors.append(err))
    producer.flush(TIMEOUT_S)
    (error,) = errors
    return None if error is None else error.code()


def test_acls_made_on_one_broker_apply_on_every_broker(tmp_path):
    settings = {
        "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
        "allow.everyone.if.no.acl.found": "true",
    }
    with started_cluster(tmp_path, 2, settings=settings) as cluster:
        topic = unique_name("acl")
        create_topic(cluster.bootstrap, topic, replication=2)
        assert produce_error(cluster.bootstrap, topic) is None

        client = admin(address(cluster, 1))
        deny = AclBinding(
            ResourceType.TOPIC,
            topic,
            ResourcePatternType.LITERAL,
            "User:*",
            "*",
            AclOperation.WRITE,
            AclPermissionType.DENY,
        )
        for future in client.create_acls([deny]).values():
            future.result(timeout=TIMEOUT_S)
        wait_until(lambda: described_by(address(cluster, 2), topic) == 1, what="broker 2 has it")
        # Whichever broker leads the partition refuses the write.
        assert produce_error(cluster.bootstrap, topic) == KafkaError.TOPIC_AUTHORIZATION_FAILED

        other = admin(address(cluster, 2))
        for future in other.delete_acls([_filter(topic)]).values():
            assert len(future.result(timeout=TIMEOUT_S)) == 1
        # Each broker learns of the deletion from ZooKeeper in its own time; the leader may be
        # either.
        wait_until(
            lambda: all(described_by(address(cluster, b), topic) == 0 for b in (1, 2)),
            what="both brokers forgot",
        )
        wait_until(
            lambda: produce_error(cluster.bootstrap, topic) is None,
            what="the write allowed again",
        )
