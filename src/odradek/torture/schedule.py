"""The nemesis's plan: which fault when, for how long, against whom — a pure function of the seed
and of the kinds of fault asked for.

Faults come one at a time, each healed before a quiet gap and the next, so that every fault is
judged by itself and the cluster has the chance to recover that Kafka's guarantees assume. They are
dealt in rounds: each round is every kind asked for once, in an order drawn from the seed, so a
short campaign still tries each kind.

What a fault needs to know that only the running cluster can tell (which broker follows a
partition, where in its segment a byte is flipped) is drawn here too, as numbers in [0, 1) that
the runner maps onto what it finds (``pick``), so one seed gives one plan; what the cluster is
doing at that moment still varies between runs.
"""

from __future__ import annotations

import random
from collections.abc import Iterable
from dataclasses import dataclass

KILL = "kill"  # kill -9 of a broker, started again after the fault's duration
PAUSE = "pause"  # SIGSTOP of a broker, SIGCONT after the duration
PAUSE_ZOOKEEPER = "pause-zookeeper"  # SIGSTOP of ZooKeeper
ISOLATE = "isolate"  # one broker cut off from every other broker and from ZooKeeper
SPLIT = "split"  # a minority of brokers cut off from the rest (ZooKeeper stays with the rest)
CUT_ZOOKEEPER = "cut-zookeeper"  # one broker cannot reach ZooKeeper (its peers and clients can)
LOSSY = "lossy"  # a broker's packets (in and out) dropped at random
CORRUPT = "corrupt"  # kill -9 of a follower, one byte of its segment flipped, started again
SLOW = "slow"  # every packet of a broker (in and out) held ``delay_ms`` before it goes on
FULL_DISK = "full-disk"  # a broker's log dir filled to ENOSPC, freed after the duration
FAILING_DISK = "failing-disk"  # a broker's writes and flushes answered EIO for the duration

KINDS = (
    KILL,
    PAUSE,
    PAUSE_ZOOKEEPER,
    ISOLATE,
    SPLIT,
    CUT_ZOOKEEPER,
    LOSSY,
    CORRUPT,
    SLOW,
    FULL_DISK,
    FAILING_DISK,
)
# What a campaign deals unless told otherwise.
DEFAULT_KINDS = KINDS
# Kinds that need a second broker: one to fault while the others serve, or a follower.
CLUSTER_KINDS = (ISOLATE, SPLIT, CORRUPT)

FAULT_S = (2.0, 8.0)  # how long a fault lasts
GAP_S = (3.0, 6.0)  # quiet time after a fault is healed
WARMUP_S = 5.0  # clients run this long before the first fault
COOLDOWN_S = 5.0  # no fault starts this close to the end
LOSS_PROBABILITY = (0.05, 0.3)
DELAY_MS = (50, 300)  # a slow link's delay, each way


@dataclass(frozen=True, slots=True)
class Fault:
    """One fault: ``kind`` against ``brokers`` from ``at`` seconds into the campaign for
    ``duration`` seconds. ``probability`` is a lossy link's drop rate, ``delay_ms`` a slow link's
    delay in each direction; ``pick`` chooses among what the runner finds at the time (a
    partition and a byte to corrupt)."""

    at: float
    kind: str
    brokers: tuple[int, ...]
    duration: float
    probability: float = 0.0
    pick: float = 0.0
    delay_ms: int = 0

    def describe(self) -> str:
        who = ",".join(str(b) for b in self.brokers) or "-"
        extra = ""
        if self.kind == LOSSY:
            extra = f" p={self.probability:.2f}"
        elif self.kind == SLOW:
            extra = f" delay={self.delay_ms}ms"
        return f"t={self.at:6.1f}s {self.kind:<15} brokers={who:<5} for {self.duration:.1f}s{extra}"


def parse_kinds(text: str) -> tuple[str, ...]:
    """Kinds from a comma-separated list (``all`` for every kind; ``-kind`` leaves one out of
    what came before, or of every kind when nothing did): ``kill,slow`` or ``all,-full-disk``."""
    chosen: list[str] = []
    for word in (w.strip() for w in text.split(",")):
        if not word:
            continue
        if word == "all":
            chosen += [k for k in KINDS if k not in chosen]
            continue
        name = word[1:] if word.startswith("-") else word
        if name not in KINDS:
            raise ValueError(f"unknown kind of fault {name!r} (kinds: {', '.join(KINDS)})")
        if word.startswith("-"):
            chosen = [k for k in (chosen or KINDS) if k != name]
        elif name not in chosen:
            chosen.append(name)
    if not chosen:
        raise ValueError("no kind of fault chosen")
    return tuple(k for k in KINDS if k in chosen)


def plan(
    seed: int, duration_s: float, brokers: int, kinds: Iterable[str] = DEFAULT_KINDS
) -> list[Fault]:
    """The faults of a campaign of ``duration_s`` seconds on brokers ``1..brokers``, of the
    ``kinds`` given (those that need a second broker are left out of a one-broker campaign)."""
    if brokers < 1:
        raise ValueError("a campaign needs at least one broker")
    asked = set(kinds)
    unknown = asked - set(KINDS)
    if unknown:
        raise ValueError(f"unknown kinds of fault: {sorted(unknown)}")
    rng = random.Random(seed)
    ids = list(range(1, brokers + 1))
    # In KINDS' order whatever order they were asked in: one seed, one plan.
    dealt = [k for k in KINDS if k in asked and (brokers > 1 or k not in CLUSTER_KINDS)]
    if not dealt:
        return []
    faults: list[Fault] = []
    at = WARMUP_S
    deck: list[str] = []
    while True:
        if not deck:
            deck = list(dealt)
            rng.shuffle(deck)
        kind = deck.pop()
        duration = round(rng.uniform(*FAULT_S), 1)
        if at + duration > duration_s - COOLDOWN_S:
            return faults
        if kind == SPLIT:
            minority = rng.sample(ids, max(1, (brokers - 1) // 2))
            targets = tuple(sorted(minority))
        elif kind == PAUSE_ZOOKEEPER:
            targets = ()
        else:
            targets = (rng.choice(ids),)
        probability = round(rng.uniform(*LOSS_PROBABILITY), 2) if kind == LOSSY else 0.0
        delay_ms = rng.randint(*DELAY_MS) if kind == SLOW else 0
        pick = rng.random()
        faults.append(Fault(round(at, 1), kind, targets, duration, probability, pick, delay_ms))
        at += duration + rng.uniform(*GAP_S)
