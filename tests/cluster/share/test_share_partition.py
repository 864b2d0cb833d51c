"""The share-partition state machine with the caller's time and no sockets: acquisition, locks,
acknowledgements, delivery counts and the in-flight limit."""

from __future__ import annotations

from odradek.cluster.share.persister import ACKNOWLEDGED, AVAILABLE, StateBatch
from odradek.cluster.share.share_partition import (
    AcknowledgementBatch,
    AcknowledgeType,
    AcquiredRange,
    FetchedBatch,
    RecordState,
    SharePartition,
)
from odradek.protocol.errors import ErrorCode

LOCK_MS = 1_000
ACCEPT, RELEASE, REJECT, RENEW = (
    AcknowledgeType.ACCEPT,
    AcknowledgeType.RELEASE,
    AcknowledgeType.REJECT,
    AcknowledgeType.RENEW,
)


def share(start: int = 0, limit: int = 5, locks: int = 100) -> SharePartition:
    return SharePartition(start, delivery_count_limit=limit, max_record_locks=locks)


def ack(first: int, last: int, *types: int) -> list[AcknowledgementBatch]:
    return [AcknowledgementBatch(first, last, tuple(types))]


def log_of(count: int) -> list[FetchedBatch]:
    """One batch per record, offsets 0.."""
    return [FetchedBatch(i, i) for i in range(count)]


def test_new_records_are_acquired_once_with_delivery_count_one() -> None:
    sp = share()
    got = sp.acquire("a", [FetchedBatch(0, 9)], 100, now_ms=0, lock_ms=LOCK_MS)
    assert got == [AcquiredRange(0, 9, 1)]
    assert sp.acquire("b", [FetchedBatch(0, 9)], 100, now_ms=0, lock_ms=LOCK_MS) == []
    assert sp.next_fetch_offset() == 10
    assert sp.in_flight == 10


def test_max_records_bounds_one_acquisition() -> None:
    sp = share()
    assert sp.acquire("a", log_of(10), 3, 0, LOCK_MS) == [AcquiredRange(0, 2, 1)]
    assert sp.acquire("b", log_of(10), 3, 0, LOCK_MS) == [AcquiredRange(3, 5, 1)]


def test_accept_and_reject_end_records_and_move_the_start() -> None:
    sp = share()
    sp.acquire("a", log_of(4), 100, 0, LOCK_MS)
    assert sp.acknowledge("a", ack(0, 1, ACCEPT), 0, LOCK_MS) == ErrorCode.none
    assert sp.start_offset == 2
    assert sp.acknowledge("a", ack(3, 3, REJECT), 0, LOCK_MS) == ErrorCode.none
    assert sp.start_offset == 2  # 2 is still held
    assert sp.acknowledge("a", ack(2, 2, ACCEPT), 0, LOCK_MS) == ErrorCode.none
    assert sp.start_offset == 4 and sp.in_flight == 0


def test_release_redelivers_with_a_higher_delivery_count() -> None:
    sp = share()
    sp.acquire("a", log_of(3), 100, 0, LOCK_MS)
    assert sp.acknowledge("a", ack(1, 1, RELEASE), 0, LOCK_MS) == ErrorCode.none
    assert sp.next_fetch_offset() == 1
    assert sp.acquire("b", log_of(3), 100, 0, LOCK_MS) == [AcquiredRange(1, 1, 2)]


def test_rejected_records_never_come_back() -> None:
    sp = share()
    sp.acquire("a", log_of(2), 100, 0, LOCK_MS)
    sp.acknowledge("a", ack(0, 1, REJECT), 0, LOCK_MS)
    assert sp.acquire("a", log_of(2), 100, 10 * LOCK_MS, LOCK_MS) == []
    assert sp.next_fetch_offset() == 2


def test_an_expired_lock_releases_the_record_to_anyone() -> None:
    sp = share()
    sp.acquire("a", log_of(2), 100, 0, LOCK_MS)
    assert sp.next_deadline() == LOCK_MS
    assert sp.expire_locks(LOCK_MS - 1) == 0
    assert sp.expire_locks(LOCK_MS) == 2
    assert sp.acquire("b", log_of(2), 100, LOCK_MS, LOCK_MS) == [AcquiredRange(0, 1, 2)]
    # The first holder's acknowledgement comes too late.
    assert sp.acknowledge("a", ack(0, 1, ACCEPT), LOCK_MS, LOCK_MS) == (
        ErrorCode.invalid_record_state
    )


def test_renew_moves_the_lock_deadline() -> None:
    sp = share()
    sp.acquire("a", log_of(1), 100, 0, LOCK_MS)
    assert sp.acknowledge("a", ack(0, 0, RENEW), 900, LOCK_MS) == ErrorCode.none
    assert sp.expire_locks(LOCK_MS) == 0
    assert sp.expire_locks(1_900) == 1


def test_a_poison_record_is_archived_at_the_delivery_limit() -> None:
    sp = share(limit=3)
    counts = []
    for now in range(5):
        got = sp.acquire("a", log_of(1), 100, now, LOCK_MS)
        counts += [r.delivery_count for r in got]
        if got:
            sp.acknowledge("a", ack(0, 0, RELEASE), now, LOCK_MS)
    assert counts == [1, 2, 3]
    assert sp.state_of(0) is None and sp.start_offset == 1


def test_a_timed_out_poison_record_is_archived_too() -> None:
    sp = share(limit=2)
    sp.acquire("a", log_of(1), 100, 0, LOCK_MS)
    sp.expire_locks(LOCK_MS)
    sp.acquire("a", log_of(1), 100, LOCK_MS, LOCK_MS)
    sp.expire_locks(2 * LOCK_MS)
    assert sp.state_of(0) is None and sp.start_offset == 1


