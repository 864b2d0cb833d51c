"""Connection limits' bookkeeping (Kafka's ConnectionQuotas), by an injected clock: no sockets."""

from __future__ import annotations

from odradek.clock import ManualClock
from odradek.config import BrokerConfig
from odradek.server.connection_quotas import (
    UNTIL_A_CONNECTION_ENDS,
    BrokerLimits,
    ConnectionQuotas,
    Limits,
    client_address,
    resolve_overrides,
)


def quotas(clock: ManualClock, **kwargs: object) -> ConnectionQuotas:
    settings: dict[str, object] = {
        "broker": Limits(),
        "listeners": {"PLAINTEXT": Limits()},
        "inter_broker_listener": "PLAINTEXT",
        **kwargs,
    }
    return ConnectionQuotas(clock, **settings)  # type: ignore[arg-type]


def test_an_address_at_its_limit_is_refused_and_others_are_not() -> None:
    q = quotas(ManualClock(), per_ip=2, per_ip_overrides={"127.0.0.2": 3})
    assert q.opened("PLAINTEXT", "127.0.0.1")
    assert q.opened("PLAINTEXT", "127.0.0.1")
    assert not q.opened("PLAINTEXT", "127.0.0.1")
    assert q.connections() == 2  # the refused one is not counted
    assert all(q.opened("PLAINTEXT", "127.0.0.2") for _ in range(3))
    assert not q.opened("PLAINTEXT", "127.0.0.2")
    q.closed("PLAINTEXT", "127.0.0.1")
    assert q.opened("PLAINTEXT", "127.0.0.1")


def test_a_full_listener_waits_for_a_connection_to_end() -> None:
    q = quotas(ManualClock(), broker=Limits(max_connections=2))
    woken: list[str] = []
    assert q.wait_ms("PLAINTEXT") == 0
    q.opened("PLAINTEXT", "10.0.0.1")
    q.opened("PLAINTEXT", "10.0.0.2")
    assert q.wait_ms("PLAINTEXT") == UNTIL_A_CONNECTION_ENDS
    q.when_a_connection_ends("PLAINTEXT", lambda: woken.append("again"))
    q.closed("PLAINTEXT", "10.0.0.1")
    assert woken == ["again"]
    assert q.wait_ms("PLAINTEXT") == 0


def test_the_inter_broker_listener_is_outside_the_brokers_limits_when_there_are_others() -> None:
    q = quotas(
        ManualClock(),
        broker=Limits(max_connections=1, creation_rate=1),
        listeners={"CLIENTS": Limits(), "REPLICATION": Limits(max_connections=3)},
        inter_broker_listener="REPLICATION",
    )
    q.opened("CLIENTS", "10.0.0.1")
    assert q.wait_ms("CLIENTS") == UNTIL_A_CONNECTION_ENDS
    for n in range(3):
        assert q.wait_ms("REPLICATION") == 0
        q.opened("REPLICATION", f"10.0.1.{n}")
    # Its own listener limit still holds.
    assert q.wait_ms("REPLICATION") == UNTIL_A_CONNECTION_ENDS
    # With one listener, the inter-broker listener is every client's: the broker's limit holds.
    alone = quotas(ManualClock(), broker=Limits(max_connections=1))
    alone.opened("PLAINTEXT", "10.0.0.1")
    assert alone.wait_ms("PLAINTEXT") == UNTIL_A_CONNECTION_ENDS


def test_past_the_creation_rate_a_listener_waits_the_throttle_time() -> None:
    clock = ManualClock()
    q = quotas(
        clock,
        listeners={"PLAINTEXT": Limits(), "OTHER": Limits(creation_rate=1)},
        broker=Limits(creation_rate=2),
        inter_broker_listener="OTHER",
        samples=2,
        sample_ms=1000,
    )
    q.opened("PLAINTEXT", "10.0.0.1")
    q.opened("PLAINTEXT", "10.0.0.1")
    assert q.wait_ms("PLAINTEXT") == 0
    q.opened("PLAINTEXT", "10.0.0.1")  # 3/s against 2/s over a one-second span
    assert q.wait_ms("PLAINTEXT") == 500
    clock.advance(300)
    assert q.wait_ms("PLAINTEXT") == 200
    clock.advance(200)
    assert q.wait_ms("PLAINTEXT") == 0
    # A listener's own rate.
    q.opened("OTHER", "10.0.0.3")
    q.opened("OTHER", "10.0.0.3")
    assert q.wait_ms("OTHER") == 1000


