"""Request frames captured from kafka-python pinned to old ``api_version`` settings (0.8.1 to
2.0; tests/protocol/captured), replayed byte for byte against a real broker.

Every frame gets a response of its API and version that kafka-python reads (its classes are
generated from Kafka's own message definitions), on a connection that stays open; the data APIs
answer without an error.
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

from odradek.testing import RunningBroker, running_broker
from tests.server.conftest import KafkaConnection

CAPTURED: dict[str, dict[str, Any]] = json.loads(
    (Path(__file__).parents[1] / "protocol" / "captured" / "kafka_python.json").read_text()
)
# Group answers depend on the group's state: a member of the capture's broker is unknown here
# (UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION), and once a replayed JoinGroup has made a member, a
# commit from outside the group is refused too. Their responses must be well formed, and a
# commit refused only for those reasons (tests/e2e/test_old_clients.py commits for real).
DATA_APIS = {0, 1, 2, 3, 9}
OFFSET_COMMIT = 8
GROUP_REFUSALS = {22, 25}  # ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningBroker]:
    with running_broker(tmp_path_factory.mktemp("captured")) as b:
        with KafkaConnection(b.bootstrap) as client:
            for name in sorted(topics_named()):
                client.create_topic(name)
        yield b


def topics_named() -> set[str]:
    names = set()
    for entry in CAPTURED.values():
        frame = bytes.fromhex(entry["frame"])
        names.update(
            part.decode()
            for part in frame.split(b"captured-")[1:]
            for part in [b"captured-" + part.split(b"\x00")[0].rstrip(b"\xff")]
            if part[-1:].isdigit()
        )
    return names


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


@pytest.mark.parametrize("name", sorted(CAPTURED), ids=lambda n: "api" + n.replace("/", "-"))
def test_captured_frame_is_answered(broker: RunningBroker, name: str) -> None:
    entry = CAPTURED[name]
    frame = bytes.fromhex(entry["frame"])
    api_key, version, correlation_id = struct.unpack_from(">hhi", frame)
    header = RequestHeader(
        request_api_key=api_key,
        request_api_version=version,
        correlation_id=correlation_id,
        client_id="replay",
    )
    response_class = header.get_response_class()
    with KafkaConnection(broker.bootstrap, timeout=15) as client:
        client.send_raw(struct.pack(">i", len(frame)) + frame)
        answer = bytes(client.read_frame())
        response = response_class.decode(answer, header=True)
        assert response.header.correlation_id == correlation_id
        if api_key in DATA_APIS:
            codes = list(error_codes(response))
            assert all(code == 0 for code in codes), (entry["client"], codes)
        if api_key == OFFSET_COMMIT:
            assert set(error_codes(response)) <= {0} | GROUP_REFUSALS
        # the connection is still served
        client.send_raw(struct.pack(">i", len(frame)) + frame)
        assert response_class.decode(bytes(client.read_frame()), header=True)
