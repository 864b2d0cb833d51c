"""The rules a Kafka cluster keeps over a campaign's history, checked after the fact (pure code).

What is acknowledged: a non-transactional record whose Produce was answered (:class:`Acked`),
and a transactional record once its transaction's commit was answered. Records whose send failed
and transactions whose end is unknown are indeterminate: they may be in the log or not, but
never partly (a transaction) and never twice.

The rules, each a :class:`Violation` kind:

- ``lost``: an acknowledged record is not at its offset in a reader's complete read of the
  partition (:class:`ReadComplete`), or that read ended below it (the log was truncated under an
  acknowledged record); ``moved`` when it is there but at another offset. A record acknowledged
  without its offset is lost when a complete read does not hold it anywhere; for the other rules
  its offset is where a reader found it.
- ``duplicate``: one value at two offsets of a partition (idempotent and transactional producers
  write each record once).
- ``phantom``: a value read that no producer sent.
- ``divergent``: two readers saw different values at one offset of a partition (readers disagree
  about the partition's order).
- ``corrupt``: a reader was served a batch it could not read.
- ``commit-went-back``: a group's committed offset, fetched after a commit of a higher offset
  was acknowledged (or after a higher offset was fetched), is lower.
- ``skipped-by-group``: a group committed an offset past an acknowledged record that no member
  of the group read.
- ``aborted-read``: a read_committed reader saw a record of a transaction whose abort was
  acknowledged; ``uncommitted-read`` when a complete read_committed read of that partition does
  not hold it.
- ``partial-transaction``: the complete read_committed reads hold some of a transaction's records
  and not the others.

Each violation carries the smallest history around it: the operations on its partition within a
few offsets of the offending one, those on its value, and the nemesis's faults of that moment.
"""

from __future__ import annotations

import dataclasses
from bisect import bisect_left
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from odradek.torture.history import (
    Acked,
    CommitAcked,
    CommitObserved,
    Nemesis,
    Op,
    Read,
    ReadComplete,
    ReadError,
    Sent,
    TxnEnded,
    describe_op,
    op_time,
)

EXCERPT_OFFSETS = 3  # offsets either side of the offending one in a violation's excerpt
EXCERPT_MAX_OPS = 40
EXCERPT_NEMESIS_S = 15.0  # the nemesis's operations this close in time join an excerpt

Partition = tuple[str, int]


@dataclass(frozen=True, slots=True)
class Violation:
    kind: str
    message: str
    excerpt: tuple[Op, ...]

    def describe(self) -> str:
        lines = [f"VIOLATION {self.kind}: {self.message}", "  history around it:"]
        lines.extend(f"    {describe_op(op)}" for op in self.excerpt)
        return "\n".join(lines)


@dataclass(frozen=True, slots=True)
class Summary:
    """Counts over a history, for the campaign's report."""

    sent: int
    acknowledged: int
    indeterminate: int
    read: int
    transactions_committed: int
    transactions_aborted: int
    commits_acknowledged: int


def _offset_of(op: Op) -> tuple[Partition, int] | None:
    if isinstance(op, Acked | Read | ReadError | CommitAcked | CommitObserved):
        return None if op.offset is None else ((op.topic, op.partition), op.offset)
    return None


