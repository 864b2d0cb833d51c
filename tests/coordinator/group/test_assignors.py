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
