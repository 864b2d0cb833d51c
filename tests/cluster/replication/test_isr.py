"""The leader's ISR and high watermark tracking, driven by an injected clock: no sockets, no
ZooKeeper (its compare-and-set is the caller's; here the test plays it)."""

from __future__ import annotations

import pytest

from odradek.clock import ManualClock
from odradek.cluster.replication.isr import AcksAllOutcome, IsrProposal, IsrTracker
from odradek.protocol.errors import ErrorCode

LAG_MS = 30_000
LEADER, F1, F2 = 1, 2, 3


def tracker(
    clock: ManualClock,
    *,
    isr: tuple[int, ...] = (LEADER, F1, F2),
    log_end_offset: int = 0,
    high_watermark: int = 0,
    leader_epoch_start_offset: int = 0,
    min_insync_replicas: int = 1,
) -> IsrTracker:
    return IsrTracker(
        clock,
        leader_id=LEADER,
        replicas=(LEADER, F1, F2),
        isr=isr,
        leader_epoch=5,
        zk_version=10,
        leader_epoch_start_offset=leader_epoch_start_offset,
        log_end_offset=log_end_offset,
        high_watermark=high_watermark,
        replica_lag_time_max_ms=LAG_MS,
        min_insync_replicas=min_insync_replicas,
    )


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


# -- the high watermark --------------------------------------------------------------------------


def test_the_high_watermark_advances_only_when_the_whole_isr_has_the_records(
    clock: ManualClock,
) -> None:
    isr = tracker(clock)
    assert not isr.leader_appended(10)
    assert isr.high_watermark == 0
    assert not isr.follower_fetched(F1, 10, 10)  # F2 has not fetched: its log end is unknown
    assert isr.high_watermark == 0
    assert isr.follower_fetched(F2, 6, 10)
    assert isr.high_watermark == 6
    assert isr.follower_fetched(F2, 10, 10)
    assert isr.high_watermark == 10
    assert isr.is_committed(9) and not isr.is_committed(10)


def test_the_high_watermark_never_moves_back(clock: ManualClock) -> None:
    isr = tracker(clock, log_end_offset=20, high_watermark=15)
    assert isr.high_watermark == 15
    isr.follower_fetched(F1, 12, 20)  # behind the high watermark the last leader left
    isr.follower_fetched(F2, 20, 20)
    assert isr.high_watermark == 15
    isr.follower_fetched(F1, 20, 20)
    assert isr.high_watermark == 20
    # A follower that truncated (a new leader's follower): its lower end does not lower it.
    isr.follower_fetched(F2, 18, 20)
    isr.leader_appended(25)
    assert isr.high_watermark == 20


def test_a_leader_alone_in_the_isr_commits_its_own_appends(clock: ManualClock) -> None:
    isr = tracker(clock, isr=(LEADER,))
    assert isr.leader_appended(4)
    assert isr.high_watermark == 4


def test_a_caught_up_follower_outside_the_isr_holds_the_watermark(clock: ManualClock) -> None:
    isr = tracker(clock, isr=(LEADER,))
    isr.leader_appended(10)
    assert isr.high_watermark == 10
    isr.follower_fetched(F1, 10, 10)  # caught up: about to join, so not left behind
    isr.leader_appended(15)
    assert isr.high_watermark == 10
    isr.follower_fetched(F1, 15, 15)
    assert isr.high_watermark == 15


def test_a_fetch_at_an_unchanged_log_end_moves_nothing_yet_the_clock_still_counts(
    clock: ManualClock,
) -> None:
    # All in the ISR, a follower polling at the same log end changes nothing (the fast path).
    isr = tracker(clock)
    isr.leader_appended(10)
    isr.follower_fetched(F1, 10, 10)
    assert isr.follower_fetched(F2, 10, 10)
    assert not isr.follower_fetched(F1, 10, 10)
    assert isr.high_watermark == 10
    # A follower outside the ISR, caught up a while ago and silent since, holds the watermark
    # only for the lag time: the next fetch of the other, though at its same log end, moves it.
    isr = tracker(clock, isr=(LEADER, F1))
    isr.leader_appended(10)
    isr.follower_fetched(F2, 10, 10)
    isr.follower_fetched(F1, 10, 10)
    assert isr.high_watermark == 10
    isr.leader_appended(20)
    isr.follower_fetched(F1, 20, 20)
    assert isr.high_watermark == 10  # F2 caught up a moment ago: it counts
    clock.advance(LAG_MS + 1)
    assert isr.follower_fetched(F1, 20, 20)
    assert isr.high_watermark == 20


