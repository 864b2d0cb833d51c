"""Delegation tokens' rules, on a manual clock: lifetimes and their caps, who may renew and
expire, expired and unknown tokens, Kafka's znode format, and a SCRAM login with a token."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json

import pytest

from odradek.client.security import ScramClient
from odradek.clock import ManualClock
from odradek.config import BrokerConfig
from odradek.protocol.errors import ErrorCode
from odradek.security.delegation_tokens import (
    TokenInformation,
    TokenSettings,
    TokenState,
    token_hmac,
    visible,
)
from odradek.security.sasl import SaslFailure, SaslSession, SaslSettings
from odradek.security.scram import SCRAM_SHA_256, SCRAM_SHA_512

HOUR = 3_600_000
DAY = 24 * HOUR
SECRET = "broker-secret"
ALICE, BOB, EVE = "User:alice", "User:bob", "User:eve"


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def state(clock: ManualClock) -> TokenState:
    return TokenState(TokenSettings(SECRET, max_lifetime_ms=7 * DAY, expiry_time_ms=DAY), clock)


def made(state: TokenState, *renewers: str, max_lifetime_ms: int = -1) -> TokenInformation:
    token = state.create(ALICE, ALICE, renewers, max_lifetime_ms)
    state.learn(token)
    return token


def test_settings_from_config_with_either_key_name() -> None:
    assert not TokenSettings.from_config(BrokerConfig({})).enabled
    old = TokenSettings.from_config(BrokerConfig({"delegation.token.master.key": "k"}))
    assert old.secret_key == "k"
    both = BrokerConfig(
        {"delegation.token.master.key": "old", "delegation.token.secret.key": "new"}
    )
    settings = TokenSettings.from_config(both)
    assert settings.secret_key == "new"
    assert (settings.max_lifetime_ms, settings.expiry_time_ms) == (7 * DAY, DAY)
    assert settings.expiry_check_interval_ms == HOUR


def test_a_token_expires_after_the_expiry_time_within_its_capped_lifetime(
    state: TokenState, clock: ManualClock
) -> None:
    now = clock.time_ms()
    token = made(state)
    assert (token.issue_ms, token.expiry_ms, token.max_ms) == (now, now + DAY, now + 7 * DAY)
    assert len(token.token_id) == 22
    capped = made(state, max_lifetime_ms=30 * DAY)
    assert capped.max_ms == now + 7 * DAY
    short = made(state, max_lifetime_ms=HOUR)
    assert (short.expiry_ms, short.max_ms) == (now + HOUR, now + HOUR)


def test_hmac_is_hmac_sha512_of_the_token_id(state: TokenState) -> None:
    token = made(state)
    expected = hmac.new(SECRET.encode(), token.token_id.encode(), hashlib.sha512).digest()
    assert state.hmac_of(token.token_id) == token_hmac(SECRET, token.token_id) == expected


def test_owner_and_renewers_renew_others_do_not(state: TokenState, clock: ManualClock) -> None:
    token = made(state, BOB)
    mac = state.hmac_of(token.token_id)
    clock.advance(HOUR)
    now = clock.time_ms()
    assert state.renew(EVE, mac, -1).error == ErrorCode.delegation_token_owner_mismatch
    change = state.renew(BOB, mac, -1)  # negative: the default expiry time
    assert (change.error, change.expiry_ms) == (ErrorCode.none, now + DAY)
    assert change.write is not None and change.write.expiry_ms == now + DAY
    # Never past the maximum.
    assert state.renew(ALICE, mac, 30 * DAY).expiry_ms == token.max_ms
    assert state.renew(ALICE, b"not a token", 1).error == ErrorCode.delegation_token_not_found


def test_an_expired_token_is_neither_renewed_nor_expired_later(
    state: TokenState, clock: ManualClock
) -> None:
    token = made(state)
    mac = state.hmac_of(token.token_id)
    clock.advance(DAY + 1)
    assert state.renew(ALICE, mac, HOUR).error == ErrorCode.delegation_token_expired
    assert state.expire(ALICE, mac, HOUR).error == ErrorCode.delegation_token_expired
    assert state.expired_tokens() == [token.token_id]
    # Expiring at once still works: it removes the token.
    change = state.expire(ALICE, mac, -1)
    assert (change.error, change.remove) == (ErrorCode.none, token.token_id)


def test_expire_moves_the_expiry_or_removes_the_token(
    state: TokenState, clock: ManualClock
) -> None:
    token = made(state, BOB)
    mac = state.hmac_of(token.token_id)
    now = clock.time_ms()
    assert state.expire(EVE, mac, -1).error == ErrorCode.delegation_token_owner_mismatch
    later = state.expire(BOB, mac, HOUR)
    assert (later.error, later.expiry_ms, later.remove) == (ErrorCode.none, now + HOUR, None)
    assert later.write is not None
    state.learn(later.write)
    clock.advance(HOUR + 1)
    assert state.expired_tokens() == [token.token_id]
    state.forget(token.token_id)
    assert state.expire(ALICE, mac, -1).error == ErrorCode.delegation_token_not_found


def test_the_znode_json_is_kafkas() -> None:
    token = TokenInformation("abc", "User:al ice", "User:admin", ("User:bob",), 1, 3, 2)
    data = json.loads(token.to_json())
    assert data == {
        "version": 3,
        "owner": "User%3Aal%20ice",
        "tokenRequester": "User%3Aadmin",
        "renewers": ["User%3Abob"],
        "issueTimestamp": 1,
        "maxTimestamp": 3,
        "expiryTimestamp": 2,
        "tokenId": "abc",
    }
    assert TokenInformation.from_json(token.to_json()) == token
    # Version 2 had no requester: the owner asked.
    del data["tokenRequester"]
    data["version"] = 2
    assert TokenInformation.from_json(json.dumps(data)).requester == "User:al ice"
    with pytest.raises(ValueError):
        TokenInformation.from_json(b'{"version": 9}')


def test_describe_shows_owners_renewers_and_those_allowed(state: TokenState) -> None:
    token = made(state, BOB)

    def never(_: str) -> bool:
        return False

    def always(_: str) -> bool:
        return True

    assert visible(token, ALICE, None, never, never)
    assert visible(token, BOB, None, never, never)
    assert not visible(token, EVE, None, never, never)
    assert visible(token, EVE, None, always, never)
    assert visible(token, EVE, None, never, always)
    assert visible(token, ALICE, [BOB], never, never)  # a renewer named matches
    assert not visible(token, ALICE, [EVE], always, always)


def _login(
    state: TokenState, token_id: str, password: str, mechanism: str = SCRAM_SHA_512
) -> SaslSession:
    settings = SaslSettings(
        (SCRAM_SHA_256, SCRAM_SHA_512),
        {},
        lambda user, mechanism: None,
        reauth_ms=10 * DAY,
        clock=state.clock,
        token_lookup=state.login,
    )
    session = SaslSession(settings)
    assert session.handshake(mechanism)
    client = ScramClient(mechanism, token_id, password, token=True)
    answer, done = session.authenticate(client.first(), 0)
    assert not done
    final = client.step(answer)
    assert final is not None
    answer, done = session.authenticate(final, 0)
    assert done
    assert client.step(answer) is None
    return session


@pytest.mark.parametrize("mechanism", [SCRAM_SHA_256, SCRAM_SHA_512])
def test_a_scram_login_with_a_token_is_its_owner_until_it_expires(
    state: TokenState, clock: ManualClock, mechanism: str
) -> None:
    token = made(state)
    password = base64.b64encode(state.hmac_of(token.token_id)).decode()
    session = _login(state, token.token_id, password, mechanism)
    assert session.principal == ALICE
    assert session.token_authenticated
    # KIP-368: the session ends with the token, before connections.max.reauth.ms.
    assert session.expires_at_ms == DAY
    with pytest.raises(SaslFailure):
        _login(state, token.token_id, "d3Jvbmc=", mechanism)
    clock.advance(DAY + 1)
    with pytest.raises(SaslFailure):
        _login(state, token.token_id, password, mechanism)


def test_a_token_id_is_no_user_without_tokenauth(state: TokenState) -> None:
    token = made(state)
    password = base64.b64encode(state.hmac_of(token.token_id)).decode()
    settings = SaslSettings(
        (SCRAM_SHA_512,), {}, lambda user, mechanism: None, token_lookup=state.login
    )
    session = SaslSession(settings)
    session.handshake(SCRAM_SHA_512)
    with pytest.raises(SaslFailure):
        session.authenticate(ScramClient(SCRAM_SHA_512, token.token_id, password).first(), 0)
