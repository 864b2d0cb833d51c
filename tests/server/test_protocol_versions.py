"""ApiVersions advertises exactly the registry, and every API answers at both ends of its range.

Each request is a minimal valid one built from version-independent fields; its response must be
decoded by kio at the same version with no byte left over, and carry no error.
"""

from __future__ import annotations

import dataclasses
import datetime
import struct
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from odradek.protocol.errors import ErrorCode
from odradek.protocol.messages import decode_response, request_schema, response_schema
from odradek.server.registry import HANDLERS, Handler, load_handlers
from odradek.testing import RunningBroker, running_broker

from .conftest import API_VERSIONS, KafkaConnection, batch_of, unique_topic

load_handlers()

TOPIC = "versions"
TOPIC_CONFIG = 2  # DescribeConfigs' resource type of a topic


def share_state(group: str, **partition: Any) -> dict[str, Any]:
    return {
        "group_id": group,
        "topics": [{"topic_id": uuid.UUID(int=1), "partitions": [{"partition": 0, **partition}]}],
    }


# A minimal valid request of each API, as fields of every version at once (``build`` keeps the
# ones a version has). Called with a fresh name for requests that change something.
REQUESTS: dict[int, Callable[[str], dict[str, Any]]] = {
    0: lambda _: {
        "acks": 1,
        "timeout": 5000,
        "topic_data": [
            {"name": TOPIC, "partition_data": [{"index": 0, "records": batch_of(b"v")}]}
        ],
    },
    1: lambda _: {
        "replica_id": -1,
        "max_wait": 0,
        "min_bytes": 0,
        "max_bytes": 1 << 20,
        "session_epoch": -1,
        "topics": [
            {
                "topic": TOPIC,
                "partitions": [
                    {
                        "partition": 0,
                        "current_leader_epoch": -1,
                        "fetch_offset": 0,
                        "last_fetched_epoch": -1,
                        "log_start_offset": -1,
                        "partition_max_bytes": 1 << 20,
                    }
                ],
            }
        ],
    },
    2: lambda _: {
        "replica_id": -1,
        "topics": [
            {
                "name": TOPIC,
                "partitions": [{"partition_index": 0, "current_leader_epoch": -1, "timestamp": -2}],
            }
        ],
    },
    3: lambda _: {"topics": [{"name": TOPIC}], "allow_auto_topic_creation": False},
    18: lambda _: {"client_software_name": "tests", "client_software_version": "1.0"},
    19: lambda name: {
        "timeout": 5000,
        "topics": [
            {
                "name": name,
                "num_partitions": 2,
                "replication_factor": 1,
                "configs": [{"name": "retention.ms", "value": "3600000"}],
            }
        ],
    },
    20: lambda name: {"timeout": 5000, "topic_names": [name], "topics": [{"name": name}]},
    21: lambda _: {
        "timeout": 5000,
        "topics": [{"name": TOPIC, "partitions": [{"partition_index": 0, "offset": 0}]}],
    },
    22: lambda _: {
        "transactional_id": None,
        "transaction_timeout": 60000,
        "producer_id": -1,
        "producer_epoch": -1,
    },
    32: lambda _: {
        "resources": [
            {"resource_type": TOPIC_CONFIG, "resource_name": TOPIC, "configuration_keys": None}
        ]
    },
    33: lambda _: {
        "validate_only": True,
        "resources": [
            {
                "resource_type": TOPIC_CONFIG,
                "resource_name": TOPIC,
                "configs": [{"name": "retention.ms", "value": "7200000"}],
            }
        ],
    },
    35: lambda _: {"topics": [{"topic": TOPIC, "partitions": [0]}]},
    37: lambda _: {
        "timeout": 5000,
        "validate_only": True,
        "topics": [{"name": TOPIC, "count": 3, "assignments": None}],
    },
    44: lambda _: {
        "validate_only": True,
        "resources": [
            {
                "resource_type": TOPIC_CONFIG,
                "resource_name": TOPIC,
                "configs": [{"name": "retention.ms", "config_operation": 0, "value": "7200000"}],
            }
        ],
    },
    23: lambda _: {
        "replica_id": -1,
        "topics": [
            {
                "topic": TOPIC,
                "partitions": [{"partition": 0, "current_leader_epoch": -1, "leader_epoch": 0}],
            }
        ],
    },
    43: lambda _: {"election_type": 0, "topic_partitions": None, "timeout": 5000},
    # The broker alone holds every replica: moving a partition onto itself is all it takes.
    45: lambda _: {
        "timeout": 5000,
        "allow_replication_factor_change": True,
        "topics": [{"name": TOPIC, "partitions": [{"partition_index": 0, "replicas": [1]}]}],
    },
    46: lambda _: {"timeout": 5000, "topics": None},
    60: lambda _: {},
    65: lambda name: {"transactional_ids": []},
    66: lambda _: {"state_filters": [], "producer_id_filters": [], "duration_filter": -1},
    # The share state APIs, a broker's requests to the share coordinator (any topic id will do).
    83: lambda name: share_state(name, state_epoch=0, start_offset=0),
    84: lambda name: share_state(name, leader_epoch=0),
    85: lambda name: share_state(
        name, state_epoch=0, leader_epoch=0, start_offset=0, state_batches=[]
    ),
    86: lambda name: share_state(name),
    87: lambda name: share_state(name, leader_epoch=0),
    # A marker for a producer with no transaction in the partition: Kafka appends it anyway.
    27: lambda _: {
        "markers": [
            {
                "producer_id": 1_000_000,
                "producer_epoch": 0,
                "transaction_result": True,
                "topics": [{"name": TOPIC, "partition_indexes": [1]}],
                "coordinator_epoch": 0,
                "transaction_version": 0,
            }
        ]
    },
    61: lambda _: {"topics": [{"name": TOPIC, "partition_indexes": [0, 1]}]},
    48: lambda _: {"components": [], "strict": False},
    49: lambda name: {
        "entries": [
            {
                "entity": [{"entity_type": "client-id", "entity_name": name}],
                "ops": [{"key": "producer_byte_rate", "value": 1024.0, "remove": False}],
            }
        ],
        "validate_only": True,
    },
    50: lambda _: {"users": None},
    57: lambda _: {"timeout": 5000, "feature_updates": [], "validate_only": True},
    75: lambda _: {"topics": [{"name": TOPIC}], "response_partition_limit": 10},
    51: lambda name: {
        "deletions": [],
        "upsertions": [
            {
                "name": name,
                "mechanism": 2,
                "iterations": 4096,
                "salt": b"salt",
                "salted_password": bytes(64),
            }
        ],
    },
    # ACL APIs: the broker below runs an authorizer with User:ANONYMOUS a super user.
    29: lambda name: {
        "resource_type_filter": 2,
        "resource_name_filter": name,
        "pattern_type_filter": 3,
        "principal_filter": None,
        "host_filter": None,
        "operation": 1,
        "permission_type": 1,
    },
    30: lambda name: {
        "creations": [
            {
                "resource_type": 2,
                "resource_name": name,
                "resource_pattern_type": 3,
                "principal": "User:alice",
                "host": "*",
                "operation": 3,
                "permission_type": 3,
            }
        ]
    },
    71: lambda _: {"client_instance_id": uuid.UUID(int=0)},
    74: lambda _: {"resource_types": []},
    31: lambda name: {
        "filters": [
            {
                "resource_type_filter": 2,
                "resource_name_filter": name,
                "pattern_type_filter": 1,
                "principal_filter": None,
                "host_filter": None,
                "operation": 1,
                "permission_type": 1,
            }
        ]
    },
}
DELETE_TOPICS = 20
# The consumer group APIs answer without an error only inside a live group, so
# tests/e2e/test_groups_protocol.py drives each of them at both ends of its range instead (the
# KIP-848 ones, 68 and 69: tests/server/handlers/test_consumer_groups.py, and
# tests/e2e/test_groups_kip848.py with confluent-kafka and the Java consumer's choice).
GROUP_APIS = frozenset({8, 9, 10, 11, 12, 13, 14, 15, 16, 42, 47, 68, 69})
# PushTelemetry answers without an error only after GetTelemetrySubscriptions gave the client a
# subscription: tests/server/handlers/test_telemetry.py drives it.
TELEMETRY_APIS = frozenset({72})
# APIs kio has no schema of, with codecs of our own (tested below and in tests/protocol).
CONTROLLED_SHUTDOWN = 7
OWN_CODECS = frozenset({CONTROLLED_SHUTDOWN})
# The transaction APIs answer without an error only for a producer in a transaction, so
# test_transaction_apis_at_both_ends drives each through one.
ADD_PARTITIONS_TO_TXN, ADD_OFFSETS_TO_TXN, END_TXN, TXN_OFFSET_COMMIT = 24, 25, 26, 28
TXN_APIS = frozenset({ADD_PARTITIONS_TO_TXN, ADD_OFFSETS_TO_TXN, END_TXN, TXN_OFFSET_COMMIT})
# SASL answers without an error only on a SASL listener, mid-exchange:
# tests/e2e/security/test_sasl_protocol.py drives both ends of their ranges there.
SASL_APIS = frozenset({17, 36})
# The share group APIs answer without an error only for a member of a share group (and its
# share session): tests/server/handlers/test_share_groups.py drives them through one, and
# tests/e2e/test_share_groups_confluent_kafka.py with a real client.
SHARE_APIS = frozenset({76, 77, 78, 79, 90, 91, 92})
# The streams group APIs (KIP-1071) answer without an error only for a member of a streams
# group: test_streams_group_apis below joins one (and tests/server/handlers/
# test_streams_groups.py, tests/java/test_streams.py with Kafka Streams drive them further).
STREAMS_HEARTBEAT, STREAMS_DESCRIBE = 88, 89
STREAMS_APIS = frozenset({STREAMS_HEARTBEAT, STREAMS_DESCRIBE})
# The delegation token APIs answer without an error only on an authenticated connection not
# logged in with a token: tests/server/handlers/test_delegation_tokens.py drives both ends of
# their ranges as an authenticated principal.
TOKEN_APIS = frozenset({38, 39, 40, 41})


