"""SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677): salted credentials and the server side
of the exchange.

A credential is what Kafka stores, never the password: the salt, the iteration count, and the
stored and server keys derived from ``SaltedPassword = PBKDF2(password, salt, iterations)``.
Its text form is Kafka's (the value of a ``SCRAM-SHA-512`` entry of ``/config/users/<name>`` in
ZooKeeper mode): ``salt=<b64>,stored_key=<b64>,server_key=<b64>,iterations=<n>``.

:class:`ScramServer` is pure: messages in, messages out, no I/O (the client side is
``odradek.client.security.ScramClient``). A client-first message with Kafka's ``tokenauth=true``
extension logs in with a delegation token (KIP-48): the user name is the token id, looked up
with the server's ``token_lookup`` instead of the users' credentials.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
from collections.abc import Callable
from dataclasses import dataclass

SCRAM_SHA_256 = "SCRAM-SHA-256"
SCRAM_SHA_512 = "SCRAM-SHA-512"
# Kafka's ScramMechanism: the type codes of AlterUserScramCredentials and its hash names.
MECHANISM_TYPES = {SCRAM_SHA_256: 1, SCRAM_SHA_512: 2}
MECHANISMS_BY_TYPE = {code: name for name, code in MECHANISM_TYPES.items()}
_HASHES = {SCRAM_SHA_256: "sha256", SCRAM_SHA_512: "sha512"}
# Kafka's limits on iterations (ScramMechanism.minIterations, ScramFormatter's maximum).
MIN_ITERATIONS = 4096
MAX_ITERATIONS = 16384
DEFAULT_ITERATIONS = 4096


class ScramError(Exception):
    """The client's message is malformed or its proof is wrong."""


@dataclass(frozen=True, slots=True)
class ScramCredential:
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int

    def to_kafka(self) -> str:
        b64 = base64.b64encode
        return (
            f"salt={b64(self.salt).decode()},stored_key={b64(self.stored_key).decode()},"
            f"server_key={b64(self.server_key).decode()},iterations={self.iterations}"
        )

    @classmethod
    def from_kafka(cls, text: str) -> ScramCredential:
        fields = dict(item.split("=", 1) for item in text.split(",") if "=" in item)
        try:
            return cls(
                base64.b64decode(fields["salt"]),
                base64.b64decode(fields["stored_key"]),
                base64.b64decode(fields["server_key"]),
                int(fields["iterations"]),
            )
        except (KeyError, ValueError) as e:
            raise ValueError(f"not a SCRAM credential: {e}") from e


def _hmac(mechanism: str, key: bytes, message: bytes) -> bytes:
    return hmac.new(key, message, _HASHES[mechanism]).digest()


def salted_password(mechanism: str, password: str, salt: bytes, iterations: int) -> bytes:
    return hashlib.pbkdf2_hmac(_HASHES[mechanism], password.encode(), salt, iterations)


def credential_from_salted(
    mechanism: str, salted: bytes, salt: bytes, iterations: int
) -> ScramCredential:
    """What AlterUserScramCredentials carries (the salted password) made into a credential."""
    client_key = _hmac(mechanism, salted, b"Client Key")
    stored_key = hashlib.new(_HASHES[mechanism], client_key).digest()
    server_key = _hmac(mechanism, salted, b"Server Key")
    return ScramCredential(salt, stored_key, server_key, iterations)


def make_credential(
    mechanism: str, password: str, iterations: int = DEFAULT_ITERATIONS, salt: bytes | None = None
) -> ScramCredential:
    salt = salt if salt is not None else secrets.token_bytes(32)
    salted = salted_password(mechanism, password, salt, iterations)
    return credential_from_salted(mechanism, salted, salt, iterations)


def _attributes(message: str) -> dict[str, str]:
    # RFC 5802's attributes are one letter; Kafka's extensions (``tokenauth=true``) are words.
    found: dict[str, str] = {}
    for part in message.split(","):
        key, sep, value = part.partition("=")
        if not sep or not key.isalnum():
            raise ScramError(f"malformed SCRAM attribute {part!r}")
        found.setdefault(key, value)
    return found


def _username(escaped: str) -> str:
    # RFC 5802: ',' and '=' in a name travel as =2C and =3D; any other '=' is malformed.
    if "=" in escaped.replace("=2C", "").replace("=3D", ""):
        raise ScramError("malformed username")
    return escaped.replace("=2C", ",").replace("=3D", "=")


CredentialLookup = Callable[[str, str], "ScramCredential | None"]


@dataclass(frozen=True, slots=True)
class TokenLogin:
    """A delegation token's SCRAM credential (its password is the token's HMAC), the principal
    that owns the token, and the token's expiry (ms since the epoch)."""

    credential: ScramCredential
    owner: str
    expiry_ms: int


