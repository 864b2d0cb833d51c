"""Request frames captured from real old clients (tests/protocol/captured, its README): kafka-python
pinned to old ``api_version`` settings (0.8.1 to 2.8), sarama 1.22.1 and kafka-go 0.2.1 (the
versions Debian bookworm packages) and librdkafka 2.0 (Debian's kcat) — replayed byte for byte
against a real broker, which has the captures' topics; a capture's ``setup`` frames (the Produce
requests before a Fetch from past offset 0) are replayed first.

Every frame gets a response of its API and version that kafka-python reads (its classes are
generated from Kafka's own message definitions), on a connection that stays open, carrying the
error codes Kafka gives: none for the data, metadata and admin APIs.
"""

from __future__ import annotations

import dataclasses
import json
import struct
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import kafka.protocol.admin
import kafka.protocol.consumer
import kafka.protocol.metadata
import kafka.protocol.producer  # noqa: F401  (each registers its response classes)
import pytest
from kafka.protocol.api_header import RequestHeader
from kafka.protocol.metadata import ApiVersionsResponse

from odradek.testing import RunningBroker, running_broker
from tests.server.conftest import KafkaConnection

CAPTURED_DIR = Path(__file__).parents[1] / "protocol" / "captured"
CAPTURED: dict[str, dict[str, Any]] = {
    f"{path.stem}:{name}": entry
    for path in sorted(CAPTURED_DIR.glob("*.json"))
    for name, entry in json.loads(path.read_text()).items()
}
# What each API may answer to a frame from another broker's session. Group answers depend on
# the group's state: a member of the capture's broker is unknown here (UNKNOWN_MEMBER_ID,
# ILLEGAL_GENERATION), a replayed JoinGroup makes a member and starts a rebalance
# (REBALANCE_IN_PROGRESS) and a commit from outside that group is refused; their responses must
# be well formed, and a commit refused only for those reasons (the e2e tests commit for real).
# A replayed CreateTopics finds its topic made (TOPIC_ALREADY_EXISTS).
JOIN_GROUP = 11
# ApiVersions v0, framed: api key 18, version 0, correlation id 99, client id "replay"
API_VERSIONS_V0 = struct.pack(">ihhih", 16, 18, 0, 99, 6) + b"replay"
NONE = {0}
GROUP_REFUSALS = {0, 22, 25, 27}  # ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID, REBALANCE_IN_PROGRESS
EXPECTED_ERRORS = {
    0: NONE,  # Produce
    1: NONE,  # Fetch
    2: NONE,  # ListOffsets
    3: NONE,  # Metadata
    8: GROUP_REFUSALS,  # OffsetCommit
    9: NONE,  # OffsetFetch
    10: NONE,  # FindCoordinator
    12: GROUP_REFUSALS,  # Heartbeat
    13: GROUP_REFUSALS,  # LeaveGroup
    14: GROUP_REFUSALS,  # SyncGroup
    18: NONE,  # ApiVersions
    19: {0, 36},  # CreateTopics: TOPIC_ALREADY_EXISTS
    29: NONE,  # DescribeAcls
    30: NONE,  # CreateAcls
    31: NONE,  # DeleteAcls
    32: NONE,  # DescribeConfigs
}


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningBroker]:
    # Kafka's authorizer, so that the ACL APIs answer; the replaying clients are super users.
    with running_broker(
        tmp_path_factory.mktemp("captured"),
        authorizer_class_name="kafka.security.authorizer.AclAuthorizer",
        super_users="User:ANONYMOUS",
        group_initial_rebalance_delay_ms="0",
    ) as b:
        with KafkaConnection(b.bootstrap) as client:
            for name, partitions in sorted(topics_needed().items()):
                client.create_topic(name, partitions)
        yield b


def topics_needed() -> dict[str, int]:
    """Topic name → partitions, for the frames to find their topics: named by the capture
    (``topics``), or else (kafka-python's captures) every ``captured-<version>`` in a frame."""
    topics: dict[str, int] = {}
    for entry in CAPTURED.values():
        if "topics" in entry:
            topics.update(entry["topics"])
            continue
        frame = bytes.fromhex(entry["frame"])
        for part in frame.split(b"captured-")[1:]:
            name = b"captured-" + part.split(b"\x00")[0].rstrip(b"\xff")
            if name[-1:].isdigit():
                topics.setdefault(name.decode(), 1)
    return topics


def error_codes(value: Any) -> Iterator[int]:
    if isinstance(value, list | tuple):
        for item in value:
            yield from error_codes(item)
    elif hasattr(value, "to_dict") or dataclasses.is_dataclass(value):
        fields = value.to_dict() if hasattr(value, "to_dict") else dataclasses.asdict(value)
        yield from error_codes(fields)
    elif isinstance(value, dict):
        for key, item in value.items():
            if key == "error_code":
                yield int(item)
            else:
                yield from error_codes(item)


def test_captures_cover_each_client() -> None:
    clients = {name.split(":")[0] for name in CAPTURED}
    assert {"kafka_python", "sarama", "kafka_go", "librdkafka"} <= clients


@pytest.mark.parametrize(
    "name", sorted(CAPTURED), ids=lambda n: n.replace(":", "-api").replace("/", "-")
)
def test_captured_frame_is_answered(broker: RunningBroker, name: str) -> None:
    entry = CAPTURED[name]
    frame = bytes.fromhex(entry["frame"])
    api_key, version, correlation_id = struct.unpack_from(">hhi", frame)
    assert (api_key, version) == (entry["api_key"], entry["api_version"])
    header = RequestHeader(
        request_api_key=api_key,
        request_api_version=version,
        correlation_id=correlation_id,
        client_id="replay",
    )
    response_class = header.get_response_class()
    with KafkaConnection(broker.bootstrap, timeout=15) as client:
        for setup in map(bytes.fromhex, entry.get("setup", [])):
            client.send_raw(struct.pack(">i", len(setup)) + setup)
            client.read_frame()
        client.send_raw(struct.pack(">i", len(frame)) + frame)
        answer = bytes(client.read_frame())
        response = response_class.decode(answer, header=True)
        assert response.header.correlation_id == correlation_id
        codes = set(error_codes(response))
        assert codes <= EXPECTED_ERRORS.get(api_key, codes), (entry["client"], codes)
        # the connection is still served: the same request again, or for a JoinGroup (whose
        # repeat is a second member, waiting out the first one's rebalance timeout) ApiVersions
        if api_key == JOIN_GROUP:
            client.send_raw(API_VERSIONS_V0)
            assert ApiVersionsResponse[0].decode(bytes(client.read_frame()), header=True).api_keys
        else:
            client.send_raw(struct.pack(">i", len(frame)) + frame)
            assert response_class.decode(bytes(client.read_frame()), header=True)
