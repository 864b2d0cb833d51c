"""How the project's own client authenticates to a secured broker: the client side of SASL
(PLAIN, SCRAM-SHA-256/512, OAUTHBEARER with a token of :mod:`odradek.client.oauth`) on the
settings of :mod:`odradek.security.client_settings` (TLS is the ``ssl.SSLContext`` those
settings make).

:class:`SaslClient` is the client side of one SASL exchange without I/O (KIP-152: after
ApiVersions, SaslHandshake names the mechanism, then SaslAuthenticate carries each message):
:meth:`SaslClient.first` is the first message, :meth:`SaslClient.step` answers the server's and
returns the next (None when the client has nothing more to send), raising
:class:`~odradek.client.core.ClientError` when the server's answer does not check out (a SCRAM
server signature that is wrong). The shells (:mod:`odradek.client.blocking`,
:mod:`odradek.client.aio`) run the exchange.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets

from odradek.client.core import ClientError
from odradek.security.client_settings import ClientSecurity

SASL_HANDSHAKE, SASL_AUTHENTICATE = 17, 36


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

    def __init__(
        self, mechanism: str, username: str, password: str, *, token: bool = False
    ) -> None:
        self.mechanism = mechanism
        self._hash = hashlib.sha256 if mechanism == "SCRAM-SHA-256" else hashlib.sha512
        self._password = password.encode()
        self._nonce = base64.b64encode(secrets.token_bytes(24)).decode()
        self._first_bare = f"n={_scram_name(username)},r={self._nonce}"
        if token:
            # A delegation token's login (KIP-48): user name the token id, password its HMAC.
            self._first_bare += ",tokenauth=true"
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


class OAuthBearerClient(SaslClient):
    """RFC 7628: the token in one message; a server that refuses it sends an error challenge,
    which the client acknowledges with ``\x01`` (the server then fails the exchange)."""

    mechanism = "OAUTHBEARER"

    def __init__(self, token: str) -> None:
        self._message = b"n,,\x01auth=Bearer " + token.encode() + b"\x01\x01"

    def first(self) -> bytes:
        return self._message

    def step(self, challenge: bytes) -> bytes | None:
        return b"\x01" if challenge else None


def check_handshake(error_code: int, mechanisms: list[str], wanted: str) -> None:
    if error_code:
        raise ClientError(
            f"the broker refused SASL mechanism {wanted} (error {error_code}); "
            f"it enables {', '.join(mechanisms) or 'none'}"
        )


def check_authenticate(error_code: int, message: str | None) -> None:
    if error_code:
        raise ClientError(f"SASL authentication failed (error {error_code}): {message or ''}")


def sasl_client(security: ClientSecurity, token: str | None = None) -> SaslClient:
    """The client side of the SASL exchange ``security`` names (OAUTHBEARER: with ``token``,
    from :func:`odradek.client.oauth.token_for`)."""
    if security.mechanism == "OAUTHBEARER":
        assert token is not None
        return OAuthBearerClient(token)
    assert security.username is not None and security.password is not None
    if security.mechanism == "PLAIN":
        return PlainClient(security.username, security.password)
    return ScramClient(
        security.mechanism, security.username, security.password, token=security.token
    )
