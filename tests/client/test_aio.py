"""The asyncio shell against a real broker: many requests in flight on one connection, timeouts,
and a lost connection failing every request waiting on it."""

from __future__ import annotations

import asyncio
import re
import socket
import threading
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from odradek.client.aio import AsyncConnection
from odradek.client.core import (
    FETCH,
    METADATA,
    PRODUCE,
    ClientError,
    ConnectionFailed,
    ProtocolError,
    RequestTimeout,
    Response,
    request_frame,
)
from odradek.protocol.errors import ErrorCode
from odradek.protocol.records import iter_records
from odradek.testing import RunningBroker, running_broker

from .conftest import METADATA_FIELDS, produce_fields


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningBroker]:
    with running_broker(tmp_path_factory.mktemp("aio")) as running:
        yield running


def fetch_fields(
    topic: str, offset: int, max_wait_ms: int = 0, min_bytes: int = 0
) -> dict[str, Any]:
    return {
        "replica_id": -1,
        "max_wait": max_wait_ms,
        "min_bytes": min_bytes,
        "max_bytes": 1 << 20,
        "isolation_level": 0,
        "session_id": 0,
        "session_epoch": -1,
        "topics": [
            {
                "topic": topic,
                "partitions": [
                    {
                        "partition": 0,
                        "current_leader_epoch": -1,
                        "fetch_offset": offset,
                        "last_fetched_epoch": -1,
                        "log_start_offset": -1,
                        "partition_max_bytes": 1 << 20,
                    }
                ],
            }
        ],
        "forgotten_topics_data": [],
        "rack_id": "",
    }


async def new_topic(connection: AsyncConnection) -> str:
    topic = f"aio-{uuid.uuid4().hex[:8]}"
    await connection.request(
        METADATA, {"topics": [{"name": topic}], "allow_auto_topic_creation": True}, highest=12
    )
    return topic


def test_negotiates_versions(broker: RunningBroker) -> None:
    async def run() -> None:
        async with await AsyncConnection.open(broker.bootstrap) as connection:
            assert connection.version_for(FETCH, highest=12) == 12
            assert connection.versions[PRODUCE][0] == 0  # the broker serves v0 (Kafka 3.9)
            with pytest.raises(ClientError, match="no common version"):
                connection.version_for(PRODUCE, highest=2)

    asyncio.run(run())


def test_many_requests_in_flight_complete_their_own_futures(broker: RunningBroker) -> None:
    """Hundreds of concurrent requests of different kinds on one connection: each caller gets
    the answer to its own request."""

    async def run() -> None:
        async with await AsyncConnection.open(broker.bootstrap) as connection:
            topic = await new_topic(connection)

            async def produce(i: int) -> tuple[int, int]:
                response = await connection.request(
                    PRODUCE, produce_fields(topic, b"%d" % i), highest=9
                )
                partition = response.responses[0].partition_responses[0]
                assert partition.error_code == ErrorCode.none
                return i, int(partition.base_offset)

            async def metadata() -> None:
                response = await connection.request(METADATA, METADATA_FIELDS, highest=12)
                assert response.brokers[0].port == broker.port

            tasks = [produce(i) for i in range(300)] + [metadata() for _ in range(100)]
            results = await asyncio.gather(*tasks)
            offsets = dict(r for r in results if r is not None)
            # Every produce got its own offset, and offset n holds the value sent as n's.
            assert sorted(offsets.values()) == list(range(300))
            fetched = await connection.request(FETCH, fetch_fields(topic, 0), highest=12)
            records = fetched.responses[0].partitions[0].records
            values = {r.offset: r.value for _, rs in iter_records(records) for r in rs}
            assert all(values[offset] == b"%d" % i for i, offset in offsets.items())
            assert connection.in_flight == 0

    asyncio.run(run())


def test_a_long_poll_does_not_hold_back_later_requests_of_other_connections(
    broker: RunningBroker,
) -> None:
    """A long-polling Fetch waits for its data while its own future waits; acks=0 Produce on
    the same connection needs no answer, and the Fetch then sees the record."""

    async def run() -> None:
        async with await AsyncConnection.open(broker.bootstrap) as connection:
            topic = await new_topic(connection)
            _, waiting = connection.send(
                FETCH, fetch_fields(topic, 0, max_wait_ms=10_000, min_bytes=1), highest=12
            )
            async with await AsyncConnection.open(broker.bootstrap) as producer:
                assert await producer.request(PRODUCE, produce_fields(topic, b"x", acks=0)) is None
            response = await asyncio.wait_for(waiting, 10)
            assert response is not None
            records = response.body.responses[0].partitions[0].records
            assert [r.value for _, rs in iter_records(records) for r in rs] == [b"x"]

    asyncio.run(run())


