"""Share sessions with an injected clock: opening, epochs, adding and forgetting partitions,
closing, and the bound on how many are kept."""

from __future__ import annotations

import uuid

from odradek.clock import ManualClock
from odradek.protocol.errors import ErrorCode
from odradek.server.share_sessions import ShareSessionCache

T = uuid.uuid4()


def cache(max_sessions: int = 10, idle_ms: int = 1_000) -> tuple[ShareSessionCache, ManualClock]:
    clock = ManualClock()
    return ShareSessionCache(clock, max_sessions, idle_ms), clock


def test_a_session_opens_at_epoch_zero_and_then_counts_up() -> None:
    sessions, _ = cache()
    opened = sessions.fetch("g", "m", 0, [(T, 0), (T, 1)], [])
    assert opened.error == ErrorCode.none and opened.full
    assert opened.session is not None and list(opened.session.partitions) == [(T, 0), (T, 1)]
    assert sessions.fetch("g", "m", 2, [], []).error == ErrorCode.invalid_share_session_epoch
    assert sessions.fetch("g", "m", 1, [(T, 2)], [(T, 0)]).error == ErrorCode.none
    later = sessions.fetch("g", "m", 2, [], [])
    assert not later.full and later.session is not None
    assert list(later.session.partitions) == [(T, 1), (T, 2)]
    assert sessions.acknowledge("g", "m", 3).error == ErrorCode.none
    assert sessions.acknowledge("g", "m", 3).error == ErrorCode.invalid_share_session_epoch


def test_what_a_request_both_names_and_forgets_leaves_the_session() -> None:
    sessions, _ = cache()
    sessions.fetch("g", "m", 0, [(T, 0), (T, 1)], [])
    outcome = sessions.fetch("g", "m", 1, [(T, 0)], [(T, 0)])
    assert outcome.session is not None and list(outcome.session.partitions) == [(T, 1)]


def test_unknown_sessions_and_closing() -> None:
    sessions, _ = cache()
    assert sessions.fetch("g", "m", 1, [], []).error == ErrorCode.share_session_not_found
    assert sessions.acknowledge("g", "m", 0).error == ErrorCode.invalid_share_session_epoch
    sessions.fetch("g", "m", 0, [(T, 0)], [])
    closed = sessions.acknowledge("g", "m", -1)
    assert closed.closed and closed.session is not None
    assert sessions.get("g", "m") is None
    assert sessions.fetch("g", "m", -1, [], []).error == ErrorCode.share_session_not_found


def test_a_new_session_replaces_the_member_s_old_one() -> None:
    sessions, _ = cache()
    first = sessions.fetch("g", "m", 0, [(T, 0)], [])
    again = sessions.fetch("g", "m", 0, [(T, 1)], [])
    assert again.replaced is first.session and len(sessions) == 1


def test_the_cache_is_bounded_and_evicts_only_idle_sessions() -> None:
    sessions, clock = cache(max_sessions=2, idle_ms=1_000)
    sessions.fetch("g", "a", 0, [], [])
    sessions.fetch("g", "b", 0, [], [])
    assert sessions.fetch("g", "c", 0, [], []).error == ErrorCode.share_session_limit_reached
    clock.advance(1_000)
    sessions.fetch("g", "b", 1, [], [])  # b is used again: a is the idle one
    assert sessions.fetch("g", "c", 0, [], []).error == ErrorCode.none
    assert sessions.get("g", "a") is None and sessions.get("g", "b") is not None
    assert len(sessions) == 2
