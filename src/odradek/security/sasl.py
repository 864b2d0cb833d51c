"""SASL authentication of a connection (KIP-152: SaslHandshake, then SaslAuthenticate rounds),
with the PLAIN, SCRAM-SHA-256/512 and OAUTHBEARER mechanisms (the last in
:mod:`odradek.security.oauthbearer`).

:class:`SaslSettings` is one listener's SASL configuration, read once at start:
``sasl.enabled.mechanisms`` (or ``listener.name.<l>.sasl.enabled.mechanisms``), PLAIN users
from a JAAS ``PlainLoginModule`` entry's ``user_<name>="<password>"`` options (the listener's
``listener.name.<l>.plain.sasl.jaas.config``, else ``sasl.jaas.config``), SCRAM credentials
looked up in the metadata store at each authentication (so a credential added with
AlterUserScramCredentials applies to the next login, on every broker).

:class:`SaslSession` is one connection's state: which mechanism the handshake chose, the
mechanism's exchange in progress, and once it succeeds the principal (``User:<name>``) and, with
``connections.max.reauth.ms`` (KIP-368), when the session expires. Pure: no I/O; the connection
and the two handlers drive it on the event loop.
"""

from __future__ import annotations

import hmac
from collections.abc import Mapping
from dataclasses import dataclass, field

from odradek.clock import Clock, SystemClock
from odradek.config import BrokerConfig, ConfigError
from odradek.security import jaas
from odradek.security.oauthbearer import (
    ERROR_CHALLENGE,
    OAUTHBEARER,
    InvalidToken,
    JwksSource,
    OAuthBearerValidator,
    token_of,
)
from odradek.security.scram import (
    MECHANISM_TYPES,
    CredentialLookup,
    ScramError,
    ScramServer,
    TokenLookup,
)

PLAIN = "PLAIN"
SUPPORTED_MECHANISMS = (PLAIN, *MECHANISM_TYPES, OAUTHBEARER)


class SaslFailure(Exception):
    """Authentication failed (wrong password, unknown user, malformed message)."""


def parse_jaas(text: str) -> tuple[str, dict[str, str]]:
    """:func:`odradek.security.jaas.parse_jaas`, its error a broker configuration error."""
    try:
        return jaas.parse_jaas(text)
    except jaas.JaasError as e:
        raise ConfigError(str(e)) from None


@dataclass(frozen=True, slots=True)
class SaslSettings:
    """A SASL listener's configuration (see the module doc)."""

    mechanisms: tuple[str, ...]
    plain_users: Mapping[str, str]
    scram_lookup: CredentialLookup
    reauth_ms: int = 0
    oauth: OAuthBearerValidator | None = None
    clock: Clock = field(default_factory=SystemClock)
    # Delegation tokens' SCRAM logins (``tokenauth=true``); None: refused.
    token_lookup: TokenLookup | None = None

    @classmethod
    def from_config(
        cls,
        config: BrokerConfig,
        listener: str,
        scram_lookup: CredentialLookup,
        clock: Clock | None = None,
        token_lookup: TokenLookup | None = None,
    ) -> SaslSettings:
        raw = config.listener_setting(listener, "sasl.enabled.mechanisms") or ""
        mechanisms = tuple(m.strip().upper() for m in raw.split(",") if m.strip())
        usable = tuple(m for m in mechanisms if m in SUPPORTED_MECHANISMS)
        if not usable:
            raise ConfigError(
                f"SASL listener {listener} enables no supported mechanism "
                f"(sasl.enabled.mechanisms={raw!r}; supported: {', '.join(SUPPORTED_MECHANISMS)})"
            )
        plain_users: dict[str, str] = {}
        if PLAIN in usable:
            jaas = config.props.get(
                f"listener.name.{listener.lower()}.plain.sasl.jaas.config"
            ) or config.listener_setting(listener, "sasl.jaas.config")
            if jaas:
                _, options = parse_jaas(jaas)
                plain_users = {
                    name.removeprefix("user_"): password
                    for name, password in options.items()
                    if name.startswith("user_")
                }
        reauth = config.listener_setting(listener, "connections.max.reauth.ms") or "0"
        clock = clock or SystemClock()
        oauth = _oauth_validator(config, listener, clock) if OAUTHBEARER in usable else None
        return cls(usable, plain_users, scram_lookup, int(reauth), oauth, clock, token_lookup)


def _oauth_validator(config: BrokerConfig, listener: str, clock: Clock) -> OAuthBearerValidator:
    def setting(name: str) -> str | None:
        return config.listener_setting(listener, f"sasl.oauthbearer.{name}")

    url = setting("jwks.endpoint.url")
    jwks = None
    if url:
        try:
            jwks = JwksSource(url, int(setting("jwks.endpoint.refresh.ms") or "3600000"))
        except ValueError as e:
            raise ConfigError(f"sasl.oauthbearer.jwks.endpoint.url: {e}") from None
        jwks.start()
    audience = [a.strip() for a in (setting("expected.audience") or "").split(",") if a.strip()]
    return OAuthBearerValidator(
        clock,
        jwks=jwks,
        audience=audience,
        issuer=setting("expected.issuer") or None,
        clock_skew_s=int(setting("clock.skew.seconds") or "30"),
        subject_claim=setting("sub.claim.name") or "sub",
    )


