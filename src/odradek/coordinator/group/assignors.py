"""The server-side assignors of the KIP-848 consumer group protocol: ``uniform`` and ``range``.

An assignor is a pure function from the group's members (what each subscribes to), the
subscribed topics (id and partition count) and the previous target assignment to the next
target assignment, partitions by topic id for every member. The coordinator calls it when the
group epoch moves past the assignment epoch (``group.consumer.assignors``: the first is the
default, a member may name another in ``ServerAssignor``).

- ``uniform`` (Kafka's ``UniformAssignor``): every partition of a subscribed topic goes to one
  of its subscribers, as evenly as the subscriptions allow, moving as few partitions as it can
  from the previous target (so a member joining or leaving moves only its share).
- ``range`` (Kafka's ``RangeAssignor``): per topic, its subscribers sorted by member id take
  contiguous ranges of partitions, the first ``partitions % members`` one more; topics with the
  same partition count are so co-partitioned.

``uniform`` is rack-aware where members name racks (their ``client.rack``) and partitions'
replicas lie in some racks only: balance first, then a partition with a member of one of its
replicas' racks, then stickiness (the order Kafka's rack-aware assignment builders keep). Where
every partition has the same racks, or no member's rack holds a replica, racks are left aside.
``range`` is not rack-aware.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping, Set
from dataclasses import dataclass

from odradek.coordinator.group.consumer_records import Assignment


@dataclass(frozen=True, slots=True)
class TopicInfo:
    topic_id: uuid.UUID
    partitions: int
    # The racks of each partition's replicas, by partition (empty: no rack known).
    racks: tuple[tuple[str, ...], ...] = ()


MemberAssignments = dict[str, dict[uuid.UUID, frozenset[int]]]
Assignor = Callable[
    [
        Mapping[str, Set[str]],
        Mapping[str, TopicInfo],
        Mapping[str, Assignment],
        Mapping[str, str | None],
    ],
    MemberAssignments,
]


def _subscribers(
    members: Mapping[str, Set[str]], topics: Mapping[str, TopicInfo]
) -> dict[str, list[str]]:
    """Each subscribed topic that exists, with its subscribers sorted by member id."""
    found: dict[str, list[str]] = {}
    for member_id in sorted(members):
        for name in members[member_id]:
            if name in topics:
                found.setdefault(name, []).append(member_id)
    return found


def _freeze(
    members: Mapping[str, Set[str]], owned: dict[str, dict[uuid.UUID, set[int]]]
) -> MemberAssignments:
    return {m: {t: frozenset(p) for t, p in owned.get(m, {}).items() if p} for m in members}


def range_assignor(
    members: Mapping[str, Set[str]],
    topics: Mapping[str, TopicInfo],
    previous: Mapping[str, Assignment],
    member_racks: Mapping[str, str | None] | None = None,
) -> MemberAssignments:
    owned: dict[str, dict[uuid.UUID, set[int]]] = {}
    for name, subscribers in _subscribers(members, topics).items():
        info = topics[name]
        share, extra = divmod(info.partitions, len(subscribers))
        start = 0
        for i, member_id in enumerate(subscribers):
            count = share + (1 if i < extra else 0)
            if count:
                owned.setdefault(member_id, {})[info.topic_id] = set(range(start, start + count))
            start += count
    return _freeze(members, owned)


def _partition_racks(
    topics: Mapping[str, TopicInfo], subscribers: Mapping[str, list[str]]
) -> dict[tuple[uuid.UUID, int], frozenset[str]]:
    racks: dict[tuple[uuid.UUID, int], frozenset[str]] = {}
    for name in subscribers:
        info = topics[name]
        for index, names in enumerate(info.racks[: info.partitions]):
            racks[(info.topic_id, index)] = frozenset(names)
    return racks


def _uses_racks(
    partition_racks: Mapping[tuple[uuid.UUID, int], frozenset[str]],
    member_racks: Mapping[str, str | None],
    eligible: Mapping[tuple[uuid.UUID, int], list[str]],
) -> bool:
    """Racks matter where some member's rack holds replicas and the partitions do not all lie in
    the same racks (else every choice is as local as every other)."""
    known = {r for r in member_racks.values() if r}
    every = {tp: partition_racks.get(tp, frozenset()) for tp in eligible}
    return bool(known & set().union(*every.values())) and len(set(every.values())) > 1


def uniform_assignor(
    members: Mapping[str, Set[str]],
    topics: Mapping[str, TopicInfo],
    previous: Mapping[str, Assignment],
    member_racks: Mapping[str, str | None] | None = None,
) -> MemberAssignments:
    subscribers = _subscribers(members, topics)
    eligible: dict[tuple[uuid.UUID, int], list[str]] = {}
    for name, who in subscribers.items():
        info = topics[name]
        for index in range(info.partitions):
            eligible[(info.topic_id, index)] = who
    racks_of = dict(member_racks or {})
    partition_racks = _partition_racks(topics, subscribers)
    use_racks = _uses_racks(partition_racks, racks_of, eligible)

    def local(member_id: str, tp: tuple[uuid.UUID, int]) -> bool:
        return use_racks and racks_of.get(member_id) in partition_racks.get(tp, frozenset())

    def misplaced(member_id: str, tp: tuple[uuid.UUID, int]) -> bool:
        """Owned away from its racks while a subscriber in them exists."""
        return not local(member_id, tp) and any(local(m, tp) for m in eligible.get(tp, ()))

    owner: dict[tuple[uuid.UUID, int], str] = {}
    load = dict.fromkeys(members, 0)
    # Stickiness first: a partition stays with its previous owner while that one still
    # subscribes to its topic (and, where racks matter, is in one of its racks or no
    # subscriber is).
    for member_id, assignment in sorted(previous.items()):
        if member_id not in members:
            continue
        for topic_id, indexes in assignment.items():
            for index in sorted(indexes):
                tp = (topic_id, index)
                if tp in owner or member_id not in eligible.get(tp, ()):
                    continue
                if misplaced(member_id, tp):
                    continue
                owner[tp] = member_id
                load[member_id] += 1
    order = sorted(eligible, key=lambda tp: (str(tp[0]), tp[1]))
    if use_racks:
        # Then each partition to a subscriber in its racks, while that one holds no more than
        # an even share.
        share = -(-len(eligible) // max(1, len(members)))
        for tp in order:
            if tp in owner:
                continue
            nearby = [m for m in eligible[tp] if local(m, tp) and load[m] < share]
            if nearby:
                chosen = min(nearby, key=lambda m: (load[m], m))
                owner[tp] = chosen
                load[chosen] += 1
    # Then the rest, each to its least loaded subscriber (a local one among equals).
    for tp in order:
        if tp not in owner:
            chosen = min(eligible[tp], key=lambda m: (load[m], not local(m, tp), m))
            owner[tp] = chosen
            load[chosen] += 1
    # Then balance: move a partition from a member holding two more than another subscriber
    # of its topic, until none does (each move lowers the sum of squared loads, so it ends);
    # partitions away from their racks move first, and to a member in their racks if one is
    # among the least loaded.
    moved = True
    while moved:
        moved = False
        for tp in sorted(
            owner,
            key=lambda tp: (-load[owner[tp]], local(owner[tp], tp), str(tp[0]), -tp[1]),
        ):
            current = owner[tp]
            target = min(eligible[tp], key=lambda m: (load[m], not local(m, tp), m))
            if load[current] - load[target] >= 2:
                owner[tp] = target
                load[current] -= 1
                load[target] += 1
                moved = True
    owned: dict[str, dict[uuid.UUID, set[int]]] = {}
    for (topic_id, index), member_id in owner.items():
        owned.setdefault(member_id, {}).setdefault(topic_id, set()).add(index)
    return _freeze(members, owned)


ASSIGNORS: dict[str, Assignor] = {"uniform": uniform_assignor, "range": range_assignor}


def assignor_names(setting: list[str]) -> list[str]:
    """``group.consumer.assignors`` as names: Kafka accepts its class names too."""
    names = []
    for entry in setting:
        name = entry.strip()
        simple = name.rsplit(".", 1)[-1].lower()
        if simple.endswith("assignor"):
            simple = simple[: -len("assignor")]
        names.append(simple if simple in ASSIGNORS else name)
    return names
