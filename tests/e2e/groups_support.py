"""Shared pieces of the consumer group end-to-end tests (``test_groups_*.py``).

The broker runs with settings that keep group tests fast, as Kafka users set them in tests: no
initial rebalance delay, and session timeouts down to 500 ms allowed. The group's view comes from
the broker itself, through odradek's own admin client (what ``odradek groups describe`` shows).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

from confluent_kafka import Consumer, Producer

from odradek import testing
from odradek.client.admin import GroupAdmin, GroupInfo
from odradek.testing import BrokerProcess, RunningBroker, running_broker

GROUP_BROKER_SETTINGS = {
    "group_initial_rebalance_delay_ms": "0",
    "group_min_session_timeout_ms": "500",
    "offsets_topic_num_partitions": "4",
}
SESSION_MS = 2000
HEARTBEAT_MS = 100
TIMEOUT_S = 20


def group_broker(directory: Path) -> Iterator[RunningBroker]:
    with running_broker(directory, **GROUP_BROKER_SETTINGS) as broker:
        yield broker


def group_broker_args() -> list[str]:
    """``odradek serve`` arguments for the same settings."""
    return [
        arg
        for key, value in GROUP_BROKER_SETTINGS.items()
        for arg in ("-o", f"{key.replace('_', '.')}={value}")
    ]


def group_broker_process(directory: Path, port: int = 0) -> BrokerProcess:
    """The group test broker as a child process.

    confluent-kafka runs its rebalance callback (and the ``assign`` inside it, which waits for
    librdkafka's threads) holding the GIL; a broker in the same process then cannot answer what
    librdkafka waits for, and closing a group consumer can deadlock. librdkafka clients in
    these tests therefore talk to a broker of their own process.
    """
    return BrokerProcess(directory, *group_broker_args(), port=port).start()


def describe(bootstrap: str, group: str) -> GroupInfo:
    async def run() -> GroupInfo:
        async with await GroupAdmin.connect(bootstrap, timeout_s=10) as admin:
            return await admin.describe_group(group)

    return asyncio.run(run())


def assignment_of(info: GroupInfo) -> dict[str, set[tuple[str, int]]]:
    """Each member's partitions (by client id, which each test makes unique)."""
    return {m.client_id: set(m.assignment) for m in info.members}


def wait_until(
    predicate: Callable[[], bool],
    timeout: float = TIMEOUT_S,
    what: str = "condition",
    tick: Callable[[], object] | None = None,
) -> None:
    """:func:`odradek.testing.wait_until` for ``predicate``, calling ``tick`` between tries
    instead of sleeping when given (e.g. to poll consumers)."""
    if tick is None:
        testing.wait_until(predicate, timeout, 0.05, what)
        return

    def tried() -> bool:
        if predicate():
            return True
        tick()
        return False

    testing.wait_until(tried, timeout, 0, what)


def split_among(
    bootstrap: str, group: str, members: int, topic: str, partitions: int = 6
) -> Callable[[], bool]:
    """A predicate: the group is Stable with ``members`` members that share all ``partitions``
    of ``topic`` with none assigned twice."""

    def check() -> bool:
        info = describe(bootstrap, group)
        if info.state != "Stable" or len(info.members) != members:
            return False
        owned = [tp for m in info.members for tp in m.assignment]
        return sorted(owned) == [(topic, p) for p in range(partitions)]

    return check


def produce_everywhere(
    bootstrap: str, topic: str, per_partition: int, partitions: int = 6, prefix: str = "v"
) -> list[bytes]:
    """``per_partition`` records into each partition; the values sent."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    values = []
    for i in range(per_partition):
        for p in range(partitions):
            value = f"{prefix}-{p}-{i}".encode()
            producer.produce(topic, value, partition=p)
            values.append(value)
    assert producer.flush(TIMEOUT_S) == 0
    return values


def partition_of(value: bytes) -> int:
    """The partition a ``produce_everywhere`` value was sent to."""
    return int(value.decode().split("-")[-2])


def close_all(consumers: Iterable[Consumer]) -> None:
    """Unsubscribe every librdkafka consumer, poll them until none holds a partition, then
    close them.

    librdkafka (its issue 4884, open in 2.16) can hang for good in close() when a rebalance
    reaches a consumer while it closes, as one does when the group's members close one after
    the other: the revocation runs inside close() and its assign() waits for a reply that never
    comes. After unsubscribe() the revocations are served by poll(), and close() has no group
    left to wait for."""
    closing = list(consumers)
    for c in closing:
        c.unsubscribe()
    wait_until(
        lambda: not any(c.assignment() for c in closing),
        what="the consumers to give back their partitions",
        tick=lambda: [c.poll(0.02) for c in closing],
    )
    for c in closing:
        c.close()
