"""The transaction coordinator's state machine, driven with a manual clock and no log or sockets:
each write it asks for is reported written (or failed) by the test, as the runtime would."""

from __future__ import annotations

import itertools
from collections.abc import Callable

import pytest

from odradek.clock import ManualClock
from odradek.coordinator.group.records import RecordFormatError, java_string_hash
from odradek.coordinator.transaction.coordinator import (
    MarkerJob,
    TransactionCoordinator,
    TxnAnswer,
    TxnConfig,
    TxnOutcome,
    TxnWrite,
)
from odradek.coordinator.transaction.records import (
    TxnState,
    TxnValue,
    decode_txn_key,
    decode_txn_value,
    encode_txn_key,
    encode_txn_value,
    txn_partition_for,
)
from odradek.protocol.errors import ErrorCode

PARTITIONS = 4
TIMEOUT_MS = 60_000
T1 = ("orders", 0)
T2 = ("orders", 1)


def make(clock: ManualClock, epoch: int = 7) -> TransactionCoordinator:
    ids = itertools.count(1000)
    coordinator = TransactionCoordinator(
        TxnConfig(partitions=PARTITIONS, max_timeout_ms=900_000), clock, lambda: next(ids)
    )
    for index in range(PARTITIONS):
        coordinator.begin_loading(index, epoch)
        coordinator.finish_loading(index)
    return coordinator


def done(coordinator: TransactionCoordinator, outcome: TxnOutcome, ok: bool = True) -> TxnAnswer:
    """What the producer hears once the write (if any) is replicated, or failed."""
    if isinstance(outcome, TxnAnswer):
        return outcome
    coordinator.written(outcome, ok)
    return outcome.answer if ok else TxnAnswer(ErrorCode.coordinator_not_available)


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(1_700_000_000_000)


def started(coordinator: TransactionCoordinator, tid: str = "tx") -> tuple[int, int]:
    answer = done(coordinator, coordinator.init_producer_id(tid, TIMEOUT_MS))
    assert answer.error == ErrorCode.none
    return answer.producer_id, answer.producer_epoch


def recording(
    coordinator: TransactionCoordinator, log: list[TxnWrite]
) -> Callable[[TxnOutcome], TxnAnswer]:
    """``done``, keeping each write in ``log``: the records of the coordinator's partitions."""

    def run(outcome: TxnOutcome) -> TxnAnswer:
        if isinstance(outcome, TxnWrite):
            log.append(outcome)
        return done(coordinator, outcome)

    return run


def replayed(
    clock: ManualClock, log: list[TxnWrite], tid: str, coordinator_epoch: int
) -> tuple[TransactionCoordinator, list[MarkerJob]]:
    """A coordinator that loaded the records of ``tid``'s partition from ``log`` (it moved),
    and the marker jobs it resumed."""
    reloaded = make(clock, epoch=coordinator_epoch)
    index = reloaded.partition_for(tid)
    reloaded.begin_loading(index, coordinator_epoch)
    for write in log:
        if write.partition == index:
            reloaded.replay(index, write.key, write.value)
    return reloaded, reloaded.finish_loading(index)


def test_init_gives_an_id_and_each_init_bumps_the_epoch(clock: ManualClock) -> None:
    c = make(clock)
    assert started(c) == (1000, 0)
    assert started(c) == (1000, 1)
    assert started(c, "other") == (1001, 0)
    metadata = c.metadata("tx")
    assert metadata is not None and metadata.state == TxnState.EMPTY


