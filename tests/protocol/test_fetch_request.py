"""A follower's Fetch v12 written by hand is byte for byte what kio writes, and reads back as the
request the follower meant."""

from __future__ import annotations

import datetime
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from odradek.client.core import request_frame
from odradek.protocol.fetch_request import (
    API_KEY,
    REPLICA_FETCH_VERSION,
    ReplicaFetchPartition,
    decode_fetch_request,
    encode_replica_fetch,
)

_INT32 = st.integers(-(2**31), 2**31 - 1)
_INT64 = st.integers(-(2**63), 2**63 - 1)
_PARTITIONS = st.lists(
    st.builds(ReplicaFetchPartition, _INT32, _INT32, _INT64, _INT64, _INT32), max_size=4
)
_TOPICS = st.lists(st.tuples(st.text(min_size=1, max_size=200), _PARTITIONS), max_size=4)
_FORGOTTEN = st.lists(
    st.tuples(st.text(min_size=1, max_size=200), st.lists(_INT32, max_size=4)), max_size=4
)
Forgotten = list[tuple[str, list[int]]]


def _kio_frame(
    correlation_id: int,
    client_id: str,
    replica_id: int,
    max_wait_ms: int,
    topics: list[tuple[str, list[ReplicaFetchPartition]]],
    session: tuple[int, int],
    forgotten: Forgotten,
) -> bytes:
    fields: dict[str, Any] = {
        "replica_id": replica_id,
        "max_wait": datetime.timedelta(milliseconds=max_wait_ms),
        "min_bytes": 1,
        "max_bytes": 10 * 1024 * 1024,
        "isolation_level": 0,
        "session_id": session[0],
        "session_epoch": session[1],
        "topics": [
            {
                "topic": name,
                "partitions": [
                    {
                        "partition": p.partition,
                        "current_leader_epoch": p.current_leader_epoch,
                        "fetch_offset": p.fetch_offset,
                        "log_start_offset": p.log_start_offset,
                        "partition_max_bytes": p.partition_max_bytes,
                    }
                    for p in partitions
                ],
            }
            for name, partitions in topics
        ],
        "forgotten_topics_data": [
            {"topic": name, "partitions": indexes} for name, indexes in forgotten
        ],
        "rack_id": "",
    }
    return request_frame(
        API_KEY, REPLICA_FETCH_VERSION, fields, client_id=client_id, correlation_id=correlation_id
    )


@given(
    correlation_id=st.integers(0, 2**31 - 1),
    client_id=st.text(max_size=50),
    replica_id=st.integers(0, 2**31 - 1),
    max_wait_ms=st.integers(0, 2**31 - 1),
    topics=_TOPICS,
    session=st.tuples(_INT32, _INT32),
    forgotten=_FORGOTTEN,
)
def test_a_replica_fetch_is_what_kio_writes(
    correlation_id: int,
    client_id: str,
    replica_id: int,
    max_wait_ms: int,
    topics: list[tuple[str, list[ReplicaFetchPartition]]],
    session: tuple[int, int],
    forgotten: Forgotten,
) -> None:
    ours = encode_replica_fetch(
        correlation_id,
        client_id,
        replica_id,
        max_wait_ms,
        1,
        10 * 1024 * 1024,
        topics,
        session_id=session[0],
        session_epoch=session[1],
        forgotten=forgotten,
    )
    theirs = _kio_frame(
        correlation_id, client_id, replica_id, max_wait_ms, topics, session, forgotten
    )
    assert ours == theirs


def test_a_replica_fetch_goes_without_a_session_unless_told() -> None:
    frame = encode_replica_fetch(1, "c", 2, 500, 1, 1024, [])
    _, request = decode_fetch_request(memoryview(frame)[4:])
    assert (request.session_id, request.session_epoch, request.forgotten_topics_data) == (0, -1, ())


def test_a_replica_fetch_reads_back() -> None:
    frame = encode_replica_fetch(
        7,
        "broker-2-fetcher-1",
        2,
        500,
        1,
        1024,
        [("t", [ReplicaFetchPartition(3, 4, 5, 6, 7)])],
        session_id=123456,
        session_epoch=9,
        forgotten=[("gone", [0, 2]), ("t", [1])],
    )
    header, request = decode_fetch_request(memoryview(frame)[4:])
    assert (header.api_version, header.correlation_id) == (REPLICA_FETCH_VERSION, 7)
    assert (request.replica_id, request.max_bytes) == (2, 1024)
    assert (request.session_id, request.session_epoch) == (123456, 9)
    assert [(f.topic, list(f.partitions)) for f in request.forgotten_topics_data] == [
        ("gone", [0, 2]),
        ("t", [1]),
    ]
    ((topic, (partition,)),) = [(t.topic, t.partitions) for t in request.topics]
    assert topic == "t"
    assert (
        partition.partition,
        partition.current_leader_epoch,
        partition.fetch_offset,
        partition.log_start_offset,
        partition.partition_max_bytes,
    ) == (3, 4, 5, 6, 7)
