"""The checker over hand-made histories: clean ones pass, each kind of violation is caught."""

from __future__ import annotations

from odradek.torture.checker import EXCERPT_OFFSETS, Violation, check, summarize
from odradek.torture.history import (
    Acked,
    CommitAcked,
    CommitObserved,
    Nemesis,
    Op,
    Read,
    ReadComplete,
    ReadError,
    SendFailed,
    Sent,
    TxnEnded,
)

T = "t"
FINAL_U = "final-read_uncommitted"
FINAL_C = "final-read_committed"


class Timeline:
    """Builds a history with increasing times."""

    def __init__(self) -> None:
        self.ops: list[Op] = []
        self.now = 0.0

    def tick(self) -> float:
        self.now += 1
        return self.now

    def send(self, value: str, partition: int, offset: int | None, txn: str | None = None) -> None:
        self.ops.append(Sent("p", value, T, partition, txn, self.tick()))
        if offset is not None:
            self.ops.append(Acked("p", value, T, partition, offset, txn, self.tick()))

    def send_acked_without_offset(self, value: str, partition: int) -> None:
        self.ops.append(Sent("p", value, T, partition, None, self.tick()))
        self.ops.append(Acked("p", value, T, partition, None, None, self.tick()))

    def fail(self, value: str, partition: int) -> None:
        self.ops.append(Sent("p", value, T, partition, None, self.tick()))
        self.ops.append(SendFailed("p", value, "timed out", self.tick()))

    def txn(self, txn: str, outcome: str) -> None:
        self.ops.append(TxnEnded("p", txn, outcome, self.tick()))  # type: ignore[arg-type]

    def read(
        self,
        reader: str,
        partition: int,
        offset: int,
        value: str,
        group: str | None = None,
        isolation: str = "read_uncommitted",
    ) -> None:
        self.ops.append(
            Read(reader, group, isolation, T, partition, offset, value, self.tick())  # type: ignore[arg-type]
        )

    def complete(self, reader: str, partition: int, end: int, isolation: str) -> None:
        self.ops.append(ReadComplete(reader, isolation, T, partition, end, self.tick()))  # type: ignore[arg-type]

    def commit(self, group: str, partition: int, offset: int) -> None:
        start = self.tick()
        self.ops.append(CommitAcked(group, "m1", T, partition, offset, start, self.tick()))

    def observe(self, group: str, partition: int, offset: int) -> None:
        start = self.tick()
        self.ops.append(CommitObserved(group, T, partition, offset, start, self.tick()))

    def final_read(self, log: dict[int, list[str]], committed: dict[int, list[str]]) -> None:
        """Complete reads of each partition: ``log`` for read_uncommitted (index = offset),
        ``committed`` (offset -> value, '' for a hole) for read_committed."""
        for partition, values in log.items():
            for offset, value in enumerate(values):
                if value:
                    self.read(FINAL_U, partition, offset, value)
            self.complete(FINAL_U, partition, len(values), "read_uncommitted")
        for partition, values in committed.items():
            for offset, value in enumerate(values):
                if value:
                    self.read(FINAL_C, partition, offset, value, isolation="read_committed")
            self.complete(FINAL_C, partition, len(values), "read_committed")


def clean() -> Timeline:
    """Two partitions: v0, v1 at 0 and 1 of partition 0; a committed transaction T1 (a at 0 of
    partition 1, b at 2 of partition 0, markers after them), an aborted one (x at 2 of partition
    1, its marker at 3), a failed send that did land (f at 4 of partition 0); a read_uncommitted
    group that read partition 0 (one record twice) and a read_committed one that read partition
    1, both committing to the end."""
    h = Timeline()
    h.send("v0", 0, 0)
    h.send("v1", 0, 1)
    h.send("a", 1, 0, txn="T1")
    h.send("b", 0, 2, txn="T1")
    h.txn("T1", "committed")
    h.send("x", 1, 2, txn="T2")
    h.txn("T2", "aborted")
    h.fail("f", 0)
    h.read("g1-m1", 0, 0, "v0", group="g1")
    h.read("g1-m1", 0, 1, "v1", group="g1")
    h.commit("g1", 0, 2)
    h.observe("g1", 0, 2)
    h.read("g1-m2", 0, 1, "v1", group="g1")  # redelivered after a rebalance: allowed
    h.read("g1-m2", 0, 2, "b", group="g1")
    h.commit("g1", 0, 4)
    h.observe("g1", 0, 4)
    h.read("g2-m1", 1, 0, "a", group="g2", isolation="read_committed")
    h.commit("g2", 1, 4)
    h.observe("g2", 1, 4)
    h.final_read(
        {0: ["v0", "v1", "b", "", "f"], 1: ["a", "", "x", ""]},
        {0: ["v0", "v1", "b", "", "f"], 1: ["a", "", "", ""]},
    )
    return h