def test_a_transaction_commits_through_prepare_markers_and_complete(clock: ManualClock) -> None:
    c = make(clock, epoch=7)
    pid, epoch = started(c)
    assert done(c, c.add_partitions("tx", pid, epoch, [T1])).error == ErrorCode.none
    # Adding what is already in the transaction writes nothing.
    assert c.add_partitions("tx", pid, epoch, [T1]) == TxnAnswer(ErrorCode.none)
    assert done(c, c.add_partitions("tx", pid, epoch, [T2])).error == ErrorCode.none
    assert c.verify_partitions("tx", pid, epoch, [T1, ("orders", 9)]) == {
        T1: ErrorCode.none,
        ("orders", 9): ErrorCode.invalid_txn_state,
    }
    end = c.end_txn("tx", pid, epoch, commit=True)
    assert isinstance(end, TxnWrite) and end.markers is not None
    assert (end.markers.commit, end.markers.coordinator_epoch) == (True, 7)
    assert end.markers.partitions == {T1, T2}
    # While the Prepare record is written, the producer's next request must wait.
    assert c.add_partitions("tx", pid, epoch, [T1]).error == ErrorCode.concurrent_transactions  # type: ignore[union-attr]
    assert done(c, end).error == ErrorCode.none
    assert c.add_partitions("tx", pid, epoch, [T1]) == TxnAnswer(ErrorCode.concurrent_transactions)
    assert c.end_txn("tx", pid, epoch, commit=True) == TxnAnswer(ErrorCode.concurrent_transactions)
    assert c.end_txn("tx", pid, epoch, commit=False) == TxnAnswer(ErrorCode.invalid_txn_state)
    complete = c.markers_done(end.markers)
    assert complete is not None and complete.next_value.state == TxnState.COMPLETE_COMMIT
    done(c, complete)
    # A retried EndTxn of the transaction just committed succeeds; the opposite does not.
    assert c.end_txn("tx", pid, epoch, commit=True) == TxnAnswer(ErrorCode.none)
    assert c.end_txn("tx", pid, epoch, commit=False) == TxnAnswer(ErrorCode.invalid_txn_state)
    metadata = c.metadata("tx")
    assert metadata is not None and metadata.partitions == frozenset()


def test_a_new_producer_fences_the_old_one_and_aborts_its_transaction(clock: ManualClock) -> None:
    c = make(clock)
    pid, old_epoch = started(c)
    done(c, c.add_partitions("tx", pid, old_epoch, [T1]))
    fence = c.init_producer_id("tx", TIMEOUT_MS)
    assert isinstance(fence, TxnWrite) and fence.markers is not None
    assert fence.answer == TxnAnswer(ErrorCode.concurrent_transactions)
    assert fence.next_value.state == TxnState.PREPARE_ABORT
    assert fence.markers.producer_epoch == old_epoch + 1 and not fence.markers.commit
    done(c, fence)
    # The old producer is fenced everywhere.
    assert c.add_partitions("tx", pid, old_epoch, [T2]) == TxnAnswer(ErrorCode.producer_fenced)
    assert c.end_txn("tx", pid, old_epoch, True) == TxnAnswer(ErrorCode.producer_fenced)
    # The new producer retries until the abort is complete, then gets the next epoch.
    assert c.init_producer_id("tx", TIMEOUT_MS) == TxnAnswer(ErrorCode.concurrent_transactions)
    complete = c.markers_done(fence.markers)
    assert complete is not None
    done(c, complete)
    assert started(c) == (pid, old_epoch + 2)


def test_kip_360_a_producer_bumps_only_its_own_epoch(clock: ManualClock) -> None:
    c = make(clock)
    pid, epoch = started(c)
    assert done(c, c.init_producer_id("tx", TIMEOUT_MS, pid, epoch)) == TxnAnswer(
        ErrorCode.none, pid, epoch + 1
    )
    # A retry with the epoch it had gets the same answer again.
    assert c.init_producer_id("tx", TIMEOUT_MS, pid, epoch) == TxnAnswer(
        ErrorCode.none, pid, epoch + 1
    )
    assert c.init_producer_id("tx", TIMEOUT_MS, pid + 5, epoch) == TxnAnswer(
        ErrorCode.producer_fenced
    )


