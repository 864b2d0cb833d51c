"""ACLs with real clients: a broker running Kafka's authorizer refuses and allows confluent-kafka
producers, consumers and groups as the ACLs for their principal say (User:ANONYMOUS: the
PLAINTEXT listener authenticates no one), and the ACLs survive a restart.

The ACLs that let ANONYMOUS manage ACLs and create topics are written into the metadata store
before the broker starts, as a Kafka operator bootstraps them through ZooKeeper; every other ACL
goes through confluent-kafka's admin client (CreateAcls, DescribeAcls, DeleteAcls).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
)

from odradek.cluster.metadata.store import LocalMetadataStore, result_now
from odradek.security import acl
from odradek.testing import RunningBroker, running_broker

from .conftest import create_topics

ANONYMOUS = "User:ANONYMOUS"
TIMEOUT_S = 15


def _bootstrap_acls(data_dir: Path) -> None:
    store = LocalMetadataStore(data_dir)
    cluster = acl.ResourcePattern(
        acl.ResourceType.CLUSTER, acl.CLUSTER_NAME, acl.PatternType.LITERAL
    )
    result_now(
        store.change_acls(
            cluster,
            add=[
                acl.AccessControlEntry(ANONYMOUS, "*", operation, acl.AclPermissionType.ALLOW)
                for operation in (acl.AclOperation.ALTER, acl.AclOperation.CREATE)
            ],
        )
    )
    store.close()


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningBroker]:
    data_dir = tmp_path_factory.mktemp("acls")
    _bootstrap_acls(data_dir)
    with running_broker(
        data_dir,
        authorizer_class_name="kafka.security.authorizer.AclAuthorizer",
        group_initial_rebalance_delay_ms="0",
    ) as running:
        yield running


def admin(bootstrap: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": bootstrap})


def allow(
    bootstrap: str,
    rtype: ResourceType,
    name: str,
    operation: AclOperation,
    permission: AclPermissionType = AclPermissionType.ALLOW,
    pattern: ResourcePatternType = ResourcePatternType.LITERAL,
    principal: str = ANONYMOUS,
) -> None:
    binding = AclBinding(rtype, name, pattern, principal, "*", operation, permission)
    client = admin(bootstrap)  # kept while its futures are pending
    for future in client.create_acls([binding], request_timeout=TIMEOUT_S).values():
        future.result(timeout=TIMEOUT_S)


def produce(bootstrap: str, topic: str, value: bytes) -> KafkaError | None:
    """The delivery error of one message (None when it was written)."""
    producer = Producer({"bootstrap.servers": bootstrap, "message.timeout.ms": 5000})
    outcome: list[KafkaError | None] = []
    producer.produce(topic, value, on_delivery=lambda err, _msg: outcome.append(err))
    producer.flush(TIMEOUT_S)
    assert len(outcome) == 1
    return outcome[0]


def consume(bootstrap: str, topic: str, group: str) -> tuple[list[bytes], KafkaError | None]:
    """What a subscribed consumer reads before its first error (or the end of its patience)."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.partition.eof": True,
        }
    )
    consumer.subscribe([topic])
    values: list[bytes] = []
    error: KafkaError | None = None
    try:
        for _ in range(40):
            message = consumer.poll(0.5)
            if message is None:
                continue
            if message.error() is None:
                values.append(message.value())
            elif message.error().code() == KafkaError._PARTITION_EOF:
                break
            else:
                error = message.error()
                break
    finally:
        consumer.close()
    return values, error


