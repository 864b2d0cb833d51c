"""The hand-written Metadata response is byte for byte what kio writes, for every version served."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from odradek.protocol import metadata_response
from odradek.protocol.messages import build, encode_response, response_schema

BROKERS = [
    {"node_id": 1, "host": "broker-1.example", "port": 9092, "rack": None},
    {"node_id": 2, "host": "brökér-2", "port": 19092, "rack": "rack-b"},
]
TOPICS: list[dict[str, Any]] = [
    {
        "error_code": 0,
        "name": "orders",
        "topic_id": uuid.UUID("6ba7b810-9dad-11d1-80b4-00c04fd430c8"),
        "is_internal": False,
        "partitions": [
            {
                "error_code": 0,
                "partition_index": 0,
                "leader_id": 1,
                "leader_epoch": 7,
                "replica_nodes": (1, 2),
                "isr_nodes": (1,),
                "offline_replicas": (2,),
            },
            {
                "error_code": 5,  # LEADER_NOT_AVAILABLE
                "partition_index": 1,
                "leader_id": -1,
                "leader_epoch": -1,
                "replica_nodes": [],  # lists, as the handler gives them for a partition unknown
                "isr_nodes": [],
                "offline_replicas": [],
            },
        ],
        "topic_authorized_operations": 0x5F8,
    },
    {
        "error_code": 0,
        "name": "__consumer_offsets",
        "topic_id": uuid.uuid4(),
        "is_internal": True,
        "partitions": [
            {
                "error_code": 0,
                "partition_index": i,
                "leader_id": 2,
                "leader_epoch": 0,
                "replica_nodes": (2, 1, 3),
                "isr_nodes": (2, 1, 3),
                "offline_replicas": (),
            }
            for i in range(3)
        ],
    },
    {"error_code": 3, "name": "missing", "partitions": []},  # UNKNOWN_TOPIC_OR_PARTITION
]


@pytest.mark.parametrize("version", range(metadata_response.MAX_VERSION + 1))
@pytest.mark.parametrize("cluster_id", ["c-1ûd", None])
def test_bytes_are_kios(version: int, cluster_id: str | None) -> None:
    fields = {
        "brokers": BROKERS,
        "cluster_id": cluster_id,
        "controller_id": 2,
        "topics": TOPICS,
        "cluster_authorized_operations": -(2**31),
    }
    kio = encode_response(99, build(response_schema(3, version), dict(fields, throttle_time=0)))
    assert metadata_response.encode(version, 99, **fields) == kio


def test_a_name_unknown_by_id_is_null_from_v12() -> None:
    by_id = [{"error_code": 100, "name": None, "topic_id": uuid.uuid4(), "partitions": []}]
    fields = {"brokers": BROKERS, "cluster_id": "c", "controller_id": 1, "topics": by_id}
    kio = encode_response(1, build(response_schema(3, 12), dict(fields, throttle_time=0)))
    assert metadata_response.encode(12, 1, **fields) == kio


def test_versions_not_served_are_refused() -> None:
    with pytest.raises(ValueError):
        metadata_response.encode(13, 1, brokers=[], cluster_id=None, controller_id=1, topics=[])


@pytest.mark.parametrize("version", range(metadata_response.MAX_VERSION + 1))
def test_topics_written_beforehand_make_the_same_bytes(version: int) -> None:
    fields: dict[str, Any] = {"brokers": BROKERS, "cluster_id": "c", "controller_id": 2}
    written = [metadata_response.encode_topic(version, t) for t in TOPICS]
    assert metadata_response.encode(version, 5, topics=written, **fields) == (
        metadata_response.encode(version, 5, topics=TOPICS, **fields)
    )


def test_a_topic_written_is_kept_for_its_state_only() -> None:
    topics = metadata_response.EncodedTopics(capacity=2)
    topic_id = uuid.uuid4()
    topics.put(12, "a", topic_id, ("state", 1), b"a-1")
    assert topics.get(12, "a", topic_id, ("state", 1)) == b"a-1"
    assert topics.get(12, "a", topic_id, ("state", 2)) is None  # changed since
    assert topics.get(11, "a", topic_id, ("state", 1)) is None  # another version
    assert topics.get(12, "a", uuid.uuid4(), ("state", 1)) is None  # a topic made again
    topics.put(12, "b", None, 1, b"b")
    topics.put(12, "c", None, 1, b"c")  # over capacity: the oldest goes
    assert topics.get(12, "a", topic_id, ("state", 1)) is None
    assert topics.get(12, "b", None, 1) == b"b"
    assert topics.get(12, "c", None, 1) == b"c"
