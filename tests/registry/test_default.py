"""Where a broker serves the registry: schema.registry.listener, or the default a lone
``odradek serve`` broker is given, which a port in use only turns off."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from odradek.config import BrokerConfig
from odradek.server.broker import Broker


def config(tmp_path: Path, **settings: str) -> BrokerConfig:
    return BrokerConfig(
        {"log.dirs": str(tmp_path), "listeners": "PLAINTEXT://127.0.0.1:0", **settings}
    )


def busy_port() -> tuple[socket.socket, int]:
    holder = socket.socket()
    holder.bind(("127.0.0.1", 0))
    holder.listen()
    return holder, holder.getsockname()[1]


async def test_the_default_is_served_when_nothing_is_set(tmp_path: Path) -> None:
    broker = Broker(config(tmp_path), schema_registry_default=("127.0.0.1", 0))
    await broker.start()
    try:
        assert broker.schema_registry is not None
        assert broker.schema_registry.bound[1] != 0
    finally:
        await broker.stop()


async def test_a_default_port_in_use_only_turns_the_registry_off(tmp_path: Path) -> None:
    holder, port = busy_port()
    with holder:
        broker = Broker(config(tmp_path), schema_registry_default=("127.0.0.1", port))
        await broker.start()
        try:
            assert broker.schema_registry is None
        finally:
            await broker.stop()


async def test_a_setting_wins_over_the_default(tmp_path: Path) -> None:
    off = Broker(
        config(tmp_path / "off", **{"schema.registry.listener": ""}),
        schema_registry_default=("127.0.0.1", 0),
    )
    await off.start()
    try:
        assert off.schema_registry is None
    finally:
        await off.stop()
    holder, port = busy_port()
    with holder:
        explicit = Broker(
            config(tmp_path / "busy", **{"schema.registry.listener": f"127.0.0.1:{port}"}),
            schema_registry_default=("127.0.0.1", 0),
        )
        with pytest.raises(OSError):
            await explicit.start()
