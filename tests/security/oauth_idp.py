"""An identity provider for OAUTHBEARER tests: a signing key, its JWKS file, tokens it signs, and
a broker whose SASL listener checks them."""

from __future__ import annotations

import base64
import contextlib
import http.server
import json
import threading
import time
import urllib.parse
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


@contextlib.contextmanager
def token_endpoint(key: RSAKey, clients: dict[str, str]) -> Iterator[tuple[str, list[str]]]:
    """An identity provider's token endpoint on a free local port: the client credentials grant
    for ``clients`` (client id → secret, as HTTP basic authentication, URL-encoded first),
    answering a token ``key`` signed for the client id as subject. Yields its URL and the
    client ids it issued tokens to, in order."""
    issued: list[str] = []

    class Endpoint(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", "0"))
            form = urllib.parse.parse_qs(self.rfile.read(length).decode())
            scheme, _, encoded = self.headers.get("Authorization", "").partition(" ")
            user, _, secret = base64.b64decode(encoded).decode().partition(":")
            client_id = urllib.parse.unquote(user)
            if (
                scheme != "Basic"
                or form.get("grant_type") != ["client_credentials"]
                or clients.get(client_id) != urllib.parse.unquote(secret)
            ):
                self.send_response(401)
                self.end_headers()
                return
            issued.append(client_id)
            body = json.dumps(
                {
                    "access_token": signed_token(key, sub=client_id),
                    "token_type": "Bearer",
                    "expires_in": 300,
                }
            ).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Endpoint)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/token", issued
    finally:
        server.shutdown()
        server.server_close()
