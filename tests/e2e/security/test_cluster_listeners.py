"""Listeners in a ZooKeeper cluster: every broker registers all its listeners (Kafka's
``endpoints`` list), Metadata over one listener names every broker at that listener's address,
and replication runs over the inter-broker listener, PLAINTEXT or SASL_SSL, while clients use
SSL; or SASL_PLAINTEXT with OAUTHBEARER tokens of an identity provider."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from joserfc.jwk import KeySet

from odradek.testing import (
    RunningBroker,
    TestCertificateAuthority,
    tls_broker_settings,
    wait_until,
)
from tests.security.oauth_idp import AUDIENCE, ISSUER, signing_key, token_endpoint

TIMEOUT_S = 20


@pytest.fixture
def cluster(tmp_path: Path, zookeeper_connect: str) -> Iterator[list[RunningBroker]]:
    ca = TestCertificateAuthority(tmp_path / "certs")
    server = ca.issue("broker", {"CN": "localhost"}, server=True)
    brokers: list[RunningBroker] = []
    try:
        for broker_id in (1, 2):
            settings = {
                "broker.id": str(broker_id),
                "zookeeper.connect": zookeeper_connect,
                "listeners": "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0",
                "inter.broker.listener.name": "PLAINTEXT",
                "offsets.topic.replication.factor": "2",
                **tls_broker_settings(ca, server),
            }
            brokers.append(RunningBroker(tmp_path / f"b{broker_id}", settings).start())
        brokers[0].ca_file = ca.ca_file  # type: ignore[attr-defined]
        yield brokers
    finally:
        for broker in brokers:
            broker.stop()


def test_clients_get_the_addresses_of_their_listener(cluster: list[RunningBroker]) -> None:
    ca_file = str(cluster[0].ca_file)  # type: ignore[attr-defined]
    ssl_config = {
        "bootstrap.servers": cluster[0].listener_bootstrap("SSL"),
        "security.protocol": "SSL",
        "ssl.ca.location": ca_file,
    }
    for listener, config in (
        ("SSL", ssl_config),
        ("PLAINTEXT", {"bootstrap.servers": cluster[1].bootstrap}),
    ):
        expected = {b.listener_bootstrap(listener) for b in cluster}

        def addresses(config: dict[str, str] = config) -> set[str] | None:
            brokers = AdminClient(config).list_topics(timeout=TIMEOUT_S).brokers.values()
            found = {f"{b.host}:{b.port}" for b in brokers}
            return found if len(found) == 2 else None

        assert wait_until(addresses, what="both brokers registered") == expected

    topic = f"replicated-{uuid.uuid4().hex[:8]}"
    admin = AdminClient(ssl_config)
    admin.create_topics([NewTopic(topic, 1, 2)])[topic].result(TIMEOUT_S)
    producer = Producer({**ssl_config, "acks": "all", "message.timeout.ms": TIMEOUT_S * 1000})
    for i in range(20):
        producer.produce(topic, value=b"%d" % i)
    assert producer.flush(TIMEOUT_S) == 0
    consumer = Consumer({**ssl_config, "group.id": "g", "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    got = []
    while len(got) < 20:
        message = consumer.poll(TIMEOUT_S)
        assert message is not None and message.error() is None
        got.append(message.value())
    consumer.close()
    assert got == [b"%d" % i for i in range(20)]


BROKER_JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    'username="broker" password="broker-secret" user_broker="broker-secret";'
)


def test_brokers_replicate_over_a_sasl_ssl_inter_broker_listener(
    tmp_path: Path, zookeeper_connect: str
) -> None:
    ca = TestCertificateAuthority(tmp_path / "certs")
    server = ca.issue("broker", {"CN": "localhost"}, server=True)
    brokers: list[RunningBroker] = []
    try:
        for broker_id in (1, 2):
            settings = {
                "broker.id": str(broker_id),
                "zookeeper.connect": zookeeper_connect,
                "listeners": "INTERNAL://127.0.0.1:0,CLIENT://127.0.0.1:0",
                "listener.security.protocol.map": "INTERNAL:SASL_SSL,CLIENT:SSL",
                "inter.broker.listener.name": "INTERNAL",
                "listener.name.internal.sasl.enabled.mechanisms": "PLAIN",
                "listener.name.internal.plain.sasl.jaas.config": BROKER_JAAS,
                "offsets.topic.replication.factor": "2",
                **tls_broker_settings(ca, server),
            }
            brokers.append(RunningBroker(tmp_path / f"b{broker_id}", settings).start())
        client = {
            "bootstrap.servers": brokers[0].listener_bootstrap("CLIENT"),
            "security.protocol": "SSL",
            "ssl.ca.location": str(ca.ca_file),
        }
        admin = AdminClient(client)
        wait_until(
            lambda: len(admin.list_topics(timeout=TIMEOUT_S).brokers) == 2,
            what="both brokers registered",
        )
        topic = f"internal-{uuid.uuid4().hex[:8]}"
        admin.create_topics([NewTopic(topic, 1, 2)])[topic].result(TIMEOUT_S)
        producer = Producer({**client, "acks": "all", "message.timeout.ms": TIMEOUT_S * 1000})
        for i in range(20):
            producer.produce(topic, value=b"%d" % i)
        assert producer.flush(TIMEOUT_S) == 0

        # acks=all was answered, so the follower fetched every record over INTERNAL, logged in
        # as User:broker.
        def replicated() -> bool:
            for broker in brokers:
                assert broker.broker is not None
                partition = broker.broker.topics.partition(topic, 0)
                if partition is None or partition.log.log_end_offset != 20:
                    return False
            return True

        assert wait_until(replicated, what="both replicas at offset 20")
        principals = {
            (s.listener, s.principal)
            for broker in brokers
            if broker.broker is not None
            for s in broker.broker.sessions()
        }
        assert ("INTERNAL", "User:broker") in principals

        # A transaction over partitions led by both brokers: its coordinator sends the markers
        # to the other broker over INTERNAL too, so a read_committed reader sees every record.
        spread = f"txn-{uuid.uuid4().hex[:8]}"
        admin.create_topics([NewTopic(spread, 2, 2)])[spread].result(TIMEOUT_S)
        leaders = wait_until(
            lambda: (
                {
                    p.leader
                    for p in admin.list_topics(spread, timeout=TIMEOUT_S)
                    .topics[spread]
                    .partitions.values()
                }
                == {1, 2}
            ),
            what="the partitions led by both brokers",
        )
        assert leaders
        transactional = Producer({**client, "transactional.id": f"tx-{spread}"})
        transactional.init_transactions(TIMEOUT_S)
        transactional.begin_transaction()
        for i in range(10):
            transactional.produce(spread, value=b"t%d" % i, partition=i % 2)
        transactional.commit_transaction(TIMEOUT_S)
        reader = Consumer(
            {**client, "group.id": "rc", "isolation.level": "read_committed",
             "enable.partition.eof": True}
        )  # fmt: skip
        reader.assign([TopicPartition(spread, p, OFFSET_BEGINNING) for p in (0, 1)])
        seen: list[bytes] = []
        ends: set[int] = set()

        def read() -> bool:
            message = reader.poll(0.5)
            if message is not None:
                if message.error():
                    ends.add(message.partition())
                else:
                    seen.append(message.value())
            return len(seen) == 10 and ends == {0, 1}

        wait_until(read, interval_s=0, what="the committed transaction read on both partitions")
        reader.close()
        assert sorted(seen) == sorted(b"t%d" % i for i in range(10))
    finally:
        for broker in brokers:
            broker.stop()


def test_brokers_replicate_over_an_oauthbearer_inter_broker_listener(
    tmp_path: Path, zookeeper_connect: str
) -> None:
    """Each broker logs in to the other with a token its identity provider's token endpoint
    issued for the broker's client credentials (KIP-768), checked against the provider's keys."""
    key = signing_key("cluster-key")
    jwks = tmp_path / "jwks.json"
    jwks.write_text(json.dumps(KeySet([key]).as_dict(private=False)))
    brokers: list[RunningBroker] = []
    with token_endpoint(key, {"broker": "broker-secret"}) as (url, issued):
        try:
            for broker_id in (1, 2):
                settings = {
                    "broker.id": str(broker_id),
                    "zookeeper.connect": zookeeper_connect,
                    "listeners": "INTERNAL://127.0.0.1:0,CLIENT://127.0.0.1:0",
                    "listener.security.protocol.map": "INTERNAL:SASL_PLAINTEXT,CLIENT:PLAINTEXT",
                    "inter.broker.listener.name": "INTERNAL",
                    "listener.name.internal.sasl.enabled.mechanisms": "OAUTHBEARER",
                    "listener.name.internal.oauthbearer.sasl.jaas.config": (
                        "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule "
                        'required clientId="broker" clientSecret="broker-secret";'
                    ),
                    "sasl.oauthbearer.token.endpoint.url": url,
                    "sasl.oauthbearer.jwks.endpoint.url": jwks.as_uri(),
                    "sasl.oauthbearer.expected.audience": AUDIENCE,
                    "sasl.oauthbearer.expected.issuer": ISSUER,
                    "offsets.topic.replication.factor": "2",
                }
                brokers.append(RunningBroker(tmp_path / f"b{broker_id}", settings).start())
            client = {"bootstrap.servers": brokers[0].listener_bootstrap("CLIENT")}
            admin = AdminClient(client)
            wait_until(
                lambda: len(admin.list_topics(timeout=TIMEOUT_S).brokers) == 2,
                what="both brokers registered",
            )
            topic = f"oauth-{uuid.uuid4().hex[:8]}"
            admin.create_topics([NewTopic(topic, 2, 2)])[topic].result(TIMEOUT_S)
            producer = Producer({**client, "acks": "all", "message.timeout.ms": TIMEOUT_S * 1000})
            for i in range(20):
                producer.produce(topic, value=b"%d" % i, partition=i % 2)
            # acks=all answered: each partition's follower fetched its records over INTERNAL.
            assert producer.flush(TIMEOUT_S) == 0
            principals = {
                (s.listener, s.principal)
                for broker in brokers
                if broker.broker is not None
                for s in broker.broker.sessions()
            }
            assert ("INTERNAL", "User:broker") in principals
            assert issued and set(issued) == {"broker"}
        finally:
            for broker in brokers:
                broker.stop()
