"""Consumer groups with aiokafka against a real odradek broker."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer
from aiokafka.abc import ConsumerRebalanceListener

from odradek.testing import RunningBroker

from .groups_support import (
    HEARTBEAT_MS,
    SESSION_MS,
    TIMEOUT_S,
    describe,
    group_broker,
    partition_of,
    produce_everywhere,
    split_among,
)


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningBroker]:
    yield from group_broker(tmp_path_factory.mktemp("groups-aiokafka"))


class Revocations(ConsumerRebalanceListener):  # type: ignore[misc]
    def __init__(self) -> None:
        self.revoked: list[set[int]] = []

    async def on_partitions_revoked(self, revoked: Any) -> None:
        self.revoked.append({tp.partition for tp in revoked})

    async def on_partitions_assigned(self, assigned: Any) -> None:
        pass


async def start(
    bootstrap: str, group: str, topic: str, client_id: str, **config: Any
) -> AIOKafkaConsumer:
    listener = config.pop("listener", None)
    settings: dict[str, Any] = {
        "bootstrap_servers": bootstrap,
        "group_id": group,
        "client_id": client_id,
        "auto_offset_reset": "earliest",
        "enable_auto_commit": False,
        "session_timeout_ms": SESSION_MS,
        "heartbeat_interval_ms": HEARTBEAT_MS,
    }
    consumer = AIOKafkaConsumer(**(settings | config))
    consumer.subscribe([topic], listener=listener)
    await consumer.start()
    return consumer


async def eventually(
    predicate: Callable[[], bool | Awaitable[bool]], what: str = "condition"
) -> None:
    deadline = time.monotonic() + TIMEOUT_S
    while True:
        result = predicate()
        if not isinstance(result, bool):
            result = await result
        if result:
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.05)


def stable_split(bootstrap: str, group: str, members: int, topic: str) -> Callable[[], Any]:
    check = split_among(bootstrap, group, members, topic)
    return lambda: asyncio.to_thread(check)


async def read(consumers: dict[str, AIOKafkaConsumer], count: int) -> dict[str, list[Any]]:
    got: dict[str, list[Any]] = {name: [] for name in consumers}

    async def drain(name: str, consumer: AIOKafkaConsumer) -> None:
        while sum(map(len, got.values())) < count:
            batches = await consumer.getmany(timeout_ms=50)
            for messages in batches.values():
                got[name].extend(messages)

    await asyncio.wait_for(asyncio.gather(*(drain(n, c) for n, c in consumers.items())), TIMEOUT_S)
    return got


def check_split(got: dict[str, list[Any]], sent: list[bytes]) -> None:
    assert sorted(m.value for ms in got.values() for m in ms) == sorted(sent)
    owners: dict[int, set[str]] = {}
    for name, messages in got.items():
        for m in messages:
            assert partition_of(m.value) == m.partition
            owners.setdefault(m.partition, set()).add(name)
    assert all(len(names) == 1 for names in owners.values()), owners


def test_two_then_three_members_split_six_partitions(
    bootstrap: str, make_topic: Callable[..., str], topic_name: str
) -> None:
    topic = make_topic(topic_name, 6)
    group = f"split-{topic}"

    async def scenario() -> None:
        consumers = {n: await start(bootstrap, group, topic, n) for n in ("a0", "a1")}
        await eventually(stable_split(bootstrap, group, 2, topic), "2 members")
        await eventually(lambda: all(len(c.assignment()) == 3 for c in consumers.values()))
        sent = await asyncio.to_thread(produce_everywhere, bootstrap, topic, 4, prefix="one")
        check_split(await read(consumers, len(sent)), sent)
        for c in consumers.values():
            await c.commit()
        consumers["a2"] = await start(bootstrap, group, topic, "a2")
        await eventually(stable_split(bootstrap, group, 3, topic), "3 members")
        await eventually(lambda: all(len(c.assignment()) == 2 for c in consumers.values()))
        sent = await asyncio.to_thread(produce_everywhere, bootstrap, topic, 4, prefix="two")
        check_split(await read(consumers, len(sent)), sent)
        for c in consumers.values():
            await c.stop()

    asyncio.run(scenario())


def test_a_member_that_leaves_has_its_partitions_reassigned(
    bootstrap: str, make_topic: Callable[..., str], topic_name: str
) -> None:
    topic = make_topic(topic_name, 6)
    group = f"leave-{topic}"

    async def scenario() -> None:
        consumers = [await start(bootstrap, group, topic, f"a{i}") for i in range(3)]
        await eventually(stable_split(bootstrap, group, 3, topic), "3 members")
        await consumers.pop().stop()
        await eventually(stable_split(bootstrap, group, 2, topic), "2 members")
        await eventually(
            lambda: (
                sorted(tp.partition for c in consumers for tp in c.assignment()) == list(range(6))
            )
        )
        for c in consumers:
            await c.stop()

    asyncio.run(scenario())


def test_a_static_member_rejoins_without_a_rebalance(
    broker: RunningBroker, bootstrap: str, make_topic: Callable[..., str], topic_name: str
) -> None:
    topic = make_topic(topic_name, 6)
    group = f"static-{topic}"
    static: dict[str, Any] = {"session_timeout_ms": 6000}

    def generation() -> int:
        async def get() -> int:
            assert broker.broker is not None
            return broker.broker.groups.shard.groups[group].generation

        return broker.call(get())

    async def scenario() -> None:
        watch = Revocations()
        stays = await start(
            bootstrap, group, topic, "stays", group_instance_id="stays", listener=watch, **static
        )
        restarts = await start(
            bootstrap, group, topic, "restarts", group_instance_id="restarts", **static
        )
        await eventually(stable_split(bootstrap, group, 2, topic), "2 members")
        await eventually(lambda: len(stays.assignment()) == 3 and len(restarts.assignment()) == 3)
        owned = restarts.assignment()
        revocations = len(watch.revoked)
        before = await asyncio.to_thread(generation)
        await restarts.stop()  # a static member sends no LeaveGroup
        again = await start(
            bootstrap, group, topic, "restarts", group_instance_id="restarts", **static
        )
        await eventually(lambda: again.assignment() == owned, "its old partitions")
        assert (await asyncio.to_thread(describe, bootstrap, group)).state == "Stable"
        assert await asyncio.to_thread(generation) == before, "no rebalance happened"
        assert len(watch.revoked) == revocations
        await stays.stop()
        await again.stop()

    asyncio.run(scenario())


def test_a_new_member_resumes_from_committed_offsets(
    bootstrap: str, make_topic: Callable[..., str], topic_name: str
) -> None:
    topic = make_topic(topic_name, 2)
    group = f"resume-{topic}"
    sent = produce_everywhere(bootstrap, topic, 5, partitions=2)

    async def scenario() -> None:
        first = await start(bootstrap, group, topic, "first")
        got = await read({"first": first}, len(sent))
        await first.commit()
        await first.stop()
        assert len(got["first"]) == len(sent)
        later = await asyncio.to_thread(
            produce_everywhere, bootstrap, topic, 3, partitions=2, prefix="later"
        )
        second = await start(bootstrap, group, topic, "second")
        again = await read({"second": second}, len(later))
        assert sorted(m.value for m in again["second"]) == sorted(later)
        await second.stop()

    asyncio.run(scenario())
