"""The security settings of a Kafka client, read from Kafka's own client setting names: what the
project's client (and the console, the Spark source and sink, a CLI ``--command-config`` file)
needs to reach a secured broker. Only settings here; the exchanges that use them are the
client's (:mod:`odradek.client.security`). Below :mod:`odradek.config`, which checks a
``console.client.config`` file with it.

Settings understood (Kafka's names; librdkafka's ``sasl.username`` / ``sasl.password`` too):
``security.protocol`` (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL), ``ssl.truststore.location``
(PEM CA file; ``ssl.ca.location`` as librdkafka names it), ``ssl.keystore.location`` (PEM with
the key and certificate, for mutual TLS; or ``ssl.certificate.location`` + ``ssl.key.location``),
``ssl.key.password``, ``ssl.endpoint.identification.algorithm`` (``https``, the default, checks
the broker's host name; empty does not), ``sasl.mechanism``, ``sasl.jaas.config`` (the username
and password of a PlainLoginModule or ScramLoginModule line; ``tokenauth="true"`` there logs in
with a delegation token: username its token id, password its HMAC in base64).

OAUTHBEARER (KIP-768), as Kafka's and librdkafka's clients name it: a token from the identity
provider's ``sasl.oauthbearer.token.endpoint.url`` by the client credentials grant, with the
OAuthBearerLoginModule's ``clientId``, ``clientSecret`` and ``scope`` options (librdkafka:
``sasl.oauthbearer.client.id``, ``.client.secret``, ``.scope``); or, with no token endpoint, an
unsecured token for development (the module's ``unsecuredLoginStringClaim_sub``, librdkafka's
``sasl.oauthbearer.config=principal=<name>``).
"""

from __future__ import annotations

import ssl
from collections.abc import Mapping
from dataclasses import dataclass

from odradek.security.jaas import JaasError, parse_jaas


class ClientSettingsError(ValueError):
    """Client security settings that cannot work together (the message says which)."""


PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")
SASL_HANDSHAKE, SASL_AUTHENTICATE = 17, 36


@dataclass(frozen=True, slots=True)
class OAuthLogin:
    """How an OAUTHBEARER client gets its token: from ``token_endpoint`` (client credentials),
    or, with none, unsecured for ``unsecured_subject``."""

    token_endpoint: str | None = None
    client_id: str | None = None
    client_secret: str | None = None
    scope: str | None = None
    unsecured_subject: str | None = None

    @classmethod
    def from_config(cls, config: Mapping[str, str], jaas: Mapping[str, str]) -> OAuthLogin:
        endpoint = config.get("sasl.oauthbearer.token.endpoint.url")
        principal = None
        for pair in config.get("sasl.oauthbearer.config", "").split():
            key, _, value = pair.partition("=")
            if key == "principal":
                principal = value
        login = cls(
            token_endpoint=endpoint or None,
            client_id=jaas.get("clientId", config.get("sasl.oauthbearer.client.id")),
            client_secret=jaas.get("clientSecret", config.get("sasl.oauthbearer.client.secret")),
            scope=jaas.get("scope", config.get("sasl.oauthbearer.scope")),
            unsecured_subject=jaas.get("unsecuredLoginStringClaim_sub", principal),
        )
        if login.token_endpoint is not None:
            if login.client_id is None or login.client_secret is None:
                raise ClientSettingsError(
                    "OAUTHBEARER with sasl.oauthbearer.token.endpoint.url needs clientId and "
                    "clientSecret (sasl.jaas.config)"
                )
        elif login.unsecured_subject is None:
            raise ClientSettingsError(
                "OAUTHBEARER needs sasl.oauthbearer.token.endpoint.url (and clientId, "
                "clientSecret), or unsecuredLoginStringClaim_sub for an unsecured token"
            )
        return login


@dataclass(frozen=True, slots=True)
class ClientSecurity:
    protocol: str = "PLAINTEXT"
    ca_file: str | None = None
    cert_file: str | None = None
    key_file: str | None = None
    key_password: str | None = None
    check_hostname: bool = True
    mechanism: str = "PLAIN"
    username: str | None = None
    password: str | None = None
    # A SCRAM login with a delegation token (the JAAS option tokenauth="true", KIP-48).
    token: bool = False
    oauth: OAuthLogin | None = None

    @property
    def tls(self) -> bool:
        return self.protocol in ("SSL", "SASL_SSL")

    @property
    def sasl(self) -> bool:
        return self.protocol in ("SASL_PLAINTEXT", "SASL_SSL")

    @classmethod
    def from_config(cls, config: Mapping[str, str]) -> ClientSecurity:
        """From Kafka client settings (unknown names are ignored: they are other settings)."""
        protocol = config.get("security.protocol", "PLAINTEXT").upper()
        if protocol not in PROTOCOLS:
            raise ClientSettingsError(f"security.protocol {protocol!r} is not one of {PROTOCOLS}")
        mechanism = config.get("sasl.mechanism", config.get("sasl.mechanisms", "PLAIN")).upper()
        if protocol.startswith("SASL") and mechanism not in MECHANISMS:
            raise ClientSettingsError(f"sasl.mechanism {mechanism!r} is not one of {MECHANISMS}")
        username = config.get("sasl.username")
        password = config.get("sasl.password")
        jaas = config.get("sasl.jaas.config")
        token = False
        fields: dict[str, str] = {}
        if jaas:
            try:
                fields = parse_jaas(jaas)[1]
            except JaasError as e:
                raise ClientSettingsError(f"sasl.jaas.config: {e}") from None
            username = fields.get("username", username)
            password = fields.get("password", password)
            token = fields.get("tokenauth", "").lower() == "true"
        oauth = None
        if protocol.startswith("SASL") and mechanism == "OAUTHBEARER":
            oauth = OAuthLogin.from_config(config, fields)
        elif protocol.startswith("SASL") and (username is None or password is None):
            raise ClientSettingsError("SASL needs a username and password (sasl.jaas.config)")
        keystore = config.get("ssl.keystore.location")
        return cls(
            protocol=protocol,
            ca_file=config.get("ssl.truststore.location") or config.get("ssl.ca.location"),
            cert_file=keystore or config.get("ssl.certificate.location"),
            key_file=keystore or config.get("ssl.key.location"),
            key_password=config.get("ssl.key.password"),
            check_hostname=config.get("ssl.endpoint.identification.algorithm", "https") != "",
            mechanism=mechanism,
            username=username,
            password=password,
            token=token,
            oauth=oauth,
        )

    def ssl_context(self) -> ssl.SSLContext | None:
        if not self.tls:
            return None
        context = ssl.create_default_context(cafile=self.ca_file)
        context.check_hostname = self.check_hostname
        if self.cert_file is not None:
            context.load_cert_chain(self.cert_file, self.key_file, self.key_password)
        return context