class _Index:
    def __init__(self, ops: Sequence[Op]) -> None:
        self.ops = ops
        self.sent: dict[str, Sent] = {}
        self.acked: dict[str, Acked] = {}
        self.outcomes: dict[str, str] = {}
        self.txn_values: dict[str, list[str]] = defaultdict(list)
        self.reads: list[Read] = []
        self.complete: dict[tuple[str, Partition], ReadComplete] = {}
        for op in ops:
            if isinstance(op, Sent):
                self.sent[op.value] = op
                if op.txn is not None:
                    self.txn_values[op.txn].append(op.value)
            elif isinstance(op, Acked):
                self.acked[op.value] = op
            elif isinstance(op, TxnEnded):
                self.outcomes[op.txn] = op.outcome
            elif isinstance(op, Read):
                self.reads.append(op)
            elif isinstance(op, ReadComplete):
                self.complete[(op.reader, (op.topic, op.partition))] = op
        # Where readers found what was acknowledged without an offset.
        found_at = {(r.value, r.topic, r.partition): r.offset for r in reversed(self.reads)}
        for acked in list(self.acked.values()):
            if acked.offset is None:
                offset = found_at.get((acked.value, acked.topic, acked.partition))
                if offset is not None:
                    self.acked[acked.value] = dataclasses.replace(acked, offset=offset)
        # For excerpts: operations by partition and offset, by value, and the nemesis's.
        self.at: dict[tuple[Partition, int], list[Op]] = defaultdict(list)
        self.on_value: dict[str, list[Op]] = defaultdict(list)
        self.ends: dict[Partition, list[Op]] = defaultdict(list)
        self.nemesis = [op for op in ops if isinstance(op, Nemesis)]
        for op in ops:
            where = _offset_of(op)
            if where is not None:
                self.at[where].append(op)
            value = getattr(op, "value", None)
            if value is not None:
                self.on_value[value].append(op)
            if isinstance(op, ReadComplete):
                self.ends[(op.topic, op.partition)].append(op)

    def excerpt(
        self, partition: Partition | None, offset: int | None, values: Iterable[str] = ()
    ) -> tuple[Op, ...]:
        """The operations on ``partition`` within :data:`EXCERPT_OFFSETS` of ``offset``, those on
        any of ``values``, and the nemesis's of that moment, in time order (at most
        :data:`EXCERPT_MAX_OPS` besides the nemesis's, nearest offsets first)."""
        chosen: dict[int, tuple[int, Op]] = {}  # by id(op): one op once
        for value in values:
            for op in self.on_value.get(value, ()):
                chosen[id(op)] = (0, op)
        if partition is not None and offset is not None:
            for distance in range(EXCERPT_OFFSETS + 1):
                for at in {offset - distance, offset + distance}:
                    for op in self.at.get((partition, at), ()):
                        chosen.setdefault(id(op), (distance, op))
        if partition is not None:
            for op in self.ends.get(partition, ()):
                chosen.setdefault(id(op), (EXCERPT_OFFSETS, op))
        ranked = sorted(chosen.values(), key=lambda pair: (pair[0], op_time(pair[1])))
        kept = [op for _, op in ranked[:EXCERPT_MAX_OPS]]
        if kept:
            # What the nemesis did shortly before and while it happened.
            first = min(op_time(op) for op in kept) - EXCERPT_NEMESIS_S
            last = max(op_time(op) for op in kept) + EXCERPT_NEMESIS_S
            kept += [op for op in self.nemesis if first <= op.time <= last]
        return tuple(sorted(kept, key=op_time))

    def acknowledged(self) -> list[Acked]:
        """Acknowledged records: acked non-transactional ones and those of committed txns."""
        return [
            a
            for a in self.acked.values()
            if a.txn is None or self.outcomes.get(a.txn) == "committed"
        ]

    def txn_of(self, value: str) -> str | None:
        sent = self.sent.get(value)
        return sent.txn if sent is not None else None


def check(ops: Iterable[Op]) -> list[Violation]:
    """Every rule over the history; an empty list when it is clean."""
    history = tuple(ops)
    index = _Index(history)
    violations: list[Violation] = []
    violations += _phantoms_and_corruption(index)
    violations += _divergence(index)
    violations += _complete_reads(index)
    violations += _transactions(index)
    violations += _committed_offsets(index)
    violations += _group_skips(index)
    return violations


def summarize(ops: Iterable[Op]) -> Summary:
    history = tuple(ops)
    index = _Index(history)
    sent = len(index.sent)
    acknowledged = len(index.acknowledged())
    outcomes = list(index.outcomes.values())
    definite = {a.value for a in index.acknowledged()} | {
        v for txn, o in index.outcomes.items() if o == "aborted" for v in index.txn_values[txn]
    }
    return Summary(
        sent=sent,
        acknowledged=acknowledged,
        indeterminate=sum(1 for v in index.sent if v not in definite),
        read=len(index.reads),
        transactions_committed=outcomes.count("committed"),
        transactions_aborted=outcomes.count("aborted"),
        commits_acknowledged=sum(1 for op in history if isinstance(op, CommitAcked)),
    )


def _phantoms_and_corruption(index: _Index) -> list[Violation]:
    found: list[Violation] = []
    for read in index.reads:
        if read.value not in index.sent:
            found.append(
                Violation(
                    "phantom",
                    f"{read.reader} read {read.value!r} at {read.topic}-{read.partition}@"
                    f"{read.offset}, which no producer sent",
                    index.excerpt((read.topic, read.partition), read.offset, [read.value]),
                )
            )
    for op in index.ops:
        if isinstance(op, ReadError):
            found.append(
                Violation(
                    "corrupt",
                    f"{op.reader} was served an unreadable batch at {op.topic}-{op.partition}@"
                    f"{op.offset}: {op.error}",
                    index.excerpt((op.topic, op.partition), op.offset),
                )
            )
    return found


