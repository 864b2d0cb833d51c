"""Delegation tokens (KIP-48): what a token is, its HMAC, and the rules for making, renewing,
expiring and showing one, as Kafka's ``DelegationTokenManager`` applies them.

A token is a token id (a random UUID as 22 URL-safe base64 characters), its owner (the
principal whose rights it carries), the principal that asked for it, the renewers (principals
besides the owner allowed to renew or expire it), and three times: issued, expires (moved by a
renewal), and the maximum (issue time plus the smaller of the requested maximum lifetime and
``delegation.token.max.lifetime.ms``), past which no renewal goes. Its HMAC, the password a
client logs in with, is HMAC-SHA512 of the token id keyed with ``delegation.token.secret.key``:
never stored, computed again by every broker with the same key.

A client logs in with SCRAM-SHA-256 or -512, user name the token id, password the HMAC in base64,
and the ``tokenauth=true`` extension; the connection's principal is then the token's owner. The
SCRAM credential is derived from that password as Kafka derives it (4096 iterations).

:class:`TokenState` is pure: every broker's copy of the tokens, with the clock injected; it
decides and returns what to store, the store persists it (``MetadataStore.put_delegation_token``)
and every broker's copy follows the store's change notifications. Its JSON form is Kafka's
``/delegation_token/tokens/<tokenId>`` znode. Thread: the broker's event loop.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
import urllib.parse
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace

from kio.schema.errors import ErrorCode

from odradek.clock import Clock
from odradek.config import BrokerConfig
from odradek.security.scram import (
    MECHANISM_TYPES,
    MIN_ITERATIONS,
    ScramCredential,
    TokenLogin,
    make_credential,
)

# Kafka's znode version: 3 added the token requester.
ZNODE_VERSION = 3


def sanitize(name: str) -> str:
    """Kafka's ``Sanitizer.sanitize``: URL-encoding, ``*`` and ``~`` escaped too."""
    return urllib.parse.quote(name, safe="-_.").replace("~", "%7E")


def desanitize(name: str) -> str:
    return urllib.parse.unquote(name)


@dataclass(frozen=True, slots=True)
class TokenInformation:
    """A token as stored (principals as ``"User:<name>"``; times in ms since the epoch)."""

    token_id: str
    owner: str
    requester: str
    renewers: tuple[str, ...]
    issue_ms: int
    max_ms: int
    expiry_ms: int

    def owner_or_renewer(self, principal: str) -> bool:
        return principal == self.owner or principal in self.renewers

    def expired(self, now_ms: int) -> bool:
        return self.max_ms < now_ms or self.expiry_ms < now_ms

    def to_json(self) -> bytes:
        """Kafka's znode JSON."""
        return json.dumps(
            {
                "version": ZNODE_VERSION,
                "owner": sanitize(self.owner),
                "tokenRequester": sanitize(self.requester),
                "renewers": [sanitize(r) for r in self.renewers],
                "issueTimestamp": self.issue_ms,
                "maxTimestamp": self.max_ms,
                "expiryTimestamp": self.expiry_ms,
                "tokenId": self.token_id,
            },
            separators=(",", ":"),
        ).encode()

    @classmethod
    def from_json(cls, data: bytes | str) -> TokenInformation:
        """Read Kafka's znode JSON (versions 1 to 3); ValueError if it is not one."""
        try:
            found = json.loads(data)
            version = int(found["version"])
            if not 0 < version <= ZNODE_VERSION:
                raise ValueError(f"unknown delegation token version {version}")
            owner = desanitize(str(found["owner"]))
            return cls(
                str(found["tokenId"]),
                owner,
                desanitize(str(found["tokenRequester"])) if version >= 3 else owner,
                tuple(desanitize(str(r)) for r in found["renewers"]),
                int(found["issueTimestamp"]),
                int(found["maxTimestamp"]),
                int(found["expiryTimestamp"]),
            )
        except (KeyError, TypeError, json.JSONDecodeError) as e:
            raise ValueError(f"not a delegation token: {e!r}") from e


def token_hmac(secret_key: str, token_id: str) -> bytes:
    return hmac.new(secret_key.encode(), token_id.encode(), hashlib.sha512).digest()


