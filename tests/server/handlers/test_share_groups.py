"""The share group handlers (ShareGroupHeartbeat 76, ShareGroupDescribe 77, ShareFetch 78,
ShareAcknowledge 79, Describe/Alter/DeleteShareGroupOffsets 90-92) and the group configs of
Describe/IncrementalAlterConfigs: bytes a client would receive, decoded."""

from __future__ import annotations

import asyncio
import datetime
from typing import Any

from odradek.protocol.errors import ErrorCode
from odradek.protocol.messages import build, request_schema
from odradek.server.registry import HANDLERS
from odradek.server.services import BrokerServices

from ..conftest import batch_of
from .conftest import HandlerCaller

HEARTBEAT, DESCRIBE, FETCH, ACK = 76, 77, 78, 79
DESCRIBE_OFFSETS, ALTER_OFFSETS, DELETE_OFFSETS = 90, 91, 92
PRODUCE, DESCRIBE_CONFIGS, INCREMENTAL_ALTER_CONFIGS, LIST_GROUPS = 0, 32, 44, 16
DELETE_GROUPS = 42
GROUP_RESOURCE = 32
MS = datetime.timedelta(milliseconds=1)
ACCEPT, RELEASE = 1, 2


def setup(handlers: HandlerCaller, services: BrokerServices, records: int = 4) -> Any:
    asyncio.run(services.topics.create_topic("t", 1, 1))
    topic_id = services.topics.topic("t").topic_id  # type: ignore[union-attr]
    set_config(handlers, "share.auto.offset.reset", "earliest")
    response = handlers.call(
        PRODUCE,
        9,
        acks=1,
        timeout=10_000,
        topic_data=[
            {
                "name": "t",
                "partition_data": [
                    {"index": 0, "records": batch_of(*(b"r%d" % i for i in range(records)))}
                ],
            }
        ],
    )
    assert response.responses[0].partition_responses[0].error_code == ErrorCode.none
    return topic_id


def set_config(handlers: HandlerCaller, name: str, value: str) -> Any:
    (result,) = handlers.call(
        INCREMENTAL_ALTER_CONFIGS,
        1,
        resources=[
            {
                "resource_type": GROUP_RESOURCE,
                "resource_name": "g",
                "configs": [{"name": name, "config_operation": 0, "value": value}],
            }
        ],
        validate_only=False,
    ).responses
    return result


def heartbeat(handlers: HandlerCaller, member: str, epoch: int) -> Any:
    return handlers.call(
        HEARTBEAT,
        1,
        group_id="g",
        member_id=member,
        member_epoch=epoch,
        subscribed_topic_names=["t"] if epoch == 0 else None,
    )


def fetch(
    handlers: HandlerCaller,
    topic_id: Any,
    epoch: int,
    acks: list[dict[str, Any]] | None = None,
    member: str = "m",
) -> Any:
    return handlers.call(
        FETCH,
        1,
        group_id="g",
        member_id=member,
        share_session_epoch=epoch,
        max_wait=0 * MS,
        min_bytes=1,
        max_bytes=1 << 20,
        max_records=100,
        batch_size=100,
        topics=[
            {
                "topic_id": topic_id,
                "partitions": [
                    {
                        "partition_index": 0,
                        **(
                            {"acknowledgement_batches": acks}
                            if acks
                            else {"acknowledgement_batches": []}
                        ),
                    }
                ],
            }
        ],
        forgotten_topics_data=[],
    )


def acquired(response: Any) -> list[tuple[int, int, int]]:
    return [
        (r.first_offset, r.last_offset, r.delivery_count)
        for t in response.responses
        for p in t.partitions
        for r in p.acquired_records
    ]


