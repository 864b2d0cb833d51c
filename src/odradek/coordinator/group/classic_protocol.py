"""The classic consumer protocol's own bytes, as a group coordinator reads and writes them for a
classic member of a KIP-848 consumer group (Kafka 4's online migration): the member's
``ConsumerProtocolSubscription`` (the metadata of its JoinGroup protocols: topics, owned
partitions, rack) and the ``ConsumerProtocolAssignment`` its SyncGroup answer carries.

Both are an int16 version, then the message of that version (non-flexible Kafka encoding); a
version newer than kio knows is read as the newest one known, since later versions only add
fields at the end. Pure functions on bytes: no I/O, any thread.
"""

from __future__ import annotations

import io
import struct
from collections.abc import Iterable
from dataclasses import dataclass

from kio.schema.consumer_protocol_assignment.v0.data import (
    ConsumerProtocolAssignment,
)
from kio.schema.consumer_protocol_assignment.v0.data import (
    TopicPartition as AssignedTopic,
)
from kio.schema.consumer_protocol_subscription.v0.data import (
    ConsumerProtocolSubscription as SubscriptionV0,
)
from kio.schema.consumer_protocol_subscription.v1.data import (
    ConsumerProtocolSubscription as SubscriptionV1,
)
from kio.schema.consumer_protocol_subscription.v2.data import (
    ConsumerProtocolSubscription as SubscriptionV2,
)
from kio.schema.consumer_protocol_subscription.v3.data import (
    ConsumerProtocolSubscription as SubscriptionV3,
)
from kio.serial import entity_reader, entity_writer

from odradek.protocol.bounds import entity_check

_SUBSCRIPTION_VERSIONS: tuple[type, ...] = (
    SubscriptionV0,
    SubscriptionV1,
    SubscriptionV2,
    SubscriptionV3,
)
_VERSION = struct.Struct(">h")


class BadSubscription(ValueError):
    """Protocol metadata that is no ``ConsumerProtocolSubscription``."""


@dataclass(frozen=True, slots=True)
class Subscription:
    topics: tuple[str, ...]
    owned: tuple[tuple[str, int], ...]
    rack_id: str | None


def decode_subscription(data: bytes) -> Subscription:
    """A classic member's subscription; :class:`BadSubscription` when unreadable."""
    if len(data) < _VERSION.size:
        raise BadSubscription("subscription shorter than its version")
    (version,) = _VERSION.unpack_from(data, 0)
    if version < 0:
        raise BadSubscription(f"subscription version {version}")
    schema = _SUBSCRIPTION_VERSIONS[min(version, len(_SUBSCRIPTION_VERSIONS) - 1)]
    try:
        # its counts are the client's word: checked before kio reserves room for them
        entity_check(schema)(data, _VERSION.size)
        read, _ = entity_reader(schema)(data, _VERSION.size)
    except Exception as e:
        raise BadSubscription(f"unreadable subscription: {e}") from e
    owned = tuple(
        (tp.topic, int(p)) for tp in getattr(read, "owned_partitions", ()) for p in tp.partitions
    )
    return Subscription(tuple(read.topics), owned, getattr(read, "rack_id", None))


def decode_assignment_partitions(data: bytes) -> tuple[tuple[str, int], ...]:
    """The partitions of a ``ConsumerProtocolAssignment`` (what a classic leader gave a
    member); :class:`BadSubscription` when unreadable, empty for no bytes."""
    if not data:
        return ()
    if len(data) < _VERSION.size or _VERSION.unpack_from(data, 0)[0] < 0:
        raise BadSubscription("assignment without a version")
    try:
        entity_check(ConsumerProtocolAssignment)(data, _VERSION.size)
        read, _ = entity_reader(ConsumerProtocolAssignment)(data, _VERSION.size)
    except Exception as e:
        raise BadSubscription(f"unreadable assignment: {e}") from e
    return tuple((tp.topic, int(p)) for tp in read.assigned_partitions for p in tp.partitions)


def encode_assignment(partitions: Iterable[tuple[str, int]]) -> bytes:
    """A ``ConsumerProtocolAssignment`` version 0 (every classic client reads it)."""
    by_topic: dict[str, list[int]] = {}
    for topic, index in sorted(partitions):
        by_topic.setdefault(topic, []).append(index)
    assignment = ConsumerProtocolAssignment(
        assigned_partitions=tuple(
            AssignedTopic(topic=t, partitions=tuple(ps))  # type: ignore[arg-type]
            for t, ps in by_topic.items()
        ),
        user_data=None,
    )
    buffer = io.BytesIO()
    buffer.write(_VERSION.pack(0))
    entity_writer(ConsumerProtocolAssignment)(buffer, assignment)
    return buffer.getvalue()
