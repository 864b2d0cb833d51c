"""Hostile requests against a running broker process (a child process: a crash of native code
fails these tests instead of killing the run): the frames whose counts lie and null arrays where
Kafka allows none close only their own connection, logged in one line without a traceback; and
a network fuzzer sends mutated captured frames over many connections for a bounded time while a
healthy client keeps a produce/fetch round trip going, which must never fail.

``ODRADEK_NETWORK_FUZZ_SECONDS`` (default 5) sets the fuzzer's run; a minute or more is the
issue's "done when" run.
"""

from __future__ import annotations

import contextlib
import os
import random
import socket
import struct
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from odradek.protocol.errors import ErrorCode
from odradek.protocol.messages import RequestHeader, encode_request, request_schema
from odradek.testing import BrokerProcess, wait_until
from tests.protocol.fuzz_targets import captured_frames
from tests.protocol.lying_frames import LYING_FRAMES
from tests.protocol.null_arrays import request_with_null

from .conftest import KafkaConnection, assert_broker_serves, batch_of, unique_topic, values_of
from .test_captured_frames import topics_needed

FUZZ_SECONDS = float(os.environ.get("ODRADEK_NETWORK_FUZZ_SECONDS", "5"))
FUZZ_CONNECTIONS = 8
# (API key, version, path of the array sent as null): the APIs the issue saw fail with TypeError
NULLS = {
    "list-offsets-v7": (2, 7, ("topics",)),
    "fetch-v12": (1, 12, ("topics",)),
    "sync-group-v5": (14, 5, ("assignments",)),
    "offset-commit-v8": (8, 8, ("topics",)),
    "offset-commit-v8-partitions": (8, 8, ("topics", "partitions")),
    "txn-offset-commit-v3": (28, 3, ("topics",)),
}


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    process = BrokerProcess(
        tmp_path_factory.mktemp("fuzz-network"), "-o", "group.initial.rebalance.delay.ms=0"
    ).start()
    try:
        with KafkaConnection(process.bootstrap) as client:
            for name, partitions in sorted(topics_needed().items()):
                client.create_topic(name, partitions)
        yield process
    finally:
        assert process.terminate() == 0, "".join(process.output[-40:])


@pytest.fixture
def bystander(broker: BrokerProcess) -> Iterator[KafkaConnection]:
    with KafkaConnection(broker.bootstrap) as connection:
        connection.request(3, 9, topics=[], allow_auto_topic_creation=False)
        yield connection


def tracebacks(broker: BrokerProcess) -> list[str]:
    return [line for line in broker.output if "Traceback" in line or "unexpected error" in line]


def closed_lines(broker: BrokerProcess, start: int) -> list[str]:
    return [line for line in broker.output[start:] if "closing connection from" in line]


def assert_closed_alone(
    broker: BrokerProcess, bystander: KafkaConnection, frame: bytes, reason: str
) -> None:
    start = len(broker.output)
    with KafkaConnection(broker.bootstrap) as client:
        client.send_raw(struct.pack(">i", len(frame)) + frame)
        client.assert_closed_by_broker()
    lines = wait_until(lambda: closed_lines(broker, start), what="the close in the broker's log")
    assert len(lines) == 1 and reason in lines[0], lines
    assert_broker_serves(broker, bystander)  # type: ignore[arg-type]
    assert not tracebacks(broker)


@pytest.mark.parametrize("name", sorted(LYING_FRAMES))
def test_lying_count_closes_only_its_connection(
    broker: BrokerProcess, bystander: KafkaConnection, name: str
) -> None:
    assert_closed_alone(broker, bystander, LYING_FRAMES[name], "elements with")


@pytest.mark.parametrize("name", sorted(NULLS))
def test_null_where_kafka_allows_none_closes_only_its_connection(
    broker: BrokerProcess, bystander: KafkaConnection, name: str
) -> None:
    api_key, version, path = NULLS[name]
    request = request_with_null(request_schema(api_key, version), path, group_id="g")
    frame = encode_request(RequestHeader(api_key, version, 11, "null"), request)[4:]
    assert_closed_alone(broker, bystander, frame, "serialized as null")


# -- the network fuzzer --------------------------------------------------------------------------

LIES = [b"\xff\xff\xff\xff", b"\x7f\xff\xff\xfe", b"\xff\xff\xff\xff\x0f", b"\x00", b"\xff"]


