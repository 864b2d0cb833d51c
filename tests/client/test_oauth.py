"""The client's OAUTHBEARER login (KIP-768) against a broker that checks signed tokens: a token
from an identity provider's token endpoint by the client credentials grant, reused while fresh;
wrong client credentials are the endpoint's refusal, named; a broker that takes unsecured
tokens takes the client's own."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from joserfc.jwk import RSAKey

from odradek.client.blocking import BlockingConnection
from odradek.client.core import ClientError
from odradek.client.oauth import token_for
from odradek.security.client_settings import ClientSecurity, ClientSettingsError
from odradek.testing import RunningBroker, running_broker
from tests.security.oauth_idp import oauth_broker, signing_key, token_endpoint

METADATA = 3
MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required"


@pytest.fixture(scope="module")
def key() -> RSAKey:
    return signing_key("client-test-key")


@pytest.fixture(scope="module")
def broker(key: RSAKey, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningBroker]:
    with oauth_broker(key, tmp_path_factory.mktemp("idp")) as running:
        yield running


def security(endpoint: str, client_id: str, secret: str) -> ClientSecurity:
    return ClientSecurity.from_config(
        {
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "OAUTHBEARER",
            "sasl.oauthbearer.token.endpoint.url": endpoint,
            "sasl.jaas.config": f'{MODULE} clientId="{client_id}" clientSecret="{secret}";',
        }
    )


def principals(broker: RunningBroker) -> set[str]:
    """Who the broker's open connections are logged in as."""
    assert broker.broker is not None
    return {s.principal for s in broker.broker.sessions()}


def test_a_token_from_the_token_endpoint_logs_in(broker: RunningBroker, key: RSAKey) -> None:
    with token_endpoint(key, {"svc-orders": "s3cret:/"}) as (url, issued):
        login = security(url, "svc-orders", "s3cret:/")
        for _ in range(2):
            connection = BlockingConnection.open(
                broker.bootstrap, client_id="oauth-client", security=login
            )
            try:
                answer = connection.request(METADATA, {"topics": []}, version=12)
                assert [b.node_id for b in answer.brokers]
                assert "User:svc-orders" in principals(broker)
            finally:
                connection.close()
        assert issued == ["svc-orders"]  # the second connection reused the token


def test_wrong_client_credentials_are_the_endpoints_refusal(
    broker: RunningBroker, key: RSAKey
) -> None:
    with token_endpoint(key, {"svc-orders": "s3cret"}) as (url, issued):
        with pytest.raises(ClientError, match=r"refused the client credentials \(HTTP 401\)"):
            BlockingConnection.open(broker.bootstrap, security=security(url, "svc-orders", "no"))
        assert issued == []


def test_an_unsecured_token_for_a_broker_that_takes_them(tmp_path: Path) -> None:
    unsecured = ClientSecurity.from_config(
        {
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "OAUTHBEARER",
            "sasl.jaas.config": f'{MODULE} unsecuredLoginStringClaim_sub="dev";',
        }
    )
    assert unsecured.oauth is not None
    assert token_for(unsecured.oauth).endswith(".")  # unsigned
    with running_broker(
        listeners="SASL_PLAINTEXT://127.0.0.1:0", sasl_enabled_mechanisms="OAUTHBEARER"
    ) as dev:
        connection = BlockingConnection.open(dev.bootstrap, client_id="dev", security=unsecured)
        try:
            connection.request(METADATA, {"topics": []}, version=12)
            assert principals(dev) == {"User:dev"}
        finally:
            connection.close()


def test_oauthbearer_settings_name_what_is_missing() -> None:
    base = {"security.protocol": "SASL_SSL", "sasl.mechanism": "OAUTHBEARER"}
    with pytest.raises(ClientSettingsError, match=r"token\.endpoint\.url"):
        ClientSecurity.from_config(base)
    with pytest.raises(ClientSettingsError, match="clientId and clientSecret"):
        ClientSecurity.from_config(
            {**base, "sasl.oauthbearer.token.endpoint.url": "https://idp.test/token"}
        )
    librdkafka = ClientSecurity.from_config(
        {
            **base,
            "sasl.oauthbearer.token.endpoint.url": "https://idp.test/token",
            "sasl.oauthbearer.client.id": "c",
            "sasl.oauthbearer.client.secret": "s",
            "sasl.oauthbearer.scope": "kafka",
        }
    )
    assert librdkafka.oauth is not None
    assert (librdkafka.oauth.client_id, librdkafka.oauth.scope) == ("c", "kafka")
