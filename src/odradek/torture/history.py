"""What the clients of a campaign did and saw, as plain values (no sockets, no clocks).

A history is a sequence of operations, each a frozen dataclass. Values written are strings unique
over the whole campaign (``i1-000042``: the 42nd record of idempotent producer 1; ``t2-00007-3``:
record 3 of transaction 7 of transactional producer 2), so a value read names its one write.
Times are seconds on the recorder's monotonic clock; only their order matters (an observation
that started after a commit was acknowledged must see it).

:class:`History` is the recorder the workload's threads append to (under a lock); the checker
reads the tuple it hands out. A history can be written as JSON lines and read back, so a failing
campaign's history can be checked again, or cut down by hand into a test.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import threading
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, TextIO

Isolation = Literal["read_committed", "read_uncommitted"]
TxnOutcome = Literal["committed", "aborted", "unknown"]


@dataclass(frozen=True, slots=True)
class Sent:
    """``producer`` handed ``value`` to its client for ``topic`` (``partition`` when chosen by the
    producer); ``txn`` names the transaction it belongs to, if any."""

    producer: str
    value: str
    topic: str
    partition: int | None
    txn: str | None
    time: float


@dataclass(frozen=True, slots=True)
class Acked:
    """The cluster acknowledged ``value`` at ``offset`` (for a transactional record: it is in the
    log, and counts as acknowledged once its transaction's commit is). ``offset`` is None when the
    client acknowledged the record without learning where it is: librdkafka's idempotent producer
    does so for a record whose request's fate was unknown (it timed out, or its connection
    closed) once a later record of the same partition is acknowledged, which proves the earlier
    one is in the log."""

    producer: str
    value: str
    topic: str
    partition: int
    offset: int | None
    txn: str | None
    time: float


@dataclass(frozen=True, slots=True)
class SendFailed:
    """The client gave up on ``value``: it may or may not be in the log (indeterminate)."""

    producer: str
    value: str
    error: str
    time: float


@dataclass(frozen=True, slots=True)
class TxnEnded:
    """How transaction ``txn`` ended: its commit or abort acknowledged, or ``unknown`` when the
    client could not tell."""

    producer: str
    txn: str
    outcome: TxnOutcome
    time: float


@dataclass(frozen=True, slots=True)
class Read:
    """``reader`` (a member of ``group``, or a reader by assignment when None) read ``value`` at
    ``offset``."""

    reader: str
    group: str | None
    isolation: Isolation
    topic: str
    partition: int
    offset: int
    value: str
    time: float


@dataclass(frozen=True, slots=True)
class ReadError:
    """``reader`` was served something it could not read at ``offset`` (a corrupt batch)."""

    reader: str
    topic: str
    partition: int
    offset: int
    error: str
    time: float


@dataclass(frozen=True, slots=True)
class ReadComplete:
    """``reader`` read every record of the partition below ``end_offset`` (its high watermark, or
    last stable offset for read_committed, when it finished): its reads of that partition are the
    whole log."""

    reader: str
    isolation: Isolation
    topic: str
    partition: int
    end_offset: int
    time: float


@dataclass(frozen=True, slots=True)
class CommitAcked:
    """A member of ``group`` had the commit of ``offset`` acknowledged (requested at ``start``,
    answered at ``end``)."""

    group: str
    member: str
    topic: str
    partition: int
    offset: int
    start: float
    end: float


@dataclass(frozen=True, slots=True)
class CommitObserved:
    """OffsetFetch for ``group`` answered ``offset`` (asked at ``start``, answered at ``end``)."""

    group: str
    topic: str
    partition: int
    offset: int
    start: float
    end: float


@dataclass(frozen=True, slots=True)
class Nemesis:
    """The nemesis started (``phase`` "start") or healed ("end") a fault."""

    phase: Literal["start", "end"]
    fault: str
    detail: str
    time: float


Op = (
    Sent
    | Acked
    | SendFailed
    | TxnEnded
    | Read
    | ReadError
    | ReadComplete
    | CommitAcked
    | CommitObserved
    | Nemesis
)

OP_TYPES: dict[str, type[Any]] = {
    cls.__name__: cls
    for cls in (
        Sent,
        Acked,
        SendFailed,
        TxnEnded,
        Read,
        ReadError,
        ReadComplete,
        CommitAcked,
        CommitObserved,
        Nemesis,
    )
}


def op_time(op: Op) -> float:
    return op.start if isinstance(op, CommitAcked | CommitObserved) else op.time


def op_to_json(op: Op) -> str:
    return json.dumps({"op": type(op).__name__, **dataclasses.asdict(op)}, sort_keys=True)


def op_from_json(line: str) -> Op:
    fields = json.loads(line)
    cls = OP_TYPES[fields.pop("op")]
    op: Op = cls(**fields)
    return op


def describe_op(op: Op) -> str:
    """One line for a person: the op's type and fields."""
    fields = ", ".join(f"{f.name}={getattr(op, f.name)!r}" for f in dataclasses.fields(op))
    return f"{type(op).__name__}({fields})"


class History:
    """The recorder: threads :meth:`add` operations; :meth:`ops` is what was added, in order.
    With a ``sink``, each operation is also written there as a JSON line as it is added (the
    clients' process writes its history to a file that way, so that what it recorded survives
    it)."""

    def __init__(self, ops: Iterable[Op] = (), sink: TextIO | None = None) -> None:
        self._lock = threading.Lock()
        self._ops: list[Op] = list(ops)
        self._sink = sink

    def add(self, op: Op) -> None:
        with self._lock:
            self._ops.append(op)
            if self._sink is not None:
                self._sink.write(op_to_json(op) + "\n")
                self._sink.flush()

    def ops(self) -> tuple[Op, ...]:
        with self._lock:
            return tuple(self._ops)

    def __iter__(self) -> Iterator[Op]:
        return iter(self.ops())

    def __len__(self) -> int:
        with self._lock:
            return len(self._ops)

    def write(self, path: Path) -> None:
        path.write_text("".join(op_to_json(op) + "\n" for op in self.ops()))

    @classmethod
    def read(cls, path: Path) -> History:
        """The operations of a JSON-lines file; a last line cut short (its writer was killed
        in the middle of it) is left out."""
        lines = [line for line in path.read_text().splitlines() if line.strip()]
        ops = [op_from_json(line) for line in lines[:-1]]
        if lines:
            with contextlib.suppress(ValueError, TypeError, KeyError):
                ops.append(op_from_json(lines[-1]))
        return cls(ops)
