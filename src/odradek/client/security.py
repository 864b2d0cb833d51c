"""How the project's own client reaches a secured broker: TLS and SASL (PLAIN, SCRAM-SHA-256/512),
configured with the Kafka client's own setting names so that the Spark options
(``kafka.security.protocol``, ``kafka.ssl.*``, ``kafka.sasl.*``) and a CLI ``--command-config``
file pass through unchanged.

:class:`ClientSecurity` holds the settings and makes the ``ssl.SSLContext``; :class:`SaslClient`
is the client side of one SASL exchange without I/O (KIP-152: after ApiVersions, SaslHandshake
names the mechanism, then SaslAuthenticate carries each message): :meth:`SaslClient.first` is the
first message, :meth:`SaslClient.step` answers the server's and returns the next (None when the
client has nothing more to send), raising :class:`~odradek.client.core.ClientError` when the
server's answer does not check out (a SCRAM server signature that is wrong). The shells
(:mod:`odradek.client.blocking`, :mod:`odradek.client.aio`) run the exchange.

Settings understood (Kafka's names; librdkafka's ``sasl.username`` / ``sasl.password`` too):
``security.protocol`` (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL), ``ssl.truststore.location``
(PEM CA file; ``ssl.ca.location`` as librdkafka names it), ``ssl.keystore.location`` (PEM with
the key and certificate, for mutual TLS; or ``ssl.certificate.location`` + ``ssl.key.location``),
``ssl.key.password``, ``ssl.endpoint.identification.algorithm`` (``https``, the default, checks
the broker's host name; empty does not), ``sasl.mechanism``, ``sasl.jaas.config`` (the username
and password of a PlainLoginModule or ScramLoginModule line).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
import ssl
from collections.abc import Mapping
from dataclasses import dataclass

from odradek.client.core import ClientError
from odradek.security.jaas import JaasError, parse_jaas

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
SASL_HANDSHAKE, SASL_AUTHENTICATE = 17, 36


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
            raise ClientError(f"security.protocol {protocol!r} is not one of {PROTOCOLS}")
        mechanism = config.get("sasl.mechanism", config.get("sasl.mechanisms", "PLAIN")).upper()
        if protocol.startswith("SASL") and mechanism not in MECHANISMS:
            raise ClientError(f"sasl.mechanism {mechanism!r} is not one of {MECHANISMS}")
        username = config.get("sasl.username")
        password = config.get("sasl.password")
        jaas = config.get("sasl.jaas.config")
        if jaas:
            try:
                fields = parse_jaas(jaas)[1]
            except JaasError as e:
                raise ClientError(f"sasl.jaas.config: {e}") from None
            username = fields.get("username", username)
            password = fields.get("password", password)
        if protocol.startswith("SASL") and (username is None or password is None):
            raise ClientError("SASL needs a username and password (sasl.jaas.config)")
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
        )

    def ssl_context(self) -> ssl.SSLContext | None:
        if not self.tls:
            return None
        context = ssl.create_default_context(cafile=self.ca_file)
        context.check_hostname = self.check_hostname
        if self.cert_file is not None:
            context.load_cert_chain(self.cert_file, self.key_file, self.key_password)
        return context

    def sasl_client(self) -> SaslClient:
        assert self.username is not None and self.password is not None
        if self.mechanism == "PLAIN":
            return PlainClient(self.username, self.password)
        return ScramClient(self.mechanism, self.username, self.password)


class SaslClient:
    mechanism = ""

    def first(self) -> bytes:
        raise NotImplementedError

    def step(self, challenge: bytes) -> bytes | None:
        raise NotImplementedError


class PlainClient(SaslClient):
    """RFC 4616: one message, ``\\0user\\0password``."""

    mechanism = "PLAIN"

    def __init__(self, username: str, password: str) -> None:
        self._message = b"\0" + username.encode() + b"\0" + password.encode()

    def first(self) -> bytes:
        return self._message

    def step(self, challenge: bytes) -> bytes | None:
        return None


def _scram_name(name: str) -> str:
    return name.replace("=", "=3D").replace(",", "=2C")


class ScramClient(SaslClient):
    """RFC 5802 / 7677 client: client-first, client-final with the proof, then the server's
    signature checked."""

    def __init__(self, mechanism: str, username: str, password: str) -> None:
        self.mechanism = mechanism
        self._hash = hashlib.sha256 if mechanism == "SCRAM-SHA-256" else hashlib.sha512
        self._password = password.encode()
        self._nonce = base64.b64encode(secrets.token_bytes(24)).decode()
        self._first_bare = f"n={_scram_name(username)},r={self._nonce}"
        self._server_signature: bytes | None = None

    def first(self) -> bytes:
        return ("n,," + self._first_bare).encode()

    def _hmac(self, key: bytes, message: bytes) -> bytes:
        return hmac.new(key, message, self._hash).digest()

    def step(self, challenge: bytes) -> bytes | None:
        text = challenge.decode()
        fields = dict(part.split("=", 1) for part in text.split(",") if "=" in part)
        if self._server_signature is not None:
            if "e" in fields:
                raise ClientError(f"SCRAM authentication failed: {fields['e']}")
            if base64.b64decode(fields.get("v", "")) != self._server_signature:
                raise ClientError("the broker's SCRAM signature is wrong")
            return None
        nonce, salt, iterations = fields["r"], base64.b64decode(fields["s"]), int(fields["i"])
        if not nonce.startswith(self._nonce):
            raise ClientError("the broker's SCRAM nonce does not extend ours")
        salted = hashlib.pbkdf2_hmac(self._hash().name, self._password, salt, iterations)
        client_key = self._hmac(salted, b"Client Key")
        stored_key = self._hash(client_key).digest()
        final_bare = f"c=biws,r={nonce}"
        auth_message = f"{self._first_bare},{text},{final_bare}".encode()
        signature = self._hmac(stored_key, auth_message)
        proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
        self._server_signature = self._hmac(self._hmac(salted, b"Server Key"), auth_message)
        return f"{final_bare},p={base64.b64encode(proof).decode()}".encode()


def check_handshake(error_code: int, mechanisms: list[str], wanted: str) -> None:
    if error_code:
        raise ClientError(
            f"the broker refused SASL mechanism {wanted} (error {error_code}); "
            f"it enables {', '.join(mechanisms) or 'none'}"
        )


def check_authenticate(error_code: int, message: str | None) -> None:
    if error_code:
        raise ClientError(f"SASL authentication failed (error {error_code}): {message or ''}")
