"""Kafka's Java producer logs in with SASL/OAUTHBEARER: its login callback reads a JWT, signed by
a key the test makes, from a file (KIP-768's file token endpoint); the broker checks it against
the public key in a JWKS file and refuses a token made for another audience."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from joserfc.jwk import RSAKey

from odradek.testing import RunningBroker
from tests.security.oauth_idp import oauth_broker, signed_token, signing_key

from .support import classpath, parse_produced, run_java


@pytest.fixture(scope="module")
def key() -> RSAKey:
    return signing_key("java-key")


@pytest.fixture(scope="module")
def broker(key: RSAKey, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningBroker]:
    classpath()
    with oauth_broker(key, tmp_path_factory.mktemp("idp")) as running:
        yield running


def token_file(directory: Path, key: RSAKey, audience: str) -> Path:
    path = directory / f"token-{audience}.jwt"
    path.write_text(signed_token(key, sub="java-app", aud=audience, exp=int(time.time()) + 600))
    return path


def produce_with(
    broker: RunningBroker, token: Path, monkeypatch: pytest.MonkeyPatch
) -> tuple[int, list[str]]:
    # Kafka 4's client reads a token only from a URL and a file allowed by these properties.
    monkeypatch.setenv(
        "JDK_JAVA_OPTIONS",
        f"-Dorg.apache.kafka.sasl.oauthbearer.allowed.urls={token.as_uri()} "
        f"-Dorg.apache.kafka.sasl.oauthbearer.allowed.files={token}",
    )
    out = run_java(
        "JavaProducer",
        broker.bootstrap,
        "oauth-java",
        "5",
        "oauth",
        "1",
        "0",
        "security.protocol=SASL_PLAINTEXT",
        "sasl.mechanism=OAUTHBEARER",
        "sasl.login.callback.handler.class="
        "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler",
        f"sasl.oauthbearer.token.endpoint.url={token.as_uri()}",
        "sasl.jaas.config="
        "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required ;",
        "max.block.ms=15000",
        "delivery.timeout.ms=15000",
        "request.timeout.ms=10000",
    )
    produced = parse_produced(out.splitlines())
    return len(produced.acked), produced.failed


def test_the_java_client_logs_in_with_a_signed_token(
    broker: RunningBroker, key: RSAKey, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    acked, failed = produce_with(broker, token_file(tmp_path, key, "kafka"), monkeypatch)
    assert (acked, failed) == (5, [])


def test_the_java_client_is_refused_with_a_token_for_another_audience(
    broker: RunningBroker, key: RSAKey, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    acked, failed = produce_with(broker, token_file(tmp_path, key, "elsewhere"), monkeypatch)
    assert acked == 0
    assert failed and all("Authentication" in line for line in failed), failed
