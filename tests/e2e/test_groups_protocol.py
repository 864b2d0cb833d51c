"""The group APIs on the wire: every version range end, and bad input answered with Kafka's error
codes while the group carries on for its other members.

Requests go through odradek's own asyncio client at exact versions; responses are decoded with
kio at the same version, and every byte must belong to the response.
"""

from __future__ import annotations

import asyncio
import struct
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kio.serial import entity_reader

from odradek.client.aio import AsyncConnection
from odradek.clock import ManualClock
from odradek.protocol import old_messages
from odradek.protocol.errors import ErrorCode
from odradek.protocol.messages import response_schema
from odradek.server.registry import HANDLERS, load_handlers
from odradek.testing import RunningBroker, running_broker

from .conftest import create_topics
from .groups_support import GROUP_BROKER_SETTINGS, group_broker

load_handlers()

OFFSET_COMMIT, OFFSET_FETCH, FIND_COORDINATOR, JOIN, HEARTBEAT = 8, 9, 10, 11, 12
LEAVE, SYNC, DESCRIBE, LIST, DELETE_GROUPS, OFFSET_DELETE = 13, 14, 15, 16, 42, 47
SESSION_MS = 6000
TOPIC = "wire"


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningBroker]:
    for running in group_broker(tmp_path_factory.mktemp("groups-wire")):
        create_topics(running.bootstrap, {TOPIC: 2})
        yield running


def subscription(*topics: str) -> bytes:
    out = bytearray(struct.pack(">hi", 0, len(topics)))
    for t in topics:
        out += struct.pack(">h", len(t)) + t.encode()
    return bytes(out + struct.pack(">i", -1))


class Wire:
    """A connection whose every response is decoded exactly."""

    def __init__(self, connection: AsyncConnection) -> None:
        self.connection = connection

    @classmethod
    async def open(cls, bootstrap: str) -> Wire:
        return cls(await AsyncConnection.open(bootstrap, client_id="wire"))

    async def __call__(self, api_key: int, version: int, **fields: Any) -> Any:
        response = await self.connection.exchange(api_key, fields, version=version, raw=True)
        assert response is not None
        frame = response.frame
        schema: Any = response_schema(api_key, version)
        _, header_size = entity_reader(schema.__header_schema__)(frame, 0)
        body, body_size = entity_reader(schema)(frame, header_size)
        left = len(frame) - header_size - body_size
        assert left == 0, f"{left} bytes after the response"
        return body

    async def close(self) -> None:
        await self.connection.close()


def join_fields(group: str, member_id: str = "", **extra: Any) -> dict[str, Any]:
    return {
        "group_id": group,
        "session_timeout": SESSION_MS,
        "rebalance_timeout": 10_000,
        "member_id": member_id,
        "group_instance_id": None,
        "protocol_type": "consumer",
        "protocols": [{"name": "range", "metadata": subscription(TOPIC)}],
        **extra,
    }


async def join(wire: Wire, version: int, group: str, member_id: str = "", **extra: Any) -> Any:
    """JoinGroup, coming back with the member id when told MEMBER_ID_REQUIRED."""
    response = await wire(JOIN, version, **join_fields(group, member_id, **extra))
    if response.error_code == ErrorCode.member_id_required:
        response = await wire(JOIN, version, **join_fields(group, response.member_id, **extra))
    return response


def commit_fields(group: str, generation: int, member_id: str, partitions: list[Any]) -> Any:
    return {
        "group_id": group,
        "generation_id_or_member_epoch": generation,
        "member_id": member_id,
        "group_instance_id": None,
        "retention_time": -1,
        "topics": [{"name": t, "partitions": ps} for t, ps in partitions],
    }


def offset(index: int, value: int, metadata: str = "") -> dict[str, Any]:
    return {
        "partition_index": index,
        "committed_offset": value,
        "committed_leader_epoch": -1,
        "committed_metadata": metadata,
    }


def codes(commit_response: Any) -> dict[tuple[str, int], ErrorCode]:
    return {
        (t.name, int(p.partition_index)): p.error_code
        for t in commit_response.topics
        for p in t.partitions
    }