def ends_of(handler: Handler) -> list[int]:
    return sorted({handler.min_version, handler.max_version})


def kio_has(api_key: int, version: int) -> bool:
    try:
        request_schema(api_key, version)
    except Exception:  # kio's UnknownEntity: a version older than Kafka 4's
        return False
    return True


CASES = [
    pytest.param(h.api_key, v, id=f"api{h.api_key}-v{v}")
    for h in sorted(HANDLERS.values(), key=lambda h: h.api_key)
    if h.api_key
    not in GROUP_APIS
    | OWN_CODECS
    | TXN_APIS
    | SASL_APIS
    | TELEMETRY_APIS
    | SHARE_APIS
    | TOKEN_APIS
    | STREAMS_APIS
    for v in ends_of(h)
    if kio_has(h.api_key, v)
]
# Ends of ranges kio has no schema for (versions Kafka 4 dropped, and ApiVersions v5, newer than
# kio), each driven by hand below.
OLD_ENDS = sorted(
    (h.api_key, v)
    for h in HANDLERS.values()
    if h.api_key not in GROUP_APIS | OWN_CODECS | TXN_APIS | SHARE_APIS | STREAMS_APIS
    for v in ends_of(h)
    if not kio_has(h.api_key, v)
)


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningBroker]:
    with running_broker(
        tmp_path_factory.mktemp("versions"),
        authorizer_class_name="org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        super_users="User:ANONYMOUS",
    ) as b:
        with KafkaConnection(b.bootstrap) as client:
            client.create_topic(TOPIC, partitions=2)
            assert client.produce(TOPIC, 0, batch_of(b"a", b"b")).error_code == ErrorCode.none
        yield b


