"""The follower's side of a fetch session: which partitions each fetch lists and forgets, and
the epoch it carries."""

from __future__ import annotations

from odradek.cluster.replication.fetch_session import FollowerSession, SessionFetch
from odradek.protocol.errors import ErrorCode

A, B = ("t", 0), ("t", 1)


def answered(session: FollowerSession, fetch: SessionFetch, session_id: int = 5) -> None:
    session.sent(fetch)
    session.answered(fetch, ErrorCode.none, session_id)


def test_the_epoch_wraps_to_one_as_the_leaders_does() -> None:
    session = FollowerSession()
    answered(session, session.next_fetch({A: (0, 0, 1, 10)}))
    session.epoch = 2**31 - 1
    last = session.next_fetch({A: (0, 0, 1, 10)})
    assert last.epoch == 2**31 - 1
    answered(session, last)
    assert (session.session_id, session.epoch) == (5, 1)


def test_any_change_of_what_is_asked_lists_a_partition() -> None:
    session = FollowerSession()
    asked = (3, 1, 7, 10)
    answered(session, session.next_fetch({A: asked, B: asked}))
    for moved in [(4, 1, 7, 10), (3, 2, 7, 10), (3, 1, 8, 10), (3, 1, 7, 11)]:
        fetch = session.next_fetch({A: moved, B: asked})
        assert (fetch.listed, fetch.forgotten) == ([A], [])
    assert session.next_fetch({B: asked}).forgotten == [A]


def test_an_answer_to_a_fetch_given_up_on_changes_nothing() -> None:
    session = FollowerSession()
    answered(session, session.next_fetch({A: (0, 0, 1, 10)}))
    fetch = session.next_fetch({A: (1, 0, 1, 10)})
    session.sent(fetch)
    session.lost()
    session.answered(fetch, ErrorCode.none, 5)
    assert (session.session_id, session.epoch, session.out) == (5, 0, False)
    assert session.next_fetch({A: (1, 0, 1, 10)}).listed == [A]