@pytest.mark.parametrize("end", ["lowest", "highest"])
def test_every_group_api_at_each_end_of_its_range(bootstrap: str, end: str) -> None:
    def v(api_key: int) -> int:
        handler = HANDLERS[api_key]
        if end == "highest":
            return handler.max_version
        # the lowest kio has: OffsetCommit v0-v1 and OffsetFetch v0 (kio lacks them) are driven
        # by tests/e2e/test_old_clients.py and tests/server/test_captured_frames.py
        return next(
            version
            for version in range(handler.min_version, handler.max_version + 1)
            if (api_key, version) not in old_messages.REQUESTS
        )

    group = f"ends-{end}"

    async def scenario() -> None:
        wire = await Wire.open(bootstrap)
        found = await wire(
            FIND_COORDINATOR, v(FIND_COORDINATOR), key=group, key_type=0, coordinator_keys=[group]
        )
        coordinator = found.coordinators[0] if v(FIND_COORDINATOR) >= 4 else found
        assert coordinator.error_code == ErrorCode.none
        assert f"{coordinator.host}:{coordinator.port}" == bootstrap

        joined = await join(wire, v(JOIN), group)
        assert joined.error_code == ErrorCode.none
        assert joined.leader == joined.member_id
        me, generation = joined.member_id, int(joined.generation_id)
        synced = await wire(
            SYNC,
            v(SYNC),
            group_id=group,
            generation_id=generation,
            member_id=me,
            protocol_type="consumer",
            protocol_name="range",
            assignments=[{"member_id": me, "assignment": b"mine"}],
        )
        assert synced.error_code == ErrorCode.none and synced.assignment == b"mine"
        beat = await wire(
            HEARTBEAT, v(HEARTBEAT), group_id=group, generation_id=generation, member_id=me
        )
        assert beat.error_code == ErrorCode.none

        committed = await wire(
            OFFSET_COMMIT,
            v(OFFSET_COMMIT),
            **commit_fields(group, generation, me, [(TOPIC, [offset(0, 5, "m")])]),
        )
        assert codes(committed) == {(TOPIC, 0): ErrorCode.none}
        topics = [{"name": TOPIC, "partition_indexes": [0, 1]}]
        fetched = await wire(
            OFFSET_FETCH,
            v(OFFSET_FETCH),
            group_id=group,
            topics=topics,
            groups=[{"group_id": group, "topics": topics}],
        )
        if v(OFFSET_FETCH) >= 8:
            (fetched,) = fetched.groups
        assert getattr(fetched, "error_code", ErrorCode.none) == ErrorCode.none  # v2+
        (t,) = fetched.topics
        assert [(p.partition_index, p.committed_offset, p.metadata) for p in t.partitions] == [
            (0, 5, "m"),
            (1, -1, ""),
        ]

        listed = await wire(LIST, v(LIST))
        assert group in {g.group_id for g in listed.groups}
        described = await wire(DESCRIBE, v(DESCRIBE), groups=[group])
        (d,) = described.groups
        assert (d.error_code, d.group_state, d.protocol_data) == (ErrorCode.none, "Stable", "range")
        assert [(m.member_id, m.member_assignment) for m in d.members] == [(me, b"mine")]

        left = await wire(
            LEAVE, v(LEAVE), group_id=group, member_id=me, members=[{"member_id": me}]
        )
        assert left.error_code == ErrorCode.none
        assert all(m.error_code == ErrorCode.none for m in getattr(left, "members", ()))
        deleted_offsets = await wire(
            OFFSET_DELETE,
            v(OFFSET_DELETE),
            group_id=group,
            topics=[{"name": TOPIC, "partitions": [{"partition_index": 0}]}],
        )
        assert deleted_offsets.error_code == ErrorCode.none
        deleted = await wire(DELETE_GROUPS, v(DELETE_GROUPS), groups_names=[group])
        assert [(r.group_id, r.error_code) for r in deleted.results] == [(group, ErrorCode.none)]
        await wire.close()

    asyncio.run(scenario())