def end_offset(broker: RunningBroker, topic: str) -> int:
    async def look() -> int:
        assert broker.broker is not None
        partition = broker.broker.topics.partition(topic, 0)
        assert partition is not None
        return partition.log.log_end_offset

    return broker.call(look())


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def test_produce_and_consume_need_write_and_read(broker: RunningBroker) -> None:
    bootstrap = broker.bootstrap
    topic, group = unique("orders"), unique("billing")
    create_topics(bootstrap, {topic: 1})

    refused = produce(bootstrap, topic, b"no")
    assert refused is not None and refused.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert end_offset(broker, topic) == 0

    allow(bootstrap, ResourceType.TOPIC, topic, AclOperation.WRITE)
    assert produce(bootstrap, topic, b"yes") is None
    assert end_offset(broker, topic) == 1

    # Without READ on the group it finds no coordinator; with it, WRITE still does not read.
    values, error = consume(bootstrap, topic, group)
    assert not values and error is not None
    assert error.code() == KafkaError.GROUP_AUTHORIZATION_FAILED
    allow(bootstrap, ResourceType.GROUP, group, AclOperation.READ)
    values, error = consume(bootstrap, topic, group)
    assert not values and error is not None
    assert error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    allow(bootstrap, ResourceType.TOPIC, topic, AclOperation.READ)
    values, error = consume(bootstrap, topic, group)
    assert (values, error) == ([b"yes"], None)


def test_prefixed_acls_and_deny_over_allow(broker: RunningBroker) -> None:
    bootstrap = broker.bootstrap
    prefix = unique("fin") + "-"
    ledger, secret = prefix + "ledger", prefix + "secret"
    create_topics(bootstrap, {ledger: 1, secret: 1})
    allow(
        bootstrap,
        ResourceType.TOPIC,
        prefix,
        AclOperation.WRITE,
        pattern=ResourcePatternType.PREFIXED,
        principal="User:*",
    )
    allow(bootstrap, ResourceType.TOPIC, secret, AclOperation.WRITE, AclPermissionType.DENY)
    assert produce(bootstrap, ledger, b"ok") is None
    denied = produce(bootstrap, secret, b"no")
    assert denied is not None and denied.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert (end_offset(broker, ledger), end_offset(broker, secret)) == (1, 0)

    client = admin(bootstrap)
    listed = client.describe_acls(
        AclBindingFilter(
            ResourceType.TOPIC,
            ledger,
            ResourcePatternType.MATCH,
            None,
            None,
            AclOperation.ANY,
            AclPermissionType.ANY,
        ),
        request_timeout=TIMEOUT_S,
    ).result(timeout=TIMEOUT_S)
    assert [(b.name, b.resource_pattern_type) for b in listed] == [
        (prefix, ResourcePatternType.PREFIXED)
    ]


def test_acls_survive_a_restart_and_deleting_them_refuses_again(broker: RunningBroker) -> None:
    topic = unique("kept")
    create_topics(broker.bootstrap, {topic: 1})
    allow(broker.bootstrap, ResourceType.TOPIC, topic, AclOperation.WRITE)
    broker.restart()
    bootstrap = broker.bootstrap
    assert produce(bootstrap, topic, b"after restart") is None

    client = admin(bootstrap)
    deleted = client.delete_acls(
        [
            AclBindingFilter(
                ResourceType.TOPIC,
                topic,
                ResourcePatternType.LITERAL,
                None,
                None,
                AclOperation.ANY,
                AclPermissionType.ANY,
            )
        ],
        request_timeout=TIMEOUT_S,
    )
    (removed,) = [f.result(timeout=TIMEOUT_S) for f in deleted.values()]
    assert [(b.name, b.operation) for b in removed] == [(topic, AclOperation.WRITE)]
    refused = produce(bootstrap, topic, b"no")
    assert refused is not None and refused.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED


def test_changing_acls_needs_alter_on_the_cluster(broker: RunningBroker) -> None:
    # confluent-kafka calls the cluster resource (type 4) BROKER.
    bootstrap = broker.bootstrap
    group = unique("g")
    allow(
        bootstrap, ResourceType.BROKER, "kafka-cluster", AclOperation.ALTER, AclPermissionType.DENY
    )
    try:
        with pytest.raises(KafkaException) as refused:
            allow(bootstrap, ResourceType.GROUP, group, AclOperation.READ)
        assert refused.value.args[0].code() == KafkaError.CLUSTER_AUTHORIZATION_FAILED
    finally:
        # Only the store, as at bootstrap, can lift the deny now.
        async def lift() -> None:
            assert broker.broker is not None
            authorizer = broker.broker.services.authorizer
            assert authorizer is not None
            await authorizer.delete(
                [
                    acl.AclBindingFilter(
                        acl.ResourceType.CLUSTER, permission=acl.AclPermissionType.DENY
                    )
                ]
            )

        broker.call(lift())
