"""OAUTHBEARER tokens checked as Kafka's validators check them, by an injected clock."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest
from joserfc import jwt
from joserfc.jwk import KeySet, RSAKey

from odradek.clock import ManualClock
from odradek.security.oauthbearer import (
    InvalidToken,
    JwksSource,
    OAuthBearerValidator,
    token_of,
)

NOW_S = 1_800_000_000


@pytest.fixture(scope="module")
def key() -> RSAKey:
    return RSAKey.generate_key(2048, parameters={"kid": "k1"})


@pytest.fixture
def validator(key: RSAKey, tmp_path: Path) -> OAuthBearerValidator:
    path = tmp_path / "jwks.json"
    path.write_text(json.dumps(KeySet([key]).as_dict(private=False)))
    return OAuthBearerValidator(
        ManualClock(start_ms=NOW_S * 1000),
        jwks=JwksSource(path.as_uri(), 3_600_000),
        audience=["kafka"],
        issuer="https://idp.example",
    )


def signed(key: RSAKey, **claims: object) -> str:
    body = {"sub": "alice", "aud": "kafka", "iss": "https://idp.example", "exp": NOW_S + 60}
    body.update(claims)
    return jwt.encode({"alg": "RS256", "kid": key.kid}, body, key)


def test_a_good_token_names_its_subject(validator: OAuthBearerValidator, key: RSAKey) -> None:
    token = validator.validate(signed(key))
    assert token.subject == "alice" and token.expires_ms == (NOW_S + 60) * 1000
    assert validator.validate(signed(key, aud=["other", "kafka"])).subject == "alice"
    # Within the clock skew (30 s) of its expiry, still good.
    assert validator.validate(signed(key, exp=NOW_S - 20)).subject == "alice"


@pytest.mark.parametrize(
    "claims",
    [
        {"aud": "other"},
        {"iss": "https://evil.example"},
        {"exp": NOW_S - 31},
        {"exp": None},
        {"nbf": NOW_S + 120},
        {"sub": ""},
    ],
)
def test_a_token_with_wrong_claims_is_refused(
    validator: OAuthBearerValidator, key: RSAKey, claims: dict[str, object]
) -> None:
    token = signed(key, **claims)
    with pytest.raises(InvalidToken):
        validator.validate(token)


def test_a_token_signed_by_another_key_is_refused(validator: OAuthBearerValidator) -> None:
    for kid in ("k1", "k2"):
        other = RSAKey.generate_key(2048, parameters={"kid": kid})
        with pytest.raises(InvalidToken):
            validator.validate(signed(other))
    with pytest.raises(InvalidToken):
        validator.validate("not.a.token")


def unsigned(claims: dict[str, object]) -> str:
    def part(value: dict[str, object]) -> str:
        return base64.urlsafe_b64encode(json.dumps(value).encode()).decode().rstrip("=")

    return f"{part({'alg': 'none'})}.{part(claims)}."


def test_without_keys_unsecured_tokens_are_taken(key: RSAKey) -> None:
    unsecured = OAuthBearerValidator(ManualClock(start_ms=NOW_S * 1000))
    assert unsecured.validate(unsigned({"sub": "bob", "exp": NOW_S + 5})).subject == "bob"
    with pytest.raises(InvalidToken):
        unsecured.validate(unsigned({"sub": "bob", "exp": NOW_S - 100}))
    with pytest.raises(InvalidToken):
        unsecured.validate(signed(key))  # a signed one is not unsecured


def test_the_client_message_carries_the_bearer_token() -> None:
    assert token_of(b"n,,\x01auth=Bearer abc.def.ghi\x01\x01") == "abc.def.ghi"
    assert token_of(b"n,a=alice,\x01host=x\x01auth=Bearer t\x01ext=1\x01\x01") == "t"
    for bad in (b"auth=Bearer t", b"n,,\x01auth=Basic t\x01\x01", b"n,,\x01\x01", b"\xff"):
        with pytest.raises(InvalidToken):
            token_of(bad)
