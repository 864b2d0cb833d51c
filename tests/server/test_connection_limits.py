"""Connection limits on a running broker, over real sockets: per IP address (with overrides),
per broker, and the creation rate (by an injected clock)."""

from __future__ import annotations

import contextlib
import socket
import time
from collections.abc import Iterator

from odradek.client.core import ConnectionFailed
from odradek.clock import ManualClock
from odradek.protocol.errors import ErrorCode
from odradek.testing import RunningBroker, running_broker, wait_until
from tests.server.conftest import API_VERSIONS, KafkaConnection

ALTER_CLIENT_QUOTAS = 49
INCREMENTAL_ALTER_CONFIGS = 44
BROKER_RESOURCE = 4

VERSIONS_REQUEST = {"client_software_name": "t", "client_software_version": "1"}


def served(connection: KafkaConnection) -> KafkaConnection:
    """``connection``, once a round trip over it has been answered."""
    response = connection.request(API_VERSIONS, 3, **VERSIONS_REQUEST)
    assert response.error_code == ErrorCode.none
    return connection


def connect_from(broker: RunningBroker, source: str) -> socket.socket:
    host, _, port = broker.bootstrap.rpartition(":")
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind((source, 0))
    sock.connect((host, int(port)))
    return sock


def closed_by_broker(sock: socket.socket, wait_s: float) -> bool:
    """Whether the broker ends the connection within ``wait_s`` (it sends nothing unasked)."""
    sock.settimeout(wait_s)
    try:
        return sock.recv(1) == b""
    except TimeoutError:
        return False
    except ConnectionResetError:
        return True


@contextlib.contextmanager
def sockets_from(broker: RunningBroker, source: str, count: int) -> Iterator[list[socket.socket]]:
    opened = [connect_from(broker, source) for _ in range(count)]
    try:
        yield opened
    finally:
        for sock in opened:
            sock.close()


def test_an_address_gets_its_limit_of_connections_and_no_more() -> None:
    with running_broker(
        max_connections_per_ip="3", max_connections_per_ip_overrides="127.0.0.2:5"
    ) as broker:
        first = [served(KafkaConnection(broker.bootstrap)) for _ in range(3)]
        with sockets_from(broker, "127.0.0.1", 1) as [fourth]:
            assert closed_by_broker(fourth, 5)
        # Another address has a limit of its own, overridden.
        with sockets_from(broker, "127.0.0.2", 6) as others:
            assert closed_by_broker(others[5], 5)
            assert not any(closed_by_broker(sock, 0.2) for sock in others[:5])
        for connection in first:
            served(connection)
        first.pop().close()

        def another_is_served() -> bool:
            try:
                first.append(served(KafkaConnection(broker.bootstrap)))
            except ConnectionFailed:
                return False
            return True

        wait_until(another_is_served, what="a connection once one ended")
        for connection in first:
            connection.close()


def test_past_max_connections_the_broker_accepts_once_one_ends() -> None:
    with running_broker(max_connections="3") as broker:
        open_ones = [served(KafkaConnection(broker.bootstrap)) for _ in range(3)]
        waiting = KafkaConnection(broker.bootstrap)  # in the kernel's backlog
        request = waiting.connection.send(API_VERSIONS, VERSIONS_REQUEST, version=3, raw=True)
        assert not waiting.has_data(1.0), "answered past max.connections"
        for connection in open_ones:
            served(connection)  # those within the limit are unaffected
        open_ones.pop().close()
        response = waiting.connection.receive(request)
        assert response is not None
        for connection in [*open_ones, waiting]:
            connection.close()


def test_past_the_creation_rate_new_connections_wait_for_the_throttle() -> None:
    clock = ManualClock(start_ms=int(time.time() * 1000))
    with running_broker(
        clock=clock, max_connection_creation_rate="2", quota_window_num="2"
    ) as broker:
        # Three at once is 3/s over the one-second span against 2/s: half a second's throttle
        # from the third on.
        made = [served(KafkaConnection(broker.bootstrap)) for _ in range(3)]
        fourth = KafkaConnection(broker.bootstrap)
        request = fourth.connection.send(API_VERSIONS, VERSIONS_REQUEST, version=3, raw=True)
        assert not fourth.has_data(1.5), "accepted while throttled"
        served(made[0])  # connections already made are not throttled
        clock.advance(500)
        assert fourth.connection.receive(request) is not None
        for connection in [*made, fourth]:
            connection.close()