def _divergence(index: _Index) -> list[Violation]:
    found: list[Violation] = []
    first: dict[tuple[Partition, int], Read] = {}
    reported: set[tuple[Partition, int]] = set()
    for read in index.reads:
        key = ((read.topic, read.partition), read.offset)
        seen = first.setdefault(key, read)
        if seen.value != read.value and key not in reported:
            reported.add(key)
            found.append(
                Violation(
                    "divergent",
                    f"at {read.topic}-{read.partition}@{read.offset} {seen.reader} read "
                    f"{seen.value!r} but {read.reader} read {read.value!r}",
                    index.excerpt(key[0], read.offset, [seen.value, read.value]),
                )
            )
    return found


def _complete_reads(index: _Index) -> list[Violation]:
    found: list[Violation] = []
    by_reader: dict[tuple[str, Partition], dict[int, str]] = defaultdict(dict)
    for read in index.reads:
        by_reader[(read.reader, (read.topic, read.partition))][read.offset] = read.value
    acknowledged = index.acknowledged()
    for (reader, partition), complete in index.complete.items():
        positions = by_reader.get((reader, partition), {})
        offsets_of: dict[str, list[int]] = defaultdict(list)
        for offset, value in positions.items():
            offsets_of[value].append(offset)
        for value, offsets in offsets_of.items():
            if len(offsets) > 1:
                found.append(
                    Violation(
                        "duplicate",
                        f"{reader} read {value!r} at offsets {sorted(offsets)} of "
                        f"{partition[0]}-{partition[1]}",
                        index.excerpt(partition, min(offsets), [value]),
                    )
                )
        for acked in acknowledged:
            if (acked.topic, acked.partition) != partition:
                continue
            if acked.offset is None:  # and no reader found it anywhere
                found.append(
                    Violation(
                        "lost",
                        f"{acked.value!r} was acknowledged (without its offset) in "
                        f"{partition[0]}-{partition[1]} but {reader}'s complete read does not "
                        "hold it",
                        index.excerpt(partition, None, [acked.value]),
                    )
                )
                continue
            where = f"{partition[0]}-{partition[1]}@{acked.offset}"
            if acked.offset >= complete.end_offset:
                kind = "lost"
                message = (
                    f"{acked.value!r} was acknowledged at {where} but {reader}'s complete read "
                    f"ended at {complete.end_offset}"
                )
            elif positions.get(acked.offset) == acked.value:
                continue
            elif acked.value in offsets_of:
                kind = "moved"
                message = (
                    f"{acked.value!r} was acknowledged at {where} but {reader} read it at "
                    f"{sorted(offsets_of[acked.value])}"
                )
            else:
                kind = "lost"
                there = positions.get(acked.offset)
                message = f"{acked.value!r} was acknowledged at {where} but {reader} read " + (
                    f"{there!r} there" if there is not None else "nothing there"
                )
            found.append(
                Violation(kind, message, index.excerpt(partition, acked.offset, [acked.value]))
            )
    return found


def _transactions(index: _Index) -> list[Violation]:
    found: list[Violation] = []
    committed_complete: dict[Partition, list[ReadComplete]] = defaultdict(list)
    for (_, partition), complete in index.complete.items():
        if complete.isolation == "read_committed":
            committed_complete[partition].append(complete)
    seen_by_complete: dict[str, set[str]] = defaultdict(set)
    read_at = {(r.reader, (r.topic, r.partition), r.offset): r.value for r in index.reads}
    complete_readers = {
        (c.reader, p) for p, completes in committed_complete.items() for c in completes
    }
    for read in index.reads:
        txn = index.txn_of(read.value)
        if txn is None or read.isolation != "read_committed":
            continue
        partition = (read.topic, read.partition)
        if (read.reader, partition) in complete_readers:
            seen_by_complete[txn].add(read.value)
        if index.outcomes.get(txn) == "aborted":
            found.append(
                Violation(
                    "aborted-read",
                    f"{read.reader} (read_committed) read {read.value!r} of aborted "
                    f"transaction {txn} at {read.topic}-{read.partition}@{read.offset}",
                    index.excerpt(partition, read.offset, [read.value]),
                )
            )
            continue
        for complete in committed_complete.get(partition, []):
            if complete.end_offset <= read.offset:
                continue
            if read_at.get((complete.reader, partition, read.offset)) != read.value:
                found.append(
                    Violation(
                        "uncommitted-read",
                        f"{read.reader} (read_committed) read {read.value!r} of transaction "
                        f"{txn} at {read.topic}-{read.partition}@{read.offset}, which "
                        f"{complete.reader}'s complete read_committed read does not hold",
                        index.excerpt(partition, read.offset, [read.value]),
                    )
                )
                break
    if committed_complete:
        covered: set[Partition | None] = set(committed_complete)
        for txn, values in index.txn_values.items():
            if not _partitions_of(index, values) <= covered:
                continue
            seen = seen_by_complete.get(txn, set())
            if seen and len(seen) < len(values):
                missing = sorted(set(values) - seen)
                first = index.acked.get(missing[0])
                found.append(
                    Violation(
                        "partial-transaction",
                        f"transaction {txn} ({index.outcomes.get(txn, 'unknown')}) shows "
                        f"{len(seen)} of its {len(values)} records to read_committed readers; "
                        f"missing {missing}",
                        index.excerpt(
                            (first.topic, first.partition) if first else None,
                            first.offset if first else None,
                            values,
                        ),
                    )
                )
    return found


