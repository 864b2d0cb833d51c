"""FindCoordinator: the group's coordinator is the leader of its ``__consumer_offsets``
partition, which a first lookup creates."""

from __future__ import annotations

from odradek.cluster.metadata.view import BrokerEndpoint
from odradek.protocol.errors import ErrorCode
from odradek.server.services import BrokerServices

from .conftest import ENDPOINT, NODE_ID, HandlerCaller, StaticClusterView

FIND_COORDINATOR = 10
GROUP, TRANSACTION = 0, 1


def test_this_broker_coordinates_groups(handlers: HandlerCaller, services: BrokerServices) -> None:
    assert services.topics.topic("__consumer_offsets") is None
    response = handlers.call(FIND_COORDINATOR, 3, key="a-group", key_type=GROUP)
    assert response.error_code == ErrorCode.none
    assert (response.node_id, response.host, response.port) == (
        NODE_ID,
        ENDPOINT.host,
        ENDPOINT.port,
    )
    offsets = services.topics.topic("__consumer_offsets")
    assert offsets is not None
    assert offsets.partitions == services.config.get_int("offsets.topic.num.partitions")


def test_batched_lookups_and_transactions(handlers: HandlerCaller) -> None:
    response = handlers.call(FIND_COORDINATOR, 4, key_type=GROUP, coordinator_keys=["one", "two"])
    assert [(c.key, c.error_code, c.node_id) for c in response.coordinators] == [
        ("one", ErrorCode.none, NODE_ID),
        ("two", ErrorCode.none, NODE_ID),
    ]
    (txn,) = handlers.call(
        FIND_COORDINATOR, 4, key_type=TRANSACTION, coordinator_keys=["tx"]
    ).coordinators
    # The first transactional id to look creates __transaction_state; a lone broker leads it.
    assert (txn.error_code, txn.node_id, txn.port) == (ErrorCode.none, NODE_ID, ENDPOINT.port)
    assert handlers.services.topics.topic("__transaction_state") is not None


def test_the_coordinator_is_the_one_the_view_names(handlers: HandlerCaller) -> None:
    elsewhere = BrokerEndpoint(2, "b2.example", 9093)
    view = StaticClusterView(
        node_id=NODE_ID,
        cluster_id="c",
        brokers=[ENDPOINT, elsewhere],
        controller=NODE_ID,
        states={},
        coordinators={"there": elsewhere},
    )
    response = handlers.with_cluster(view).call(
        FIND_COORDINATOR, 4, key_type=GROUP, coordinator_keys=["there", "nowhere"]
    )
    there, nowhere = response.coordinators
    assert (there.error_code, there.node_id, there.host, there.port) == (
        ErrorCode.none,
        2,
        "b2.example",
        9093,
    )
    assert (nowhere.error_code, nowhere.node_id) == (ErrorCode.coordinator_not_available, -1)