@pytest.fixture
def client(broker: RunningBroker) -> Iterator[KafkaConnection]:
    with KafkaConnection(broker.bootstrap) as connection:
        yield connection


def error_codes(entity: Any) -> Iterator[tuple[str, ErrorCode]]:
    """Every error code anywhere in a response, with the path to it."""
    if isinstance(entity, tuple):
        for item in entity:
            yield from error_codes(item)
    elif dataclasses.is_dataclass(entity):
        for field in dataclasses.fields(entity):
            value = getattr(entity, field.name)
            if field.name == "error_code":
                yield f"{type(entity).__qualname__}.error_code", value
            else:
                yield from error_codes(value)


def test_every_api_has_a_request_here() -> None:
    """A newly registered handler must get a case here too."""
    missing = (
        set(HANDLERS)
        - GROUP_APIS
        - OWN_CODECS
        - TXN_APIS
        - SASL_APIS
        - TELEMETRY_APIS
        - SHARE_APIS
        - TOKEN_APIS
        - STREAMS_APIS
        - set(REQUESTS)
    )
    assert not missing, missing


def test_streams_group_apis(client: KafkaConnection) -> None:
    """StreamsGroupHeartbeat and StreamsGroupDescribe at each end of their ranges: a member
    joins a streams group whose one subtopology reads the test topic, is described, leaves."""
    ms = datetime.timedelta(milliseconds=1)
    topology = {
        "epoch": 1,
        "subtopologies": [
            {
                "subtopology_id": "0",
                "source_topics": [TOPIC],
                "state_changelog_topics": [],
                "repartition_source_topics": [],
                "copartition_groups": [],
            }
        ],
    }
    for version in ends_of(HANDLERS[STREAMS_HEARTBEAT]):
        group = f"streams-v{version}"
        joined = client.request(
            STREAMS_HEARTBEAT,
            version,
            group_id=group,
            member_id="m",
            member_epoch=0,
            endpoint_information_epoch=0,
            rebalance_timeout=30_000 * ms,
            topology=topology,
            process_id="p",
            active_tasks=[],
            standby_tasks=[],
            warmup_tasks=[],
            client_tags=[],
            task_offsets=None,
            task_end_offsets=None,
        )
        assert joined.error_code == ErrorCode.none and joined.member_epoch == 1
        assert {(t.subtopology_id, tuple(t.partitions)) for t in joined.active_tasks} == {
            ("0", (0, 1))
        }
        for describe_version in ends_of(HANDLERS[STREAMS_DESCRIBE]):
            (described,) = client.request(
                STREAMS_DESCRIBE,
                describe_version,
                group_ids=[group],
                include_authorized_operations=True,
            ).groups
            assert described.error_code == ErrorCode.none
            assert [m.member_id for m in described.members] == ["m"]
        left = client.request(
            STREAMS_HEARTBEAT,
            version,
            group_id=group,
            member_id="m",
            member_epoch=-1,
            endpoint_information_epoch=0,
            active_tasks=None,
            standby_tasks=None,
            warmup_tasks=None,
            client_tags=None,
            task_offsets=None,
            task_end_offsets=None,
        )
        assert left.error_code == ErrorCode.none and left.member_epoch == -1