def kinds(violations: list[Violation]) -> list[str]:
    return sorted({v.kind for v in violations})


def test_a_clean_history_passes() -> None:
    assert check(clean().ops) == []


def test_an_empty_history_passes() -> None:
    assert check([]) == []


def test_summary_counts() -> None:
    summary = summarize(clean().ops)
    assert summary.sent == 6
    assert summary.acknowledged == 4  # v0, v1 and the committed a, b
    assert summary.indeterminate == 1  # f (x is definitely aborted)
    assert summary.transactions_committed == 1
    assert summary.transactions_aborted == 1
    assert summary.commits_acknowledged == 3


def test_an_acknowledged_record_missing_from_the_log_is_lost() -> None:
    h = Timeline()
    h.send("v0", 0, 0)
    h.send("v1", 0, 1)
    h.send("v2", 0, 2)
    h.final_read({0: ["v0", "v2", ""]}, {})
    violations = check(h.ops)
    assert kinds(violations) == ["lost", "moved"]
    lost = next(v for v in violations if v.kind == "lost")
    assert lost.message == (
        "'v1' was acknowledged at t-0@1 but final-read_uncommitted read 'v2' there"
    )


def test_a_log_truncated_below_an_acknowledged_record_is_loss() -> None:
    h = Timeline()
    h.send("v0", 0, 0)
    h.send("v1", 0, 1)
    h.final_read({0: ["v0"]}, {})
    (violation,) = check(h.ops)
    assert violation.kind == "lost"
    assert "complete read ended at 1" in violation.message


def test_a_record_at_another_offset_has_moved() -> None:
    h = Timeline()
    h.send("v0", 0, 0)
    h.final_read({0: ["", "v0"]}, {})
    (violation,) = check(h.ops)
    assert violation.kind == "moved"


def test_a_record_twice_in_the_log_is_a_duplicate() -> None:
    h = Timeline()
    h.send("v0", 0, 0)
    h.fail("v1", 0)
    h.final_read({0: ["v0", "v1", "v1"]}, {})
    (violation,) = check(h.ops)
    assert violation.kind == "duplicate"
    assert "[1, 2]" in violation.message


def test_a_record_acknowledged_without_its_offset_is_found_wherever_it_is() -> None:
    h = Timeline()
    h.send("v0", 0, 0)
    h.send_acked_without_offset("v1", 0)
    h.final_read({0: ["v0", "v1"]}, {0: ["v0", "v1"]})
    assert check(h.ops) == []
    assert summarize(h.ops).acknowledged == 2


def test_a_record_acknowledged_without_its_offset_and_not_in_the_log_is_lost() -> None:
    h = Timeline()
    h.send("v0", 0, 0)
    h.send_acked_without_offset("v1", 0)
    h.final_read({0: ["v0"]}, {})
    (violation,) = check(h.ops)
    assert violation.kind == "lost"
    assert violation.message == (
        "'v1' was acknowledged (without its offset) in t-0 but final-read_uncommitted's "
        "complete read does not hold it"
    )


def test_a_group_skipping_a_record_acknowledged_without_its_offset() -> None:
    h = Timeline()
    h.send("v0", 0, 0)
    h.send_acked_without_offset("v1", 0)
    h.read("g-m1", 0, 0, "v0", group="g")
    h.commit("g", 0, 2)
    h.final_read({0: ["v0", "v1"]}, {})
    (violation,) = check(h.ops)
    assert violation.kind == "skipped-by-group"
    assert "'v1' acknowledged at 1" in violation.message


def test_a_value_never_sent_is_a_phantom() -> None:
    h = Timeline()
    h.send("v0", 0, 0)
    h.read("g-m1", 0, 1, "garbage\x00", group="g")
    assert kinds(check(h.ops)) == ["phantom"]


def test_readers_that_disagree_about_an_offset_diverge() -> None:
    h = Timeline()
    h.fail("v0", 0)
    h.fail("v1", 0)
    h.read("g-m1", 0, 0, "v0", group="g")
    h.read("h-m1", 0, 0, "v1", group="h")
    (violation,) = check(h.ops)
    assert violation.kind == "divergent"
    assert "g-m1 read 'v0' but h-m1 read 'v1'" in violation.message


def test_an_unreadable_batch_is_corruption() -> None:
    h = Timeline()
    h.ops.append(ReadError("g-m1", T, 0, 5, "Local: Bad message format", h.tick()))
    (violation,) = check(h.ops)
    assert violation.kind == "corrupt"


def test_a_committed_offset_that_moves_back_after_an_acknowledged_commit() -> None:
    h = Timeline()
    h.commit("g", 0, 10)
    h.observe("g", 0, 7)
    (violation,) = check(h.ops)
    assert violation.kind == "commit-went-back"
    assert violation.excerpt[0].offset == 10  # type: ignore[union-attr]