def _partitions_of(index: _Index, values: Iterable[str]) -> set[Partition | None]:
    """Where each value went: its acknowledged partition, else the one its producer chose
    (None when neither is known)."""
    partitions: set[Partition | None] = set()
    for value in values:
        acked = index.acked.get(value)
        sent = index.sent[value]
        if acked is not None:
            partitions.add((acked.topic, acked.partition))
        elif sent.partition is not None:
            partitions.add((sent.topic, sent.partition))
        else:
            partitions.add(None)
    return partitions


def _committed_offsets(index: _Index) -> list[Violation]:
    """Per group and partition, each fetch against the highest offset that a commit or fetch
    answered before it began (events by end time, with a running maximum: n log n, for the
    hundreds of thousands of a long campaign)."""
    found: list[Violation] = []
    events: dict[tuple[str, Partition], list[CommitAcked | CommitObserved]] = defaultdict(list)
    for op in index.ops:
        if isinstance(op, CommitAcked | CommitObserved):
            events[(op.group, (op.topic, op.partition))].append(op)
    for (group, partition), ops in events.items():
        by_end = sorted(ops, key=lambda op: op.end)
        ends = [op.end for op in by_end]
        highest: list[CommitAcked | CommitObserved] = []  # highest[i]: max offset of by_end[:i+1]
        for op in by_end:
            highest.append(op if not highest or op.offset > highest[-1].offset else highest[-1])
        for observed in ops:
            if not isinstance(observed, CommitObserved):
                continue
            before = bisect_left(ends, observed.start)  # events that ended before it began
            if before == 0:
                continue
            earlier = highest[before - 1]
            if earlier.offset > observed.offset:
                what = "a commit of" if isinstance(earlier, CommitAcked) else "an earlier fetch of"
                found.append(
                    Violation(
                        "commit-went-back",
                        f"group {group} on {partition[0]}-{partition[1]}: fetched committed "
                        f"offset {observed.offset} after {what} {earlier.offset} was answered",
                        (earlier, observed),
                    )
                )
                break
    return found


def _group_skips(index: _Index) -> list[Violation]:
    found: list[Violation] = []
    last_committed: dict[tuple[str, Partition], int] = {}
    for op in index.ops:
        if isinstance(op, CommitAcked | CommitObserved):
            key = (op.group, (op.topic, op.partition))
            last_committed[key] = max(last_committed.get(key, 0), op.offset)
    read_by_group: dict[str, set[str]] = defaultdict(set)
    for read in index.reads:
        if read.group is not None:
            read_by_group[read.group].add(read.value)
    acknowledged = index.acknowledged()
    for (group, partition), committed in sorted(last_committed.items()):
        for acked in acknowledged:
            if (acked.topic, acked.partition) != partition:
                continue
            if acked.offset is None or acked.offset >= committed:  # (None: reported lost)
                continue
            if acked.value not in read_by_group[group]:
                found.append(
                    Violation(
                        "skipped-by-group",
                        f"group {group} committed {partition[0]}-{partition[1]}@{committed} "
                        f"but no member read {acked.value!r} acknowledged at {acked.offset}",
                        index.excerpt(partition, acked.offset, [acked.value]),
                    )
                )
                break
    return found