def test_api_versions_lists_the_registry(client: KafkaConnection) -> None:
    for version in [v for v in ends_of(HANDLERS[API_VERSIONS]) if kio_has(API_VERSIONS, v)]:
        response = client.request(API_VERSIONS, version, **REQUESTS[API_VERSIONS](""))
        assert response.error_code == ErrorCode.none
        advertised = [(k.api_key, k.min_version, k.max_version) for k in response.api_keys]
        assert advertised == sorted(
            (h.api_key, h.min_version, h.max_version) for h in HANDLERS.values()
        )


def test_floors_of_kafka_3_9(client: KafkaConnection) -> None:
    """Message formats v0/v1 too: Produce and Fetch from v0, as Kafka 3.9 has them."""
    response = client.request(API_VERSIONS, 3, **REQUESTS[API_VERSIONS](""))
    versions = {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}
    assert versions[0][0] == 0
    assert versions[1][0] == 0


@pytest.mark.parametrize(("api_key", "version"), CASES)
def test_api_answers_at_both_ends_of_its_range(
    client: KafkaConnection, api_key: int, version: int
) -> None:
    name = unique_topic("v")
    if api_key == DELETE_TOPICS:
        client.create_topic(name)
    # ``request`` decodes with kio at this version and insists every byte is consumed.
    response = client.request(api_key, version, **REQUESTS[api_key](name))
    errors = [(path, code) for path, code in error_codes(response) if code != ErrorCode.none]
    assert not errors, errors


def test_fetch_answers_at_both_ends_with_the_records(client: KafkaConnection) -> None:
    fetch = HANDLERS[1]
    for version in [v for v in ends_of(fetch) if kio_has(1, v)]:  # v0: _fetch_v0
        response = client.request(1, version, **REQUESTS[1](""))
        (topic,) = response.responses
        (partition,) = topic.partitions
        assert partition.error_code == ErrorCode.none
        assert partition.high_watermark >= 2
        assert partition.records, f"no records at v{version}"


def test_created_topic_is_described_at_every_metadata_version(client: KafkaConnection) -> None:
    name = unique_topic("meta")
    client.create_topic(name, partitions=3)
    handler = HANDLERS[3]
    for version in range(handler.min_version, handler.max_version + 1):
        response = client.request(3, version, topics=[{"name": name}])
        (topic,) = response.topics
        assert topic.error_code == ErrorCode.none
        assert topic.name == name
        assert sorted(p.partition_index for p in topic.partitions) == [0, 1, 2]
        if version >= 10:
            assert topic.topic_id != uuid.UUID(int=0)