def test_bad_input_gets_kafkas_error_codes_and_the_group_carries_on(
    broker: RunningBroker, bootstrap: str
) -> None:
    group = "wire-bad-input"

    async def scenario() -> None:
        a, b, c = [await Wire.open(bootstrap) for _ in range(3)]
        ja = await join(a, 9, group)
        assert ja.error_code == ErrorCode.none
        # b joins; a learns of the rebalance from its heartbeat and rejoins.
        join_b = asyncio.ensure_future(join(b, 9, group))
        await asyncio.sleep(0.1)
        beat = await a(
            HEARTBEAT, 4, group_id=group, generation_id=ja.generation_id, member_id=ja.member_id
        )
        assert beat.error_code in (ErrorCode.none, ErrorCode.rebalance_in_progress)
        ja = await join(a, 9, group, ja.member_id)
        jb = await join_b
        assert ja.generation_id == jb.generation_id == 2
        generation = int(ja.generation_id)
        leader, follower = (ja, jb) if ja.leader == ja.member_id else (jb, ja)
        wire_of = {ja.member_id: a, jb.member_id: b}
        follower_sync = asyncio.ensure_future(
            wire_of[follower.member_id](
                SYNC,
                5,
                group_id=group,
                generation_id=generation,
                member_id=follower.member_id,
                assignments=[],
            )
        )
        leader_sync = await wire_of[leader.member_id](
            SYNC,
            5,
            group_id=group,
            generation_id=generation,
            member_id=leader.member_id,
            assignments=[
                {"member_id": leader.member_id, "assignment": b"p0"},
                {"member_id": follower.member_id, "assignment": b"p1"},
            ],
        )
        assert leader_sync.assignment == b"p0"
        assert (await follower_sync).assignment == b"p1"
        me = ja.member_id

        async def commit(*partitions: Any, generation: int = generation, member: str = me) -> Any:
            return codes(
                await a(
                    OFFSET_COMMIT, 9, **commit_fields(group, generation, member, list(partitions))
                )
            )

        # Unknown topic, unknown partition, next to a good one.
        assert await commit(("nope", [offset(0, 1)]), (TOPIC, [offset(0, 3), offset(99, 1)])) == {
            ("nope", 0): ErrorCode.unknown_topic_or_partition,
            (TOPIC, 0): ErrorCode.none,
            (TOPIC, 99): ErrorCode.unknown_topic_or_partition,
        }
        # A zombie of an older generation, and a stranger.
        assert await commit((TOPIC, [offset(0, 9)]), generation=generation - 1) == {
            (TOPIC, 0): ErrorCode.illegal_generation
        }
        assert await commit((TOPIC, [offset(0, 9)]), member="stranger") == {
            (TOPIC, 0): ErrorCode.unknown_member_id
        }
        stale = await a(HEARTBEAT, 4, group_id=group, generation_id=generation - 1, member_id=me)
        assert stale.error_code == ErrorCode.illegal_generation
        stranger = await c(
            HEARTBEAT, 4, group_id=group, generation_id=generation, member_id="stranger"
        )
        assert stranger.error_code == ErrorCode.unknown_member_id
        stale_sync = await c(
            SYNC, 5, group_id=group, generation_id=generation + 5, member_id=me, assignments=[]
        )
        assert stale_sync.error_code == ErrorCode.illegal_generation
        # Oversized commit metadata fails its partition only.
        assert await commit((TOPIC, [offset(0, 4, "x" * 5000), offset(1, 7, "small")])) == {
            (TOPIC, 0): ErrorCode.offset_metadata_too_large,
            (TOPIC, 1): ErrorCode.none,
        }
        # A commit with a generation into a group that does not exist, old and new style.
        for version, code in ((8, ErrorCode.illegal_generation), (9, ErrorCode.group_id_not_found)):
            answer = await c(
                OFFSET_COMMIT,
                version,
                **commit_fields("no-such-group", 3, "m", [(TOPIC, [offset(0, 1)])]),
            )
            assert codes(answer) == {(TOPIC, 0): code}
        # Joins that cannot be accepted.
        refused = {
            "session": await c(JOIN, 9, **join_fields(group, session_timeout=100)),
            "protocol": await c(
                JOIN, 9, **join_fields(group, protocols=[{"name": "other", "metadata": b""}])
            ),
            "group id": await c(JOIN, 9, **join_fields("")),
            "member": await c(JOIN, 9, **join_fields(group, "made-up-member")),
        }
        assert {k: r.error_code for k, r in refused.items()} == {
            "session": ErrorCode.invalid_session_timeout,
            "protocol": ErrorCode.inconsistent_group_protocol,
            "group id": ErrorCode.invalid_group_id,
            "member": ErrorCode.unknown_member_id,
        }
        # Admin requests on a live group.
        deleted = await c(DELETE_GROUPS, 2, groups_names=[group, "no-such-group"])
        assert [r.error_code for r in deleted.results] == [
            ErrorCode.non_empty_group,
            ErrorCode.group_id_not_found,
        ]
        subscribed = await c(
            OFFSET_DELETE,
            0,
            group_id=group,
            topics=[{"name": TOPIC, "partitions": [{"partition_index": 0}]}],
        )
        assert subscribed.topics[0].partitions[0].error_code == ErrorCode.group_subscribed_to_topic
        unknown_old = await c(DESCRIBE, 5, groups=["no-such-group"])
        unknown_new = await c(DESCRIBE, 6, groups=["no-such-group"])
        assert (unknown_old.groups[0].error_code, unknown_old.groups[0].group_state) == (
            ErrorCode.none,
            "Dead",
        )
        assert unknown_new.groups[0].error_code == ErrorCode.group_id_not_found

        # Through all of that the group stayed as it was.
        for wire, member in ((a, ja.member_id), (b, jb.member_id)):
            ok = await wire(
                HEARTBEAT, 4, group_id=group, generation_id=generation, member_id=member
            )
            assert ok.error_code == ErrorCode.none
        fetched = await c(OFFSET_FETCH, 7, group_id=group, topics=None)
        assert {
            (t.name, p.partition_index): p.committed_offset
            for t in fetched.topics
            for p in t.partitions
        } == {(TOPIC, 0): 3, (TOPIC, 1): 7}
        assert broker.broker is not None
        for wire in (a, b, c):
            await wire.close()

    asyncio.run(scenario())