def test_kip_360_bumps_after_the_coordinator_moved(clock: ManualClock) -> None:
    """A producer whose transaction failed asks for a bump with its current epoch: the
    coordinator that replayed the log (a record for each step of one epoch) must bump it, not
    take the request for a retry of a bump that never was. Answered with the same epoch, the
    producer kept sequences its partitions had refused and was out of order for good."""
    c = make(clock)
    log: list[TxnWrite] = []
    run = recording(c, log)
    pid, epoch = run(c.init_producer_id("tx", TIMEOUT_MS)).producer_id, 0
    run(c.add_partitions("tx", pid, epoch, [T1]))
    end = c.end_txn("tx", pid, epoch, commit=False)
    run(end)
    assert isinstance(end, TxnWrite) and end.markers is not None
    complete = c.markers_done(end.markers)
    assert complete is not None
    run(complete)

    moved, _ = replayed(clock, log, "tx", 8)
    bump = moved.init_producer_id("tx", TIMEOUT_MS, pid, epoch)
    assert isinstance(bump, TxnWrite)
    assert bump.answer == TxnAnswer(ErrorCode.none, pid, epoch + 1)
    log.append(bump)
    moved.written(bump, True)
    # Its retry (the answer was lost) gets the same epoch, also from a coordinator that moved
    # again, which bumps the new epoch in turn.
    assert moved.init_producer_id("tx", TIMEOUT_MS, pid, epoch) == bump.answer
    again, _ = replayed(clock, log, "tx", 9)
    assert again.init_producer_id("tx", TIMEOUT_MS, pid, epoch) == bump.answer
    bumped = again.init_producer_id("tx", TIMEOUT_MS, pid, epoch + 1)
    assert isinstance(bumped, TxnWrite)
    assert bumped.answer == TxnAnswer(ErrorCode.none, pid, epoch + 2)


def test_timeouts_abort_with_a_bumped_epoch(clock: ManualClock) -> None:
    c = make(clock)
    pid, epoch = started(c)
    done(c, c.add_partitions("tx", pid, epoch, [T1]))
    assert c.next_expiry_ms() == clock.time_ms() + TIMEOUT_MS
    clock.advance(TIMEOUT_MS - 1)
    assert c.expired() == []
    clock.advance(1)
    (abort,) = c.expired()
    assert abort.next_value.state == TxnState.PREPARE_ABORT
    assert abort.markers is not None and abort.markers.producer_epoch == epoch + 1
    done(c, abort)
    assert c.expired() == []
    assert c.end_txn("tx", pid, epoch, True) == TxnAnswer(ErrorCode.producer_fenced)


@pytest.mark.parametrize(
    ("call", "expected"),
    [
        (
            lambda c, pid, e: c.end_txn("nobody", pid, e, True),
            ErrorCode.invalid_producer_id_mapping,
        ),
        (
            lambda c, pid, e: c.end_txn("tx", pid + 1, e, True),
            ErrorCode.invalid_producer_id_mapping,
        ),
        (lambda c, pid, e: c.end_txn("tx", pid, e - 1, True), ErrorCode.producer_fenced),
        (lambda c, pid, e: c.end_txn("tx", pid, e, True), ErrorCode.invalid_txn_state),
        (lambda c, pid, e: c.add_partitions("tx", pid, e + 1, [T1]), ErrorCode.producer_fenced),
        (lambda c, pid, e: c.init_producer_id("tx", 0), ErrorCode.invalid_transaction_timeout),
        (
            lambda c, pid, e: c.init_producer_id("tx", 900_001),
            ErrorCode.invalid_transaction_timeout,
        ),
    ],
)
def test_bad_requests(clock: ManualClock, call, expected: ErrorCode) -> None:  # type: ignore[no-untyped-def]
    c = make(clock)
    started(c)
    pid, epoch = started(c)
    assert call(c, pid, epoch) == TxnAnswer(expected)
    # Nothing changed for the transactional id.
    assert done(c, c.add_partitions("tx", pid, epoch, [T1])).error == ErrorCode.none


def test_a_failed_write_changes_nothing(clock: ManualClock) -> None:
    c = make(clock)
    pid, epoch = started(c)
    add = c.add_partitions("tx", pid, epoch, [T1])
    done(c, add, ok=False)
    metadata = c.metadata("tx")
    assert metadata is not None and metadata.state == TxnState.EMPTY and not metadata.pending
    assert c.end_txn("tx", pid, epoch, True) == TxnAnswer(ErrorCode.invalid_txn_state)