def new_token_id() -> str:
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


@dataclass(frozen=True, slots=True)
class TokenSettings:
    """The broker's ``delegation.token.*`` settings. ``secret_key`` None: tokens are disabled."""

    secret_key: str | None
    max_lifetime_ms: int = 7 * 24 * 3600 * 1000
    expiry_time_ms: int = 24 * 3600 * 1000
    expiry_check_interval_ms: int = 3600 * 1000

    @classmethod
    def from_config(cls, config: BrokerConfig) -> TokenSettings:
        key = config.raw("delegation.token.secret.key") or config.raw("delegation.token.master.key")
        return cls(
            key or None,
            config.get_int("delegation.token.max.lifetime.ms"),
            config.get_int("delegation.token.expiry.time.ms"),
            config.get_int("delegation.token.expiry.check.interval.ms"),
        )

    @property
    def enabled(self) -> bool:
        return self.secret_key is not None


@dataclass(frozen=True, slots=True)
class TokenChange:
    """What a renewal or expiry decided: the error (``none`` when it succeeded), the expiry time
    to answer (-1 on an error), and what to store: a token to write, or a token id to remove."""

    error: ErrorCode
    expiry_ms: int = -1
    write: TokenInformation | None = None
    remove: str | None = None


@dataclass
class TokenState:
    """Every token this broker knows, and Kafka's rules over them (see the module doc)."""

    settings: TokenSettings
    clock: Clock
    _tokens: dict[str, TokenInformation] = field(default_factory=dict)
    # HMAC (raw bytes) -> token id, to find the token a Renew or Expire names.
    _by_hmac: dict[bytes, str] = field(default_factory=dict)
    # 4096 PBKDF2 rounds per mechanism (~10 ms): derived off the loop by the broker as tokens
    # arrive (:meth:`underived`, :meth:`add_credential`), else at the first login.
    _credentials: dict[tuple[str, str], ScramCredential] = field(default_factory=dict)

    @property
    def tokens(self) -> Mapping[str, TokenInformation]:
        return self._tokens

    def hmac_of(self, token_id: str) -> bytes:
        assert self.settings.secret_key is not None
        return token_hmac(self.settings.secret_key, token_id)

    # -- the copy of the store ------------------------------------------------------------------

    def replace_all(self, tokens: Iterable[TokenInformation]) -> None:
        fresh = {t.token_id: t for t in tokens}
        for token_id in set(self._tokens) - set(fresh):
            self.forget(token_id)
        for token in fresh.values():
            self.learn(token)

    def learn(self, token: TokenInformation) -> None:
        if self.settings.secret_key is None:
            return
        if token.token_id not in self._tokens:
            self._by_hmac[self.hmac_of(token.token_id)] = token.token_id
        self._tokens[token.token_id] = token

    def forget(self, token_id: str) -> None:
        if self._tokens.pop(token_id, None) is not None and self.settings.secret_key is not None:
            self._by_hmac.pop(self.hmac_of(token_id), None)
        for mechanism in MECHANISM_TYPES:
            self._credentials.pop((token_id, mechanism), None)

    # -- Kafka's rules ---------------------------------------------------------------------------

    def create(
        self, owner: str, requester: str, renewers: Iterable[str], max_lifetime_ms: int
    ) -> TokenInformation:
        """A new token, to be stored (the settings must enable tokens)."""
        now = self.clock.time_ms()
        limit = self.settings.max_lifetime_ms
        lifetime = limit if max_lifetime_ms <= 0 else min(max_lifetime_ms, limit)
        max_ms = now + lifetime
        expiry = min(max_ms, now + self.settings.expiry_time_ms)
        return TokenInformation(
            new_token_id(), owner, requester, tuple(renewers), now, max_ms, expiry
        )

    def renew(self, principal: str, token_hmac_bytes: bytes, period_ms: int) -> TokenChange:
        token = self._find(token_hmac_bytes)
        now = self.clock.time_ms()
        if token is None:
            return TokenChange(ErrorCode.delegation_token_not_found)
        if not token.owner_or_renewer(principal):
            return TokenChange(ErrorCode.delegation_token_owner_mismatch)
        if token.expired(now):
            return TokenChange(ErrorCode.delegation_token_expired)
        period = self.settings.expiry_time_ms if period_ms < 0 else period_ms
        expiry = min(token.max_ms, now + period)
        return TokenChange(ErrorCode.none, expiry, write=replace(token, expiry_ms=expiry))

    def expire(self, principal: str, token_hmac_bytes: bytes, period_ms: int) -> TokenChange:
        token = self._find(token_hmac_bytes)
        now = self.clock.time_ms()
        if token is None:
            return TokenChange(ErrorCode.delegation_token_not_found)
        if not token.owner_or_renewer(principal):
            return TokenChange(ErrorCode.delegation_token_owner_mismatch)
        if period_ms < 0:  # at once: the token goes
            return TokenChange(ErrorCode.none, now, remove=token.token_id)
        if token.expired(now):
            return TokenChange(ErrorCode.delegation_token_expired)
        expiry = min(token.max_ms, now + period_ms)
        return TokenChange(ErrorCode.none, expiry, write=replace(token, expiry_ms=expiry))

    def expired_tokens(self) -> list[str]:
        """The ids of the tokens past their expiry or maximum time (to be removed)."""
        now = self.clock.time_ms()
        return sorted(t.token_id for t in self._tokens.values() if t.expired(now))

    def _find(self, token_hmac_bytes: bytes) -> TokenInformation | None:
        token_id = self._by_hmac.get(bytes(token_hmac_bytes))
        return None if token_id is None else self._tokens.get(token_id)

    def password_of(self, token_id: str) -> str:
        """What a client logs in with: the HMAC in base64."""
        return base64.b64encode(self.hmac_of(token_id)).decode()

    def underived(self) -> list[tuple[str, str]]:
        """The (token id, mechanism) pairs whose SCRAM credential is not derived yet."""
        return [
            (token_id, mechanism)
            for token_id in self._tokens
            for mechanism in MECHANISM_TYPES
            if (token_id, mechanism) not in self._credentials
        ]

    def add_credential(self, token_id: str, mechanism: str, credential: ScramCredential) -> None:
        if token_id in self._tokens:  # not forgotten while it was derived
            self._credentials.setdefault((token_id, mechanism), credential)

    def login(self, token_id: str, mechanism: str) -> TokenLogin | None:
        """The SCRAM credential of a token that has not expired; None otherwise (an expired
        token is refused at once, not only once the expiry check removes it)."""
        token = self._tokens.get(token_id)
        if token is None or token.expired(self.clock.time_ms()):
            return None
        key = (token_id, mechanism)
        credential = self._credentials.get(key)
        if credential is None:
            credential = derive_credential(mechanism, self.password_of(token_id))
            self._credentials[key] = credential
        return TokenLogin(credential, token.owner, token.expiry_ms)


def derive_credential(mechanism: str, password: str) -> ScramCredential:
    """A token's SCRAM credential, as Kafka derives it (its mechanism's minimum iterations)."""
    return make_credential(mechanism, password, MIN_ITERATIONS, secrets.token_bytes(32))


def visible(
    token: TokenInformation,
    requester: str,
    owners: Iterable[str] | None,
    may_describe_token: Callable[[str], bool],
    may_describe_owner: Callable[[str], bool],
) -> bool:
    """Kafka's DescribeDelegationToken filter: a token of one of ``owners`` (None: any; an owner
    named matches the token's owner or a renewer), shown to its owner and renewers, and to
    others allowed DESCRIBE on the token or DESCRIBE_TOKENS on its owner (the two callables,
    asked only when needed)."""
    if owners is not None and not any(token.owner_or_renewer(o) for o in owners):
        return False
    if token.owner_or_renewer(requester):
        return True
    return may_describe_token(token.token_id) or may_describe_owner(token.owner)


def split_principal(principal: str) -> tuple[str, str]:
    """``"User:alice"`` as the protocol carries it: (``"User"``, ``"alice"``)."""
    kind, _, name = principal.partition(":")
    return kind, name
