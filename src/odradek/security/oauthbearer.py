"""SASL/OAUTHBEARER (RFC 7628; Kafka's KIP-255 and KIP-768): a client logs in with a JWT its
identity provider issued.

The client's first message is RFC 7628's: a GS2 header, then ``auth=Bearer <token>`` among
``\\x01``-separated key/value pairs (Kafka's SASL extensions, if any, are read and ignored).
A token that passes becomes the principal ``User:<subject>``; one that does not is answered
with RFC 7628's error challenge (``{"status":"invalid_token"}``), and the client's
acknowledgement of it ends the exchange with SASL_AUTHENTICATION_FAILED, as Kafka does.

Two ways of checking a token, as Kafka's two validator callback handlers:

- **Signed** (``sasl.oauthbearer.jwks.endpoint.url`` set, a ``file:`` or ``https:`` URL): the
  JWS signature against the identity provider's keys (its JWKS, read at start and every
  ``sasl.oauthbearer.jwks.endpoint.refresh.ms``, and again, at most every 10 s, when a token
  names a key id not yet known); ``exp`` required, ``nbf``/``iat`` respected, each within
  ``sasl.oauthbearer.clock.skew.seconds``; ``iss`` must be
  ``sasl.oauthbearer.expected.issuer`` and ``aud`` one of
  ``sasl.oauthbearer.expected.audience`` where those are set; the subject is the claim
  ``sasl.oauthbearer.sub.claim.name``.
- **Unsecured** (no JWKS URL: Kafka's default, for development): an unsigned JWS (``alg`` is
  ``none``), whose ``exp`` and subject are checked the same way.

The keys are fetched on a daemon thread (never on the event loop); validation itself is pure
and takes its time from the injected clock. A token's expiry bounds the session
(``connections.max.reauth.ms``, KIP-368).

``joserfc`` (and the ``cryptography`` it imports) is imported where signed tokens are to be
checked (a JWKS URL is set), not with this module: every broker imports it, few check
signatures, and the two cost a tenth of a second of a broker's start.
"""

from __future__ import annotations

import base64
import importlib
import json
import logging
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from odradek.clock import Clock

if TYPE_CHECKING:
    from joserfc.jwk import KeySet

log = logging.getLogger(__name__)

OAUTHBEARER = "OAUTHBEARER"
ERROR_CHALLENGE = b'{"status":"invalid_token"}'
_SIGNING_ALGORITHMS = ("RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384")
_UNKNOWN_KEY_REFRESH_S = 10.0
_FETCH_TIMEOUT_S = 10.0


class InvalidToken(Exception):
    """The token is not one this broker accepts (the reason is logged, not told the client)."""


@dataclass(frozen=True, slots=True)
class ValidToken:
    subject: str
    expires_ms: int  # wall-clock ms


def token_of(message: bytes) -> str:
    """The bearer token of an RFC 7628 client message."""
    try:
        text = message.decode()
    except UnicodeDecodeError as e:
        raise InvalidToken("the message is not UTF-8") from e
    header, sep, rest = text.partition("\x01")
    if not sep or not header.startswith(("n,", "y,")):
        raise InvalidToken("not an RFC 7628 client message")
    for pair in rest.split("\x01"):
        key, _, value = pair.partition("=")
        if key == "auth":
            scheme, _, token = value.partition(" ")
            if scheme.lower() != "bearer" or not token.strip():
                raise InvalidToken("auth is not a bearer token")
            return token.strip()
    raise InvalidToken("no auth=Bearer in the message")


