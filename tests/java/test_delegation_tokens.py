"""Delegation tokens with Kafka's own tools and clients: kafka-delegation-tokens
(DelegationTokenCommand, through the admin client's createDelegationToken,
describeDelegationToken, renewDelegationToken and expireDelegationToken) run as a SCRAM user,
then Kafka's Java producer and consumer log in with the token (SCRAM with ``tokenauth=true``) as
that user, under that user's ACLs, and are refused once the token is expired."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from odradek.security.acl import (
    AccessControlEntry,
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from odradek.security.scram import make_credential
from odradek.testing import RunningBroker, running_broker

from .support import (
    DELEGATION_TOKENS_TOOL,
    classpath,
    consume,
    create_topic,
    parse_produced,
    run_java,
)

TOPIC = "token-orders"
GROUP = "token-readers"
SCRAM = "SCRAM-SHA-512"


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningBroker]:
    classpath()
    with running_broker(
        tmp_path_factory.mktemp("java-tokens"),
        listeners="PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
        sasl_enabled_mechanisms="SCRAM-SHA-256,SCRAM-SHA-512",
        authorizer_class_name="org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        super_users="User:ANONYMOUS",
        delegation_token_secret_key="java-token-secret",
    ) as running:
        assert running.broker is not None and running.broker.store is not None
        credential = make_credential(SCRAM, "alice-secret").to_kafka()
        running.call(running.broker.store.set_user_configs("alice", {SCRAM: credential}))
        authorizer = running.broker.services.authorizer
        assert authorizer is not None
        grants = [
            (ResourceType.TOPIC, TOPIC, op)
            for op in (AclOperation.WRITE, AclOperation.READ, AclOperation.DESCRIBE)
        ] + [(ResourceType.GROUP, GROUP, AclOperation.READ)]
        running.call(
            authorizer.create(
                [
                    AclBinding(
                        ResourcePattern(rtype, name, PatternType.LITERAL),
                        AccessControlEntry("User:alice", "*", op, AclPermissionType.ALLOW),
                    )
                    for rtype, name, op in grants
                ]
            )
        )
        create_topic(running.bootstrap, TOPIC, 1)
        yield running


def scram_config(directory: Path, user: str, password: str, token: bool = False) -> list[str]:
    extension = ' tokenauth="true"' if token else ""
    return [
        "security.protocol=SASL_PLAINTEXT",
        f"sasl.mechanism={SCRAM}",
        "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required "
        f'username="{user}" password="{password}"{extension};',
    ]


def tokens_tool(broker: RunningBroker, directory: Path, *args: str) -> str:
    config = directory / "alice.properties"
    config.write_text("\n".join(scram_config(directory, "alice", "alice-secret")) + "\n")
    return run_java(
        DELEGATION_TOKENS_TOOL,
        "--bootstrap-server",
        broker.listener_bootstrap("SASL_PLAINTEXT"),
        "--command-config",
        str(config),
        *args,
    )


def produce_with_token(
    broker: RunningBroker, token_id: str, hmac: str, prefix: str
) -> tuple[int, list[str]]:
    out = run_java(
        "JavaProducer",
        broker.listener_bootstrap("SASL_PLAINTEXT"),
        TOPIC,
        "3",
        prefix,
        "1",
        "0",
        *scram_config(Path(), token_id, hmac, token=True),
        "max.block.ms=15000",
        "delivery.timeout.ms=15000",
        "request.timeout.ms=10000",
    )
    produced = parse_produced(out.splitlines())
    return len(produced.acked), produced.failed


def test_a_token_made_with_kafkas_tool_logs_java_clients_in_until_it_expires(
    broker: RunningBroker, tmp_path: Path
) -> None:
    created = tokens_tool(
        broker,
        tmp_path,
        "--create",
        "--max-life-time-period",
        "-1",
        "--renewer-principal",
        "User:bob",
    )
    assert "Created delegation token with tokenId : " in created
    token_id = created.split("Created delegation token with tokenId : ")[1].split()[0]
    row = next(line.split() for line in created.splitlines() if line.startswith(token_id))
    hmac, owner, requester, renewers = row[1:5]
    assert (owner, requester, renewers) == ("User:alice", "User:alice", "[User:bob]")

    # Without --owner-principal the tool sends an empty owner list, which Kafka answers with
    # no tokens; named owners (or renewers) select theirs.
    assert "Total number of tokens : 0" in tokens_tool(broker, tmp_path, "--describe")
    described = tokens_tool(broker, tmp_path, "--describe", "--owner-principal", "User:alice")
    assert "Total number of tokens : 1" in described and token_id in described
    by_renewer = tokens_tool(broker, tmp_path, "--describe", "--owner-principal", "User:bob")
    assert "Total number of tokens : 1" in by_renewer
    renewed = tokens_tool(broker, tmp_path, "--renew", "--hmac", hmac, "--renew-time-period", "-1")
    assert "Completed renew operation" in renewed

    # The token is alice: her ACLs let it write and read the topic.
    assert produce_with_token(broker, token_id, hmac, "token") == (3, [])
    consumed = consume(
        broker.listener_bootstrap("SASL_PLAINTEXT"),
        TOPIC,
        GROUP,
        3,
        *scram_config(tmp_path, token_id, hmac, token=True),
    )
    assert [r.value for r in consumed.records] == ["tokenv0", "tokenv1", "tokenv2"]

    expired = tokens_tool(
        broker, tmp_path, "--expire", "--hmac", hmac, "--expiry-time-period", "-1"
    )
    assert "Completed expire operation" in expired
    after = tokens_tool(broker, tmp_path, "--describe", "--owner-principal", "User:alice")
    assert "Total number of tokens : 0" in after
    acked, failed = produce_with_token(broker, token_id, hmac, "late")
    assert acked == 0
    assert failed and all("Authentication" in line for line in failed), failed