def test_a_shrunk_isr_lets_the_watermark_move(clock: ManualClock) -> None:
    isr = tracker(clock, isr=(LEADER, F1))
    isr.leader_appended(10)
    isr.follower_fetched(F1, 4, 10)
    assert isr.high_watermark == 4
    clock.advance(LAG_MS + 1)
    proposal = isr.propose_shrink()
    assert proposal == IsrProposal((LEADER,), leader_epoch=5, zk_version=10)
    assert isr.high_watermark == 4  # a removal counts only once confirmed
    assert isr.isr_updated(proposal.isr, leader_epoch=5, zk_version=11)
    assert isr.high_watermark == 10


def test_with_eligible_leader_replicas_the_watermark_waits_for_min_insync_replicas(
    clock: ManualClock,
) -> None:
    # KIP-966: what leaves an ISR below min.insync.replicas must hold every committed record.
    isr = tracker(clock, isr=(LEADER, F1), min_insync_replicas=2)
    isr.eligible_leader_replicas = True
    isr.leader_appended(10)
    isr.follower_fetched(F1, 4, 10)
    assert isr.high_watermark == 4
    clock.advance(LAG_MS + 1)
    proposal = isr.propose_shrink()
    assert proposal is not None
    assert not isr.isr_updated(proposal.isr, leader_epoch=5, zk_version=11)
    assert isr.high_watermark == 4  # F1, now eligible, has everything up to here
    isr.leader_appended(12)
    assert isr.high_watermark == 4


# -- shrinking -----------------------------------------------------------------------------------


def test_a_follower_lagging_past_the_max_lag_is_a_shrink_candidate(clock: ManualClock) -> None:
    isr = tracker(clock)
    isr.leader_appended(10)
    isr.follower_fetched(F1, 10, 10)
    isr.follower_fetched(F2, 10, 10)
    assert isr.shrink_candidates() == frozenset()
    isr.leader_appended(20)
    clock.advance(LAG_MS)
    isr.follower_fetched(F1, 20, 20)  # keeps up
    isr.follower_fetched(F2, 10, 20)  # stuck at 10 since it last caught up, LAG_MS ago
    assert isr.shrink_candidates() == frozenset()  # at the limit, not past it
    clock.advance(1)
    assert isr.shrink_candidates() == {F2}


def test_a_follower_that_never_fetches_leaves_the_isr(clock: ManualClock) -> None:
    isr = tracker(clock)
    clock.advance(LAG_MS + 1)
    isr.follower_fetched(F1, 0, 0)
    assert isr.shrink_candidates() == {F2}


def test_a_follower_level_with_the_leader_is_never_a_shrink_candidate(clock: ManualClock) -> None:
    isr = tracker(clock, log_end_offset=5)
    isr.follower_fetched(F1, 5, 5)
    isr.follower_fetched(F2, 5, 5)
    clock.advance(10 * LAG_MS)  # no traffic, no fetches: still level with the leader
    assert isr.shrink_candidates() == frozenset()


