"""Where the broker's own clients of its cluster (the web console, the schema registry, the
Iceberg worker) connect, and how: the ``console.*`` settings.

A module of its own so that a broker that serves no metrics need not import the metrics
endpoint (and Prometheus's client) to start its registry.
"""

from __future__ import annotations

from pathlib import Path

from odradek.config import BrokerConfig, ConfigError, parse_properties
from odradek.security.client_settings import ClientSecurity, ClientSettingsError


def console_client(config: BrokerConfig, bound: tuple[str, int]) -> tuple[str, ClientSecurity]:
    """Where the broker's console connects, and how (``console.*`` settings)."""
    bootstrap = config.raw("console.bootstrap.servers")
    if not bootstrap:
        host, port = bound
        bootstrap = f"{'127.0.0.1' if host in ('0.0.0.0', '', '::') else host}:{port}"
    settings: dict[str, str] = {}
    path = config.raw("console.client.config")
    if path:
        try:
            settings = parse_properties(Path(path).read_text())
        except OSError as e:
            raise ConfigError(f"console.client.config: {e}") from e
    try:
        return bootstrap, ClientSecurity.from_config(settings)
    except ClientSettingsError as e:
        raise ConfigError(f"console.client.config: {e}") from e
