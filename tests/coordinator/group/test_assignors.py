"""The server-side assignors: every subscribed partition to one subscriber, balanced, and
(uniform) sticky across membership changes."""

from __future__ import annotations

import uuid

from hypothesis import given
from hypothesis import strategies as st

from odradek.coordinator.group.assignors import TopicInfo, range_assignor, uniform_assignor

T1, T2 = uuid.uuid4(), uuid.uuid4()
TOPICS = {"a": TopicInfo(T1, 7), "b": TopicInfo(T2, 3)}


def counts(result: dict[str, dict[uuid.UUID, frozenset[int]]]) -> list[int]:
    return sorted(sum(len(p) for p in a.values()) for a in result.values())


@given(st.integers(min_value=1, max_value=12), st.integers(min_value=0, max_value=4))
def test_uniform_is_balanced_and_sticky(members: int, leave: int) -> None:
    names = [f"m{i}" for i in range(members)]
    first = uniform_assignor(dict.fromkeys(names, frozenset({"a", "b"})), TOPICS, {})
    owned = [(t, p) for a in first.values() for t, ps in a.items() for p in ps]
    assert sorted(owned, key=str) == sorted(
        [(T1, p) for p in range(7)] + [(T2, p) for p in range(3)], key=str
    )
    assert counts(first)[-1] - counts(first)[0] <= 1
    stay = names[: max(members - leave, 1)]
    second = uniform_assignor(dict.fromkeys(stay, frozenset({"a", "b"})), TOPICS, first)
    assert counts(second)[-1] - counts(second)[0] <= 1
    for m in stay:  # nobody who stayed lost a partition when others left
        for topic, partitions in first[m].items():
            assert partitions <= second[m].get(topic, frozenset())


def test_uniform_with_different_subscriptions() -> None:
    result = uniform_assignor({"x": {"a"}, "y": {"a", "b"}}, TOPICS, {})
    assert T2 not in result["x"]
    assert result["y"][T2] == {0, 1, 2}
    assert counts(result) == [5, 5]


def test_range_gives_contiguous_ranges_by_member_id() -> None:
    result = range_assignor({"b": {"a"}, "a": {"a", "b"}}, TOPICS, {})
    assert result["a"] == {T1: frozenset({0, 1, 2, 3}), T2: frozenset({0, 1, 2})}
    assert result["b"] == {T1: frozenset({4, 5, 6})}


# Six partitions of one topic, each with its replicas in one of two racks.
RACKED = {"t": TopicInfo(T1, 6, (("a",), ("b",), ("a",), ("b",), ("a",), ("b",)))}
IN_RACK_A, IN_RACK_B = frozenset({0, 2, 4}), frozenset({1, 3, 5})


def test_uniform_gives_partitions_to_members_in_their_replicas_racks() -> None:
    members = dict.fromkeys(("m1", "m2"), frozenset({"t"}))
    result = uniform_assignor(members, RACKED, {}, {"m1": "b", "m2": "a"})
    assert result == {"m1": {T1: IN_RACK_B}, "m2": {T1: IN_RACK_A}}
    # Racks over stickiness: a previous assignment across the racks is put right.
    crossed = {"m1": {T1: IN_RACK_A}, "m2": {T1: IN_RACK_B}}
    assert uniform_assignor(members, RACKED, crossed, {"m1": "b", "m2": "a"}) == result
    # Balance over racks: three members in rack a and one in b share the six evenly.
    four = dict.fromkeys(("m1", "m2", "m3", "m4"), frozenset({"t"}))
    racks = {"m1": "a", "m2": "a", "m3": "a", "m4": "b"}
    spread = uniform_assignor(four, RACKED, {}, racks)
    assert counts(spread) == [1, 1, 2, 2]
    local = sum(
        len(ps & (IN_RACK_A if racks[m] == "a" else IN_RACK_B))
        for m, a in spread.items()
        for ps in a.values()
    )
    # All but one with a member in its racks: m4, rack b's only member, holds two of its three.
    assert local == 5


def test_uniform_leaves_racks_aside_where_they_cannot_matter() -> None:
    members = dict.fromkeys(("m1", "m2"), frozenset({"t"}))
    plain = uniform_assignor(members, {"t": TopicInfo(T1, 6)}, {})
    # Every partition in the same rack, or no member in a replica's rack: as without racks.
    same = {"t": TopicInfo(T1, 6, (("a",),) * 6)}
    assert uniform_assignor(members, same, {}, {"m1": "b", "m2": "a"}) == plain
    assert uniform_assignor(members, RACKED, {}, {"m1": "c", "m2": None}) == plain
    # And stickiness stays where racks do not matter.
    crossed = {"m1": {T1: IN_RACK_A}, "m2": {T1: IN_RACK_B}}
    assert uniform_assignor(members, RACKED, crossed, {"m1": "c", "m2": "d"}) == crossed
