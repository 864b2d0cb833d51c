"""Replica assignment: which brokers hold the replicas of a new topic's (or new) partitions.

Kafka's placement (``AdminUtils.assignReplicasToBrokers``), so a cluster laid out by odradek looks
like one laid out by Kafka. Without racks: the first replica of partition ``p`` goes to broker
``(p + start) mod n`` of the id-sorted broker list, and the followers follow at a shift that grows
by one each time the partitions wrap round the brokers, so the followers of one broker's
partitions spread over all the others. ``start`` and the first shift are random (injected here,
so tests are deterministic); Kafka picks them at random so that many small topics do not all
start on the lowest broker. With racks on every broker: the same walk over a list alternating
between racks (sorted rack names, ids sorted within a rack), skipping brokers whose rack (then:
the broker itself) already holds a replica of the partition while another does not. Some brokers
with racks and some without is an error, as in Kafka (whose AdminOperationException reaches a
client as UNKNOWN_SERVER_ERROR).

An assignment is ``{partition: (broker, ...)}``, preferred replica first. Pure functions; any
thread may call them.
"""

from __future__ import annotations

import random
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

from odradek.protocol.errors import ErrorCode, KafkaError

Assignment = dict[int, tuple[int, ...]]


@dataclass(frozen=True, slots=True)
class BrokerMetadata:
    """A registered broker as placement sees it: its id and, if configured, ``broker.rack``."""

    id: int
    rack: str | None = None


def assign_replicas(
    brokers: Collection[BrokerMetadata],
    partitions: int,
    replication_factor: int,
    rng: random.Random,
    *,
    fixed_start_index: int = -1,
    start_partition_id: int = 0,
) -> Assignment:
    """Kafka's placement of ``partitions`` partitions, numbered from ``start_partition_id``.

    ``fixed_start_index`` >= 0 replaces both random draws (the start and the first follower
    shift), as Kafka does when it places partitions added to an existing topic.
    """
    if partitions <= 0:
        raise KafkaError(
            ErrorCode.invalid_partitions, "Number of partitions must be larger than 0."
        )
    if replication_factor <= 0:
        raise KafkaError(
            ErrorCode.invalid_replication_factor, "Replication factor must be larger than 0."
        )
    if replication_factor > len(brokers):
        raise KafkaError(
            ErrorCode.invalid_replication_factor,
            f"Replication factor: {replication_factor} larger than available brokers: "
            f"{len(brokers)}.",
        )
    with_rack = [b for b in brokers if b.rack is not None]
    if not with_rack:
        ordered = sorted(b.id for b in brokers)
        racks: dict[int, str] | None = None
    elif len(with_rack) < len(brokers):
        raise KafkaError(
            ErrorCode.unknown_server_error,
            "Not all brokers have rack information for replica rack aware assignment.",
        )
    else:
        racks = {b.id: b.rack for b in with_rack if b.rack is not None}
        ordered = rack_alternated(racks)
    n = len(ordered)
    start = fixed_start_index if fixed_start_index >= 0 else rng.randrange(n)
    shift = fixed_start_index if fixed_start_index >= 0 else rng.randrange(n)
    result: Assignment = {}
    for partition in range(max(0, start_partition_id), max(0, start_partition_id) + partitions):
        if partition > 0 and partition % n == 0:
            shift += 1
        first = (partition + start) % n
        if racks is None:
            followers = [
                ordered[_follower_index(first, shift, j, n)] for j in range(replication_factor - 1)
            ]
        else:
            followers = _rack_aware_followers(ordered, racks, first, shift, replication_factor)
        result[partition] = (ordered[first], *followers)
    return result


def rack_alternated(racks: Mapping[int, str]) -> list[int]:
    """Broker ids taking one from each rack in turn (racks by name, ids ascending within one)."""
    by_rack: dict[str, list[int]] = {}
    for broker, rack in sorted(racks.items()):
        by_rack.setdefault(rack, []).append(broker)
    columns = [by_rack[rack] for rack in sorted(by_rack)]
    depth = max(len(c) for c in columns)
    return [c[i] for i in range(depth) for c in columns if i < len(c)]


def _follower_index(first: int, shift: int, j: int, n: int) -> int:
    # Never 0 apart from the first replica: the offset runs over 1 .. n-1.
    return (first + 1 + (shift + j) % (n - 1)) % n


def _rack_aware_followers(
    ordered: Sequence[int], racks: Mapping[int, str], first: int, shift: int, factor: int
) -> list[int]:
    n = len(ordered)
    rack_count = len(set(racks.values()))
    leader = ordered[first]
    used_racks = {racks[leader]}
    used_brokers = {leader}
    followers: list[int] = []
    k = 0
    while len(followers) < factor - 1:
        broker = ordered[_follower_index(first, shift * rack_count, k, n)]
        k += 1
        rack = racks[broker]
        if rack in used_racks and len(used_racks) < rack_count:
            continue
        if broker in used_brokers and len(used_brokers) < n:
            continue
        followers.append(broker)
        used_racks.add(rack)
        used_brokers.add(broker)
    return followers


