"""DescribeCluster answers from the cluster view."""

from __future__ import annotations

from odradek.protocol.errors import ErrorCode
from odradek.server.services import BrokerServices

from .conftest import ENDPOINT, NODE_ID, HandlerCaller

DESCRIBE_CLUSTER = 60


def test_one_broker_is_the_cluster(handlers: HandlerCaller, services: BrokerServices) -> None:
    response = handlers.call(DESCRIBE_CLUSTER, 1, include_cluster_authorized_operations=False)
    assert response.error_code == ErrorCode.none
    assert (response.cluster_id, response.controller_id) == (services.cluster.cluster_id, NODE_ID)
    assert [(b.broker_id, b.host, b.port) for b in response.brokers] == [
        (NODE_ID, ENDPOINT.host, ENDPOINT.port)
    ]