def test_ownership(clock: ManualClock) -> None:
    c = make(clock)
    index = c.partition_for("tx")
    c.unload(index)
    assert c.init_producer_id("tx", TIMEOUT_MS) == TxnAnswer(ErrorCode.not_coordinator)
    c.begin_loading(index, 8)
    assert c.init_producer_id("tx", TIMEOUT_MS) == TxnAnswer(ErrorCode.coordinator_load_in_progress)
    assert c.verify_partitions("tx", 1, 0, [T1]) == {T1: ErrorCode.coordinator_load_in_progress}


def test_replay_rebuilds_the_state_and_resumes_half_ended_transactions(
    clock: ManualClock,
) -> None:
    c = make(clock)
    log: list[TxnWrite] = []
    run = recording(c, log)
    pid, epoch = run(c.init_producer_id("tx", TIMEOUT_MS)).producer_id, 0
    run(c.add_partitions("tx", pid, epoch, [T1, T2]))
    run(c.end_txn("tx", pid, epoch, commit=True))  # the broker dies before the markers
    other = run(c.init_producer_id("quiet", TIMEOUT_MS))

    reloaded, (job,) = replayed(clock, log, "tx", 8)
    index = reloaded.partition_for("tx")
    assert (job.transactional_id, job.commit, job.partitions, job.coordinator_epoch) == (
        "tx",
        True,
        frozenset({T1, T2}),
        8,
    )
    metadata = reloaded.metadata("tx")
    assert metadata is not None and metadata.state == TxnState.PREPARE_COMMIT
    if reloaded.partition_for("quiet") == index:
        quiet = reloaded.metadata("quiet")
        assert quiet is not None and quiet.producer_id == other.producer_id


def test_listing_filters(clock: ManualClock) -> None:
    c = make(clock)
    pid, epoch = started(c, "a")
    started(c, "b")
    done(c, c.add_partitions("a", pid, epoch, [T1]))
    clock.advance(5_000)
    assert {t.transactional_id for t in c.listing()} == {"a", "b"}
    assert [t.transactional_id for t in c.listing(["Ongoing"])] == ["a"]
    assert [t.transactional_id for t in c.listing(min_duration_ms=4_000)] == ["a"]
    assert c.listing(min_duration_ms=6_000) == []
    assert [t.transactional_id for t in c.listing(producer_ids=[pid])] == ["a"]


def test_records_round_trip_in_kafkas_layout() -> None:
    value = TxnValue(42, 3, 60_000, TxnState.ONGOING, frozenset({T1, T2, ("x", 5)}), 10, 5)
    assert decode_txn_value(encode_txn_value(value)) == value
    assert decode_txn_key(encode_txn_key("tx-é")) == "tx-é"
    # Key version 0 then an int16-length string, as Kafka's TransactionLogKey.
    assert encode_txn_key("ab") == b"\x00\x00\x00\x02ab"


def test_a_partition_count_past_the_value_bytes_is_refused() -> None:
    value = encode_txn_value(TxnValue(42, 3, 60_000, TxnState.EMPTY, frozenset(), 10, 5))
    # version, producer id, epoch, timeout, state: then the topic count
    at = 2 + 8 + 2 + 4 + 1
    lying = value[:at] + b"\x7f\xff\xff\xff" + value[at + 4 :]
    with pytest.raises(RecordFormatError, match="elements claimed"):
        decode_txn_value(lying)


def test_partition_choice_is_kafkas_utils_abs() -> None:
    negative = next(f"id-{i}" for i in range(1000) if java_string_hash(f"id-{i}") < 0)
    assert txn_partition_for(negative, 50) == abs(java_string_hash(negative)) % 50


# -- transaction version 2 (KIP-890 part 2) ------------------------------------------------------


def ended_v2(
    c: TransactionCoordinator, pid: int, epoch: int, commit: bool, tid: str = "tx"
) -> TxnAnswer:
    """EndTxn v5 to its Complete record: what the producer was told."""
    end = c.end_txn(tid, pid, epoch, commit, bump_epoch=True)
    assert isinstance(end, TxnWrite) and end.markers is not None
    answer = done(c, end)
    complete = c.markers_done(end.markers)
    assert complete is not None
    done(c, complete)
    return answer