def test_fetching_just_behind_a_busy_leader_counts_as_caught_up(clock: ManualClock) -> None:
    isr = tracker(clock, isr=(LEADER, F1, F2))
    leader_end = 0
    for _ in range(10):
        # Each fetch reaches the leader's end as the previous fetch found it, never the end
        # as of now: the previous fetch's time is the follower's caught-up time.
        isr.follower_fetched(F1, leader_end, leader_end + 5)
        isr.follower_fetched(F2, leader_end, leader_end + 5)
        leader_end += 5
        isr.leader_appended(leader_end)
        clock.advance(LAG_MS // 3)
    # The last fetch, LAG_MS // 3 ago, reached the end the one before it found.
    assert isr.follower(F1).last_caught_up_ms == clock.monotonic_ms() - 2 * (LAG_MS // 3)
    assert isr.shrink_candidates() == frozenset()


def test_a_shrink_proposal_is_in_flight_until_answered(clock: ManualClock) -> None:
    isr = tracker(clock)
    clock.advance(LAG_MS + 1)
    isr.follower_fetched(F1, 0, 0)
    proposal = isr.propose_shrink()
    assert proposal is not None and proposal.isr == (LEADER, F1)
    assert isr.pending == proposal
    assert isr.propose_shrink() is None and isr.shrink_candidates() == frozenset()
    isr.proposal_failed()  # the znode moved on: nothing changed
    assert isr.isr == {LEADER, F1, F2}
    assert isr.propose_shrink() == proposal
    isr.isr_updated(proposal.isr, leader_epoch=5, zk_version=11)
    assert isr.isr == frozenset({LEADER, F1}) and isr.zk_version == 11
    assert isr.pending is None


def test_an_older_znode_state_is_ignored(clock: ManualClock) -> None:
    isr = tracker(clock)
    isr.isr_updated((LEADER, F1), leader_epoch=5, zk_version=11)
    isr.isr_updated((LEADER, F1, F2), leader_epoch=5, zk_version=9)
    isr.isr_updated((LEADER, F1, F2), leader_epoch=4, zk_version=20)
    assert isr.isr == frozenset({LEADER, F1}) and isr.zk_version == 11


# -- expanding -----------------------------------------------------------------------------------


def test_a_follower_catching_up_becomes_an_expand_candidate(clock: ManualClock) -> None:
    isr = tracker(clock, isr=(LEADER, F1), log_end_offset=100, high_watermark=100)
    isr.follower_fetched(F1, 100, 100)
    isr.follower_fetched(F2, 40, 100)
    assert isr.expand_candidates() == frozenset()
    isr.follower_fetched(F2, 99, 100)
    assert isr.expand_candidates() == frozenset()
    isr.follower_fetched(F2, 100, 100)
    assert isr.expand_candidates() == {F2}
    proposal = isr.propose_expand()
    assert proposal == IsrProposal((LEADER, F1, F2), leader_epoch=5, zk_version=10)
    assert isr.maximal_isr == {LEADER, F1, F2}  # counted at once for the watermark
    assert isr.isr == {LEADER, F1}
    assert isr.expand_candidates() == frozenset()  # one change at a time
    isr.isr_updated(proposal.isr, leader_epoch=5, zk_version=11)
    assert isr.isr == {LEADER, F1, F2}


def test_a_follower_joins_only_once_it_reaches_the_leaders_epoch(clock: ManualClock) -> None:
    # The new leader's epoch starts at 50, past the high watermark of 30: a follower at 40 has
    # the committed records but maybe not this leader's records from 30 to 50.
    isr = tracker(
        clock,
        isr=(LEADER, F1),
        log_end_offset=50,
        high_watermark=30,
        leader_epoch_start_offset=50,
    )
    isr.follower_fetched(F1, 30, 50)
    isr.follower_fetched(F2, 40, 50)
    assert isr.high_watermark == 30
    assert isr.expand_candidates() == frozenset()
    isr.follower_fetched(F2, 50, 50)
    assert isr.expand_candidates() == {F2}


def test_a_reelected_leader_keeps_follower_offsets(clock: ManualClock) -> None:
    isr = tracker(clock, isr=(LEADER, F1), log_end_offset=10)
    isr.follower_fetched(F1, 10, 10)
    isr.follower_fetched(F2, 10, 10)
    clock.advance(5)
    isr.reelected(
        replicas=(LEADER, F1, F2),
        isr=(LEADER, F1),
        leader_epoch=6,
        zk_version=12,
        leader_epoch_start_offset=10,
        log_end_offset=10,
    )
    assert isr.follower(F1).log_end_offset == 10
    assert isr.follower(F1).last_caught_up_ms == clock.monotonic_ms()
    assert isr.follower(F2).last_caught_up_ms is None  # must fetch again to count
    assert isr.leader_epoch == 6
    # Its old log end offset does not bring it into the ISR: it may be dead by now.
    assert isr.propose_expand() is None
    isr.follower_fetched(F2, 10, 10)
    assert isr.propose_expand() == IsrProposal((LEADER, F1, F2), leader_epoch=6, zk_version=12)


# -- min.insync.replicas -------------------------------------------------------------------------


def test_acks_all_is_refused_before_the_append_when_the_isr_is_too_small(
    clock: ManualClock,
) -> None:
    isr = tracker(clock, isr=(LEADER, F1), min_insync_replicas=2)
    assert isr.append_error(-1) is None
    isr.isr_updated((LEADER,), leader_epoch=5, zk_version=11)
    assert isr.append_error(-1) == ErrorCode.not_enough_replicas
    assert isr.append_error(1) is None  # only acks=all asks for replicas
    assert isr.append_error(0) is None


def test_acks_all_waits_for_the_watermark_then_checks_the_isr_again(clock: ManualClock) -> None:
    isr = tracker(clock, isr=(LEADER, F1, F2), min_insync_replicas=2)
    isr.leader_appended(10)  # a produce of offsets 5..9
    assert isr.acks_all_outcome(9) == AcksAllOutcome(False)
    isr.follower_fetched(F1, 10, 10)
    isr.follower_fetched(F2, 9, 10)
    assert isr.acks_all_outcome(9) == AcksAllOutcome(False)  # offset 9 is not on F2 yet
    assert isr.acks_all_outcome(8) == AcksAllOutcome(True)
    isr.follower_fetched(F2, 10, 10)
    assert isr.acks_all_outcome(9) == AcksAllOutcome(True, ErrorCode.none)


def test_acks_all_after_the_isr_shrank_below_the_minimum(clock: ManualClock) -> None:
    isr = tracker(clock, isr=(LEADER, F1), min_insync_replicas=2)
    isr.leader_appended(10)  # appended while the ISR was big enough
    clock.advance(LAG_MS + 1)
    proposal = isr.propose_shrink()
    assert proposal is not None
    isr.isr_updated(proposal.isr, leader_epoch=5, zk_version=11)
    # Committed now (the leader is alone), but with fewer replicas than asked for.
    assert isr.acks_all_outcome(9) == AcksAllOutcome(
        True, ErrorCode.not_enough_replicas_after_append
    )


# -- a follower that lost committed records --------------------------------------------------------


def test_an_in_sync_follower_fetching_below_the_watermark_is_no_longer_caught_up(
    clock: ManualClock,
) -> None:
    isr = tracker(clock, log_end_offset=100, high_watermark=100)
    isr.follower_fetched(F1, 100, 100)
    isr.follower_fetched(F2, 100, 100)
    clock.advance(1_000)
    # F2 crashed and its recovery cut a corrupt tail: it fetches from 60, well within the lag
    # allowance of its last catching up, but its log misses committed records.
    assert isr.has_lost_committed(F2, 60)
    assert not isr.has_lost_committed(F1, 100)
    isr.follower_fetched(F2, 60, 100)
    assert isr.shrink_candidates() == {F2}
    assert isr.high_watermark == 100  # never moves back
    proposal = isr.propose_shrink()
    assert proposal is not None and proposal.isr == (LEADER, F1)


def test_a_reelected_leader_does_not_keep_a_follower_that_lost_records_in_sync(
    clock: ManualClock,
) -> None:
    isr = tracker(clock, log_end_offset=100, high_watermark=100)
    isr.reelected(
        replicas=(LEADER, F1, F2),
        isr=(LEADER, F1, F2),
        leader_epoch=6,
        zk_version=11,
        leader_epoch_start_offset=100,
        log_end_offset=100,
    )
    # Counted as caught up at the election, F2 comes back from a truncating recovery.
    isr.follower_fetched(F1, 100, 100)
    isr.follower_fetched(F2, 40, 100)
    assert isr.shrink_candidates() == {F2}


def test_an_in_sync_follower_at_the_watermark_but_behind_the_leader_stays_in_sync(
    clock: ManualClock,
) -> None:
    isr = tracker(clock, log_end_offset=100, high_watermark=100)
    isr.follower_fetched(F1, 100, 100)
    isr.follower_fetched(F2, 100, 100)
    isr.leader_appended(150)
    clock.advance(1_000)
    assert not isr.has_lost_committed(F2, 100)
    isr.follower_fetched(F2, 100, 150)
    assert isr.shrink_candidates() == frozenset()
    # A follower outside the ISR is behind, not lost: the rule is for members only.
    isr.isr_updated((LEADER, F1), leader_epoch=5, zk_version=11)
    assert not isr.has_lost_committed(F2, 10)