def test_an_address_over_its_connection_creation_rate_is_closed_after_the_throttle() -> None:
    clock = ManualClock(start_ms=int(time.time() * 1000))
    with running_broker(clock=clock, quota_window_num="2") as broker:
        with KafkaConnection(broker.bootstrap) as admin:
            answer = admin.request(
                ALTER_CLIENT_QUOTAS,
                1,
                entries=[
                    {
                        "entity": [{"entity_type": "ip", "entity_name": "127.0.0.3"}],
                        "ops": [{"key": "connection_creation_rate", "value": 2, "remove": False}],
                    }
                ],
                validate_only=False,
            )
        assert [e.error_code for e in answer.entries] == [ErrorCode.none]
        assert broker.broker is not None

        def known() -> bool:
            assert broker.broker is not None
            return broker.broker.connection_quotas._ip_quota("127.0.0.3") == 2

        wait_until(known, what="the quota reaching the connection limits")
        with sockets_from(broker, "127.0.0.3", 3) as [first, second, third]:
            # The third is held, unanswered, for the throttle time (the clock's), then closed.
            assert not closed_by_broker(third, 1.0)
            clock.advance(1000)
            assert closed_by_broker(third, 5)
            assert not closed_by_broker(first, 0.2) and not closed_by_broker(second, 0.2)
        # Another address is not held to it.
        with sockets_from(broker, "127.0.0.4", 5) as others:
            assert not any(closed_by_broker(sock, 0.2) for sock in others)


def alter_broker(broker: RunningBroker, **values: str) -> None:
    """IncrementalAlterConfigs SET of this broker's dynamic configs, as kafka-configs does, once
    the admin's connection fits under the limits (a connection closed just before frees its
    slot when the broker sees it end)."""
    assert broker.broker is not None
    resource = {
        "resource_type": BROKER_RESOURCE,
        "resource_name": str(broker.broker.node_id),
        "configs": [
            {"name": k.replace("_", "."), "config_operation": 0, "value": v}
            for k, v in values.items()
        ],
    }
    errors: list[int] = []

    def altered() -> bool:
        try:
            admin = KafkaConnection(broker.bootstrap)
            try:
                response = admin.request(
                    INCREMENTAL_ALTER_CONFIGS, 1, resources=[resource], validate_only=False
                )
            finally:
                admin.close()
        except ConnectionFailed:
            return False
        errors.extend(r.error_code for r in response.responses)
        return True

    wait_until(altered, what="an admin connection")
    assert errors == [ErrorCode.none]


def test_the_limits_change_at_run_time_as_dynamic_broker_configs() -> None:
    with running_broker(max_connections_per_ip="2") as broker:
        opened = [served(KafkaConnection(broker.bootstrap)) for _ in range(2)]
        with sockets_from(broker, "127.0.0.1", 1) as [third]:
            assert closed_by_broker(third, 5)
        opened.pop().close()  # room for the admin's connection (it counts too)

        def one_more_served() -> bool:
            try:
                opened.append(served(KafkaConnection(broker.bootstrap)))
            except ConnectionFailed:
                return False
            return True

        wait_until(one_more_served, what="a connection once one ended")
        opened.pop().close()
        alter_broker(broker, max_connections_per_ip="3")
        for _ in range(2):
            wait_until(one_more_served, what="connections under the raised limit")
        assert len(opened) == 3
        with sockets_from(broker, "127.0.0.1", 1) as [fourth]:
            assert closed_by_broker(fourth, 5)

        # Lowered below what is open: those open stay, new ones are refused.
        opened.pop().close()
        alter_broker(broker, max_connections_per_ip="1")

        def refused() -> bool:
            with sockets_from(broker, "127.0.0.1", 1) as [another]:
                return closed_by_broker(another, 2)

        wait_until(refused, what="a connection refused under the lowered limit")
        for connection in opened:
            served(connection)
            connection.close()