def test_controlled_shutdown_on_a_lone_broker_has_nothing_to_move(client: KafkaConnection) -> None:
    """ControlledShutdown (hand-written codec): a broker that is the whole cluster leads only
    single-replica partitions, which a controlled shutdown leaves where they are."""
    from odradek.protocol import controlled_shutdown as codec

    for version in ends_of(HANDLERS[CONTROLLED_SHUTDOWN]):
        frame = codec.encode_request(version, 77, "tests", codec.ControlledShutdownRequest(1, -1))
        client.send_raw(frame)
        correlation_id, response = codec.decode_response(version, client.read_frame())
        assert correlation_id == 77
        assert response.error_code == ErrorCode.none
        assert response.remaining_partitions == ()


def _in_transaction(client: KafkaConnection, tid: str) -> tuple[int, int]:
    init = client.request(
        22, 5, transactional_id=tid, transaction_timeout=60_000, producer_id=-1, producer_epoch=-1
    )
    assert init.error_code == ErrorCode.none
    added = client.request(
        ADD_PARTITIONS_TO_TXN,
        3,
        v3_and_below_transactional_id=tid,
        v3_and_below_producer_id=init.producer_id,
        v3_and_below_producer_epoch=init.producer_epoch,
        v3_and_below_topics=[{"name": TOPIC, "partitions": [0]}],
    )
    (topic,) = added.results_by_topic_v3_and_below
    assert [p.partition_error_code for p in topic.results_by_partition] == [ErrorCode.none]
    return int(init.producer_id), int(init.producer_epoch)


def test_transaction_apis_at_both_ends(client: KafkaConnection) -> None:
    for version in ends_of(HANDLERS[ADD_PARTITIONS_TO_TXN]):
        tid = unique_topic(f"apt{version}")
        pid, epoch = _in_transaction(client, tid)
        if version < 4:
            fields: dict[str, Any] = {
                "v3_and_below_transactional_id": tid,
                "v3_and_below_producer_id": pid,
                "v3_and_below_producer_epoch": epoch,
                "v3_and_below_topics": [{"name": TOPIC, "partitions": [1]}],
            }
        else:  # the brokers' batched form, here a KIP-890 check of what was added
            fields = {
                "transactions": [
                    {
                        "transactional_id": tid,
                        "producer_id": pid,
                        "producer_epoch": epoch,
                        "verify_only": True,
                        "topics": [{"name": TOPIC, "partitions": [0]}],
                    }
                ]
            }
        response = client.request(ADD_PARTITIONS_TO_TXN, version, **fields)
        codes = [code for _, code in error_codes(response)] + [
            p.partition_error_code
            for t in (
                response.results_by_topic_v3_and_below
                if version < 4
                else response.results_by_transaction[0].topic_results
            )
            for p in t.results_by_partition
        ]
        assert codes and all(code == ErrorCode.none for code in codes), (version, codes)
    for version in ends_of(HANDLERS[ADD_OFFSETS_TO_TXN]):
        tid = unique_topic(f"aot{version}")
        pid, epoch = _in_transaction(client, tid)
        response = client.request(
            ADD_OFFSETS_TO_TXN,
            version,
            transactional_id=tid,
            producer_id=pid,
            producer_epoch=epoch,
            group_id=f"{tid}-group",
        )
        assert response.error_code == ErrorCode.none, version
        # Outside group management (generation -1), a transactional commit needs no live
        # group, only the group's partition in the transaction.
        committed = client.request(
            TXN_OFFSET_COMMIT,
            version,
            transactional_id=tid,
            group_id=f"{tid}-group",
            producer_id=pid,
            producer_epoch=epoch,
            topics=[
                {
                    "name": TOPIC,
                    "partitions": [
                        {"partition_index": 0, "committed_offset": 1, "committed_metadata": ""}
                    ],
                }
            ],
        )
        codes = [code for _, code in error_codes(committed)]
        assert codes == [ErrorCode.none], (version, codes)
    for version in ends_of(HANDLERS[END_TXN]):
        tid = unique_topic(f"end{version}")
        pid, epoch = _in_transaction(client, tid)
        response = client.request(
            END_TXN,
            version,
            transactional_id=tid,
            producer_id=pid,
            producer_epoch=epoch,
            committed=False,
        )
        assert response.error_code == ErrorCode.none, version