def test_only_the_holder_may_acknowledge_and_all_or_nothing() -> None:
    sp = share()
    sp.acquire("a", log_of(2), 100, 0, LOCK_MS)
    assert sp.acknowledge("b", ack(0, 0, ACCEPT), 0, LOCK_MS) == ErrorCode.invalid_record_state
    # 5 was never acquired: the batch is refused whole and 0-1 stay held.
    assert sp.acknowledge("a", ack(0, 5, ACCEPT), 0, LOCK_MS) == ErrorCode.invalid_record_state
    record = sp.state_of(0)
    assert record is not None and record.state is RecordState.ACQUIRED


def test_per_offset_types_and_malformed_batches() -> None:
    sp = share()
    sp.acquire("a", log_of(3), 100, 0, LOCK_MS)
    assert sp.acknowledge("a", ack(0, 2, ACCEPT, RELEASE), 0, LOCK_MS) == (
        ErrorCode.invalid_request
    )
    assert sp.acknowledge("a", ack(0, 2, 9), 0, LOCK_MS) == ErrorCode.invalid_request
    assert sp.acknowledge("a", ack(2, 0, ACCEPT), 0, LOCK_MS) == ErrorCode.invalid_request
    assert sp.acknowledge("a", ack(0, 2, ACCEPT, RELEASE, REJECT), 0, LOCK_MS) == ErrorCode.none
    assert sp.next_fetch_offset() == 1


def test_the_in_flight_limit_stops_new_acquisitions() -> None:
    sp = share(locks=3)
    assert sp.acquire("a", log_of(10), 100, 0, LOCK_MS) == [AcquiredRange(0, 2, 1)]
    assert sp.next_fetch_offset() is None
    sp.acknowledge("a", ack(0, 0, ACCEPT), 0, LOCK_MS)
    assert sp.next_fetch_offset() == 3
    assert sp.acquire("a", log_of(10), 100, 0, LOCK_MS) == [AcquiredRange(3, 3, 1)]


def test_skipped_batches_and_gaps_are_never_delivered() -> None:
    sp = share()
    batches = [
        FetchedBatch(0, 1),
        FetchedBatch(2, 2, skipped=True),  # a control batch, or an aborted transaction's
        FetchedBatch(5, 6),  # 3-4 compacted away
    ]
    assert sp.acquire("a", batches, 100, 0, LOCK_MS) == [
        AcquiredRange(0, 1, 1),
        AcquiredRange(5, 6, 1),
    ]
    sp.acknowledge("a", ack(0, 1, ACCEPT), 0, LOCK_MS)
    assert sp.start_offset == 5


def test_a_member_whose_session_ends_releases_what_it_holds() -> None:
    sp = share()
    sp.acquire("a", log_of(2), 100, 0, LOCK_MS)
    sp.acquire("b", [FetchedBatch(2, 3)], 100, 0, LOCK_MS)
    assert sp.release_member("a") == 2
    assert sp.acquire("c", log_of(4), 100, 0, LOCK_MS) == [AcquiredRange(0, 1, 2)]


def test_reset_forgets_what_was_in_flight() -> None:
    sp = share()
    sp.acquire("a", log_of(3), 100, 0, LOCK_MS)
    sp.reset(10)
    assert (sp.start_offset, sp.end_offset, sp.in_flight) == (10, 10, 0)
    assert sp.lag(15) == 5


def test_an_acknowledgement_beyond_what_is_in_flight_is_refused_at_once() -> None:
    sp = share()
    sp.acquire("a", log_of(2), 100, 0, LOCK_MS)
    # A client's range of 2**62 offsets is refused without being walked.
    huge = ack(0, 2**62, ACCEPT)
    assert sp.acknowledge("a", huge, 0, LOCK_MS) == ErrorCode.invalid_record_state
    assert sp.acknowledge("a", ack(-5, 1, ACCEPT), 0, LOCK_MS) == ErrorCode.invalid_record_state
    assert sp.in_flight == 2


def test_what_is_persisted_restores_the_same_share_partition() -> None:
    sp = share(limit=3)
    sp.acquire("a", log_of(8), 100, 0, LOCK_MS)
    sp.acknowledge("a", ack(0, 1, ACCEPT) + ack(3, 3, REJECT) + ack(4, 4, RELEASE), 0, LOCK_MS)
    batches = sp.state_batches()
    assert batches == [
        StateBatch(2, 2, AVAILABLE, 1),  # still acquired: persisted AVAILABLE, its count
        StateBatch(3, 3, ACKNOWLEDGED, 0),
        StateBatch(4, 7, AVAILABLE, 1),
    ]
    back = SharePartition.restore(
        sp.start_offset, batches, state_epoch=2, delivery_count_limit=3, max_record_locks=100
    )
    assert (back.start_offset, back.end_offset, back.state_epoch) == (2, 8, 2)
    assert back.state_of(3) is None
    got = back.acquire("b", log_of(10), 100, 0, LOCK_MS)
    assert got == [AcquiredRange(2, 2, 2), AcquiredRange(4, 7, 2), AcquiredRange(8, 9, 1)]


def test_a_restored_record_delivered_as_often_as_allowed_is_archived_not_sent() -> None:
    back = SharePartition.restore(
        5,
        [StateBatch(5, 5, AVAILABLE, 3), StateBatch(6, 6, AVAILABLE, 1)],
        state_epoch=0,
        delivery_count_limit=3,
        max_record_locks=100,
    )
    assert back.acquire("a", log_of(7), 100, 0, LOCK_MS) == [AcquiredRange(6, 6, 2)]
    assert back.start_offset == 6