class JwksSource:
    """An identity provider's signing keys from a ``file:`` or ``https:`` URL, refreshed on a
    daemon thread (see the module doc)."""

    def __init__(self, url: str, refresh_ms: int) -> None:
        parsed = urllib.parse.urlparse(url)
        if parsed.scheme not in ("file", "https", "http"):
            raise ValueError(f"the JWKS URL {url} is neither file: nor https:")
        self.url = url
        self._refresh_s = max(refresh_ms, 1000) / 1000
        self._keys: KeySet | None = None
        self._wake = threading.Event()
        self._stopped = threading.Event()
        self._last_load = 0.0
        self._thread: threading.Thread | None = None
        # Signed tokens will be checked: their library is loaded now, at the broker's start,
        # not at the first login, on the event loop.
        importlib.import_module("joserfc.jwt")
        if parsed.scheme == "file":
            self._load()  # a local file: known before the first login

    def start(self) -> JwksSource:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="jwks-refresh", daemon=True)
            self._thread.start()
        return self

    def close(self) -> None:
        self._stopped.set()
        self._wake.set()

    def keys(self) -> KeySet | None:
        return self._keys

    def unknown_key(self) -> None:
        """A token named a key not known: load again soon (at most every 10 s)."""
        if time.monotonic() - self._last_load >= _UNKNOWN_KEY_REFRESH_S:
            self._wake.set()

    def _run(self) -> None:
        while not self._stopped.is_set():
            since = time.monotonic() - self._last_load
            due = self._keys is None or since >= self._refresh_s
            asked = self._wake.is_set() and since >= _UNKNOWN_KEY_REFRESH_S
            if due or asked:
                self._load()
            self._wake.clear()
            self._wake.wait(self._refresh_s if self._keys is not None else 5.0)

    def _load(self) -> None:
        self._last_load = time.monotonic()
        try:
            parsed = urllib.parse.urlparse(self.url)
            if parsed.scheme == "file":
                text = Path(urllib.parse.unquote(parsed.path)).read_text()
            else:
                with urllib.request.urlopen(self.url, timeout=_FETCH_TIMEOUT_S) as answer:
                    text = answer.read().decode()
            from joserfc.jwk import KeySet

            self._keys = KeySet.import_key_set(json.loads(text))
        except Exception as e:  # the keys known before stay in use
            log.warning("cannot load the JWKS from %s: %s", self.url, e)


class OAuthBearerValidator:
    """Checks tokens as the module doc says: signed (with ``jwks``) or unsecured."""

    def __init__(
        self,
        clock: Clock,
        *,
        jwks: JwksSource | None = None,
        audience: Iterable[str] = (),
        issuer: str | None = None,
        clock_skew_s: int = 30,
        subject_claim: str = "sub",
    ) -> None:
        self._clock = clock
        self.jwks = jwks
        self._audience = frozenset(audience)
        self._issuer = issuer
        self._skew_s = clock_skew_s
        self._subject_claim = subject_claim

    def validate(self, token: str) -> ValidToken:
        claims = self._signed_claims(token) if self.jwks is not None else _unsecured_claims(token)
        now_s = self._clock.time_ms() / 1000
        expires = claims.get("exp")
        if not isinstance(expires, int | float):
            raise InvalidToken("no exp claim")
        if expires + self._skew_s <= now_s:
            raise InvalidToken("the token has expired")
        for name in ("nbf", "iat"):
            value = claims.get(name)
            if isinstance(value, int | float) and value - self._skew_s > now_s:
                raise InvalidToken(f"the token's {name} is in the future")
        if self._issuer is not None and claims.get("iss") != self._issuer:
            raise InvalidToken(f"issuer {claims.get('iss')!r} is not {self._issuer!r}")
        if self._audience:
            audience = claims.get("aud")
            names = {audience} if isinstance(audience, str) else set(audience or ())
            if not names & self._audience:
                raise InvalidToken(f"audience {audience!r} is not one expected")
        subject = claims.get(self._subject_claim)
        if not isinstance(subject, str) or not subject.strip():
            raise InvalidToken(f"no {self._subject_claim} claim")
        return ValidToken(subject, int(expires * 1000))

    def _signed_claims(self, token: str) -> dict[str, Any]:
        assert self.jwks is not None
        keys = self.jwks.keys()
        if keys is None:
            raise InvalidToken(f"the keys of {self.jwks.url} are not loaded")
        from joserfc import jwt
        from joserfc.errors import InvalidKeyIdError, JoseError

        try:
            decoded = jwt.decode(token, keys, algorithms=list(_SIGNING_ALGORITHMS))
        except InvalidKeyIdError as e:
            self.jwks.unknown_key()  # the provider may have rotated its keys
            raise InvalidToken(f"no key for the token: {e}") from e
        except (JoseError, ValueError) as e:
            raise InvalidToken(f"the token's signature does not verify: {e}") from e
        return dict(decoded.claims)


def _unsecured_claims(token: str) -> dict[str, Any]:
    parts = token.split(".")
    if len(parts) != 3 or parts[2]:
        raise InvalidToken("an unsecured token is header.payload. (no signature)")
    try:
        header = json.loads(_b64(parts[0]))
        claims = json.loads(_b64(parts[1]))
    except ValueError as e:
        raise InvalidToken(f"the token is not base64url JSON: {e}") from e
    if not isinstance(header, dict) or header.get("alg") != "none":
        raise InvalidToken("an unsecured token's alg must be none")
    if not isinstance(claims, dict):
        raise InvalidToken("the token's payload is not a JSON object")
    return claims


def _b64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
