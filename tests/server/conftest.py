"""A Kafka connection for tests that feed the broker exact bytes, on the project's blocking client.

Requests are built with :func:`odradek.protocol.messages.build` from version-independent keyword
values at the exact version a test names, and go through
:class:`~odradek.client.blocking.BlockingConnection` (framing and correlation by the client core);
responses are decoded by kio, and a response whose bytes kio does not consume exactly counts as a
failure. ``send_raw`` writes any bytes at all (broken frames included); answers to frames a test
built itself are read with ``receive`` by their correlation id.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kio.serial import entity_reader

from odradek.client.blocking import BlockingConnection
from odradek.client.core import ConnectionFailed, Request
from odradek.protocol.errors import ErrorCode
from odradek.protocol.messages import response_schema
from odradek.protocol.records import Record, encode_batch, iter_records
from odradek.testing import RunningBroker

PRODUCE, FETCH, LIST_OFFSETS, METADATA, API_VERSIONS, CREATE_TOPICS = 0, 1, 2, 3, 18, 19
PRODUCE_VERSION = 9
FETCH_VERSION = 12
TIMEOUT_S = 10.0

# What a broken connection raises.
ConnectionClosed = ConnectionFailed


def now_ms() -> int:
    return int(time.time() * 1000)


def batch_of(*values: bytes, key: bytes | None = None) -> bytes:
    """One uncompressed v2 batch holding ``values``, stamped with the current time."""
    return encode_batch([(key, v, (), None) for v in values], now_ms=now_ms())


def unique_topic(prefix: str = "t") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def unread_bytes(port: int, peers: set[int]) -> int:
    """Bytes that the clients at ``peers`` sent to the broker's ``port`` and the broker has not
    read yet: those waiting in the broker's ends of the connections, and those the clients'
    ends have not sent yet."""
    total = 0
    seen = set()
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        local_port = int(fields[1].split(":")[1], 16)
        remote_port = int(fields[2].split(":")[1], 16)
        unsent, unread = (int(queue, 16) for queue in fields[4].split(":"))
        if local_port == port and remote_port in peers:
            total += unread
            seen.add(remote_port)
        elif remote_port == port and local_port in peers:
            total += unsent
    assert seen == peers, f"connections missing from /proc/net/tcp: {peers - seen}"
    return total


class KafkaConnection:
    """One TCP connection speaking Kafka's framing; requests at exact versions, no negotiation."""

    def __init__(self, bootstrap: str, timeout: float = TIMEOUT_S) -> None:
        self.connection = BlockingConnection.open(
            bootstrap, client_id="odradek-tests", timeout_s=timeout, negotiate=False
        )
        self.timeout = timeout
        self._sent: dict[int, Request] = {}  # by correlation id, oldest first

    def close(self) -> None:
        self.connection.close()

    def __enter__(self) -> KafkaConnection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- frames ----------------------------------------------------------------------------------

    def send_raw(self, data: bytes) -> None:
        """Write ``data`` as it is: whole frames, parts of frames, or garbage."""
        self.connection.send_bytes(data)

    def read_frame(self) -> bytes | memoryview:
        """The next response frame, without its length prefix: the answer to the oldest request
        sent with :meth:`send`, or else to bytes sent with :meth:`send_raw`."""
        if self._sent:
            request = self._sent.pop(next(iter(self._sent)))
            response = self.connection.receive(request)
            assert response is not None
            return response.frame
        return self.connection.read_frame()

    def has_data(self, wait_s: float) -> bool:
        """Whether something (a response, or the close) arrives within ``wait_s``."""
        return self.connection.wait_readable(wait_s)

    def assert_closed_by_broker(self) -> None:
        """The broker ends the connection (EOF or reset) without sending a response."""
        try:
            frame = self.connection.read_frame()
        except ConnectionFailed as e:
            if isinstance(e.__cause__, TimeoutError):
                raise AssertionError("the broker kept the connection open") from e
            return
        raise AssertionError(f"expected the broker to close, got {bytes(frame[:40])!r}")

    # -- requests --------------------------------------------------------------------------------

    def send(self, api_key: int, version: int, /, **fields: Any) -> int:
        """Send a request built from ``fields``; returns its correlation id."""
        request = self.connection.send(api_key, fields, version=version, raw=True)
        if request.expects_response:
            self._sent[request.correlation_id] = request
        return request.correlation_id

    def receive(self, api_key: int, version: int, correlation_id: int) -> Any:
        """The decoded answer to a request sent with :meth:`send`, or to a frame with this
        correlation id sent with :meth:`send_raw`."""
        request = self._sent.pop(correlation_id, None)
        if request is None:
            request = self.connection.expect(api_key, version, correlation_id)
        response = self.connection.receive(request)
        assert response is not None
        return decode_exactly(api_key, version, response.frame, correlation_id)

    def request(self, api_key: int, version: int, /, **fields: Any) -> Any:
        """The decoded response; None for a Produce with acks=0, which gets none."""
        request = self.connection.send(api_key, fields, version=version, raw=True)
        response = self.connection.receive(request)
        if response is None:
            return None
        return decode_exactly(api_key, version, response.frame, request.correlation_id)

    # -- the APIs the tests use most -------------------------------------------------------------

    def create_topic(self, name: str, partitions: int = 1, **configs: str) -> None:
        response = self.request(
            CREATE_TOPICS,
            5,
            timeout=10_000,
            topics=[
                {
                    "name": name,
                    "num_partitions": partitions,
                    "replication_factor": 1,
                    "assignments": [],
                    "configs": [{"name": k, "value": v} for k, v in configs.items()],
                }
            ],
        )
        (result,) = response.topics
        assert result.error_code == ErrorCode.none, result

    def produce(
        self,
        topic: str,
        partition: int,
        records: bytes | None,
        *,
        acks: int = 1,
        version: int = PRODUCE_VERSION,
    ) -> Any:
        """The partition's response to a Produce of ``records``."""
        response = self.request(
            PRODUCE,
            version,
            acks=acks,
            timeout=10_000,
            topic_data=[
                {"name": topic, "partition_data": [{"index": partition, "records": records}]}
            ],
        )
        (topic_response,) = response.responses
        (partition_response,) = topic_response.partition_responses
        return partition_response

    def fetch_request_fields(
        self,
        partitions: list[tuple[str, int, int]],
        *,
        max_wait_ms: int = 0,
        min_bytes: int = 0,
        max_bytes: int = 50 * 1024 * 1024,
        partition_max_bytes: int = 10 * 1024 * 1024,
    ) -> dict[str, Any]:
        by_topic: dict[str, list[dict[str, Any]]] = {}
        for topic, index, offset in partitions:
            by_topic.setdefault(topic, []).append(
                {
                    "partition": index,
                    "current_leader_epoch": -1,
                    "fetch_offset": offset,
                    "last_fetched_epoch": -1,
                    "log_start_offset": -1,
                    "partition_max_bytes": partition_max_bytes,
                }
            )
        return {
            "replica_id": -1,
            "max_wait": max_wait_ms,
            "min_bytes": min_bytes,
            "max_bytes": max_bytes,
            "isolation_level": 0,
            "session_id": 0,
            "session_epoch": -1,
            "topics": [{"topic": t, "partitions": ps} for t, ps in by_topic.items()],
            "forgotten_topics_data": [],
            "rack_id": "",
        }

    def fetch(self, topic: str, partition: int, offset: int, **limits: Any) -> Any:
        """The partition's part of a Fetch response (no waiting unless ``limits`` say so)."""
        response = self.request(
            FETCH,
            FETCH_VERSION,
            **self.fetch_request_fields([(topic, partition, offset)], **limits),
        )
        assert response.error_code == ErrorCode.none
        (topic_response,) = response.responses
        (partition_response,) = topic_response.partitions
        return partition_response

    def read_all(self, topic: str, partition: int) -> list[Record]:
        """Every record of the partition, from offset 0 to the high watermark."""
        records: list[Record] = []
        offset = 0
        while True:
            p = self.fetch(topic, partition, offset)
            assert p.error_code == ErrorCode.none, p
            batch_records = records_of(p.records)
            records.extend(r for r in batch_records if r.offset >= offset)
            if not batch_records or records[-1].offset + 1 >= p.high_watermark:
                return records
            offset = records[-1].offset + 1

    def latest_offset(self, topic: str, partition: int) -> int:
        response = self.request(
            LIST_OFFSETS,
            7,
            replica_id=-1,
            isolation_level=0,
            topics=[
                {
                    "name": topic,
                    "partitions": [
                        {"partition_index": partition, "current_leader_epoch": -1, "timestamp": -1}
                    ],
                }
            ],
        )
        (p,) = response.topics[0].partitions
        assert p.error_code == ErrorCode.none, p
        return int(p.offset)


