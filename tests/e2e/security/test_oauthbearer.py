"""SASL/OAUTHBEARER with a real client: confluent-kafka logs in with JWTs signed by a key the
test makes (the broker reads the public key from a JWKS file); a token with the wrong audience,
the wrong issuer, an expired one and one signed by another key are each refused."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient
from joserfc.jwk import RSAKey

from odradek.testing import RunningBroker
from tests.security.oauth_idp import oauth_broker, signed_token, signing_key


@pytest.fixture(scope="module")
def key() -> RSAKey:
    return signing_key("test-key")


@pytest.fixture(scope="module")
def broker(key: RSAKey, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningBroker]:
    with oauth_broker(key, tmp_path_factory.mktemp("idp")) as running:
        yield running


def token(key: RSAKey, **claims: Any) -> str:
    return signed_token(key, **claims)


def client_config(broker: RunningBroker, value: str, errors: list[KafkaError]) -> dict[str, Any]:
    return {
        "bootstrap.servers": broker.bootstrap,
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "OAUTHBEARER",
        "oauth_cb": lambda _config: (value, time.time() + 300),
        "error_cb": errors.append,
    }


def test_a_signed_token_logs_in_and_produces(broker: RunningBroker, key: RSAKey) -> None:
    errors: list[KafkaError] = []
    producer = Producer(client_config(broker, token(key), errors))
    delivered: list[Any] = []
    producer.produce("oauth-topic", b"hello", on_delivery=lambda e, m: delivered.append(e))
    assert producer.flush(30) == 0
    assert delivered == [None]
    assert not [e for e in errors if e.code() == KafkaError._AUTHENTICATION]


@pytest.mark.parametrize(
    "claims",
    [{"aud": "someone-else"}, {"iss": "https://evil.test"}, {"exp": int(time.time()) - 600}],
    ids=["audience", "issuer", "expired"],
)
def test_a_bad_token_is_refused(broker: RunningBroker, key: RSAKey, claims: Any) -> None:
    assert_refused(broker, token(key, **claims))


def test_a_token_signed_by_another_key_is_refused(broker: RunningBroker) -> None:
    impostor = signing_key("test-key")
    assert_refused(broker, token(impostor))


def assert_refused(broker: RunningBroker, value: str) -> None:
    errors: list[KafkaError] = []
    admin = AdminClient(client_config(broker, value, errors))
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and not errors:
        admin.poll(0.2)
        with contextlib.suppress(KafkaException):  # refused: the error callback says why
            admin.list_topics(timeout=1)
    assert any(e.code() == KafkaError._AUTHENTICATION for e in errors), errors
    assert any("SASL authentication" in e.str() for e in errors), errors