def _plain(message: bytes, users: Mapping[str, str]) -> str:
    """RFC 4616: ``[authzid] NUL authcid NUL passwd``; returns the user name."""
    parts = message.split(b"\0")
    if len(parts) != 3:
        raise SaslFailure("malformed PLAIN message")
    try:
        authzid, user, password = (p.decode() for p in parts)
    except UnicodeDecodeError as e:
        raise SaslFailure("PLAIN message is not UTF-8") from e
    if not user or not password:
        raise SaslFailure("PLAIN message without user name or password")
    if authzid and authzid != user:
        raise SaslFailure("authorization id differs from the user name")
    expected = users.get(user)
    # compare_digest against a stand-in keeps an unknown user from answering faster.
    if not hmac.compare_digest((expected or "\0" + password).encode(), password.encode()):
        raise SaslFailure("Invalid username or password")
    return user


@dataclass(slots=True)
class SaslSession:
    """One connection's SASL state (see the module doc)."""

    settings: SaslSettings
    mechanism: str | None = None
    principal: str | None = None
    # Monotonic ms past which the session must re-authenticate before another request; None:
    # never (connections.max.reauth.ms=0).
    expires_at_ms: int | None = None
    # Set when authentication failed: the connection closes, after the configured delay.
    failure: str | None = None
    # After a SaslHandshake v0 the SASL tokens come as bare size-prefixed frames, not
    # SaslAuthenticate requests (Kafka before 1.0).
    legacy_tokens: bool = False
    # Whether the connection logged in with a delegation token (KIP-48): such a connection may
    # not create, renew, expire or describe tokens.
    token_authenticated: bool = False
    _scram: ScramServer | None = field(default=None, repr=False)
    # OAUTHBEARER: why the token was refused, told once the client has read the error challenge.
    _oauth_error: str | None = field(default=None, repr=False)

    @property
    def authenticated(self) -> bool:
        return self.principal is not None

    def handshake(self, mechanism: str) -> bool:
        """Choose ``mechanism`` (a new exchange; also how KIP-368 re-authentication starts);
        False if the listener does not enable it."""
        if mechanism not in self.settings.mechanisms:
            return False
        self.mechanism = mechanism
        self._scram = None
        self._oauth_error = None
        self.legacy_tokens = False
        return True

    def authenticate(self, auth_bytes: bytes, now_ms: int) -> tuple[bytes, bool]:
        """One SaslAuthenticate round: the bytes to answer and whether the exchange is complete.
        Raises :class:`SaslFailure` (and records it in ``failure``)."""
        mechanism = self.mechanism
        if mechanism is None:
            raise SaslFailure("SaslAuthenticate before SaslHandshake")
        try:
            if mechanism == PLAIN:
                user = _plain(auth_bytes, self.settings.plain_users)
                self._succeed(user, now_ms)
                return b"", True
            if mechanism == OAUTHBEARER:
                return self._oauthbearer(auth_bytes, now_ms)
            if self._scram is None:
                self._scram = ScramServer(
                    mechanism, self.settings.scram_lookup, token_lookup=self.settings.token_lookup
                )
            scram = self._scram
            answer = scram.step(auth_bytes)
            if scram.complete:
                assert scram.username is not None
                token = scram.token
                if token is None:
                    self._succeed(scram.username, now_ms)
                    self.token_authenticated = False
                    return answer, True
                # The connection is the token's owner, for as long as the token lasts.
                self._succeed_as(token.owner, now_ms)
                self.token_authenticated = True
                if self.expires_at_ms is not None:
                    remaining = token.expiry_ms - self.settings.clock.time_ms()
                    self.expires_at_ms = min(self.expires_at_ms, now_ms + max(remaining, 0))
                return answer, True
            return answer, False
        except (SaslFailure, ScramError) as e:
            self.failure = (
                "Authentication failed during authentication due to invalid credentials with "
                f"SASL mechanism {mechanism}: {e}"
            )
            raise SaslFailure(self.failure) from e

    def _oauthbearer(self, auth_bytes: bytes, now_ms: int) -> tuple[bytes, bool]:
        if self._oauth_error is not None:
            # The client's answer to the error challenge (RFC 7628 wants a lone \x01).
            raise SaslFailure(self._oauth_error)
        validator = self.settings.oauth
        assert validator is not None
        try:
            token = validator.validate(token_of(auth_bytes))
        except InvalidToken as e:
            self._oauth_error = str(e)
            return ERROR_CHALLENGE, False
        self._succeed(token.subject, now_ms)
        # KIP-368: a session ends with its token, when sessions are bounded at all.
        if self.expires_at_ms is not None:
            remaining = token.expires_ms - self.settings.clock.time_ms()
            self.expires_at_ms = min(self.expires_at_ms, now_ms + max(remaining, 0))
        return b"", True

    def _succeed(self, user: str, now_ms: int) -> None:
        self._succeed_as(f"User:{user}", now_ms)

    def _succeed_as(self, principal: str, now_ms: int) -> None:
        if self.principal is not None and self.principal != principal:
            # KIP-368: re-authentication may not change who the connection is.
            raise SaslFailure(f"re-authentication as {principal}, not {self.principal}")
        self.principal = principal
        self.mechanism = None
        self._scram = None
        reauth = self.settings.reauth_ms
        self.expires_at_ms = now_ms + reauth if reauth > 0 else None

    def expired(self, now_ms: int) -> bool:
        return self.expires_at_ms is not None and now_ms >= self.expires_at_ms