def test_heartbeat_describe_and_list(handlers: HandlerCaller, services: BrokerServices) -> None:
    topic_id = setup(handlers, services)
    joined = heartbeat(handlers, "m", 0)
    assert (joined.error_code, joined.member_epoch) == (ErrorCode.none, 1)
    (tp,) = joined.assignment.topic_partitions
    assert (tp.topic_id, list(tp.partitions)) == (topic_id, [0])
    (group,) = handlers.call(
        DESCRIBE, 1, group_ids=["g"], include_authorized_operations=False
    ).groups
    assert (group.group_state, group.assignor_name, len(group.members)) == ("Stable", "simple", 1)
    listed = handlers.call(LIST_GROUPS, 5, states_filter=[], types_filter=["share"]).groups
    assert [(g.group_id, g.group_type) for g in listed] == [("g", "share")]


def test_fetch_acknowledge_and_offsets(handlers: HandlerCaller, services: BrokerServices) -> None:
    topic_id = setup(handlers, services)
    first = fetch(handlers, topic_id, 0)
    assert first.error_code == ErrorCode.none
    assert first.acquisition_lock_timeout == 30_000 * MS
    assert acquired(first) == [(0, 3, 1)]
    assert first.responses[0].partitions[0].records  # the batch goes along
    # Accept 0-1, release 2-3: they come back with delivery count 2.
    second = fetch(
        handlers,
        topic_id,
        1,
        [
            {"first_offset": 0, "last_offset": 1, "acknowledge_types": [ACCEPT]},
            {"first_offset": 2, "last_offset": 3, "acknowledge_types": [RELEASE]},
        ],
    )
    assert second.responses[0].partitions[0].acknowledge_error_code == ErrorCode.none
    assert acquired(second) == [(2, 3, 2)]
    # Acknowledging what is not held is refused; the session epoch must follow.
    bad = handlers.call(
        ACK,
        1,
        group_id="g",
        member_id="m",
        share_session_epoch=2,
        topics=[
            {
                "topic_id": topic_id,
                "partitions": [
                    {
                        "partition_index": 0,
                        "acknowledgement_batches": [
                            {"first_offset": 0, "last_offset": 0, "acknowledge_types": [ACCEPT]}
                        ],
                    }
                ],
            }
        ],
    )
    assert bad.responses[0].partitions[0].error_code == ErrorCode.invalid_record_state
    stale = fetch(handlers, topic_id, 2)
    assert stale.error_code == ErrorCode.invalid_share_session_epoch
    (group,) = handlers.call(DESCRIBE_OFFSETS, 1, groups=[{"group_id": "g", "topics": None}]).groups
    # Describing needs the group known to its coordinator: a member joins first.
    assert group.error_code == ErrorCode.group_id_not_found
    heartbeat(handlers, "m", 0)
    (group,) = handlers.call(DESCRIBE_OFFSETS, 1, groups=[{"group_id": "g", "topics": None}]).groups
    ((partition,),) = [t.partitions for t in group.topics]
    assert (partition.start_offset, partition.lag) == (2, 2)
    # Offsets change only while the group is empty.
    alter = {
        "group_id": "g",
        "topics": [{"topic_name": "t", "partitions": [{"partition_index": 0, "start_offset": 1}]}],
    }
    assert handlers.call(ALTER_OFFSETS, 0, **alter).error_code == ErrorCode.non_empty_group
    assert heartbeat(handlers, "m", -1).error_code == ErrorCode.none
    altered = handlers.call(ALTER_OFFSETS, 0, **alter)
    assert altered.responses[0].partitions[0].error_code == ErrorCode.none
    (group,) = handlers.call(
        DESCRIBE_OFFSETS,
        1,
        groups=[{"group_id": "g", "topics": [{"topic_name": "t", "partitions": [0]}]}],
    ).groups
    assert group.topics[0].partitions[0].start_offset == 1
    deleted = handlers.call(DELETE_OFFSETS, 0, group_id="g", topics=[{"topic_name": "t"}])
    assert deleted.responses[0].error_code == ErrorCode.none
    (group,) = handlers.call(
        DESCRIBE_OFFSETS,
        1,
        groups=[{"group_id": "g", "topics": [{"topic_name": "t", "partitions": [0]}]}],
    ).groups
    assert group.topics[0].partitions[0].start_offset == -1
    fetch(handlers, topic_id, 0)  # the group reads again: it has state here
    assert services.share_partitions is not None
    assert services.share_partitions.existing("g")
    (deleted_group,) = handlers.call(DELETE_GROUPS, 2, groups_names=["g"]).results
    assert deleted_group.error_code == ErrorCode.none
    assert services.share_partitions.existing("g") == {}