# (token id, mechanism) -> the token's login, or None for no token or an expired one.
TokenLookup = Callable[[str, str], "TokenLogin | None"]


class ScramServer:
    """One SCRAM exchange, server side: :meth:`step` takes the client's first message and answers
    the server-first message, then takes the client-final message and answers the server-final
    one. ``lookup(user, mechanism)`` finds the stored credential."""

    def __init__(
        self,
        mechanism: str,
        lookup: CredentialLookup,
        nonce_suffix: str | None = None,
        token_lookup: TokenLookup | None = None,
    ) -> None:
        self.mechanism = mechanism
        self._token_lookup = token_lookup
        # Set when the exchange is a delegation token's: whose token, and until when.
        self.token: TokenLogin | None = None
        # Fixed only by tests (RFC 7677's example); otherwise fresh per exchange.
        self._nonce_suffix = nonce_suffix
        self._lookup = lookup
        self._state = "first"
        self._credential: ScramCredential | None = None
        self._client_first_bare = ""
        self._server_first = ""
        self._nonce = ""
        self._client_nonce = ""
        self._gs2_header = ""
        self.username: str | None = None

    @property
    def complete(self) -> bool:
        return self._state == "done"

    def step(self, message: bytes) -> bytes:
        try:
            text = message.decode()
        except UnicodeDecodeError as e:
            raise ScramError("SCRAM message is not UTF-8") from e
        if self._state == "first":
            return self._client_first(text)
        if self._state == "final":
            return self._client_final(text)
        raise ScramError("SCRAM exchange already complete")

    def _client_first(self, text: str) -> bytes:
        # gs2-header: channel binding flag ("n" or "y"; "p" would ask for binding, unsupported),
        # then an optional authorization id.
        flag, _, rest = text.partition(",")
        authzid, _, bare = rest.partition(",")
        if flag not in ("n", "y") or not bare:
            raise ScramError("unsupported or malformed SCRAM gs2 header")
        attributes = _attributes(bare)
        if "n" not in attributes or "r" not in attributes:
            raise ScramError("SCRAM client-first message lacks n= or r=")
        user = _username(attributes["n"])
        if authzid and _username(authzid.removeprefix("a=")) != user:
            raise ScramError("authorization id differs from the user name")
        if attributes.get("tokenauth", "").lower() == "true":
            token = None if self._token_lookup is None else self._token_lookup(user, self.mechanism)
            if token is None:
                raise ScramError("no such delegation token, or it has expired")
            self.token = token
            credential: ScramCredential | None = token.credential
        else:
            credential = self._lookup(user, self.mechanism)
        if credential is None:
            raise ScramError(f"no {self.mechanism} credential for user {user!r}")
        self.username = user
        self._credential = credential
        self._gs2_header = f"{flag},{authzid},"
        self._client_first_bare = bare
        self._client_nonce = attributes["r"]
        self._nonce = attributes["r"] + (self._nonce_suffix or secrets.token_urlsafe(24))
        salt = base64.b64encode(credential.salt).decode()
        self._server_first = f"r={self._nonce},s={salt},i={credential.iterations}"
        self._state = "final"
        return self._server_first.encode()

    def _client_final(self, text: str) -> bytes:
        without_proof, sep, proof_b64 = text.rpartition(",p=")
        if not sep:
            raise ScramError("SCRAM client-final message lacks p=")
        attributes = _attributes(without_proof)
        # librdkafka before 2.2 echoes its own nonce again in front of the combined one; older
        # Kafka accepted any prefix (endsWith), newer only the exact nonce. Only that one quirk
        # is let through here: the proof covers the message as sent either way.
        if attributes.get("r") not in (self._nonce, self._client_nonce + self._nonce):
            raise ScramError("SCRAM nonce mismatch")
        if attributes.get("c") != base64.b64encode(self._gs2_header.encode()).decode():
            raise ScramError("SCRAM channel binding mismatch")
        credential = self._credential
        assert credential is not None
        auth_message = f"{self._client_first_bare},{self._server_first},{without_proof}".encode()
        try:
            proof = base64.b64decode(proof_b64, validate=True)
        except ValueError as e:
            raise ScramError("SCRAM proof is not base64") from e
        signature = _hmac(self.mechanism, credential.stored_key, auth_message)
        if len(proof) != len(signature):
            raise ScramError("invalid credentials")
        client_key = bytes(a ^ b for a, b in zip(proof, signature, strict=True))
        expected = hashlib.new(_HASHES[self.mechanism], client_key).digest()
        if not hmac.compare_digest(expected, credential.stored_key):
            raise ScramError("invalid credentials")
        self._state = "done"
        server_signature = _hmac(self.mechanism, credential.server_key, auth_message)
        return b"v=" + base64.b64encode(server_signature)
