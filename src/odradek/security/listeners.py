"""A listener as the connections accepted on it see it: its name and security protocol, the TLS
context of SSL and SASL_SSL listeners, and the SASL settings of SASL_PLAINTEXT and SASL_SSL ones.

Built once by the broker at start from the config (a bad key file or an unusable mechanism list
stops the start with a :class:`~odradek.config.ConfigError`); read-only afterwards, shared by
every connection of the listener, on the event loop.
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass

from odradek.clock import Clock
from odradek.config import BrokerConfig, ListenerSpec
from odradek.security.sasl import SaslSettings
from odradek.security.scram import CredentialLookup, TokenLookup
from odradek.security.tls import server_context


@dataclass(frozen=True, slots=True)
class Listener:
    """One listener's security, shared by its connections (see the module doc)."""

    spec: ListenerSpec
    ssl_context: ssl.SSLContext | None = None
    sasl: SaslSettings | None = None
    # connection.failed.authentication.delay.ms
    failed_auth_delay_ms: int = 100

    @property
    def name(self) -> str:
        return self.spec.name

    @classmethod
    def plaintext(cls, name: str = "PLAINTEXT") -> Listener:
        """A PLAINTEXT listener (for connections made outside a broker, in tests)."""
        return cls(ListenerSpec(name, "PLAINTEXT", "127.0.0.1", 0))

    @classmethod
    def from_config(
        cls,
        config: BrokerConfig,
        spec: ListenerSpec,
        scram_lookup: CredentialLookup,
        clock: Clock | None = None,
        *,
        token_lookup: TokenLookup | None = None,
    ) -> Listener:
        return cls(
            spec,
            server_context(config, spec.name) if spec.uses_tls else None,
            (
                SaslSettings.from_config(config, spec.name, scram_lookup, clock, token_lookup)
                if spec.uses_sasl
                else None
            ),
            int(
                config.listener_setting(spec.name, "connection.failed.authentication.delay.ms")
                or "100"
            ),
        )
