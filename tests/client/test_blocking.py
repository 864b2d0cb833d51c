"""The blocking shell against a real broker: negotiation, pipelining, acks=0, failures."""

from __future__ import annotations

import socket
import threading
import uuid
from collections.abc import Iterator

import pytest

from odradek.client.blocking import BlockingConnection
from odradek.client.core import (
    FETCH,
    METADATA,
    PRODUCE,
    ClientError,
    ConnectionFailed,
    ProtocolError,
)
from odradek.protocol.errors import ErrorCode
from odradek.testing import RunningBroker, running_broker

from .conftest import METADATA_FIELDS, produce_fields


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningBroker]:
    with running_broker(tmp_path_factory.mktemp("blocking")) as running:
        yield running


def test_negotiates_versions(broker: RunningBroker) -> None:
    with BlockingConnection.open(broker.bootstrap, client_versions={FETCH: (4, 12)}) as connection:
        assert connection.version_for(FETCH) == 12
        assert connection.version_for(METADATA, highest=9) == 9
        assert connection.versions[PRODUCE][0] == 0  # the broker serves v0 (Kafka 3.9)
        with pytest.raises(ClientError, match="does not speak"):
            connection.version_for(999)
        with pytest.raises(ClientError, match="no common version"):
            connection.version_for(PRODUCE, highest=2)


def test_many_requests_in_flight_are_answered_whichever_is_awaited_first(
    broker: RunningBroker,
) -> None:
    with BlockingConnection.open(broker.bootstrap) as connection:
        sent = [connection.send(METADATA, METADATA_FIELDS, highest=12) for _ in range(20)]
        assert connection.in_flight == 20
        # The last first: the answers read on the way are kept for their requests.
        last = connection.receive(sent[-1])
        assert last is not None and last.body.brokers[0].port == broker.port
        for request in sent[:-1]:
            response = connection.receive(request)
            assert response is not None and response.request is request
        assert connection.in_flight == 0


def test_acks_0_gets_no_answer_and_the_next_request_still_matches(broker: RunningBroker) -> None:
    topic = f"blocking-{uuid.uuid4().hex[:8]}"
    with BlockingConnection.open(broker.bootstrap) as connection:
        connection.request(
            METADATA, {"topics": [{"name": topic}], "allow_auto_topic_creation": True}
        )
        silent = connection.send(PRODUCE, produce_fields(topic, acks=0))
        assert not silent.expects_response and connection.in_flight == 0
        assert connection.receive(silent) is None
        answered = connection.request(PRODUCE, produce_fields(topic, acks=1))
        partition = answered.responses[0].partition_responses[0]
        assert partition.error_code == ErrorCode.none
        assert partition.base_offset == 1  # after the acks=0 record


def test_an_abandoned_request_is_skipped(broker: RunningBroker) -> None:
    with BlockingConnection.open(broker.bootstrap) as connection:
        dropped = connection.send(METADATA, METADATA_FIELDS)
        kept = connection.send(METADATA, METADATA_FIELDS)
        connection.abandon(dropped)
        assert connection.receive(kept) is not None
        with pytest.raises(ClientError, match="not awaiting"):
            connection.receive(dropped)


def test_raw_answers_are_frames(broker: RunningBroker) -> None:
    with BlockingConnection.open(broker.bootstrap) as connection:
        request = connection.send(METADATA, METADATA_FIELDS, raw=True)
        response = connection.receive(request)
        assert response is not None and response.body is None
        assert int.from_bytes(bytes(response.frame[:4]), "big") == request.correlation_id


def test_connecting_nowhere_fails() -> None:
    with pytest.raises(ConnectionFailed, match="cannot connect"):
        BlockingConnection.open("127.0.0.1:1", timeout_s=2)


def _fake_broker(answer: bytes) -> tuple[socket.socket, threading.Thread]:
    """A listener that takes one connection, reads a little, writes ``answer`` and closes."""
    listener = socket.create_server(("127.0.0.1", 0))

    def serve() -> None:
        peer, _ = listener.accept()
        with peer:
            peer.recv(65536)
            peer.sendall(answer)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    return listener, thread


@pytest.mark.parametrize(
    ("answer", "error", "match"),
    [
        (b"", ConnectionFailed, "closed the connection"),
        (b"\0\0\0\x04\0\0\0\x07", ProtocolError, "unknown correlation id 7"),
        (b"\xff\xff\xff\xf0", ProtocolError, "frame of -16 bytes"),
    ],
)
def test_a_broken_answer_fails_the_connection(
    answer: bytes, error: type[Exception], match: str
) -> None:
    listener, thread = _fake_broker(answer)
    try:
        address = f"127.0.0.1:{listener.getsockname()[1]}"
        connection = BlockingConnection.open(address, timeout_s=5, negotiate=False)
        request = connection.send(METADATA, METADATA_FIELDS, version=12)
        with pytest.raises(error, match=match):
            connection.receive(request)
        assert connection.closed
        with pytest.raises(ConnectionFailed, match="closed"):
            connection.send(METADATA, METADATA_FIELDS, version=12)
    finally:
        thread.join(5)
        listener.close()
