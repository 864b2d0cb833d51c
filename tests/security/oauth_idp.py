"""An identity provider for OAUTHBEARER tests: a signing key, its JWKS file, tokens it signs, and
a broker whose SASL listener checks them."""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from joserfc import jwt
from joserfc.jwk import KeySet, RSAKey

from odradek.testing import RunningBroker, running_broker

ISSUER = "https://idp.test"
AUDIENCE = "kafka"


def signing_key(kid: str) -> RSAKey:
    return RSAKey.generate_key(2048, parameters={"kid": kid})


def signed_token(key: RSAKey, **claims: Any) -> str:
    """A JWT for ``alice``, meant for the broker, valid for five minutes; ``claims`` override."""
    now = int(time.time())
    body = {"sub": "alice", "aud": AUDIENCE, "iss": ISSUER, "iat": now, "exp": now + 300}
    body.update(claims)
    return jwt.encode({"alg": "RS256", "kid": key.kid}, body, key)


@contextlib.contextmanager
def oauth_broker(key: RSAKey, directory: Path) -> Iterator[RunningBroker]:
    """A broker with one SASL_PLAINTEXT listener taking OAUTHBEARER tokens that ``key`` signed
    (its public half in a JWKS file in ``directory``), for the expected audience and issuer."""
    jwks = directory / "jwks.json"
    jwks.write_text(json.dumps(KeySet([key]).as_dict(private=False)))
    with running_broker(
        listeners="SASL_PLAINTEXT://127.0.0.1:0",
        sasl_enabled_mechanisms="OAUTHBEARER",
        **{
            "sasl.oauthbearer.jwks.endpoint.url": jwks.as_uri(),
            "sasl.oauthbearer.expected.audience": AUDIENCE,
            "sasl.oauthbearer.expected.issuer": ISSUER,
        },
    ) as running:
        yield running
