"""AlterClientQuotas and DescribeClientQuotas against the local metadata store, as Kafka answers
them (KIP-546)."""

from __future__ import annotations

from typing import Any

from odradek.protocol.errors import ErrorCode
from odradek.quotas.entities import CLIENT_ID, USER
from tests.server.handlers.conftest import HandlerCaller

ALTER, DESCRIBE = 49, 48


def alter(
    handlers: HandlerCaller,
    entity: list[tuple[str, str | None]],
    ops: list[tuple[str, float, bool]],
    validate_only: bool = False,
) -> Any:
    response = handlers.call(
        ALTER,
        1,
        entries=[
            {
                "entity": [{"entity_type": t, "entity_name": n} for t, n in entity],
                "ops": [{"key": k, "value": v, "remove": r} for k, v, r in ops],
            }
        ],
        validate_only=validate_only,
    )
    [entry] = response.entries
    return entry


def describe(
    handlers: HandlerCaller, components: list[tuple[str, int, str | None]], strict: bool = False
) -> dict[tuple[tuple[str, str | None], ...], dict[str, float]]:
    response = handlers.call(
        DESCRIBE,
        1,
        components=[{"entity_type": t, "match_type": m, "match": n} for t, m, n in components],
        strict=strict,
    )
    assert response.error_code == ErrorCode.none, response.error_message
    return {
        tuple((e.entity_type, e.entity_name) for e in entry.entity): {
            v.key: v.value for v in entry.values
        }
        for entry in response.entries
    }


def test_quotas_are_set_described_and_removed(handlers: HandlerCaller) -> None:
    alice = [(USER, "alice")]
    assert alter(handlers, alice, [("producer_byte_rate", 1024, False)]).error_code == 0
    assert (
        alter(
            handlers,
            [(USER, "alice"), (CLIENT_ID, "app")],
            [
                ("consumer_byte_rate", 2048, False),
                ("request_percentage", 12.5, False),
            ],
        ).error_code
        == 0
    )
    assert (
        alter(handlers, [(CLIENT_ID, None)], [("producer_byte_rate", 4096, False)]).error_code == 0
    )

    everything = describe(handlers, [])
    assert everything == {
        ((USER, "alice"),): {"producer_byte_rate": 1024.0},
        ((USER, "alice"), (CLIENT_ID, "app")): {
            "consumer_byte_rate": 2048.0,
            "request_percentage": 12.5,
        },
        ((CLIENT_ID, None),): {"producer_byte_rate": 4096.0},
    }
    # user=alice exactly, not strict: every entity with that user; strict: that entity alone.
    assert set(describe(handlers, [(USER, 0, "alice")])) == {
        ((USER, "alice"),),
        ((USER, "alice"), (CLIENT_ID, "app")),
    }
    assert set(describe(handlers, [(USER, 0, "alice")], strict=True)) == {((USER, "alice"),)}
    assert set(describe(handlers, [(CLIENT_ID, 1, None)])) == {((CLIENT_ID, None),)}
    assert set(describe(handlers, [(CLIENT_ID, 2, None)])) == {
        ((USER, "alice"), (CLIENT_ID, "app"))
    }

    assert alter(handlers, alice, [("producer_byte_rate", 0, True)]).error_code == 0
    assert ((USER, "alice"),) not in describe(handlers, [])


def test_validate_only_and_bad_entries_store_nothing(handlers: HandlerCaller) -> None:
    bob = [(USER, "bob")]
    assert (
        alter(handlers, bob, [("producer_byte_rate", 10, False)], validate_only=True).error_code
        == 0
    )
    assert describe(handlers, []) == {}
    for entity, ops in (
        (bob, [("no_such_quota", 1, False)]),
        (bob, [("producer_byte_rate", -5, False)]),
        (bob, [("producer_byte_rate", 1.5, False)]),
        ([(USER, "bob"), ("ip", "127.0.0.1")], [("producer_byte_rate", 1, False)]),
        ([("ip", "not-an-address")], [("connection_creation_rate", 1, False)]),
        ([("ip", "127.0.0.1")], [("producer_byte_rate", 1, False)]),
    ):
        assert alter(handlers, entity, ops).error_code == ErrorCode.invalid_request, (entity, ops)
    assert describe(handlers, []) == {}


def test_a_users_quotas_keep_its_scram_credentials(handlers: HandlerCaller) -> None:
    store = handlers.services.topics.store
    handlers._loop.run_until_complete(
        store.set_user_configs("carol", {"SCRAM-SHA-256": "salt=x,stored_key=y"})
    )
    alter(handlers, [(USER, "carol")], [("consumer_byte_rate", 100, False)])
    alter(handlers, [(USER, "carol")], [("consumer_byte_rate", 0, True)])
    configs = handlers._loop.run_until_complete(store.user_configs("carol"))
    assert configs == {"SCRAM-SHA-256": "salt=x,stored_key=y"}
