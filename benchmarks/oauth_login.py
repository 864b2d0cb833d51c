"""How long an OAUTHBEARER login takes (KIP-768), on a broker in this process whose SASL_PLAINTEXT
listener checks RS256 tokens against a JWKS file, with odradek's own client.

- **login**: ``--logins`` fresh connections, each timed from connect to the end of the SASL
  exchange (TCP connect, ApiVersions, SaslHandshake, SaslAuthenticate: the broker checks the
  token's signature, expiry, audience and issuer), with a token already in the client's cache;
- **token**: ``--fetches`` client credentials grants against a local token endpoint (the
  identity provider's side: HTTP POST, a token signed per request), for scale.

Printed: median and p99 in ms of each. Numbers only, never asserted::

    PYTHONPATH=. python benchmarks/oauth_login.py [--logins 300] [--fetches 50]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from tests.security.oauth_idp import oauth_broker, signing_key, token_endpoint

from odradek.client import oauth
from odradek.client.blocking import BlockingConnection
from odradek.security.client_settings import ClientSecurity

MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required"


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * share))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--logins", type=int, default=300)
    parser.add_argument("--fetches", type=int, default=50)
    args = parser.parse_args()
    key = signing_key("bench-key")
    with (
        tempfile.TemporaryDirectory() as work,
        oauth_broker(key, Path(work)) as broker,
        token_endpoint(key, {"bench": "bench-secret"}) as (url, _),
    ):
        security = ClientSecurity.from_config(
            {
                "security.protocol": "SASL_PLAINTEXT",
                "sasl.mechanism": "OAUTHBEARER",
                "sasl.oauthbearer.token.endpoint.url": url,
                "sasl.jaas.config": f'{MODULE} clientId="bench" clientSecret="bench-secret";',
            }
        )
        assert security.oauth is not None
        fetches = []
        for _ in range(args.fetches):
            oauth._cache.clear()
            started = time.perf_counter()
            oauth.token_for(security.oauth)
            fetches.append((time.perf_counter() - started) * 1000)
        logins = []
        for _ in range(args.logins):
            started = time.perf_counter()
            connection = BlockingConnection.open(broker.bootstrap, security=security)
            logins.append((time.perf_counter() - started) * 1000)
            connection.close()
    print(
        f"== OAUTHBEARER login ({args.logins} fresh connections, RS256 token cached): "
        f"median {statistics.median(logins):.2f} ms, p99 {percentile(logins, 0.99):.2f} ms"
    )
    print(
        f"== token from the token endpoint ({args.fetches} client credentials grants): "
        f"median {statistics.median(fetches):.2f} ms, p99 {percentile(fetches, 0.99):.2f} ms"
    )


if __name__ == "__main__":
    main()