def mutated(rng: random.Random, frame: bytes) -> bytes:
    out = bytearray(frame)
    for _ in range(rng.randint(1, 4)):
        # the header (api key, version) is kept mostly: mutations should reach the decoders
        at = rng.randrange(4, len(out)) if len(out) > 4 else 0
        choice = rng.random()
        if choice < 0.4:
            lie = rng.choice(LIES)
            out[at : at + len(lie)] = lie
        elif choice < 0.8:
            out[at] ^= rng.randint(1, 255)
        elif choice < 0.9:
            del out[at:]
        else:
            out[at:at] = rng.randbytes(rng.randint(1, 8))
    return bytes(out)


class Fuzzer(threading.Thread):
    """Opens connection after connection, each sending a few mutated frames (some cut short,
    some pipelined) and reading whatever comes back until the broker answers or closes."""

    def __init__(self, bootstrap: str, seed: int, until: float) -> None:
        super().__init__(daemon=True)
        self.host, port = bootstrap.rsplit(":", 1)
        self.port = int(port)
        self.rng = random.Random(seed)
        self.until = until
        self.frames = captured_frames()
        self.sent = 0
        self.connections = 0

    def run(self) -> None:
        while time.monotonic() < self.until:
            with socket.create_connection((self.host, self.port), timeout=5) as s:
                self.connections += 1
                try:
                    for _ in range(self.rng.randint(1, 5)):
                        frame = mutated(self.rng, self.rng.choice(self.frames))
                        s.sendall(struct.pack(">i", len(frame)) + frame)
                        self.sent += 1
                    s.settimeout(0.2)
                    while s.recv(65536):
                        pass
                except OSError:
                    pass  # closed by the broker, or nothing more to read


def round_trips(bootstrap: str, topic: str, until: float) -> list[bytes]:
    """Produce one record and fetch it back, again and again; every step must succeed."""
    sent: list[bytes] = []
    with KafkaConnection(bootstrap) as client:
        while time.monotonic() < until:
            value = f"healthy-{len(sent)}".encode()
            produced = client.produce(topic, 0, batch_of(value), acks=-1)
            assert produced.error_code == ErrorCode.none, produced
            fetched = client.fetch(topic, 0, produced.base_offset)
            assert fetched.error_code == ErrorCode.none, fetched
            assert values_of(fetched.records)[0] == value
            sent.append(value)
    return sent


def open_descriptors(broker: BrokerProcess) -> list[str]:
    """What the broker process has open, sockets and partition files alike."""
    assert broker.process is not None
    found = []
    for fd in Path(f"/proc/{broker.process.pid}/fd").iterdir():
        # One the broker closes between the listing and the read is not open any more.
        with contextlib.suppress(FileNotFoundError):
            found.append(os.readlink(fd))
    return found


def test_mutated_frames_leave_the_broker_serving(broker: BrokerProcess) -> None:
    topic = unique_topic("healthy")
    with KafkaConnection(broker.bootstrap) as admin:
        admin.create_topic(topic)
    until = time.monotonic() + FUZZ_SECONDS
    fuzzers = [Fuzzer(broker.bootstrap, seed, until) for seed in range(FUZZ_CONNECTIONS)]
    for fuzzer in fuzzers:
        fuzzer.start()
    sent = round_trips(broker.bootstrap, topic, until)
    for fuzzer in fuzzers:
        fuzzer.join(timeout=60)
    summary: dict[str, Any] = {
        "frames": sum(f.sent for f in fuzzers),
        "connections": sum(f.connections for f in fuzzers),
        "round trips": len(sent),
        # connections whose last request still waits (a long poll, a join) keep their socket
        "sockets left": sum(fd.startswith("socket:") for fd in open_descriptors(broker)),
    }
    print("network fuzz:", summary)
    assert broker.process is not None and broker.process.poll() is None
    assert sent and summary["frames"] > 0
    assert not tracebacks(broker), tracebacks(broker)[:5]
    # nothing left behind: a fresh connection is served, and the healthy topic holds exactly
    # what was acknowledged, in order (the broker's clean stop is checked by the fixture)
    with KafkaConnection(broker.bootstrap) as bystander:
        assert_broker_serves(broker, bystander)  # type: ignore[arg-type]
        assert [r.value for r in bystander.read_all(topic, 0)] == sent
