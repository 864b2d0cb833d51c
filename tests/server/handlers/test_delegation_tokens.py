"""Create/Renew/Expire/DescribeDelegationToken called directly: Kafka's refusals (no
authentication, a token's own login, tokens disabled, a non-user renewer, another owner without
CREATE_TOKENS), owners and renewers, lifetimes on a manual clock, and Describe's filter."""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
from collections.abc import Iterator
from typing import Any

import pytest

from odradek.clock import ManualClock
from odradek.protocol.errors import ErrorCode
from odradek.security.acl import (
    AccessControlEntry,
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from odradek.security.delegation_tokens import TokenSettings, token_hmac
from odradek.security.sasl import SaslSession, SaslSettings
from odradek.server.authorizer import Authorizer
from odradek.server.delegation_tokens import DelegationTokens
from odradek.server.registry import HANDLERS
from odradek.server.services import BrokerServices, Session

from .conftest import HandlerCaller

CREATE, RENEW, EXPIRE, DESCRIBE = 38, 39, 40, 41
SECRET = "secret"
HOUR = 3_600_000
DAY = 24 * HOUR
PEER = "10.0.0.2:4000"
ALICE = Session(PEER, principal="User:alice")
BOB = Session(PEER, principal="User:bob")
EVE = Session(PEER, principal="User:eve")
ANONYMOUS = Session(PEER)


def _token_session() -> Session:
    settings = SaslSettings(("SCRAM-SHA-512",), {}, lambda user, mechanism: None)
    sasl = SaslSession(settings, principal="User:alice", token_authenticated=True)
    return Session(PEER, principal="User:alice", sasl=sasl)


@pytest.fixture
def secured(services: BrokerServices, clock: ManualClock) -> BrokerServices:
    store = services.topics.store
    return dataclasses.replace(
        services,
        authorizer=Authorizer(store, frozenset({"User:admin"})),
        tokens=DelegationTokens(TokenSettings(SECRET, 7 * DAY, DAY), clock, store),
    )


@pytest.fixture
def callers(secured: BrokerServices) -> Iterator[dict[str, HandlerCaller]]:
    alice = HandlerCaller(secured, ALICE)
    found = {
        "alice": alice,
        "bob": alice.with_session(BOB),
        "eve": alice.with_session(EVE),
        "anonymous": alice.with_session(ANONYMOUS),
        "token": alice.with_session(_token_session()),
    }
    yield found
    alice.close()


def grant(services: BrokerServices, rtype: ResourceType, name: str, op: AclOperation) -> None:
    assert services.authorizer is not None
    entry = AccessControlEntry("User:eve", "*", op, AclPermissionType.ALLOW)
    binding = AclBinding(ResourcePattern(rtype, name, PatternType.LITERAL), entry)
    asyncio.run(services.authorizer.create([binding]))


def ms(value: datetime.datetime) -> int:
    return int(value.timestamp() * 1000)


def create(caller: HandlerCaller, **fields: Any) -> Any:
    values: dict[str, Any] = {
        "owner_principal_type": None,
        "owner_principal_name": None,
        "renewers": [],
        "max_lifetime": -1,
        **fields,
    }
    return caller.answer(CREATE, 3, **values)


def describe(caller: HandlerCaller, owners: list[str] | None = None) -> list[str]:
    listed = (
        None
        if owners is None
        else [{"principal_type": "User", "principal_name": o} for o in owners]
    )
    response = caller.call(DESCRIBE, 3, owners=listed)
    assert response.error_code == ErrorCode.none
    return [t.token_id for t in response.tokens]


def test_only_authenticated_connections_not_logged_in_with_a_token_ask(
    callers: dict[str, HandlerCaller],
) -> None:
    not_allowed = ErrorCode.delegation_token_request_not_allowed
    for who in ("anonymous", "token"):
        caller = callers[who]
        assert create(caller).error_code == not_allowed
        assert caller.answer(RENEW, 2, hmac=b"x", renew_period=-1).error_code == not_allowed
        assert caller.answer(EXPIRE, 2, hmac=b"x", expiry_time_period=-1).error_code == not_allowed
        assert caller.answer(DESCRIBE, 3, owners=None).error_code == not_allowed


def test_without_a_secret_key_tokens_are_disabled(services: BrokerServices) -> None:
    caller = HandlerCaller(services, ALICE)
    disabled = ErrorCode.delegation_token_auth_disabled
    try:
        assert create(caller).error_code == disabled
        assert caller.answer(RENEW, 1, hmac=b"x", renew_period=-1).error_code == disabled
        assert caller.answer(EXPIRE, 1, hmac=b"x", expiry_time_period=-1).error_code == disabled
        assert caller.answer(DESCRIBE, 1, owners=None).error_code == disabled
    finally:
        caller.close()


def test_create_renew_expire_by_owner_and_renewer(
    callers: dict[str, HandlerCaller], clock: ManualClock
) -> None:
    alice, bob, eve = callers["alice"], callers["bob"], callers["eve"]
    now = clock.time_ms()
    made = alice.call(  # decoded as a client reads it
        CREATE,
        3,
        owner_principal_type=None,
        owner_principal_name=None,
        renewers=[{"principal_type": "User", "principal_name": "bob"}],
        max_lifetime=30 * DAY,
    )
    assert made.error_code == ErrorCode.none
    assert (made.principal_type, made.principal_name) == ("User", "alice")
    assert made.token_requester_principal_name == "alice"
    assert made.hmac == token_hmac(SECRET, made.token_id)
    assert ms(made.issue_timestamp) == now
    assert ms(made.expiry_timestamp) == now + DAY
    assert ms(made.max_timestamp) == now + 7 * DAY  # capped by the broker's maximum
    mac = made.hmac

    clock.advance(HOUR)
    renewed = bob.call(RENEW, 2, hmac=mac, renew_period=2 * DAY)
    assert renewed.error_code == ErrorCode.none
    assert ms(renewed.expiry_timestamp) == clock.time_ms() + 2 * DAY
    refused = eve.answer(RENEW, 2, hmac=mac, renew_period=-1)
    assert refused.error_code == ErrorCode.delegation_token_owner_mismatch
    assert eve.answer(EXPIRE, 2, hmac=mac, expiry_time_period=-1).error_code == (
        ErrorCode.delegation_token_owner_mismatch
    )
    unknown = alice.answer(RENEW, 2, hmac=b"nothing", renew_period=-1)
    assert unknown.error_code == ErrorCode.delegation_token_not_found

    soon = alice.call(EXPIRE, 2, hmac=mac, expiry_time_period=HOUR)
    assert ms(soon.expiry_timestamp) == clock.time_ms() + HOUR
    clock.advance(HOUR + 1)
    late = alice.answer(RENEW, 2, hmac=mac, renew_period=-1)
    assert late.error_code == ErrorCode.delegation_token_expired
    assert describe(alice) == [made.token_id]  # until the expiry check removes it

    gone = alice.call(EXPIRE, 2, hmac=mac, expiry_time_period=-1)
    assert (gone.error_code, ms(gone.expiry_timestamp)) == (ErrorCode.none, clock.time_ms())
    assert describe(alice) == []
    again = alice.answer(EXPIRE, 2, hmac=mac, expiry_time_period=-1)
    assert again.error_code == ErrorCode.delegation_token_not_found


def test_expired_tokens_are_removed_by_the_expiry_check(
    callers: dict[str, HandlerCaller], secured: BrokerServices, clock: ManualClock
) -> None:
    alice = callers["alice"]
    kept = create(alice, max_lifetime=3 * DAY).token_id
    short = create(alice, max_lifetime=HOUR).token_id
    clock.advance(HOUR + 1)
    assert secured.tokens is not None
    asyncio.run(secured.tokens.remove_expired())
    assert describe(alice) == [kept]
    stored = asyncio.run(secured.topics.store.delegation_tokens())
    assert [t.token_id for t in stored] == [kept]
    assert short not in describe(alice)


def test_a_token_for_another_owner_needs_create_tokens_on_that_user(
    callers: dict[str, HandlerCaller], secured: BrokerServices
) -> None:
    eve = callers["eve"]
    on_behalf = {"owner_principal_type": "User", "owner_principal_name": "alice"}
    refused = create(eve, **on_behalf)
    assert refused.error_code == ErrorCode.delegation_token_authorization_failed
    assert (refused.principal_name, refused.token_requester_principal_name) == ("alice", "eve")
    grant(secured, ResourceType.USER, "User:alice", AclOperation.CREATE_TOKENS)
    made = create(eve, **on_behalf)
    assert made.error_code == ErrorCode.none
    assert (made.principal_name, made.token_requester_principal_name) == ("alice", "eve")
    # The owner renews it; the requester, not a renewer, may not.
    alice = callers["alice"]
    assert alice.call(RENEW, 2, hmac=made.hmac, renew_period=-1).error_code == ErrorCode.none
    assert eve.answer(RENEW, 2, hmac=made.hmac, renew_period=-1).error_code == (
        ErrorCode.delegation_token_owner_mismatch
    )


def test_renewers_must_be_users(callers: dict[str, HandlerCaller]) -> None:
    made = create(callers["alice"], renewers=[{"principal_type": "Group", "principal_name": "g"}])
    assert made.error_code == ErrorCode.invalid_principal_type


def test_describe_shows_own_tokens_and_those_acls_allow(
    callers: dict[str, HandlerCaller], secured: BrokerServices
) -> None:
    alice, bob, eve = callers["alice"], callers["bob"], callers["eve"]
    renewers = [{"principal_type": "User", "principal_name": "bob"}]
    first = create(alice, renewers=renewers).token_id
    second = create(alice).token_id
    assert describe(alice) == [first, second]
    assert describe(bob) == [first]
    assert describe(alice, owners=["bob"]) == [first]  # a renewer named matches
    assert describe(alice, owners=[]) == []
    assert describe(eve) == []
    grant(secured, ResourceType.DELEGATION_TOKEN, second, AclOperation.DESCRIBE)
    assert describe(eve) == [second]
    grant(secured, ResourceType.USER, "User:alice", AclOperation.DESCRIBE_TOKENS)
    assert describe(eve) == [first, second]
    shown = eve.call(DESCRIBE, 3, owners=None).tokens[0]
    assert (shown.principal_name, shown.token_requester_principal_name) == ("alice", "alice")
    assert [(r.principal_type, r.principal_name) for r in shown.renewers] == [("User", "bob")]
    assert shown.hmac == token_hmac(SECRET, first)


@pytest.mark.parametrize("end", ["min", "max"])
def test_each_api_answers_at_both_ends_of_its_range(
    callers: dict[str, HandlerCaller], end: str
) -> None:
    """Decoded by kio at the version asked, every byte used (as tests/server/
    test_protocol_versions.py does for the other APIs)."""
    alice = callers["alice"]

    def version(api_key: int) -> int:
        handler = HANDLERS[api_key]
        return handler.min_version if end == "min" else handler.max_version

    made = alice.call(
        CREATE,
        version(CREATE),
        owner_principal_type=None,
        owner_principal_name=None,
        renewers=[{"principal_type": "User", "principal_name": "bob"}],
        max_lifetime=-1,
    )
    assert made.error_code == ErrorCode.none
    (shown,) = alice.call(DESCRIBE, version(DESCRIBE), owners=None).tokens
    assert shown.token_id == made.token_id
    renewed = alice.call(RENEW, version(RENEW), hmac=made.hmac, renew_period=-1)
    assert renewed.error_code == ErrorCode.none
    expired = alice.call(EXPIRE, version(EXPIRE), hmac=made.hmac, expiry_time_period=HOUR)
    assert expired.error_code == ErrorCode.none