def assign_added_partitions(
    brokers: Collection[BrokerMetadata],
    existing: Mapping[int, Sequence[int]],
    new_total: int,
    rng: random.Random,
) -> Assignment:
    """Placement of the partitions CreatePartitions adds (``existing`` numbered 0 .. n-1).

    Like Kafka, the walk continues from where partition 0's preferred replica sits in the broker
    list rather than from a random point, with the existing replication factor.
    """
    _check_growth(existing, new_total)
    ids = sorted(b.id for b in brokers)
    first_of_0 = existing[0][0]
    start = next((i for i, b in enumerate(ids) if b >= first_of_0), 0)
    return assign_replicas(
        brokers,
        new_total - len(existing),
        len(existing[0]),
        rng,
        fixed_start_index=start,
        start_partition_id=len(existing),
    )


def check_assignment(
    assignment: Mapping[int, Sequence[int]], brokers: Collection[int]
) -> Assignment:
    """Validate an explicit assignment given to CreateTopics; returns it normalised.

    Partitions must be numbered 0 .. n-1, each with the same number of distinct, registered
    brokers (Kafka's ZooKeeper-era controller let unknown brokers through here; KRaft and
    Kafka's CreatePartitions refuse them, and so does odradek).
    """
    if not assignment:
        raise KafkaError(ErrorCode.invalid_replica_assignment, "The assignment is empty.")
    if sorted(assignment) != list(range(len(assignment))):
        raise KafkaError(
            ErrorCode.invalid_replica_assignment,
            "partitions should be a consecutive 0-based integer sequence",
        )
    result = {p: tuple(replicas) for p, replicas in sorted(assignment.items())}
    _check_replica_lists(result, brokers)
    if len({len(r) for r in result.values()}) != 1:
        raise KafkaError(
            ErrorCode.invalid_replica_assignment,
            "All partitions should have the same number of replicas",
        )
    return result


def check_added_assignment(
    existing: Mapping[int, Sequence[int]],
    new_total: int,
    added: Sequence[Sequence[int]],
    brokers: Collection[int],
) -> Assignment:
    """Validate the explicit assignment CreatePartitions gives for the partitions it adds."""
    _check_growth(existing, new_total)
    to_add = new_total - len(existing)
    if len(added) != to_add:
        raise KafkaError(
            ErrorCode.invalid_replica_assignment,
            f"Increasing the number of partitions by {to_add} but {len(added)} assignments "
            "provided.",
        )
    result = {len(existing) + i: tuple(replicas) for i, replicas in enumerate(added)}
    _check_replica_lists(result, brokers)
    factor = len(existing[0])
    wrong = {p: len(r) for p, r in result.items() if len(r) != factor}
    if wrong:
        raise KafkaError(
            ErrorCode.invalid_replica_assignment,
            f"Inconsistent replication factor between partitions, partition 0 has {factor} "
            f"while partitions {sorted(wrong)} have replication factors "
            f"{[wrong[p] for p in sorted(wrong)]}, respectively.",
        )
    return result


def _check_growth(existing: Mapping[int, Sequence[int]], new_total: int) -> None:
    if not existing:
        raise KafkaError(ErrorCode.unknown_topic_or_partition, "The topic has no partitions.")
    if new_total < len(existing):
        raise KafkaError(
            ErrorCode.invalid_partitions,
            f"Topic currently has {len(existing)} partitions, which is higher than the "
            f"requested {new_total}.",
        )
    if new_total == len(existing):
        raise KafkaError(
            ErrorCode.invalid_partitions, f"Topic already has {len(existing)} partitions."
        )


def _check_replica_lists(assignment: Mapping[int, Sequence[int]], brokers: Collection[int]) -> None:
    for partition, replicas in assignment.items():
        if not replicas:
            raise KafkaError(
                ErrorCode.invalid_replica_assignment,
                f"Partition {partition} has an empty replica list.",
            )
        if len(set(replicas)) != len(replicas):
            raise KafkaError(
                ErrorCode.invalid_replica_assignment,
                f"Duplicate replica assignment found: partition {partition} -> {list(replicas)}",
            )
    unknown = sorted({b for replicas in assignment.values() for b in replicas} - set(brokers))
    if unknown:
        raise KafkaError(
            ErrorCode.invalid_replica_assignment,
            f"Unknown broker(s) in replica assignment: {', '.join(map(str, unknown))}.",
        )
