"""The follower fetcher's core against a scripted leader: real logs, a manual clock, no sockets.

The leader's answers are written here as Kafka's brokers give them; the cases are KIP-101's
(truncation by leader epoch, not by high watermark) and KIP-279's (a leader epoch the follower
lacks: ask again about the epoch the log then ends with).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from odradek.clock import ManualClock
from odradek.cluster.replication.fetcher import (
    FETCH,
    LIST_OFFSETS,
    OFFSET_FOR_LEADER_EPOCH,
    FetcherConfig,
    FetcherCore,
    LeaderRequest,
    Wait,
    fetcher_id,
)
from odradek.cluster.replication.partition import Partition
from odradek.protocol.errors import ErrorCode
from odradek.protocol.messages import build, response_schema
from odradek.protocol.records import NewRecord, encode_batch
from odradek.storage import LogConfig, PartitionLog

NOW = 1_700_000_000_000
LOCAL, LEADER = 1, 2
BACKOFF_MS = 1000


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


def batch(base_offset: int, count: int, epoch: int) -> bytes:
    return encode_batch(
        [NewRecord(b"k", b"v%d" % (base_offset + i)) for i in range(count)],
        base_offset=base_offset,
        partition_leader_epoch=epoch,
        now_ms=NOW,
    )


def follower(tmp_path: Path, clock: ManualClock, *epochs: tuple[int, int]) -> Partition:
    """A follower of LEADER whose log holds ``(count, epoch)`` runs of records, as copied from
    earlier leaders, now following LEADER in an epoch above them all."""
    log = PartitionLog.open(tmp_path / "t-0", LogConfig(), clock)
    p = Partition("t", 0, log, local_id=LOCAL, clock=clock)
    p.make_follower(LEADER, 0, (LOCAL, LEADER), (LOCAL, LEADER))
    offset = 0
    for count, epoch in epochs:
        p.append_as_follower(batch(offset, count, epoch))
        offset += count
    p.make_follower(LEADER, 9, (LOCAL, LEADER), (LOCAL, LEADER))
    return p


class Checkpoints:
    def __init__(self) -> None:
        self.count = 0

    def __call__(self) -> None:
        self.count += 1


def core_for(p: Partition, checkpoint: Checkpoints | None = None) -> FetcherCore:
    config = FetcherConfig(local_id=LOCAL, backoff_ms=BACKOFF_MS)
    core = FetcherCore(LEADER, config, checkpoint or Checkpoints())
    core.add(p)
    return core


def request_of(core: FetcherCore, clock: ManualClock) -> LeaderRequest:
    step = core.poll(clock.monotonic_ms())
    assert isinstance(step, LeaderRequest), step
    return step


def partition_fields(request: LeaderRequest) -> dict[str, Any]:
    (topic,) = request.fields["topics"]
    (fields,) = topic["partitions"]
    return dict(fields)


def epoch_answer(epoch: int, end_offset: int, error: ErrorCode = ErrorCode.none) -> Any:
    return build(
        response_schema(OFFSET_FOR_LEADER_EPOCH, 4),
        topics=[
            {
                "topic": "t",
                "partitions": [
                    {
                        "error_code": error,
                        "partition": 0,
                        "leader_epoch": epoch,
                        "end_offset": end_offset,
                    }
                ],
            }
        ],
    )


def fetch_answer(
    records: bytes | None = None,
    *,
    high_watermark: int = 0,
    log_start: int = 0,
    error: ErrorCode = ErrorCode.none,
) -> Any:
    return build(
        response_schema(FETCH, 12),
        error_code=ErrorCode.none,
        responses=[
            {
                "topic": "t",
                "partitions": [
                    {
                        "partition_index": 0,
                        "error_code": error,
                        "high_watermark": high_watermark,
                        "last_stable_offset": high_watermark,
                        "log_start_offset": log_start,
                        "records": records,
                    }
                ],
            }
        ],
    )


def log_start_answer(offset: int) -> Any:
    return build(
        response_schema(LIST_OFFSETS, 7),
        topics=[
            {
                "name": "t",
                "partitions": [{"partition_index": 0, "error_code": 0, "offset": offset}],
            }
        ],
    )


def test_an_empty_log_has_nothing_to_compare_and_fetches_from_zero(
    tmp_path: Path, clock: ManualClock
) -> None:
    core = core_for(follower(tmp_path, clock), Checkpoints())
    request = request_of(core, clock)
    assert request.api_key == FETCH
    assert request.fields["replica_id"] == LOCAL
    assert partition_fields(request)["fetch_offset"] == 0
    assert partition_fields(request)["current_leader_epoch"] == 9


def test_records_past_the_leaders_end_of_their_epoch_are_cut_before_fetching(
    tmp_path: Path, clock: ManualClock
) -> None:
    # KIP-101: offsets 0-4 in epoch 0 and 5-7 in epoch 1, which the new leader never got (its
    # epoch 0 ends at 5); the high watermark (0 here) plays no part.
    p = follower(tmp_path, clock, (5, 0), (3, 1))
    checkpoints = Checkpoints()
    core = core_for(p, checkpoints)
    asked = request_of(core, clock)
    assert asked.api_key == OFFSET_FOR_LEADER_EPOCH
    assert partition_fields(asked) == {"partition": 0, "current_leader_epoch": 9, "leader_epoch": 1}
    core.received(asked, epoch_answer(0, 5), clock.monotonic_ms())
    assert p.log.log_end_offset == 5
    assert checkpoints.count == 1
    assert not core.truncating(("t", 0))
    fetch = request_of(core, clock)
    assert fetch.api_key == FETCH
    assert partition_fields(fetch)["fetch_offset"] == 5


def test_an_epoch_the_follower_lacks_is_asked_about_again(
    tmp_path: Path, clock: ManualClock
) -> None:
    # KIP-279: the follower has epochs 0 (0-4) and 2 (5-7); the leader's largest epoch up to 2
    # is 1, ending at 7. The follower's largest epoch below 1 is 0, ending at 5: cut there and
    # ask about epoch 0, whose end on the leader is also 5.
    p = follower(tmp_path, clock, (5, 0), (3, 2))
    core = core_for(p)
    first = request_of(core, clock)
    assert partition_fields(first)["leader_epoch"] == 2
    core.received(first, epoch_answer(1, 7), clock.monotonic_ms())
    assert p.log.log_end_offset == 5
    assert core.truncating(("t", 0))
    second = request_of(core, clock)
    assert second.api_key == OFFSET_FOR_LEADER_EPOCH
    assert partition_fields(second)["leader_epoch"] == 0
    core.received(second, epoch_answer(0, 5), clock.monotonic_ms())
    assert p.log.log_end_offset == 5
    assert not core.truncating(("t", 0))
    assert request_of(core, clock).api_key == FETCH


def test_a_follower_behind_the_leader_keeps_its_log(tmp_path: Path, clock: ManualClock) -> None:
    p = follower(tmp_path, clock, (4, 3))
    checkpoints = Checkpoints()
    core = core_for(p, checkpoints)
    core.received(request_of(core, clock), epoch_answer(3, 10), clock.monotonic_ms())
    assert p.log.log_end_offset == 4
    assert checkpoints.count == 0  # nothing was cut: nothing to checkpoint first
    assert partition_fields(request_of(core, clock))["fetch_offset"] == 4


def test_fetched_batches_are_appended_as_they_are_with_the_leaders_high_watermark(
    tmp_path: Path, clock: ManualClock
) -> None:
    p = follower(tmp_path, clock)
    core = core_for(p)
    fetch = request_of(core, clock)
    core.received(fetch, fetch_answer(batch(0, 3, 7), high_watermark=2), clock.monotonic_ms())
    assert p.log.log_end_offset == 3
    assert p.high_watermark == 2
    assert p.log.latest_epoch == 7
    assert partition_fields(request_of(core, clock))["fetch_offset"] == 3


def test_an_answer_for_an_offset_the_log_has_moved_from_is_dropped(
    tmp_path: Path, clock: ManualClock
) -> None:
    p = follower(tmp_path, clock)
    core = core_for(p)
    fetch = request_of(core, clock)
    p.append_as_follower(batch(0, 2, 7))  # the log moved on while the fetch was out
    core.received(fetch, fetch_answer(batch(0, 3, 7), high_watermark=3), clock.monotonic_ms())
    assert p.log.log_end_offset == 2


def test_a_partition_removed_while_asked_about_is_left_alone(
    tmp_path: Path, clock: ManualClock
) -> None:
    p = follower(tmp_path, clock, (5, 0), (3, 1))
    core = core_for(p)
    asked = request_of(core, clock)
    core.remove("t", 0)
    core.received(asked, epoch_answer(0, 5), clock.monotonic_ms())
    assert p.log.log_end_offset == 8
    assert core.poll(clock.monotonic_ms()) == Wait(None)


@pytest.mark.parametrize(
    "error",
    [
        ErrorCode.not_leader_or_follower,
        ErrorCode.fenced_leader_epoch,
        ErrorCode.unknown_leader_epoch,
        ErrorCode.unknown_topic_or_partition,
        ErrorCode.kafka_storage_error,
    ],
)
def test_a_leader_that_is_not_ready_is_asked_again_after_the_backoff(
    tmp_path: Path, clock: ManualClock, error: ErrorCode
) -> None:
    p = follower(tmp_path, clock)
    core = core_for(p)
    core.received(request_of(core, clock), fetch_answer(error=error), clock.monotonic_ms())
    assert core.poll(clock.monotonic_ms()) == Wait(clock.monotonic_ms() + BACKOFF_MS)
    clock.advance(BACKOFF_MS - 1)
    assert isinstance(core.poll(clock.monotonic_ms()), Wait)
    clock.advance(1)
    assert request_of(core, clock).api_key == FETCH


def test_a_refused_epoch_question_backs_off_and_is_asked_again(
    tmp_path: Path, clock: ManualClock
) -> None:
    p = follower(tmp_path, clock, (2, 0))
    core = core_for(p)
    answer = epoch_answer(-1, -1, ErrorCode.fenced_leader_epoch)
    core.received(request_of(core, clock), answer, clock.monotonic_ms())
    assert p.log.log_end_offset == 2
    assert isinstance(core.poll(clock.monotonic_ms()), Wait)
    clock.advance(BACKOFF_MS)
    assert request_of(core, clock).api_key == OFFSET_FOR_LEADER_EPOCH


def test_a_log_that_ends_before_the_leaders_start_starts_afresh_there(
    tmp_path: Path, clock: ManualClock
) -> None:
    p = follower(tmp_path, clock, (3, 0))
    checkpoints = Checkpoints()
    core = core_for(p, checkpoints)
    core.received(request_of(core, clock), epoch_answer(0, 3), clock.monotonic_ms())
    fetch = request_of(core, clock)
    core.received(fetch, fetch_answer(error=ErrorCode.offset_out_of_range), clock.monotonic_ms())
    asked = request_of(core, clock)
    assert asked.api_key == LIST_OFFSETS
    assert asked.fields["topics"][0]["partitions"][0]["timestamp"] == -2  # the earliest
    core.received(asked, log_start_answer(100), clock.monotonic_ms())
    assert (p.log.log_start_offset, p.log.log_end_offset) == (100, 100)
    assert checkpoints.count == 1
    assert partition_fields(request_of(core, clock))["fetch_offset"] == 100


def test_an_offset_past_the_leaders_end_goes_back_to_truncation(
    tmp_path: Path, clock: ManualClock
) -> None:
    p = follower(tmp_path, clock, (3, 0))
    core = core_for(p)
    core.received(request_of(core, clock), epoch_answer(0, 3), clock.monotonic_ms())
    fetch = request_of(core, clock)
    core.received(fetch, fetch_answer(error=ErrorCode.offset_out_of_range), clock.monotonic_ms())
    core.received(request_of(core, clock), log_start_answer(0), clock.monotonic_ms())
    assert p.log.log_end_offset == 3
    assert core.truncating(("t", 0))
    assert request_of(core, clock).api_key == OFFSET_FOR_LEADER_EPOCH


def test_the_leaders_log_start_moves_the_followers(tmp_path: Path, clock: ManualClock) -> None:
    p = follower(tmp_path, clock)
    core = core_for(p)
    answer = fetch_answer(batch(0, 4, 7), high_watermark=4, log_start=2)
    core.received(request_of(core, clock), answer, clock.monotonic_ms())
    assert (p.log.log_start_offset, p.log.log_end_offset) == (2, 4)


def test_batches_behind_the_log_end_send_the_partition_back_to_truncation(
    tmp_path: Path, clock: ManualClock
) -> None:
    p = follower(tmp_path, clock, (3, 0))
    core = core_for(p)
    core.received(request_of(core, clock), epoch_answer(0, 3), clock.monotonic_ms())
    fetch = request_of(core, clock)
    core.received(fetch, fetch_answer(batch(1, 4, 7), high_watermark=5), clock.monotonic_ms())
    assert p.log.log_end_offset == 3
    assert core.truncating(("t", 0))
    assert request_of(core, clock).api_key == OFFSET_FOR_LEADER_EPOCH


def test_a_compacted_gap_in_the_leaders_log_is_taken_as_it_is(
    tmp_path: Path, clock: ManualClock
) -> None:
    p = follower(tmp_path, clock)
    core = core_for(p)
    fetch = request_of(core, clock)
    core.received(fetch, fetch_answer(batch(5, 1, 7), high_watermark=6), clock.monotonic_ms())
    assert p.log.log_end_offset == 6
    assert not core.truncating(("t", 0))


def test_no_partition_means_waiting_until_one_is_added(tmp_path: Path, clock: ManualClock) -> None:
    p = follower(tmp_path, clock)
    core = FetcherCore(LEADER, FetcherConfig(local_id=LOCAL), Checkpoints())
    assert core.poll(clock.monotonic_ms()) == Wait(None)
    core.add(p)
    assert request_of(core, clock).api_key == FETCH


def test_a_partition_has_kafkas_fetcher_id() -> None:
    # Java: Utils.abs(31 * "test".hashCode() + partition) % 3, "test".hashCode() == 3556498.
    assert [fetcher_id("test", p, 3) for p in range(4)] == [1, 2, 0, 1]
    # A hash past Integer.MAX_VALUE wraps negative in Java before its absolute value is taken:
    # "orders".hashCode() == -1008770331, 31 * it + 2 wraps to -1207109187.
    assert fetcher_id("orders", 2, 5) == 1207109187 % 5
    assert fetcher_id("anything", 7, 1) == 0


def test_a_stale_answer_does_not_hold_back_a_partition_added_again(
    tmp_path: Path, clock: ManualClock
) -> None:
    # A fetch goes out in the old leader epoch; the new epoch arrives (the partition is added
    # again, to find its divergence point) before the leader's FENCED_LEADER_EPOCH answer. The
    # answer is about the old epoch: the partition goes on without waiting out the backoff.
    p = follower(tmp_path, clock)
    core = core_for(p)
    old_epoch_fetch = request_of(core, clock)
    assert old_epoch_fetch.api_key == FETCH
    p.make_follower(LEADER, 10, (LOCAL, LEADER), (LOCAL, LEADER))
    core.add(p)
    answer = fetch_answer(error=ErrorCode.fenced_leader_epoch)
    core.received(old_epoch_fetch, answer, clock.monotonic_ms())
    assert core.delayed_until(("t", 0)) is None
    assert request_of(core, clock).api_key == FETCH  # an empty log: nothing to compare


def test_a_stale_answer_does_not_append_to_a_partition_added_again(
    tmp_path: Path, clock: ManualClock
) -> None:
    p = follower(tmp_path, clock, (2, 0))
    core = core_for(p)
    core.received(request_of(core, clock), epoch_answer(0, 2), clock.monotonic_ms())
    fetch = request_of(core, clock)
    assert fetch.api_key == FETCH
    p.make_follower(LEADER, 10, (LOCAL, LEADER), (LOCAL, LEADER))
    core.add(p)
    core.received(fetch, fetch_answer(batch(2, 3, 9), high_watermark=5), clock.monotonic_ms())
    assert p.log.log_end_offset == 2
    assert core.truncating(("t", 0))
    assert request_of(core, clock).api_key == OFFSET_FOR_LEADER_EPOCH


# -- a second fetch out while far behind ---------------------------------------------------------


def followers(tmp_path: Path, clock: ManualClock, count: int) -> list[Partition]:
    """``count`` partitions of topic t with empty logs, following LEADER."""
    found = []
    for index in range(count):
        log = PartitionLog.open(tmp_path / f"t-{index}", LogConfig(), clock)
        p = Partition("t", index, log, local_id=LOCAL, clock=clock)
        p.make_follower(LEADER, 9, (LOCAL, LEADER), (LOCAL, LEADER))
        found.append(p)
    return found


def core_of(partitions: list[Partition]) -> FetcherCore:
    core = FetcherCore(LEADER, FetcherConfig(local_id=LOCAL, backoff_ms=BACKOFF_MS), Checkpoints())
    for p in partitions:
        core.add(p)
    return core


def answer_for(
    request: LeaderRequest, count: int, high_watermark: int, **by_index: tuple[int, int]
) -> Any:
    """``count`` records from each asked partition's fetch offset, and the leader's high
    watermark; ``p<index>=(count, high watermark)`` for a partition answered otherwise."""
    partitions = []
    for (_, index), (_, offset) in request.asked.items():
        records, hw = by_index.get(f"p{index}", (count, high_watermark))
        partitions.append(
            {
                "partition_index": index,
                "error_code": ErrorCode.none,
                "high_watermark": hw,
                "last_stable_offset": hw,
                "log_start_offset": 0,
                "records": batch(offset, records, 9) if records else None,
            }
        )
    return build(
        response_schema(FETCH, 12),
        error_code=ErrorCode.none,
        responses=[{"topic": "t", "partitions": partitions}],
    )


def asked_indexes(request: LeaderRequest) -> list[int]:
    return sorted(index for _, index in request.asked)


def fetch_offsets(request: LeaderRequest) -> dict[int, int]:
    (topic,) = request.fields["topics"]
    return {p["partition"]: p["fetch_offset"] for p in topic["partitions"]}


def max_wait_ms(request: LeaderRequest) -> float:
    return float(request.fields["max_wait"].total_seconds() * 1000)


def both_out(core: FetcherCore, clock: ManualClock) -> tuple[LeaderRequest, LeaderRequest]:
    """The next fetch and the one beside it, both sent (partitions known to be behind)."""
    one = request_of(core, clock)
    core.sent(one)
    two = core.poll_beside(clock.monotonic_ms())
    assert two is not None
    core.sent(two)
    return one, two


def test_partitions_far_behind_are_fetched_in_two_requests_out_at_once(
    tmp_path: Path, clock: ManualClock
) -> None:
    ps = followers(tmp_path, clock, 3)
    core = core_of(ps)
    now = clock.monotonic_ms()
    first = request_of(core, clock)
    assert asked_indexes(first) == [0, 1, 2]
    assert max_wait_ms(first) == FetcherConfig(local_id=LOCAL).max_wait_ms
    core.sent(first)
    assert core.poll_beside(now) is None  # nothing is known to be behind yet
    core.received(first, answer_for(first, 2, high_watermark=100), now)
    assert [p.log.log_end_offset for p in ps] == [2, 2, 2]

    # Behind: half of the partitions in one fetch, the rest in a second beside it, neither
    # waiting at the leader (the connection answers in order).
    one, two = both_out(core, clock)
    assert asked_indexes(one) == [0]
    assert asked_indexes(two) == [1, 2]
    assert max_wait_ms(one) == max_wait_ms(two) == 0
    # Each fetch reports the log ends as written, and no partition is asked about twice.
    assert fetch_offsets(one) == {0: 2}
    assert fetch_offsets(two) == {1: 2, 2: 2}
    assert core.poll_beside(now) is None

    core.received(one, answer_for(one, 3, high_watermark=100), now)
    again = core.poll_beside(now)
    assert again is not None
    assert fetch_offsets(again) == {0: 5}


def test_caught_up_partitions_go_back_to_one_long_poll(tmp_path: Path, clock: ManualClock) -> None:
    ps = followers(tmp_path, clock, 2)
    core = core_of(ps)
    now = clock.monotonic_ms()
    first = request_of(core, clock)
    core.received(first, answer_for(first, 2, high_watermark=100), now)
    one, two = both_out(core, clock)
    core.received(one, answer_for(one, 2, high_watermark=4), now)
    core.received(two, answer_for(two, 2, high_watermark=4), now)
    assert [p.log.log_end_offset for p in ps] == [4, 4]
    assert [p.high_watermark for p in ps] == [4, 4]

    last = request_of(core, clock)
    assert asked_indexes(last) == [0, 1]
    assert max_wait_ms(last) == FetcherConfig(local_id=LOCAL).max_wait_ms
    core.sent(last)
    assert core.poll_beside(now) is None


def test_one_partition_behind_has_one_fetch_out(tmp_path: Path, clock: ManualClock) -> None:
    ps = followers(tmp_path, clock, 2)
    core = core_of(ps)
    now = clock.monotonic_ms()
    first = request_of(core, clock)
    core.received(first, answer_for(first, 2, high_watermark=100, p1=(2, 2)), now)
    assert [p.log.log_end_offset for p in ps] == [2, 2]
    fetch = request_of(core, clock)
    assert asked_indexes(fetch) == [0, 1]
    assert max_wait_ms(fetch) == FetcherConfig(local_id=LOCAL).max_wait_ms
    core.sent(fetch)
    assert core.poll_beside(now) is None


def test_partitions_of_a_request_given_up_are_asked_about_again(
    tmp_path: Path, clock: ManualClock
) -> None:
    ps = followers(tmp_path, clock, 2)
    core = core_of(ps)
    first = request_of(core, clock)
    core.sent(first)
    assert core.poll(clock.monotonic_ms()) == Wait(None)  # each partition is out already
    core.abandoned(first)
    assert asked_indexes(request_of(core, clock)) == [0, 1]


def test_a_partition_answered_without_records_waits_at_the_leader_again(
    tmp_path: Path, clock: ManualClock
) -> None:
    # A leader whose replication quota is exceeded answers a throttled partition with no
    # records at once: fetches without a wait would ask again at once, round after round.
    ps = followers(tmp_path, clock, 2)
    core = core_of(ps)
    now = clock.monotonic_ms()
    first = request_of(core, clock)
    core.received(first, answer_for(first, 2, high_watermark=100), now)
    one, two = both_out(core, clock)
    core.received(one, answer_for(one, 0, high_watermark=100), now)
    core.received(two, answer_for(two, 0, high_watermark=100), now)
    fetch = request_of(core, clock)
    assert asked_indexes(fetch) == [0, 1]
    assert max_wait_ms(fetch) == FetcherConfig(local_id=LOCAL).max_wait_ms
    core.sent(fetch)
    assert core.poll_beside(now) is None


# -- the fetch session (KIP-227) -----------------------------------------------------------------

SESSION = 77
MAX_WAIT_MS = FetcherConfig(local_id=LOCAL).max_wait_ms


def session_answer(
    request: LeaderRequest,
    session_id: int,
    answers: dict[int, tuple[int, int] | ErrorCode],
    error: ErrorCode = ErrorCode.none,
) -> Any:
    """The leader's answer with ``session_id``: for each index in ``answers``, (records from
    its fetch offset, high watermark) or an error; the other partitions left out."""
    partitions = []
    for (_, index), (_, offset) in request.asked.items():
        answer = answers.get(index)
        if answer is None:
            continue
        code, (records, hw) = (answer, (0, -1)) if isinstance(answer, ErrorCode) else (0, answer)
        partitions.append(
            {
                "partition_index": index,
                "error_code": code,
                "high_watermark": hw,
                "last_stable_offset": hw,
                "log_start_offset": 0,
                "records": batch(offset, records, 9) if records else None,
            }
        )
    return build(
        response_schema(FETCH, 12),
        error_code=error,
        session_id=session_id,
        responses=[{"topic": "t", "partitions": partitions}] if partitions else [],
    )


def session_of(request: LeaderRequest) -> tuple[int, int]:
    return request.fields["session_id"], request.fields["session_epoch"]


def listed(request: LeaderRequest) -> dict[int, int]:
    """The partitions the request lists, with their fetch offsets."""
    return {
        p["partition"]: p["fetch_offset"] for t in request.fields["topics"] for p in t["partitions"]
    }


def forgotten(request: LeaderRequest) -> list[int]:
    return [i for t in request.fields["forgotten_topics_data"] for i in t["partitions"]]


def send(core: FetcherCore, clock: ManualClock) -> LeaderRequest:
    request = request_of(core, clock)
    core.sent(request)
    return request


def in_session(tmp_path: Path, clock: ManualClock, count: int) -> FetcherCore:
    """A core with ``count`` caught-up partitions whose first, full fetch opened SESSION."""
    ps = followers(tmp_path, clock, count)
    core = core_of(ps)
    full = send(core, clock)
    answer = session_answer(full, SESSION, dict.fromkeys(range(count), (0, 0)))
    core.received(full, answer, clock.monotonic_ms())
    return core


def test_fetches_after_the_first_list_only_what_moved(tmp_path: Path, clock: ManualClock) -> None:
    ps = followers(tmp_path, clock, 3)
    core = core_of(ps)
    now = clock.monotonic_ms()
    full = send(core, clock)
    assert session_of(full) == (0, 0)  # asks for a session
    assert listed(full) == {0: 0, 1: 0, 2: 0}
    assert core.poll_beside(now) is None  # the fetch in the session has every partition
    core.received(full, session_answer(full, SESSION, {0: (2, 2), 1: (0, 0), 2: (0, 0)}), now)

    second = send(core, clock)
    assert session_of(second) == (SESSION, 1)
    assert listed(second) == {0: 2}
    assert forgotten(second) == []
    # The leader reads every partition of the session: all are asked about, and in flight.
    assert {tp[1]: offset for tp, (_, offset) in second.asked.items()} == {0: 2, 1: 0, 2: 0}
    assert max_wait_ms(second) == MAX_WAIT_MS
    assert core.poll(now) == Wait(None)
    core.received(second, session_answer(second, SESSION, {1: (1, 1)}), now)
    assert [p.log.log_end_offset for p in ps] == [2, 1, 0]

    third = send(core, clock)
    assert session_of(third) == (SESSION, 2)
    assert listed(third) == {1: 1}
    core.received(third, session_answer(third, SESSION, {}), now)
    assert (session_of(request_of(core, clock)), listed(request_of(core, clock))) == (
        (SESSION, 3),
        {},
    )


def test_a_partition_backing_off_or_removed_is_forgotten(
    tmp_path: Path, clock: ManualClock
) -> None:
    core = in_session(tmp_path, clock, 3)
    now = clock.monotonic_ms()
    second = send(core, clock)
    core.received(
        second, session_answer(second, SESSION, {2: ErrorCode.not_leader_or_follower}), now
    )
    core.remove("t", 1)
    third = send(core, clock)
    assert session_of(third) == (SESSION, 2)
    assert asked_indexes(third) == [0]
    assert (listed(third), forgotten(third)) == ({}, [1, 2])
    core.received(third, session_answer(third, SESSION, {}), now)
    clock.advance(BACKOFF_MS)
    fourth = request_of(core, clock)
    assert (listed(fourth), forgotten(fourth)) == ({2: 0}, [])  # new to the session again
    assert asked_indexes(fourth) == [0, 2]


@pytest.mark.parametrize(
    ("error", "session_id"),
    [
        (ErrorCode.fetch_session_id_not_found, 0),
        # The old id goes with the full fetch, so that the leader frees its slot.
        (ErrorCode.invalid_fetch_session_epoch, SESSION),
    ],
)
def test_a_session_the_leader_refuses_is_started_again_at_once(
    tmp_path: Path, clock: ManualClock, error: ErrorCode, session_id: int
) -> None:
    core = in_session(tmp_path, clock, 2)
    second = send(core, clock)
    core.received(second, session_answer(second, 0, {}, error=error), clock.monotonic_ms())
    assert core.delayed_until(("t", 0)) is None and core.delayed_until(("t", 1)) is None
    full = request_of(core, clock)
    assert session_of(full) == (session_id, 0)
    assert listed(full) == {0: 0, 1: 0}


def test_another_error_restarts_the_session_after_the_backoff(
    tmp_path: Path, clock: ManualClock
) -> None:
    core = in_session(tmp_path, clock, 1)
    second = send(core, clock)
    answer = session_answer(second, 0, {}, error=ErrorCode.unknown_server_error)
    core.received(second, answer, clock.monotonic_ms())
    assert core.poll(clock.monotonic_ms()) == Wait(clock.monotonic_ms() + BACKOFF_MS)
    clock.advance(BACKOFF_MS)
    assert session_of(request_of(core, clock)) == (SESSION, 0)


def test_a_lost_connection_restarts_the_session(tmp_path: Path, clock: ManualClock) -> None:
    core = in_session(tmp_path, clock, 2)
    core.abandoned(send(core, clock))
    full = request_of(core, clock)
    assert session_of(full) == (SESSION, 0)
    assert listed(full) == {0: 0, 1: 0}


def test_a_leader_without_room_for_a_session_gets_full_fetches(
    tmp_path: Path, clock: ManualClock
) -> None:
    ps = followers(tmp_path, clock, 2)
    core = core_of(ps)
    for _ in range(2):
        full = send(core, clock)
        assert session_of(full) == (0, 0)
        assert listed(full) == {0: 0, 1: 0}
        core.received(full, session_answer(full, 0, {0: (0, 0), 1: (0, 0)}), clock.monotonic_ms())


def test_a_partition_left_out_is_not_behind(tmp_path: Path, clock: ManualClock) -> None:
    # A leader holding a throttled partition back has nothing new for it: left out, it counts
    # as answered without records, and one partition behind gets no second fetch.
    ps = followers(tmp_path, clock, 3)
    core = core_of(ps)
    now = clock.monotonic_ms()
    full = send(core, clock)
    core.received(full, session_answer(full, SESSION, {0: (2, 100), 1: (0, 0), 2: (0, 0)}), now)
    second = send(core, clock)
    core.received(second, session_answer(second, SESSION, {1: (2, 100)}), now)
    third = request_of(core, clock)
    assert session_of(third) == (SESSION, 2)
    assert asked_indexes(third) == [0, 1, 2]
    assert max_wait_ms(third) == MAX_WAIT_MS


def test_two_fetches_out_while_behind_go_without_the_session(
    tmp_path: Path, clock: ManualClock
) -> None:
    ps = followers(tmp_path, clock, 2)
    core = core_of(ps)
    now = clock.monotonic_ms()
    full = send(core, clock)
    core.received(full, session_answer(full, SESSION, {0: (2, 100), 1: (2, 100)}), now)
    one, two = both_out(core, clock)
    assert session_of(one) == session_of(two) == (0, -1)
    assert (listed(one), listed(two)) == ({0: 2}, {1: 2})
    assert forgotten(one) == forgotten(two) == []
    core.received(one, answer_for(one, 2, high_watermark=4), now)
    core.received(two, answer_for(two, 2, high_watermark=4), now)
    # Caught up: back in the session, which has not moved meanwhile; both offsets did.
    back = request_of(core, clock)
    assert session_of(back) == (SESSION, 1)
    assert listed(back) == {0: 4, 1: 4}


def test_nothing_goes_beside_a_fetch_in_the_session(tmp_path: Path, clock: ManualClock) -> None:
    # Partition 1 backs off while behind; ready again while the session's long poll is out,
    # it waits for that answer rather than going in a fetch of its own.
    ps = followers(tmp_path, clock, 2)
    core = core_of(ps)
    now = clock.monotonic_ms()
    full = send(core, clock)
    core.received(full, session_answer(full, SESSION, {0: (2, 100), 1: (2, 100)}), now)
    one, two = both_out(core, clock)
    core.received(one, answer_for(one, 2, high_watermark=100), now)
    core.received(two, session_answer(two, 0, {1: ErrorCode.not_leader_or_follower}), now)
    long_poll = send(core, clock)
    assert session_of(long_poll) == (SESSION, 1)
    assert (listed(long_poll), forgotten(long_poll)) == ({0: 4}, [1])
    clock.advance(BACKOFF_MS)
    assert core.poll_beside(clock.monotonic_ms()) is None
    core.received(long_poll, session_answer(long_poll, SESSION, {0: (0, 100)}), now)
    after = request_of(core, clock)
    assert session_of(after) == (SESSION, 2)
    assert (listed(after), forgotten(after)) == ({1: 2}, [])
