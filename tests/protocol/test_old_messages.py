"""The codecs of versions kio lacks (ListOffsets v0, OffsetCommit v0-v1, OffsetFetch v0,
DescribeConfigs v0) against kafka-python's classes, generated from Kafka's message definitions
(all versions from v0), and against frames old clients sent (captured/: kafka-python, sarama,
kafka-go)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import kafka.protocol
import pytest
from kafka.protocol.admin import (
    CreateAclsRequest,
    CreateAclsResponse,
    DeleteAclsRequest,
    DeleteAclsResponse,
    DescribeAclsRequest,
    DescribeAclsResponse,
    DescribeConfigsRequest,
    DescribeConfigsResponse,
)
from kafka.protocol.consumer import (
    ListOffsetsRequest,
    ListOffsetsResponse,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetFetchRequest,
    OffsetFetchResponse,
)

from odradek.protocol import old_messages
from odradek.protocol.bounds import MalformedRequest

CAPTURED: dict[str, dict[str, Any]] = {
    f"{path.stem}:{name}": entry
    for path in sorted((Path(__file__).parent / "captured").glob("*.json"))
    for name, entry in json.loads(path.read_text()).items()
}
REQUEST_CLASSES = {
    2: ListOffsetsRequest,
    8: OffsetCommitRequest,
    9: OffsetFetchRequest,
    29: DescribeAclsRequest,
    30: CreateAclsRequest,
    31: DeleteAclsRequest,
    32: DescribeConfigsRequest,
}
RESPONSE_CLASSES = {
    2: ListOffsetsResponse,
    8: OffsetCommitResponse,
    9: OffsetFetchResponse,
    29: DescribeAclsResponse,
    30: CreateAclsResponse,
    31: DeleteAclsResponse,
    32: DescribeConfigsResponse,
}


def as_plain(value: Any) -> Any:
    """A decoded request as nested dicts and lists (ours and kafka-python's alike)."""
    if hasattr(value, "to_dict"):
        value = value.to_dict()
    elif hasattr(value, "__dict__"):
        value = vars(value)
    if isinstance(value, dict):
        return {k: as_plain(v) for k, v in value.items() if k not in ("version", "header")}
    if isinstance(value, list | tuple):
        return [as_plain(v) for v in value]
    return value


# kafka-python's field names where kio's (used here) differ
RENAMED = {"generation_id": "generation_id_or_member_epoch"}


def renamed(value: Any) -> Any:
    if isinstance(value, dict):
        return {RENAMED.get(k, k): renamed(v) for k, v in value.items()}
    if isinstance(value, list):
        return [renamed(v) for v in value]
    return value


def fields_of(mine: Any, like: Any) -> Any:
    """``mine`` with only the fields ``like`` has, at every depth: the defaults given here for
    fields of later versions are not on the wire, so kafka-python's classes lack them."""
    if isinstance(mine, dict) and isinstance(like, dict):
        return {k: fields_of(v, like[k]) for k, v in mine.items() if k in like}
    if isinstance(mine, list) and isinstance(like, list) and len(mine) == len(like):
        return [fields_of(m, w) for m, w in zip(mine, like, strict=True)]
    return mine


@pytest.mark.parametrize(
    "name",
    sorted(
        n for n, e in CAPTURED.items() if old_messages.has_version(e["api_key"], e["api_version"])
    ),
)
def test_captured_requests_read_as_kafka_python_wrote_them(name):
    entry = CAPTURED[name]
    frame = bytes.fromhex(entry["frame"])
    api_key, version = entry["api_key"], entry["api_version"]
    header, got = old_messages.decode_old_request(frame)
    want = REQUEST_CLASSES[api_key].decode(frame, version=version, header=True)
    assert (header.api_key, header.api_version) == (api_key, version)
    assert header.correlation_id == want.header.correlation_id
    assert header.client_id == want.header.client_id
    expected = renamed(as_plain(want))
    assert fields_of(as_plain(got), expected) == expected


def test_captured_frames_cover_the_consumer_apis():
    captured = {(e["api_key"], e["api_version"]) for e in CAPTURED.values()}
    assert {(2, 0), (8, 0), (8, 1), (9, 0)} <= captured


def test_describe_configs_v0_request_built_by_kafka_python():
    resource = DescribeConfigsRequest[0].DescribeConfigsResource
    request = DescribeConfigsRequest[0](
        resources=[
            resource(resource_type=2, resource_name="orders", configuration_keys=None),
            resource(resource_type=4, resource_name="1", configuration_keys=["log.dirs", "x"]),
        ]
    )
    request.with_header(correlation_id=3, client_id="sarama")
    header, got = old_messages.decode_old_request(request.encode(header=True))
    assert (header.api_key, header.api_version, header.client_id) == (32, 0, "sarama")
    assert [(r.resource_type, r.resource_name, r.configuration_keys) for r in got.resources] == [
        (2, "orders", None),
        (4, "1", ("log.dirs", "x")),
    ]
    assert got.include_synonyms is False  # v1's field, with Kafka's default


def test_list_offsets_v0_response_read_by_kafka_python():
    frame = old_messages.encode_response(
        2,
        0,
        41,
        {
            "topics": [
                {
                    "name": "t",
                    "partitions": [
                        {"partition_index": 0, "error_code": 0, "old_style_offsets": [10, 0]},
                        {"partition_index": 1, "error_code": 6, "old_style_offsets": []},
                    ],
                }
            ]
        },
    )
    assert int.from_bytes(frame[:4], "big") == len(frame) - 4
    got = ListOffsetsResponse[0].decode(frame[4:], header=True)
    assert got.header.correlation_id == 41
    [topic] = got.topics
    assert [
        (p.partition_index, p.error_code, list(p.old_style_offsets)) for p in topic.partitions
    ] == [
        (0, 0, [10, 0]),
        (1, 6, []),
    ]


@pytest.mark.parametrize("version", [0, 1])
def test_offset_commit_response_read_by_kafka_python(version):
    fields = {
        "throttle_time": 0,
        "topics": [{"name": "t", "partitions": [{"partition_index": 2, "error_code": 25}]}],
    }
    frame = old_messages.encode_response(8, version, 7, fields)
    got = OffsetCommitResponse[version].decode(frame[4:], header=True)
    assert [(p.partition_index, p.error_code) for p in got.topics[0].partitions] == [(2, 25)]


def test_offset_fetch_v0_response_read_by_kafka_python():
    fields = {
        "throttle_time": 0,
        "error_code": 0,
        "topics": [
            {
                "name": "t",
                "partitions": [
                    {
                        "partition_index": 0,
                        "committed_offset": 99,
                        "committed_leader_epoch": 3,
                        "metadata": "m",
                        "error_code": 0,
                    },
                    {
                        "partition_index": 1,
                        "committed_offset": -1,
                        "committed_leader_epoch": -1,
                        "metadata": None,
                        "error_code": 0,
                    },
                ],
            }
        ],
    }
    got = OffsetFetchResponse[0].decode(
        old_messages.encode_response(9, 0, 8, fields)[4:], header=True
    )
    assert [
        (p.partition_index, p.committed_offset, p.metadata) for p in got.topics[0].partitions
    ] == [
        (0, 99, "m"),
        (1, -1, None),
    ]


def test_describe_configs_v0_response_read_by_kafka_python():
    config = {"read_only": False, "is_sensitive": False, "synonyms": []}
    fields = {
        "throttle_time": 0,
        "results": [
            {
                "error_code": 0,
                "error_message": None,
                "resource_type": 2,
                "resource_name": "orders",
                "configs": [
                    {"name": "retention.ms", "value": "1000", "config_source": 1, **config},
                    {"name": "cleanup.policy", "value": "delete", "config_source": 5, **config},
                ],
            }
        ],
    }
    got = DescribeConfigsResponse[0].decode(
        old_messages.encode_response(32, 0, 9, fields)[4:], header=True
    )
    [result] = got.results
    assert result.resource_name == "orders"
    assert [(c.name, c.value, c.is_default) for c in result.configs] == [
        ("retention.ms", "1000", False),
        ("cleanup.policy", "delete", True),
    ]


def with_header(request: Any) -> bytes:
    request.with_header(correlation_id=9, client_id="sarama")
    return bytes(request.encode(header=True))


def test_acl_v0_requests_built_by_kafka_python_select_literal_patterns():
    """v0 has no pattern type: Kafka reads LITERAL (its default), for filters and creations."""
    describe = DescribeAclsRequest[0](
        resource_type_filter=2,
        resource_name_filter="orders",
        principal_filter=None,
        host_filter="*",
        operation=3,
        permission_type=3,
    )
    _, got = old_messages.decode_old_request(with_header(describe))
    assert (got.resource_type_filter, got.resource_name_filter, got.pattern_type_filter) == (
        2,
        "orders",
        3,
    )
    assert (got.principal_filter, got.host_filter, got.operation) == (None, "*", 3)

    creation = CreateAclsRequest[0].AclCreation
    create = CreateAclsRequest[0](
        creations=[
            creation(
                resource_type=3,
                resource_name="g",
                principal="User:alice",
                host="*",
                operation=3,
                permission_type=3,
            )
        ]
    )
    _, got = old_messages.decode_old_request(with_header(create))
    [made] = got.creations
    assert (made.resource_type, made.resource_name, made.resource_pattern_type) == (3, "g", 3)
    assert (made.principal, made.host, made.operation, made.permission_type) == (
        "User:alice",
        "*",
        3,
        3,
    )

    selection = DeleteAclsRequest[0].DeleteAclsFilter
    delete = DeleteAclsRequest[0](
        filters=[
            selection(
                resource_type_filter=1,
                resource_name_filter=None,
                principal_filter="User:bob",
                host_filter=None,
                operation=1,
                permission_type=1,
            )
        ]
    )
    _, got = old_messages.decode_old_request(with_header(delete))
    [chosen] = got.filters
    assert (chosen.resource_type_filter, chosen.pattern_type_filter, chosen.principal_filter) == (
        1,
        3,
        "User:bob",
    )


def test_acl_v0_responses_read_by_kafka_python():
    acl = {"principal": "User:alice", "host": "*", "operation": 3, "permission_type": 3}
    described = DescribeAclsResponse[0].decode(
        old_messages.encode_response(
            29,
            0,
            5,
            {
                "throttle_time": 0,
                "error_code": 0,
                "error_message": None,
                "resources": [
                    {"resource_type": 2, "resource_name": "t", "pattern_type": 3, "acls": [acl]}
                ],
            },
        )[4:],
        header=True,
    )
    [resource] = described.resources
    assert (resource.resource_type, resource.resource_name) == (2, "t")
    assert [(a.principal, a.operation) for a in resource.acls] == [("User:alice", 3)]

    created = CreateAclsResponse[0].decode(
        old_messages.encode_response(
            30, 0, 6, {"throttle_time": 0, "results": [{"error_code": 42, "error_message": "x"}]}
        )[4:],
        header=True,
    )
    assert [(r.error_code, r.error_message) for r in created.results] == [(42, "x")]

    match = {"error_code": 0, "error_message": None, "resource_type": 2, "resource_name": "t"}
    deleted = DeleteAclsResponse[0].decode(
        old_messages.encode_response(
            31,
            0,
            7,
            {
                "throttle_time": 0,
                "filter_results": [
                    {"error_code": 0, "error_message": None, "matching_acls": [match | acl]}
                ],
            },
        )[4:],
        header=True,
    )
    [result] = deleted.filter_results
    assert [(m.resource_name, m.principal) for m in result.matching_acls] == [("t", "User:alice")]


def test_truncated_old_request_is_refused():
    frame = bytes.fromhex(CAPTURED["kafka_python:2/v0"]["frame"])
    for cut in range(8, len(frame)):
        with pytest.raises(MalformedRequest):
            old_messages.decode_old_request(frame[:cut])


def test_other_versions_go_to_kio():
    frame = bytes.fromhex(CAPTURED["kafka_python:2/v1"]["frame"])
    header, request = old_messages.decoder(2)(memoryview(frame))
    assert header.api_version == 1
    assert type(request).__module__.startswith("kio.")


# -- every layout against Kafka's message definitions (the copy kafka-python ships) -------------

KAFKA_JSON = Path(kafka.protocol.__file__).parent / "schemas" / "resources"
NAMES = {
    2: "ListOffsets",
    8: "OffsetCommit",
    9: "OffsetFetch",
    19: "CreateTopics",
    20: "DeleteTopics",
    23: "OffsetForLeaderEpoch",
    27: "WriteTxnMarkers",
    29: "DescribeAcls",
    30: "CreateAcls",
    31: "DeleteAcls",
    32: "DescribeConfigs",
    35: "DescribeLogDirs",
}


def kafka_definition(api_key: int, kind: str) -> dict[str, Any]:
    text = (KAFKA_JSON / f"{NAMES[api_key]}{kind}.json").read_text()
    return json.loads(
        "\n".join(line for line in text.splitlines() if not line.strip().startswith("//"))
    )


def in_versions(spec: str | None, version: int) -> bool:
    if not spec or spec == "none":
        return False
    if spec.endswith("+"):
        return version >= int(spec[:-1])
    low, _, high = spec.partition("-")
    return int(low) <= version <= int(high or low)


def kafka_layout(fields: list[dict[str, Any]], version: int) -> list[Any]:
    """Kafka's fields of ``version`` as a tree of wire types (names left out)."""
    out: list[Any] = []
    for field in fields:
        if not in_versions(field["versions"], version) or "taggedVersions" in field:
            continue
        nullable = in_versions(field.get("nullableVersions"), version)
        kind = field["type"]
        if kind.startswith("[]"):
            item = kind[2:]
            inner = kafka_layout(field["fields"], version) if "fields" in field else item
            out.append(("array", nullable, inner))
        elif kind == "string":
            out.append("nullable_string" if nullable else "string")
        else:
            out.append(kind)
    return out


def our_layout(fields: list[Any]) -> list[Any]:
    out: list[Any] = []
    for field in fields:
        kind = field[1]
        if isinstance(kind, tuple) and kind[0] == "absent":  # not on the wire in this version
            continue
        if isinstance(kind, list):
            out.append(("array", False, our_layout(kind)))
        elif isinstance(kind, tuple):
            item = our_layout(kind[1]) if isinstance(kind[1], list) else kind[1]
            out.append(("array", kind[0] == "nullable_array", item))
        else:
            out.append("int32" if kind == "timedelta_i32" else kind)
    return out


@pytest.mark.parametrize("key", sorted(old_messages.REQUESTS), ids=lambda k: f"api{k[0]}-v{k[1]}")
def test_request_layout_is_kafkas(key):
    api_key, version = key
    want = kafka_layout(kafka_definition(api_key, "Request")["fields"], version)
    assert our_layout(old_messages.REQUESTS[key]) == want


@pytest.mark.parametrize("key", sorted(old_messages.RESPONSES), ids=lambda k: f"api{k[0]}-v{k[1]}")
def test_response_layout_is_kafkas(key):
    api_key, version = key
    want = kafka_layout(kafka_definition(api_key, "Response")["fields"], version)
    assert our_layout(old_messages.RESPONSES[key]) == want


def test_every_old_version_has_both_layouts():
    assert set(old_messages.REQUESTS) == set(old_messages.RESPONSES)