def test_a_static_member_with_a_stale_member_id_is_fenced(bootstrap: str) -> None:
    group = "wire-static"

    async def scenario() -> None:
        a = await Wire.open(bootstrap)
        first = await join(a, 9, group, group_instance_id="instance-1")
        assert first.error_code == ErrorCode.none
        await a(
            SYNC,
            5,
            group_id=group,
            generation_id=first.generation_id,
            member_id=first.member_id,
            group_instance_id="instance-1",
            assignments=[],
        )
        second = await join(a, 9, group, group_instance_id="instance-1")
        assert second.member_id != first.member_id
        assert second.generation_id == first.generation_id, "no new generation"
        for api, extra in ((HEARTBEAT, {}), (SYNC, {"assignments": []})):
            fenced = await a(
                api,
                HANDLERS[api].max_version,
                group_id=group,
                generation_id=first.generation_id,
                member_id=first.member_id,
                group_instance_id="instance-1",
                **extra,
            )
            assert fenced.error_code == ErrorCode.fenced_instance_id
        rejoin = await a(
            JOIN, 9, **join_fields(group, first.member_id, group_instance_id="instance-1")
        )
        assert rejoin.error_code == ErrorCode.fenced_instance_id
        await a.close()

    asyncio.run(scenario())


def test_the_broker_drives_group_timers_from_its_injected_clock(tmp_path: Path) -> None:
    """Session timeouts follow the broker's clock: with a ManualClock, a member dies when the
    clock moves past its session, not before, however long the test takes."""
    clock = ManualClock()
    with running_broker(tmp_path, clock=clock, **GROUP_BROKER_SETTINGS) as broker:

        async def tick() -> None:
            assert broker.broker is not None
            broker.broker.housekeeping_tick()

        async def scenario() -> None:
            wire = await Wire.open(broker.bootstrap)
            joined = await join(wire, 9, "clocked")
            me, generation = joined.member_id, int(joined.generation_id)
            await wire(
                SYNC, 5, group_id="clocked", generation_id=generation, member_id=me, assignments=[]
            )

            async def beat() -> ErrorCode:
                answer = await wire(
                    HEARTBEAT, 4, group_id="clocked", generation_id=generation, member_id=me
                )
                return ErrorCode(answer.error_code)

            clock.advance(SESSION_MS - 1)
            await asyncio.to_thread(broker.call, tick())
            assert await beat() == ErrorCode.none
            clock.advance(SESSION_MS)
            await asyncio.to_thread(broker.call, tick())
            assert await beat() == ErrorCode.unknown_member_id
            await wire.close()

        asyncio.run(scenario())