def test_a_timed_out_request_is_abandoned_and_the_connection_goes_on(
    broker: RunningBroker,
) -> None:
    async def run() -> None:
        async with await AsyncConnection.open(broker.bootstrap) as connection:
            topic = await new_topic(connection)
            with pytest.raises(RequestTimeout, match=r"within 0\.2 s"):
                await connection.request(
                    FETCH,
                    fetch_fields(topic, 0, max_wait_ms=1000, min_bytes=1),
                    highest=12,
                    timeout_s=0.2,
                )
            # The late answer to the Fetch is dropped; the next request gets its own.
            response = await connection.request(METADATA, METADATA_FIELDS, highest=12)
            assert response.brokers[0].port == broker.port

    asyncio.run(run())


def test_a_cancelled_request_is_abandoned(broker: RunningBroker) -> None:
    async def run() -> None:
        async with await AsyncConnection.open(broker.bootstrap) as connection:
            topic = await new_topic(connection)
            task = asyncio.create_task(
                connection.request(
                    FETCH, fetch_fields(topic, 0, max_wait_ms=500, min_bytes=1), highest=12
                )
            )
            await asyncio.sleep(0.05)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            assert connection.in_flight == 0
            assert (await connection.request(METADATA, METADATA_FIELDS, highest=12)).brokers

    asyncio.run(run())


def test_raw_frames_and_prebuilt_requests(broker: RunningBroker) -> None:
    async def run() -> None:
        async with await AsyncConnection.open(broker.bootstrap) as connection:
            raw = await connection.exchange(METADATA, METADATA_FIELDS, highest=12, raw=True)
            assert raw is not None and raw.body is None and len(raw.frame) > 4
            topic = await new_topic(connection)
            prebuilt = bytearray(request_frame(PRODUCE, 9, produce_fields(topic, b"p")))
            answers: list[Response | ClientError] = []
            done = asyncio.Event()

            def answered(response: Response | ClientError) -> None:
                answers.append(response)
                if len(answers) == 5:
                    done.set()

            for _ in range(5):
                connection.send_frame_then(prebuilt, answered)
            await asyncio.wait_for(done.wait(), 10)
            offsets = [
                a.body.responses[0].partition_responses[0].base_offset
                for a in answers
                if isinstance(a, Response)
            ]
            assert offsets == [0, 1, 2, 3, 4]

    asyncio.run(run())


def test_connecting_nowhere_fails() -> None:
    async def run() -> None:
        with pytest.raises(ConnectionFailed, match="cannot connect"):
            await AsyncConnection.open("127.0.0.1:1", timeout_s=2)

    asyncio.run(run())


class FakeBroker:
    """A listener whose one connection reads requests and then does what a test says."""

    def __init__(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.address = f"127.0.0.1:{self.listener.getsockname()[1]}"
        self.received = threading.Event()
        self.answer = b""
        self.release = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        peer, _ = self.listener.accept()
        with peer:
            peer.recv(65536)
            self.received.set()
            self.release.wait(10)
            if self.answer:
                peer.sendall(self.answer)
                self.release.clear()
                self.release.wait(10)

    def close(self) -> None:
        self.release.set()
        self.thread.join(10)
        self.listener.close()


@pytest.mark.parametrize(
    ("answer", "error", "match"),
    [
        (b"", ConnectionFailed, "closed the connection|was lost"),
        (b"\0\0\0\x04\x7f\0\0\0", ProtocolError, "unknown correlation id"),
    ],
)
def test_a_lost_connection_fails_every_request_in_flight(
    answer: bytes, error: type[Exception], match: str
) -> None:
    fake = FakeBroker()
    fake.answer = answer

    async def run() -> None:
        connection = await AsyncConnection.open(fake.address, negotiate=False)
        waiting = [
            asyncio.create_task(connection.request(METADATA, METADATA_FIELDS, version=12))
            for _ in range(10)
        ]
        await asyncio.to_thread(fake.received.wait, 10)
        fake.release.set()  # the fake broker answers (or closes) now
        results = await asyncio.gather(*waiting, return_exceptions=True)
        assert all(isinstance(r, error) for r in results), results
        assert any(re.search(match, str(r)) for r in results), results
        assert connection.closed
        with pytest.raises(ConnectionFailed):
            await connection.request(METADATA, METADATA_FIELDS, version=12)
        await connection.close()

    try:
        asyncio.run(run())
    finally:
        fake.close()


def test_closing_fails_the_requests_still_waiting() -> None:
    fake = FakeBroker()

    async def run() -> None:
        connection = await AsyncConnection.open(fake.address, negotiate=False)
        waiting = asyncio.create_task(connection.request(METADATA, METADATA_FIELDS, version=12))
        await asyncio.to_thread(fake.received.wait, 10)
        await connection.close()
        with pytest.raises(ConnectionFailed, match="closed"):
            await waiting

    try:
        asyncio.run(run())
    finally:
        fake.close()
