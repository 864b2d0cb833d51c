"""HTTP basic authentication of the registry's clients against the broker's own users
(``schema.registry.authentication.method=BASIC``, Confluent's name): the PLAIN users of
``sasl.jaas.config`` (``user_<name>="<password>"``) and the SCRAM credentials kept in the
metadata store (``odradek users add``). A principal is ``User:<name>``; with ``super.users`` set,
only they may change compatibility levels and modes.

Threads: :meth:`BasicAuthenticator.principal` may block (a SCRAM lookup asks the broker's
metadata store): call it off any event loop.
"""

from __future__ import annotations

import base64
import binascii
import hmac
from collections.abc import Callable, Mapping

from odradek.security.scram import (
    MECHANISM_TYPES,
    ScramCredential,
    credential_from_salted,
    salted_password,
)

BASIC = "BASIC"
NONE = "NONE"
METHODS = (NONE, BASIC)

# A user's configs in the metadata store (SCRAM-SHA-256=..., SCRAM-SHA-512=...).
UserConfigs = Callable[[str], Mapping[str, str]]


def credentials(header: str | None) -> tuple[str, str] | None:
    """The user and password of an ``Authorization: Basic ...`` header, or None."""
    if header is None:
        return None
    scheme, _, encoded = header.strip().partition(" ")
    if scheme.lower() != "basic":
        return None
    try:
        decoded = base64.b64decode(encoded.strip(), validate=True).decode()
    except (binascii.Error, UnicodeDecodeError):
        return None
    user, sep, password = decoded.partition(":")
    return (user, password) if sep and user else None


class BasicAuthenticator:
    """Who a request's basic credentials name, if they are right (see the module doc)."""

    def __init__(
        self,
        plain_users: Mapping[str, str],
        user_configs: UserConfigs,
        super_users: frozenset[str] = frozenset(),
    ) -> None:
        self._plain_users = dict(plain_users)
        self._user_configs = user_configs
        self.super_users = super_users

    def principal(self, header: str | None) -> str | None:
        given = credentials(header)
        if given is None:
            return None
        user, password = given
        expected = self._plain_users.get(user)
        if expected is not None:
            ok = hmac.compare_digest(expected.encode(), password.encode())
            return f"User:{user}" if ok else None
        configs = self._user_configs(user)
        for mechanism in MECHANISM_TYPES:
            text = configs.get(mechanism)
            if text is not None and _scram_matches(
                mechanism, ScramCredential.from_kafka(text), password
            ):
                return f"User:{user}"
        return None

    def may_change_settings(self, principal: str) -> bool:
        """Compatibility levels and modes: super users only, when ``super.users`` names any."""
        return not self.super_users or principal in self.super_users


def _scram_matches(mechanism: str, credential: ScramCredential, password: str) -> bool:
    salted = salted_password(mechanism, password, credential.salt, credential.iterations)
    derived = credential_from_salted(mechanism, salted, credential.salt, credential.iterations)
    return hmac.compare_digest(derived.stored_key, credential.stored_key)
