"""connections.max.idle.ms: a connection with no request in that time is closed, by the clock."""

from __future__ import annotations

import time

from odradek.clock import ManualClock
from odradek.testing import RunningBroker, running_broker
from tests.server.conftest import API_VERSIONS, KafkaConnection, assert_broker_serves

VERSIONS_REQUEST = {"client_software_name": "t", "client_software_version": "1"}


async def _tick(broker: RunningBroker) -> None:
    assert broker.broker is not None
    broker.broker.housekeeping_tick()


def test_idle_and_half_sent_connections_are_closed_after_max_idle() -> None:
    clock = ManualClock(start_ms=int(time.time() * 1000))  # records carry real timestamps
    with running_broker(clock=clock, connections_max_idle_ms="1000") as broker:
        idle, half_sent, active = (KafkaConnection(broker.bootstrap) for _ in range(3))
        for connection in (idle, half_sent, active):
            # A round trip, so the broker has accepted each one before the clock moves.
            connection.request(API_VERSIONS, 3, **VERSIONS_REQUEST)
        half_sent.send_raw(b"\x00\x00\x00\x40\x00\x12")  # 64 bytes promised, 2 sent

        clock.advance(900)
        active.request(API_VERSIONS, 3, **VERSIONS_REQUEST)
        broker.call(_tick(broker))
        assert not idle.has_data(0.2), "closed before connections.max.idle.ms"

        clock.advance(200)
        broker.call(_tick(broker))
        idle.assert_closed_by_broker()
        half_sent.assert_closed_by_broker()
        assert_broker_serves(broker, active)
