"""The token of an OAUTHBEARER login (KIP-768), as Kafka's client gets it: from the identity
provider's token endpoint by the OAuth client credentials grant (a form POST of
``grant_type=client_credentials`` and ``scope``, the client id and secret as HTTP basic
authentication, both URL-encoded first as Kafka's HttpAccessTokenRetriever sends them; the
answer's ``access_token``), or an unsecured token made here for development (``alg`` ``none``,
as Kafka's OAuthBearerUnsecuredLoginCallbackHandler makes it).

A token is reused by every connection of the process until 80 % of its lifetime has passed
(Kafka's ``sasl.login.refresh.window.factor``), then fetched again. Fetching blocks (an HTTP
request): the asyncio client calls :func:`token_for` on a thread. Any thread; the cache has a
lock.
"""

from __future__ import annotations

import base64
import json
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable

from odradek.client.core import ClientError
from odradek.security.client_settings import OAuthLogin

# The share of a token's lifetime after which it is fetched again (Kafka's default).
REFRESH_WINDOW_FACTOR = 0.8
UNSECURED_LIFETIME_S = 3600
_TIMEOUT_S = 10
# The most of a token endpoint's answer read (a token is a few kilobytes).
_MAX_ANSWER_BYTES = 1 << 20

_lock = threading.Lock()
_cache: dict[OAuthLogin, tuple[str, float]] = {}  # login → (token, when to fetch again)


def token_for(login: OAuthLogin, now: Callable[[], float] = time.time) -> str:
    """The login's token: the cached one while fresh, else a new one."""
    with _lock:
        cached = _cache.get(login)
        if cached is not None and now() < cached[1]:
            return cached[0]
    issued_at = now()
    lifetime_s: float
    if login.token_endpoint is None:
        assert login.unsecured_subject is not None
        token, lifetime_s = _unsecured(login.unsecured_subject, issued_at), UNSECURED_LIFETIME_S
    else:
        token, lifetime_s = _fetch(login)
    with _lock:
        _cache[login] = (token, issued_at + lifetime_s * REFRESH_WINDOW_FACTOR)
    return token


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unsecured(subject: str, issued_at: float) -> str:
    header = {"alg": "none"}
    claims = {"sub": subject, "iat": int(issued_at), "exp": int(issued_at) + UNSECURED_LIFETIME_S}
    return ".".join(
        (_b64url(json.dumps(header).encode()), _b64url(json.dumps(claims).encode()), "")
    )


def _fetch(login: OAuthLogin) -> tuple[str, float]:
    """(token, lifetime in seconds) from the token endpoint."""
    assert login.token_endpoint is not None
    assert login.client_id is not None and login.client_secret is not None
    form = {"grant_type": "client_credentials"}
    if login.scope:
        form["scope"] = login.scope
    credentials = (
        f"{urllib.parse.quote(login.client_id, safe='')}:"
        f"{urllib.parse.quote(login.client_secret, safe='')}"
    )
    request = urllib.request.Request(
        login.token_endpoint,
        data=urllib.parse.urlencode(form).encode(),
        headers={
            "Authorization": "Basic " + base64.b64encode(credentials.encode()).decode(),
            "Content-Type": "application/x-www-form-urlencoded",
            "Accept": "application/json",
        },
        method="POST",
    )
    try:
        with urllib.request.urlopen(request, timeout=_TIMEOUT_S) as answer:
            body = answer.read(_MAX_ANSWER_BYTES)
    except urllib.error.HTTPError as e:
        raise ClientError(
            f"the token endpoint {login.token_endpoint} refused the client credentials "
            f"(HTTP {e.code})"
        ) from None
    except (urllib.error.URLError, OSError) as e:
        raise ClientError(f"cannot reach the token endpoint {login.token_endpoint}: {e}") from None
    try:
        answered = json.loads(body)
        token = answered["access_token"]
        lifetime_s = float(answered.get("expires_in", UNSECURED_LIFETIME_S))
    except (ValueError, KeyError, TypeError) as e:
        raise ClientError(
            f"the token endpoint {login.token_endpoint} answered no access_token ({e!r})"
        ) from None
    if not isinstance(token, str) or not token:
        raise ClientError(f"the token endpoint {login.token_endpoint} answered no access_token")
    return token, lifetime_s