# -- the old ends, in kafka-python's bytes (its protocol classes are Kafka's definitions, v0 on) --


def _produce_v0(client: KafkaConnection) -> None:
    from kafka.protocol.producer import ProduceRequest, ProduceResponse
    from kafka.record.legacy_records import LegacyRecordBatchBuilder

    builder = LegacyRecordBatchBuilder(0, 0, 1 << 20)
    builder.append(0, None, b"k", b"old")
    topic = ProduceRequest[0].TopicProduceData
    request = ProduceRequest[0](
        acks=1,
        timeout_ms=5000,
        topic_data=[
            topic(
                name=TOPIC,
                partition_data=[
                    topic.PartitionProduceData(index=1, records=bytes(builder.build()))
                ],
            )
        ],
    )
    request.with_header(correlation_id=90, client_id="old")
    client.send_raw(request.encode(header=True, framed=True))
    response = ProduceResponse[0].decode(bytes(client.read_frame()), header=True)
    assert response.header.correlation_id == 90
    [partition] = response.responses[0].partition_responses
    assert partition.error_code == 0
    assert partition.base_offset >= 0


def _fetch_v0(client: KafkaConnection) -> None:
    from kafka.protocol.consumer import FetchRequest, FetchResponse
    from kafka.record import MemoryRecords

    topic = FetchRequest[0].FetchTopic
    request = FetchRequest[0](
        replica_id=-1,
        max_wait_ms=0,
        min_bytes=0,
        topics=[
            topic(
                topic=TOPIC,
                partitions=[
                    topic.FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=1 << 20)
                ],
            )
        ],
    )
    request.with_header(correlation_id=91, client_id="old")
    client.send_raw(request.encode(header=True, framed=True))
    response = FetchResponse[0].decode(bytes(client.read_frame()), header=True)
    [partition] = response.responses[0].partitions
    assert partition.error_code == 0
    assert partition.high_watermark >= 2
    records = MemoryRecords(bytes(partition.records))
    messages = []
    while records.has_next():
        batch = records.next_batch()
        assert batch.magic == 0  # down-converted from the stored v2 batch
        messages.extend((r.offset, r.value) for r in batch)
    assert messages[:2] == [(0, b"a"), (1, b"b")]


def _list_offsets_v0(client: KafkaConnection) -> None:
    from kafka.protocol.consumer import ListOffsetsRequest, ListOffsetsResponse

    topic = ListOffsetsRequest[0].ListOffsetsTopic
    wanted = [(0, -1, 1), (0, -2, 1), (0, -1, 5)]  # latest, earliest, latest and older
    request = ListOffsetsRequest[0](
        replica_id=-1,
        topics=[
            topic(
                name=TOPIC,
                partitions=[
                    topic.ListOffsetsPartition(partition_index=i, timestamp=t, max_num_offsets=n)
                    for i, t, n in wanted
                ],
            )
        ],
    )
    request.with_header(correlation_id=92, client_id="burrow")
    client.send_raw(request.encode(header=True, framed=True))
    response = ListOffsetsResponse[0].decode(bytes(client.read_frame()), header=True)
    latest, earliest, several = response.topics[0].partitions
    assert [p.error_code for p in (latest, earliest, several)] == [0, 0, 0]
    end = client.request(
        2,
        1,
        replica_id=-1,
        topics=[{"name": TOPIC, "partitions": [{"partition_index": 0, "timestamp": -1}]}],
    )
    assert list(latest.old_style_offsets) == [end.topics[0].partitions[0].offset]
    assert list(earliest.old_style_offsets) == [0]
    # one segment: its base offset follows the log end, newest first
    assert list(several.old_style_offsets) == [end.topics[0].partitions[0].offset, 0]


def _describe_configs_v0(client: KafkaConnection) -> None:
    from kafka.protocol.admin import DescribeConfigsRequest, DescribeConfigsResponse

    resource = DescribeConfigsRequest[0].DescribeConfigsResource
    request = DescribeConfigsRequest[0](
        resources=[
            resource(
                resource_type=TOPIC_CONFIG,
                resource_name=TOPIC,
                configuration_keys=["retention.ms", "cleanup.policy"],
            )
        ]
    )
    request.with_header(correlation_id=93, client_id="sarama")
    client.send_raw(request.encode(header=True, framed=True))
    response = DescribeConfigsResponse[0].decode(bytes(client.read_frame()), header=True)
    [result] = response.results
    assert result.error_code == 0
    assert sorted((c.name, c.is_default) for c in result.configs) == [
        ("cleanup.policy", True),
        ("retention.ms", True),
    ]