def decode_exactly(
    api_key: int, version: int, frame: bytes | memoryview, correlation_id: int
) -> Any:
    """Decode a response frame with kio, insisting every byte belongs to the response."""
    schema: Any = response_schema(api_key, version)
    # kio's readers return the value and how many bytes it took.
    header, header_size = entity_reader(schema.__header_schema__)(frame, 0)
    body, body_size = entity_reader(schema)(frame, header_size)
    assert header.correlation_id == correlation_id
    left = len(frame) - header_size - body_size
    assert left == 0, f"{left} bytes left after the response"
    return body


def records_of(data: bytes | None) -> list[Record]:
    if not data:
        return []
    return [record for _, records in iter_records(data) for record in records]


def values_of(data: bytes | None) -> list[bytes | None]:
    return [r.value for r in records_of(data)]


def assert_broker_serves(broker: RunningBroker, bystander: KafkaConnection) -> None:
    """An already-open connection still gets answers, and a fresh produce + fetch works."""
    response = bystander.request(
        API_VERSIONS, 3, client_software_name="t", client_software_version="1"
    )
    assert response.error_code == ErrorCode.none
    assert any(k.api_key == PRODUCE for k in response.api_keys)
    topic = unique_topic("alive")
    with KafkaConnection(broker.bootstrap) as fresh:
        fresh.create_topic(topic)
        produced = fresh.produce(topic, 0, batch_of(b"still", b"serving"))
        assert produced.error_code == ErrorCode.none
        assert produced.base_offset == 0
        fetched = fresh.fetch(topic, 0, 0)
        assert fetched.error_code == ErrorCode.none
        assert values_of(fetched.records) == [b"still", b"serving"]


@pytest.fixture
def connect(odradek_bootstrap: str) -> Iterator[Any]:
    """``connect()`` opens a :class:`KafkaConnection` to the test's broker, closed afterwards."""
    opened: list[KafkaConnection] = []

    def open_one() -> KafkaConnection:
        connection = KafkaConnection(odradek_bootstrap)
        opened.append(connection)
        return connection

    yield open_one
    for connection in opened:
        connection.close()
