"""A connection's requests while an acks=all Produce waits for its followers: the next requests
are taken and handled meanwhile (their appends after the waiting one's), and every response
still leaves in request order."""

from __future__ import annotations

from typing import Any

from odradek.cluster.replication.partition import Partition
from odradek.protocol.errors import ErrorCode
from odradek.testing import RunningBroker, wait_until

from .conftest import KafkaConnection, batch_of, unique_topic

PRODUCE, API_VERSIONS = 0, 18
PRODUCE_VERSION = 9
# A follower that never fetches by itself: the test moves it.
FOLLOWER = 99


async def _with_follower(broker: RunningBroker, topic: str) -> Partition:
    assert broker.broker is not None
    services = broker.broker.services
    services.replicas.alone = False  # as in a cluster: followers may hold answers up
    partition = services.topics.partition(topic, 0)
    assert partition is not None
    replicas = (partition.local_id, FOLLOWER)
    partition.make_leader(partition.leader_epoch + 1, replicas, replicas, 1)
    return partition


async def _log_end(partition: Partition) -> int:
    return partition.log.log_end_offset


async def _follower_at(partition: Partition, offset: int) -> None:
    partition.follower_fetched(FOLLOWER, offset)


def _produce_fields(topic: str, value: bytes) -> dict[str, Any]:
    return {
        "transactional_id": None,
        "acks": -1,
        "timeout": 30_000,
        "topic_data": [
            {"name": topic, "partition_data": [{"index": 0, "records": batch_of(value)}]}
        ],
    }


def test_requests_after_a_waiting_produce_are_handled_and_answered_in_order(
    odradek_broker: RunningBroker,
) -> None:
    topic = unique_topic()
    with (
        KafkaConnection(odradek_broker.bootstrap) as admin,
        KafkaConnection(odradek_broker.bootstrap) as client,
    ):
        admin.create_topic(topic)
        partition = odradek_broker.call(_with_follower(odradek_broker, topic))
        first = client.send(PRODUCE, PRODUCE_VERSION, **_produce_fields(topic, b"first"))
        second = client.send(PRODUCE, PRODUCE_VERSION, **_produce_fields(topic, b"second"))
        versions = client.send(
            API_VERSIONS, 3, client_software_name="t", client_software_version="1"
        )

        # The second Produce is appended while the first waits for the follower.
        wait_until(lambda: odradek_broker.call(_log_end(partition)) == 2, what="both appended")
        assert not client.has_data(0)  # nothing answered before the follower has it

        odradek_broker.call(_follower_at(partition, 1))
        answer = client.receive(PRODUCE, PRODUCE_VERSION, first)
        (only,) = answer.responses[0].partition_responses
        assert (only.error_code, only.base_offset) == (ErrorCode.none, 0)
        assert not client.has_data(0)  # the second still waits, and ApiVersions behind it

        odradek_broker.call(_follower_at(partition, 2))
        answer = client.receive(PRODUCE, PRODUCE_VERSION, second)
        (only,) = answer.responses[0].partition_responses
        assert (only.error_code, only.base_offset) == (ErrorCode.none, 1)
        assert client.receive(API_VERSIONS, 3, versions).error_code == ErrorCode.none


def test_a_malformed_request_behind_a_waiting_produce_closes_after_its_answer(
    odradek_broker: RunningBroker,
) -> None:
    topic = unique_topic()
    with (
        KafkaConnection(odradek_broker.bootstrap) as admin,
        KafkaConnection(odradek_broker.bootstrap) as client,
    ):
        admin.create_topic(topic)
        partition = odradek_broker.call(_with_follower(odradek_broker, topic))
        first = client.send(PRODUCE, PRODUCE_VERSION, **_produce_fields(topic, b"first"))
        # An unknown API key: the connection ends, after the answers before it.
        client.send_raw(b"\x00\x00\x00\x0a\x7f\xff\x00\x00\x00\x00\x00\x07\xff\xff")
        wait_until(lambda: odradek_broker.call(_log_end(partition)) == 1, what="appended")
        odradek_broker.call(_follower_at(partition, 1))
        answer = client.receive(PRODUCE, PRODUCE_VERSION, first)
        assert answer.responses[0].partition_responses[0].error_code == ErrorCode.none
        client.assert_closed_by_broker()
