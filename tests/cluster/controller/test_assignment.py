"""Replica placement: Kafka's round robin with shifted followers, the rack-aware walk, checks."""

from __future__ import annotations

import random
from collections import Counter

import pytest
from hypothesis import given
from hypothesis import strategies as st

from odradek.cluster.controller.assignment import (
    BrokerMetadata,
    assign_added_partitions,
    assign_replicas,
    check_added_assignment,
    check_assignment,
    rack_alternated,
)
from odradek.protocol.errors import ErrorCode, KafkaError


def brokers(*ids: int) -> list[BrokerMetadata]:
    return [BrokerMetadata(i) for i in ids]


def test_kafkas_documented_layout_for_five_brokers() -> None:
    # The table in AdminUtils' documentation: start 0, shift 0, 10 partitions, 3 replicas.
    layout = assign_replicas(brokers(0, 1, 2, 3, 4), 10, 3, random.Random(), fixed_start_index=0)
    assert layout[0] == (0, 1, 2)
    assert layout[4] == (4, 0, 1)
    # After the first wrap the followers shift by one more.
    assert layout[5] == (0, 2, 3)
    assert layout[9] == (4, 1, 2)


def test_rf3_over_3_brokers_every_broker_leads_a_third_and_holds_every_partition() -> None:
    for seed in range(20):
        layout = assign_replicas(brokers(1, 2, 3), 12, 3, random.Random(seed))
        assert Counter(replicas[0] for replicas in layout.values()) == {1: 4, 2: 4, 3: 4}
        assert all(sorted(r) == [1, 2, 3] for r in layout.values())


def test_the_start_is_random_and_the_injected_random_makes_it_repeatable() -> None:
    starts = {assign_replicas(brokers(1, 2, 3, 4), 1, 1, random.Random(s))[0][0] for s in range(50)}
    assert starts == {1, 2, 3, 4}
    assert assign_replicas(brokers(1, 2, 3), 6, 2, random.Random(7)) == assign_replicas(
        brokers(3, 2, 1), 6, 2, random.Random(7)
    )


@given(
    st.integers(1, 7).flatmap(
        lambda n: st.tuples(st.just(n), st.integers(1, n), st.integers(1, 40), st.integers())
    )
)
def test_replicas_are_distinct_and_spread_evenly(case: tuple[int, int, int, int]) -> None:
    n, factor, partitions, seed = case
    layout = assign_replicas(brokers(*range(n)), partitions, factor, random.Random(seed))
    assert sorted(layout) == list(range(partitions))
    assert all(len(set(r)) == factor == len(r) for r in layout.values())
    leaders = Counter(r[0] for r in layout.values())
    assert max(leaders.values()) - min(leaders.get(b, 0) for b in range(n)) <= 1


def test_rack_alternated_list_is_kafkas_example() -> None:
    racks = {0: "rack1", 1: "rack3", 2: "rack3", 3: "rack2", 4: "rack2", 5: "rack1"}
    assert rack_alternated(racks) == [0, 3, 1, 5, 4, 2]
    layout = assign_replicas(
        [BrokerMetadata(b, r) for b, r in racks.items()],
        7,
        3,
        random.Random(),
        fixed_start_index=0,
    )
    assert layout[0] == (0, 3, 1)
    assert layout[5] == (2, 0, 3)
    assert layout[6] == (0, 4, 2)  # the followers shift once the walk wraps


@given(st.integers(0, 2**32), st.integers(1, 30))
def test_rack_aware_puts_replicas_in_distinct_racks(seed: int, partitions: int) -> None:
    racked = [BrokerMetadata(b, f"r{b % 3}") for b in range(7)]
    layout = assign_replicas(racked, partitions, 3, random.Random(seed))
    for replicas in layout.values():
        assert len({f"r{b % 3}" for b in replicas}) == 3


def test_more_replicas_than_racks_uses_every_rack() -> None:
    racked = [BrokerMetadata(b, "a" if b < 2 else "b") for b in range(4)]
    for replicas in assign_replicas(racked, 8, 3, random.Random(1)).values():
        assert {"a", "b"} == {"a" if b < 2 else "b" for b in replicas}
        assert len(set(replicas)) == 3


def test_some_brokers_without_a_rack_is_refused() -> None:
    with pytest.raises(KafkaError) as e:
        assign_replicas([BrokerMetadata(1, "a"), BrokerMetadata(2)], 1, 1, random.Random())
    assert e.value.code == ErrorCode.unknown_server_error
    assert "rack information" in e.value.message


@pytest.mark.parametrize(
    ("partitions", "factor", "code"),
    [
        (0, 1, ErrorCode.invalid_partitions),
        (-1, 1, ErrorCode.invalid_partitions),
        (1, 0, ErrorCode.invalid_replication_factor),
        (1, 4, ErrorCode.invalid_replication_factor),
    ],
)
def test_bad_counts_get_kafkas_errors(partitions: int, factor: int, code: ErrorCode) -> None:
    with pytest.raises(KafkaError) as e:
        assign_replicas(brokers(1, 2, 3), partitions, factor, random.Random())
    assert e.value.code == code


def test_added_partitions_continue_from_partition_0s_leader() -> None:
    existing = {0: (2, 3), 1: (3, 1), 2: (1, 2)}
    added = assign_added_partitions(brokers(1, 2, 3), existing, 5, random.Random())
    assert sorted(added) == [3, 4]
    assert all(len(r) == 2 and len(set(r)) == 2 for r in added.values())
    # Start index 1 (broker 2), partition 3 wraps to (3 + 1) % 3 = 1 -> broker 2.
    assert added[3][0] == 2 and added[4][0] == 3


def test_adding_no_partitions_or_fewer_is_invalid_partitions() -> None:
    existing = {0: (1,), 1: (2,)}
    for total in (1, 2):
        with pytest.raises(KafkaError) as e:
            assign_added_partitions(brokers(1, 2), existing, total, random.Random())
        assert e.value.code == ErrorCode.invalid_partitions


def test_explicit_assignment_is_checked() -> None:
    assert check_assignment({1: [2, 1], 0: [1, 2]}, {1, 2}) == {0: (1, 2), 1: (2, 1)}
    bad: list[dict[int, list[int]]] = [
        {0: [1, 1]},  # duplicate
        {0: [1, 9]},  # unknown broker
        {0: [1, 2], 1: [2]},  # unequal lengths
        {0: [1], 2: [2]},  # not 0 .. n-1
        {0: []},
        {},
    ]
    for assignment in bad:
        with pytest.raises(KafkaError) as e:
            check_assignment(assignment, {1, 2})
        assert e.value.code == ErrorCode.invalid_replica_assignment, assignment


def test_explicit_added_assignment_is_checked() -> None:
    existing = {0: (1, 2)}
    assert check_added_assignment(existing, 3, [[2, 3], [3, 1]], {1, 2, 3}) == {
        1: (2, 3),
        2: (3, 1),
    }
    for added in ([[2, 3]], [[2, 3], [3]], [[2, 2], [3, 1]], [[2, 3], [3, 7]]):
        with pytest.raises(KafkaError) as e:
            check_added_assignment(existing, 3, added, {1, 2, 3})
        assert e.value.code == ErrorCode.invalid_replica_assignment, added