def test_v2_every_end_bumps_the_epoch_and_the_markers_carry_it(clock: ManualClock) -> None:
    c = make(clock)
    pid, epoch = started(c)
    done(c, c.add_partitions("tx", pid, epoch, [T1]))
    end = c.end_txn("tx", pid, epoch, commit=True, bump_epoch=True)
    assert isinstance(end, TxnWrite) and end.markers is not None
    assert (end.markers.producer_id, end.markers.producer_epoch) == (pid, epoch + 1)
    assert end.markers.partitions == {T1}
    assert done(c, end) == TxnAnswer(ErrorCode.none, pid, epoch + 1)
    # A retry (the old epoch) while the markers are written waits; once complete, it is told
    # the new epoch again.
    retry = c.end_txn("tx", pid, epoch, commit=True, bump_epoch=True)
    assert retry == TxnAnswer(ErrorCode.concurrent_transactions)
    done(c, c.markers_done(end.markers))  # type: ignore[arg-type]
    retry = c.end_txn("tx", pid, epoch, commit=True, bump_epoch=True)
    assert retry == TxnAnswer(ErrorCode.none, pid, epoch + 1)
    assert c.end_txn("tx", pid, epoch, False, bump_epoch=True).error == ErrorCode.invalid_txn_state
    # The next transaction is the new epoch's; the old epoch is fenced.
    assert c.add_partitions("tx", pid, epoch, [T1]).error == ErrorCode.producer_fenced  # type: ignore[union-attr]
    assert done(c, c.add_partitions("tx", pid, epoch + 1, [T2])).error == ErrorCode.none
    assert ended_v2(c, pid, epoch + 1, commit=False) == TxnAnswer(ErrorCode.none, pid, epoch + 2)
    assert c.end_txn("tx", pid, epoch, True, bump_epoch=True).error == ErrorCode.producer_fenced


def test_v2_may_abort_with_nothing_added_but_not_commit(clock: ManualClock) -> None:
    c = make(clock)
    pid, epoch = started(c)
    assert c.end_txn("tx", pid, epoch, True, bump_epoch=True).error == ErrorCode.invalid_txn_state  # type: ignore[union-attr]
    end = c.end_txn("tx", pid, epoch, commit=False, bump_epoch=True)
    assert isinstance(end, TxnWrite) and end.markers is not None
    assert end.markers.partitions == frozenset()
    assert done(c, end) == TxnAnswer(ErrorCode.none, pid, epoch + 1)
    complete = c.markers_done(end.markers)
    assert complete is not None and complete.next_value.state == TxnState.COMPLETE_ABORT


def test_v2_exhausted_epochs_move_to_a_new_producer_id(clock: ManualClock) -> None:
    c = make(clock)
    pid, _ = started(c)
    metadata = c.metadata("tx")
    assert metadata is not None
    metadata.producer_epoch = 32766  # as after 32766 transactions
    done(c, c.add_partitions("tx", pid, 32766, [T1]))
    end = c.end_txn("tx", pid, 32766, commit=True, bump_epoch=True)
    assert isinstance(end, TxnWrite) and end.markers is not None
    # The markers take the last epoch; the producer is told a new id at epoch 0.
    assert (end.markers.producer_id, end.markers.producer_epoch) == (pid, 32767)
    answer = done(c, end)
    assert answer.error == ErrorCode.none and answer.producer_id != pid
    assert answer.producer_epoch == 0
    assert decode_txn_value(end.value).next_producer_id == answer.producer_id
    complete = c.markers_done(end.markers)
    assert complete is not None
    assert (complete.next_value.producer_id, complete.next_value.producer_epoch) == (
        answer.producer_id,
        0,
    )
    done(c, complete)
    assert done(c, c.add_partitions("tx", answer.producer_id, 0, [T1])).error == ErrorCode.none


def test_flexible_values_round_trip_with_their_next_producer_id() -> None:
    value = TxnValue(42, 32767, 60_000, TxnState.PREPARE_COMMIT, frozenset({T1, T2}), 10, 5, 77)
    encoded = encode_txn_value(value)
    assert encoded[:2] == b"\x00\x01"  # version 1: the tagged field needs the flexible layout
    assert decode_txn_value(encoded) == value