def test_group_configs(handlers: HandlerCaller, services: BrokerServices) -> None:
    assert set_config(handlers, "share.record.lock.duration.ms", "5000").error_code == (
        ErrorCode.none
    )
    refused = set_config(handlers, "share.auto.offset.reset", "sideways")
    assert refused.error_code == ErrorCode.invalid_config
    assert set_config(handlers, "no.such.config", "1").error_code == ErrorCode.invalid_config
    (result,) = handlers.call(
        DESCRIBE_CONFIGS,
        4,
        resources=[
            {"resource_type": GROUP_RESOURCE, "resource_name": "g", "configuration_keys": None}
        ],
        include_synonyms=False,
        include_documentation=False,
    ).results
    configs = {c.name: (c.value, c.config_source) for c in result.configs}
    assert configs == {
        "share.auto.offset.reset": ("latest", 5),
        "share.record.lock.duration.ms": ("5000", 8),
        "share.isolation.level": ("read_uncommitted", 5),
        # A group's configs include those of streams groups, at the broker's values.
        "streams.heartbeat.interval.ms": ("5000", 5),
        "streams.session.timeout.ms": ("45000", 5),
        "streams.num.standby.replicas": ("0", 5),
        "streams.num.warmup.replicas": ("2", 5),
        "streams.acceptable.recovery.lag": ("10000", 5),
        "streams.task.offset.interval.ms": ("60000", 5),
    }
    assert services.share_partitions is not None
    assert services.share_partitions.lock_ms("g") == 5000


def test_a_parked_fetch_wakes_for_records_another_member_releases(
    handlers: HandlerCaller, services: BrokerServices
) -> None:
    topic_id = setup(handlers, services, records=1)
    assert acquired(fetch(handlers, topic_id, 0, member="b")) == [(0, 0, 1)]
    fetch_a = handlers.context(FETCH, 1)
    release_b = handlers.context(ACK, 1)
    request_a = _request(
        FETCH,
        group_id="g",
        member_id="a",
        share_session_epoch=0,
        max_wait=60_000 * MS,  # far longer than the test waits
        min_bytes=1,
        max_bytes=1 << 20,
        max_records=100,
        batch_size=100,
        topics=[
            {
                "topic_id": topic_id,
                "partitions": [{"partition_index": 0, "acknowledgement_batches": []}],
            }
        ],
        forgotten_topics_data=[],
    )
    request_b = _request(
        ACK,
        group_id="g",
        member_id="b",
        share_session_epoch=1,
        topics=[
            {
                "topic_id": topic_id,
                "partitions": [
                    {
                        "partition_index": 0,
                        "acknowledgement_batches": [
                            {"first_offset": 0, "last_offset": 0, "acknowledge_types": [RELEASE]}
                        ],
                    }
                ],
            }
        ],
    )

    async def scenario() -> Any:
        parked = asyncio.ensure_future(HANDLERS[FETCH].fn(fetch_a, request_a))
        for _ in range(10):
            await asyncio.sleep(0)  # a's fetch finds nothing and parks
        assert not parked.done()
        await HANDLERS[ACK].fn(release_b, request_b)
        return await asyncio.wait_for(parked, 10)

    response = handlers.decode(fetch_a, handlers._loop.run_until_complete(scenario()))
    assert acquired(response) == [(0, 0, 2)]


def _request(api_key: int, **fields: Any) -> Any:
    return build(request_schema(api_key, 1), fields)
