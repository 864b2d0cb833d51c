"""ConsumerGroupHeartbeat (68), ConsumerGroupDescribe (69) and the group handlers where classic
and KIP-848 consumer groups meet: bytes a client would receive, decoded."""

from __future__ import annotations

import asyncio
import dataclasses
import datetime

from odradek.protocol.errors import ErrorCode
from odradek.security.acl import AclOperation as Op
from odradek.security.acl import ResourceType
from odradek.server.authorizer import Authorizer
from odradek.server.services import BrokerServices

from .conftest import HandlerCaller
from .test_authorization import ALICE, grant

GROUP, TOPIC = ResourceType.GROUP, ResourceType.TOPIC

HEARTBEAT, DESCRIBE = 68, 69
OFFSET_COMMIT, OFFSET_FETCH, LIST_GROUPS, DESCRIBE_GROUPS, API_VERSIONS = 8, 9, 16, 15, 18
MS = datetime.timedelta(milliseconds=1)


def join(handlers: HandlerCaller, member_id: str, version: int = 1) -> object:
    return handlers.call(
        HEARTBEAT,
        version,
        group_id="g",
        member_id=member_id,
        member_epoch=0,
        rebalance_timeout=30_000 * MS,
        subscribed_topic_names=["t"],
        topic_partitions=[],
    )


def test_join_heartbeat_describe_and_leave(
    handlers: HandlerCaller, services: BrokerServices
) -> None:
    asyncio.run(services.topics.create_topic("t", 3, 1))
    topic_id = services.topics.topic("t").topic_id  # type: ignore[union-attr]
    joined = join(handlers, "m-1")
    assert joined.error_code == ErrorCode.none
    assert (joined.member_id, joined.member_epoch) == ("m-1", 1)
    assert joined.heartbeat_interval == 200 * MS  # a group just formed (see _interval)
    (tp,) = joined.assignment.topic_partitions
    assert (tp.topic_id, sorted(tp.partitions)) == (topic_id, [0, 1, 2])
    # A plain heartbeat: nothing changed, no assignment in the answer.
    again = handlers.call(
        HEARTBEAT, 1, group_id="g", member_id="m-1", member_epoch=1, topic_partitions=None
    )
    assert again.error_code == ErrorCode.none and again.assignment is None
    (group,) = handlers.call(
        DESCRIBE, 1, group_ids=["g"], include_authorized_operations=False
    ).groups
    assert (group.error_code, group.group_state, group.group_epoch, group.assignor_name) == (
        ErrorCode.none,
        "Stable",
        1,
        "uniform",
    )
    (member,) = group.members
    assert member.member_id == "m-1" and member.subscribed_topic_names == ("t",)
    assert member.assignment.topic_partitions[0].topic_name == "t"
    listed = handlers.call(LIST_GROUPS, 5, states_filter=[], types_filter=["consumer"]).groups
    assert [(g.group_id, g.group_type, g.group_state) for g in listed] == [
        ("g", "consumer", "Stable")
    ]
    (classic,) = handlers.call(DESCRIBE_GROUPS, 6, groups=["g"]).groups
    assert classic.error_code == ErrorCode.group_id_not_found
    left = handlers.call(HEARTBEAT, 1, group_id="g", member_id="m-1", member_epoch=-1)
    assert (left.error_code, left.member_epoch) == (ErrorCode.none, -1)


def test_stale_member_epochs(handlers: HandlerCaller, services: BrokerServices) -> None:
    asyncio.run(services.topics.create_topic("t", 1, 1))
    join(handlers, "m-1")
    stale = handlers.call(
        HEARTBEAT, 1, group_id="g", member_id="m-1", member_epoch=7, topic_partitions=[]
    )
    assert stale.error_code == ErrorCode.fenced_member_epoch and stale.error_message
    unknown = handlers.call(HEARTBEAT, 1, group_id="g", member_id="x", member_epoch=1)
    assert unknown.error_code == ErrorCode.unknown_member_id
    no_id = handlers.call(HEARTBEAT, 1, group_id="g", member_id="", member_epoch=1)
    assert no_id.error_code == ErrorCode.invalid_request

    def commit(epoch: int) -> ErrorCode:
        response = handlers.call(
            OFFSET_COMMIT,
            9,
            group_id="g",
            generation_id_or_member_epoch=epoch,
            member_id="m-1",
            topics=[{"name": "t", "partitions": [{"partition_index": 0, "committed_offset": 4}]}],
        )
        return response.topics[0].partitions[0].error_code

    assert commit(1) == ErrorCode.none
    assert commit(0) == ErrorCode.stale_member_epoch

    def fetch(epoch: int) -> ErrorCode:
        (group,) = handlers.call(
            OFFSET_FETCH,
            9,
            groups=[{"group_id": "g", "member_id": "m-1", "member_epoch": epoch, "topics": None}],
            require_stable=False,
        ).groups
        return group.error_code

    assert fetch(1) == ErrorCode.none
    assert fetch(3) == ErrorCode.stale_member_epoch


def test_v0_gives_a_member_id(handlers: HandlerCaller, services: BrokerServices) -> None:
    asyncio.run(services.topics.create_topic("t", 1, 1))
    joined = join(handlers, "", version=0)
    assert joined.error_code == ErrorCode.none and len(joined.member_id) > 10


def test_api_versions_advertises_both(handlers: HandlerCaller) -> None:
    keys = {
        k.api_key: (k.min_version, k.max_version) for k in handlers.call(API_VERSIONS, 3).api_keys
    }
    assert keys[HEARTBEAT] == (0, 1) and keys[DESCRIBE] == (0, 1)


def test_acls_read_on_the_group_and_describe_on_its_topics(services: BrokerServices) -> None:
    asyncio.run(services.topics.create_topic("t", 1, 1))
    secured = dataclasses.replace(
        services, authorizer=Authorizer(services.topics.store, frozenset({"User:admin"}))
    )
    alice = HandlerCaller(secured, ALICE)
    try:

        def describe() -> object:
            (group,) = alice.call(
                DESCRIBE, 1, group_ids=["g"], include_authorized_operations=False
            ).groups
            return group

        assert join(alice, "m-1").error_code == ErrorCode.group_authorization_failed
        assert describe().error_code == ErrorCode.group_authorization_failed  # type: ignore[attr-defined]
        grant(secured, GROUP, "g", Op.READ)
        assert join(alice, "m-1").error_code == ErrorCode.topic_authorization_failed
        grant(secured, TOPIC, "t", Op.DESCRIBE)
        assert join(alice, "m-1").error_code == ErrorCode.none
        # READ on the group implies DESCRIBE, as in Kafka.
        assert len(describe().members) == 1  # type: ignore[attr-defined]
    finally:
        alice.close()