def test_a_committed_offset_that_moves_back_between_fetches() -> None:
    h = Timeline()
    h.observe("g", 0, 10)
    h.observe("g", 0, 3)
    assert kinds(check(h.ops)) == ["commit-went-back"]


def test_a_fetch_concurrent_with_a_commit_may_miss_it() -> None:
    h = Timeline()
    h.ops.append(CommitAcked("g", "m1", T, 0, 10, 1.0, 3.0))
    h.ops.append(CommitObserved("g", T, 0, 4, 2.0, 2.5))
    assert check(h.ops) == []


def test_a_group_that_commits_past_a_record_nobody_read_skipped_it() -> None:
    h = Timeline()
    h.send("v0", 0, 0)
    h.send("v1", 0, 1)
    h.read("g-m1", 0, 0, "v0", group="g")
    h.commit("g", 0, 2)
    (violation,) = check(h.ops)
    assert violation.kind == "skipped-by-group"
    assert "'v1'" in violation.message


def test_a_read_committed_reader_seeing_an_aborted_record() -> None:
    h = Timeline()
    h.send("x", 0, 0, txn="T1")
    h.txn("T1", "aborted")
    h.read("g-m1", 0, 0, "x", group="g", isolation="read_committed")
    assert kinds(check(h.ops)) == ["aborted-read"]


def test_a_read_uncommitted_reader_may_see_an_aborted_record() -> None:
    h = Timeline()
    h.send("x", 0, 0, txn="T1")
    h.txn("T1", "aborted")
    h.read("g-m1", 0, 0, "x", group="g")
    assert check(h.ops) == []


def test_a_read_committed_reader_seeing_what_the_log_does_not_commit() -> None:
    h = Timeline()
    h.send("x", 0, 0, txn="T1")
    h.txn("T1", "unknown")
    h.read("g-m1", 0, 0, "x", group="g", isolation="read_committed")
    h.final_read({0: ["x", ""]}, {0: ["", ""]})
    assert kinds(check(h.ops)) == ["uncommitted-read"]


def test_a_transaction_half_visible_is_partial() -> None:
    h = Timeline()
    h.send("a", 0, 0, txn="T1")
    h.send("b", 1, 0, txn="T1")
    h.txn("T1", "unknown")
    h.final_read({0: ["a", ""], 1: ["b", ""]}, {0: ["a", ""], 1: ["", ""]})
    violations = check(h.ops)
    assert kinds(violations) == ["partial-transaction"]
    assert "missing ['b']" in violations[0].message


def test_a_transaction_of_unknown_outcome_wholly_visible_or_wholly_not_is_fine() -> None:
    for visible in (True, False):
        h = Timeline()
        h.send("a", 0, 0, txn="T1")
        h.send("b", 1, 0, txn="T1")
        h.txn("T1", "unknown")
        committed = {0: ["a", ""], 1: ["b", ""]} if visible else {0: ["", ""], 1: ["", ""]}
        h.final_read({0: ["a", ""], 1: ["b", ""]}, committed)
        assert check(h.ops) == [], visible


def test_a_committed_transaction_missing_from_read_committed_is_lost() -> None:
    h = Timeline()
    h.send("a", 0, 0, txn="T1")
    h.txn("T1", "committed")
    h.final_read({0: ["a", ""]}, {0: ["", ""]})
    assert kinds(check(h.ops)) == ["lost"]


def test_the_excerpt_is_the_history_around_the_offending_offset() -> None:
    h = Timeline()
    for offset in range(20):
        h.send(f"v{offset}", 0, offset)
    h.send("other", 1, 0)
    log = [f"v{offset}" for offset in range(20)]
    log[10] = ""
    h.final_read({0: log, 1: ["other"]}, {})
    (violation,) = check(h.ops)
    offsets = {op.offset for op in violation.excerpt if hasattr(op, "offset")}
    assert offsets == set(range(10 - EXCERPT_OFFSETS, 10 + EXCERPT_OFFSETS + 1))
    assert all(getattr(op, "partition", 0) == 0 for op in violation.excerpt)
    assert "history around it" in violation.describe()
    assert "Acked(producer='p', value='v10'" in violation.describe()


def test_the_excerpt_names_the_faults_of_that_moment() -> None:
    h = Timeline()
    h.send("v0", 0, 0)
    h.ops.append(Nemesis("start", "kill", "broker 2", h.tick()))
    h.ops.append(Nemesis("end", "kill", "broker 2", h.tick()))
    h.send("v1", 0, 1)
    h.ops.append(Nemesis("start", "pause", "much later", h.tick() + 1000))
    h.final_read({0: ["v0"]}, {})
    (violation,) = check(h.ops)
    faults = [op.detail for op in violation.excerpt if isinstance(op, Nemesis)]
    assert faults == ["broker 2", "broker 2"]
    assert any(isinstance(op, Sent) and op.value == "v1" for op in violation.excerpt)