def _old_request(client: KafkaConnection, request: Any, response_class: Any) -> Any:
    """Send a kafka-python request (its classes: Kafka's definitions), read its answer."""
    request.with_header(correlation_id=94, client_id="old-admin")
    client.send_raw(request.encode(header=True, framed=True))
    response = response_class.decode(bytes(client.read_frame()), header=True)
    assert response.header.correlation_id == 94
    return response


def _create_and_delete_topics_v0(client: KafkaConnection) -> None:
    from kafka.protocol.admin import (
        CreateTopicsRequest,
        CreateTopicsResponse,
        DeleteTopicsRequest,
        DeleteTopicsResponse,
    )

    name = unique_topic("v0")
    topic = CreateTopicsRequest[0].CreatableTopic
    created = _old_request(
        client,
        CreateTopicsRequest[0](
            topics=[
                topic(
                    name=name,
                    num_partitions=2,
                    replication_factor=1,
                    assignments=[],
                    configs=[topic.CreatableTopicConfig(name="retention.ms", value="60000")],
                )
            ],
            timeout_ms=5000,
        ),
        CreateTopicsResponse[0],
    )
    assert [(t.name, t.error_code) for t in created.topics] == [(name, 0)]
    deleted = _old_request(
        client,
        DeleteTopicsRequest[0](topic_names=[name], timeout_ms=5000),
        DeleteTopicsResponse[0],
    )
    assert [(t.name, t.error_code) for t in deleted.responses] == [(name, 0)]


def _offset_for_leader_epoch_v0(client: KafkaConnection) -> None:
    from kafka.protocol.consumer import OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse

    topic = OffsetForLeaderEpochRequest[0].OffsetForLeaderTopic
    response = _old_request(
        client,
        OffsetForLeaderEpochRequest[0](
            topics=[
                topic(
                    topic=TOPIC,
                    partitions=[topic.OffsetForLeaderPartition(partition=0, leader_epoch=0)],
                )
            ]
        ),
        OffsetForLeaderEpochResponse[0],
    )
    [partition] = response.topics[0].partitions
    assert partition.error_code == 0
    assert partition.end_offset >= 2


def _describe_log_dirs_v0(client: KafkaConnection) -> None:
    from kafka.protocol.admin import DescribeLogDirsRequest, DescribeLogDirsResponse

    response = _old_request(
        client, DescribeLogDirsRequest[0](topics=None), DescribeLogDirsResponse[0]
    )
    [result] = response.results
    assert result.error_code == 0
    sizes = {
        (t.name, p.partition_index): p.partition_size for t in result.topics for p in t.partitions
    }
    assert sizes[(TOPIC, 0)] > 0


def _acls_v0(client: KafkaConnection) -> None:
    """v0 has no pattern type: what it creates, describes and deletes is LITERAL."""
    from kafka.protocol.admin import (
        CreateAclsRequest,
        CreateAclsResponse,
        DeleteAclsRequest,
        DeleteAclsResponse,
        DescribeAclsRequest,
        DescribeAclsResponse,
    )

    name = unique_topic("acl-v0")
    topic, read, allow, any_ = 2, 3, 3, 1
    acl = {"principal": "User:alice", "host": "*", "operation": read, "permission_type": allow}
    created = _old_request(
        client,
        CreateAclsRequest[0](
            creations=[
                CreateAclsRequest[0].AclCreation(resource_type=topic, resource_name=name, **acl)
            ]
        ),
        CreateAclsResponse[0],
    )
    assert [r.error_code for r in created.results] == [0]
    selection = {
        "resource_type_filter": topic,
        "resource_name_filter": name,
        "principal_filter": None,
        "host_filter": None,
        "operation": any_,
        "permission_type": any_,
    }
    described = _old_request(client, DescribeAclsRequest[0](**selection), DescribeAclsResponse[0])
    assert described.error_code == 0
    assert [
        (r.resource_type, r.resource_name, a.principal, a.operation)
        for r in described.resources
        for a in r.acls
    ] == [(topic, name, "User:alice", read)]
    deleted = _old_request(
        client,
        DeleteAclsRequest[0](filters=[DeleteAclsRequest[0].DeleteAclsFilter(**selection)]),
        DeleteAclsResponse[0],
    )
    [result] = deleted.filter_results
    assert result.error_code == 0
    assert [(m.resource_name, m.principal) for m in result.matching_acls] == [(name, "User:alice")]