def test_limits_from_the_broker_config() -> None:
    config = BrokerConfig(
        {
            "listeners": "PLAINTEXT://127.0.0.1:0,EXTERNAL://127.0.0.1:0",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,EXTERNAL:PLAINTEXT",
            "max.connections": "10",
            "max.connections.per.ip": "4",
            "max.connections.per.ip.overrides": "localhost:7,10.1.2.3:0",
            "listener.name.external.max.connections": "5",
            "quota.window.num": "3",
        }
    )
    q = ConnectionQuotas.from_config(ManualClock(), config, ["PLAINTEXT", "EXTERNAL"])
    assert q.limit_for("10.9.9.9") == 4
    assert q.limit_for("127.0.0.1") == 7
    assert q.limit_for("10.1.2.3") == 0
    for n in range(5):
        q.opened("EXTERNAL", f"10.0.0.{n}")
    assert q.wait_ms("EXTERNAL") == UNTIL_A_CONNECTION_ENDS
    assert q.wait_ms("PLAINTEXT") == 0  # the inter-broker listener, outside the others' limits


def test_addresses_are_counted_as_the_client_has_them() -> None:
    assert client_address(("::ffff:127.0.0.2", 5000, 0, 0)) == "127.0.0.2"
    assert client_address(("::1", 5000, 0, 0)) == "::1"
    assert client_address(("127.0.0.1", 5000)) == "127.0.0.1"
    assert resolve_overrides("[::1]:3, 127.0.0.5:2") == {"::1": 3, "127.0.0.5": 2}


def test_an_address_over_its_connection_creation_rate_is_held_then_refused() -> None:
    clock = ManualClock()
    q = quotas(clock, samples=2, sample_ms=1000)
    q.update_ip_quotas(
        {
            (("ip", None),): {"connection_creation_rate": "2"},  # every address: 2/s
            (("ip", "127.0.0.2"),): {"connection_creation_rate": "100"},
            (("user", "alice"),): {"producer_byte_rate": "10"},  # not an address's quota
        }
    )
    # Two at once is 2/s over the one-second span: served; the third is over.
    assert [q.ip_throttle_ms("127.0.0.1") for _ in range(2)] == [0, 0]
    throttle = q.ip_throttle_ms("127.0.0.1")
    assert throttle > 0
    assert q.connections() == 0  # refused ones are not counted anywhere
    assert all(q.ip_throttle_ms("127.0.0.2") == 0 for _ in range(10))  # its own quota
    clock.advance(throttle)
    assert q.ip_throttle_ms("127.0.0.1") == 0  # the refused one did not count against it
    q.update_ip_quotas({})
    assert all(q.ip_throttle_ms("127.0.0.1") == 0 for _ in range(10))


def test_the_broker_wide_limits_change_at_run_time() -> None:
    q = quotas(ManualClock(), broker=Limits(max_connections=2), per_ip=1)
    woken: list[str] = []
    assert q.opened("PLAINTEXT", "10.0.0.1")
    assert not q.opened("PLAINTEXT", "10.0.0.1")
    assert q.opened("PLAINTEXT", "10.0.0.2")
    assert q.wait_ms("PLAINTEXT") == UNTIL_A_CONNECTION_ENDS
    q.when_a_connection_ends("PLAINTEXT", lambda: woken.append("again"))

    q.reconfigure(BrokerLimits(Limits(max_connections=3), 2, {"10.0.0.9": 0}))
    assert woken == ["again"]  # the listener accepts again under the raised limit
    assert q.wait_ms("PLAINTEXT") == 0
    assert q.opened("PLAINTEXT", "10.0.0.1")  # its address's limit is 2 now
    assert not q.opened("PLAINTEXT", "10.0.0.9")
    assert q.connections() == 3

    # Lowered under what is open: nothing is closed, nothing more is accepted.
    q.reconfigure(BrokerLimits(Limits(max_connections=1), 1, {}))
    assert q.connections() == 3
    assert q.wait_ms("PLAINTEXT") == UNTIL_A_CONNECTION_ENDS
