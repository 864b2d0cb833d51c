"""Bounded memory per connection: a broker process whose clients announce huge requests and send
little of them keeps its memory (a size prefix is a claim, not an allocation), and a healthy
client is served meanwhile; a request over socket.request.max.bytes closes only its connection.

The broker runs as a process of its own so that its resident memory can be read from /proc."""

from __future__ import annotations

import socket
import struct
from collections.abc import Iterator
from pathlib import Path

import pytest

from odradek.protocol.errors import ErrorCode
from odradek.testing import BrokerProcess, wait_until

from .conftest import (
    API_VERSIONS,
    KafkaConnection,
    batch_of,
    unique_topic,
    unread_bytes,
    values_of,
)

MB = 1024 * 1024
ANNOUNCED = 100 * MB  # socket.request.max.bytes by default: the largest a client may announce
LIARS = 16
SENT = 100 * 1024  # more than a receive buffer, so the broker must find room for the rest


def resident_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError(f"no VmRSS for process {pid}")


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    process = BrokerProcess(tmp_path_factory.mktemp("bounded-memory")).start()
    try:
        yield process
    finally:
        process.terminate()


def test_clients_announcing_huge_requests_cost_only_what_they_send(broker: BrokerProcess) -> None:
    assert broker.process is not None
    pid = broker.process.pid
    with KafkaConnection(broker.bootstrap) as healthy:
        healthy.request(API_VERSIONS, 3, client_software_name="t", client_software_version="1")
        before = resident_bytes(pid)
        liars = [socket.create_connection(("127.0.0.1", broker.port)) for _ in range(LIARS)]
        try:
            for liar in liars:
                liar.sendall(struct.pack(">i", ANNOUNCED) + b"\0" * SENT)
            peers = {liar.getsockname()[1] for liar in liars}
            wait_until(
                lambda: unread_bytes(broker.port, peers) == 0, what="the broker read every byte"
            )
            for liar in liars:
                liar.sendall(b"\0")  # one more byte: room must be found for it
            wait_until(
                lambda: unread_bytes(broker.port, peers) == 0, what="the broker read every byte"
            )

            topic = unique_topic("healthy")
            healthy.create_topic(topic)
            assert healthy.produce(topic, 0, batch_of(b"still served")).error_code == 0
            assert values_of(healthy.fetch(topic, 0, 0).records) == [b"still served"]

            grown = resident_bytes(pid) - before
            # Allocating what was announced would take LIARS * 100 MB = 1.6 GB.
            assert grown < 100 * MB, f"RSS grew by {grown / MB:.0f} MB"
            assert resident_bytes(pid) < 300 * MB
        finally:
            for liar in liars:
                liar.close()


def test_a_request_over_the_limit_closes_only_its_connection(broker: BrokerProcess) -> None:
    with KafkaConnection(broker.bootstrap) as bystander, KafkaConnection(broker.bootstrap) as big:
        versions = {"client_software_name": "t", "client_software_version": "1"}
        bystander.request(API_VERSIONS, 3, **versions)
        big.send_raw(struct.pack(">i", ANNOUNCED + 1) + b"\0" * 64)
        big.assert_closed_by_broker()
        response = bystander.request(API_VERSIONS, 3, **versions)
        assert response.error_code == ErrorCode.none