def _write_txn_markers_v0(client: KafkaConnection) -> None:
    """A Kafka 2.x coordinator's marker: an ABORT for a producer with nothing open is written
    (as Kafka writes it), one for a topic this broker lacks is refused per partition."""
    from kafka.protocol.producer.transaction import (
        WriteTxnMarkersRequest,
        WriteTxnMarkersResponse,
    )

    marker = WriteTxnMarkersRequest[0].WritableTxnMarker
    topic = marker.WritableTxnMarkerTopic
    response = _old_request(
        client,
        WriteTxnMarkersRequest[0](
            markers=[
                marker(
                    producer_id=777_000,
                    producer_epoch=0,
                    transaction_result=False,
                    topics=[
                        topic(name=TOPIC, partition_indexes=[0]),
                        topic(name="no-such-topic", partition_indexes=[0]),
                    ],
                    coordinator_epoch=0,
                )
            ]
        ),
        WriteTxnMarkersResponse[0],
    )
    [result] = response.markers
    assert result.producer_id == 777_000
    codes = {(t.name, p.partition_index): p.error_code for t in result.topics for p in t.partitions}
    assert codes == {(TOPIC, 0): 0, ("no-such-topic", 0): 3}


def _api_versions_v5(client: KafkaConnection) -> None:
    """KIP-1242: the registry for a client that expects this broker of this cluster, or names
    nothing; REBOOTSTRAP_REQUIRED (and no versions) for one that expected another broker or
    cluster; INVALID_REQUEST for a node named without a cluster."""
    from tests.protocol.test_api_versions_request import v5_frame

    metadata = client.request(3, 12, topics=[])
    cluster_id, node_id = metadata.cluster_id, metadata.brokers[0].node_id
    schema = response_schema(API_VERSIONS, 4)  # v5's response is v4's
    registry = sorted((h.api_key, h.min_version, h.max_version) for h in HANDLERS.values())
    for expected, error in [
        ((None, -1), ErrorCode.none),
        ((cluster_id, node_id), ErrorCode.none),
        ((cluster_id, node_id + 1), ErrorCode.rebootstrap_required),
        (("another-cluster", node_id), ErrorCode.rebootstrap_required),
        ((cluster_id, -1), ErrorCode.rebootstrap_required),
        ((None, node_id), ErrorCode.invalid_request),
    ]:
        frame = v5_frame(51, *expected)
        client.send_raw(struct.pack(">i", len(frame)) + frame)
        correlation_id, response = decode_response(schema, client.read_frame())
        assert (correlation_id, response.error_code) == (51, error), expected
        advertised = [(k.api_key, k.min_version, k.max_version) for k in response.api_keys]
        assert advertised == (registry if error == ErrorCode.none else []), expected


OLD_END_DRIVERS: dict[tuple[int, int], Callable[[KafkaConnection], None]] = {
    (18, 5): _api_versions_v5,
    (27, 0): _write_txn_markers_v0,
    (29, 0): _acls_v0,
    (30, 0): _acls_v0,
    (31, 0): _acls_v0,
    (19, 0): _create_and_delete_topics_v0,
    (20, 0): _create_and_delete_topics_v0,
    (23, 0): _offset_for_leader_epoch_v0,
    (35, 0): _describe_log_dirs_v0,
    (0, 0): _produce_v0,
    (1, 0): _fetch_v0,
    (2, 0): _list_offsets_v0,
    (32, 0): _describe_configs_v0,
}


def test_every_old_end_has_a_driver() -> None:
    assert set(OLD_ENDS) <= set(OLD_END_DRIVERS), set(OLD_ENDS) - set(OLD_END_DRIVERS)


@pytest.mark.parametrize("end", OLD_ENDS, ids=lambda end: f"api{end[0]}-v{end[1]}")
def test_old_end_answers(client: KafkaConnection, end: tuple[int, int]) -> None:
    OLD_END_DRIVERS[end](client)
