"""The coordinator's deadlines."""

from __future__ import annotations

from odradek.coordinator.common.timers import Timers


def test_fires_due_actions_in_deadline_order() -> None:
    timers = Timers()
    fired: list[str] = []
    timers.schedule("b", 20, lambda: fired.append("b"))
    timers.schedule("a", 10, lambda: fired.append("a"))
    timers.schedule("c", 30, lambda: fired.append("c"))
    assert timers.next_deadline() == 10
    assert timers.fire_due(25) == 2
    assert fired == ["a", "b"]
    assert timers.next_deadline() == 30


def test_rescheduling_replaces_and_cancel_removes() -> None:
    timers = Timers()
    fired: list[str] = []
    timers.schedule("a", 10, lambda: fired.append("first"))
    timers.schedule("a", 50, lambda: fired.append("second"))
    timers.schedule("b", 5, lambda: fired.append("b"))
    timers.cancel("b")
    assert timers.next_deadline() == 50
    assert timers.fire_due(49) == 0
    assert timers.fire_due(50) == 1
    assert fired == ["second"]
    assert timers.next_deadline() is None
    assert len(timers) == 0


def test_actions_may_schedule_more() -> None:
    timers = Timers()
    fired: list[int] = []

    def again() -> None:
        fired.append(len(fired))
        if len(fired) < 3:
            timers.schedule("x", 10 * (len(fired) + 1), again)

    timers.schedule("x", 10, again)
    timers.fire_due(100)
    assert fired == [0, 1, 2]


def test_an_earlier_deadline_is_announced() -> None:
    timers = Timers()
    calls: list[int] = []
    timers.on_earlier_deadline = lambda: calls.append(1)
    timers.schedule("a", 100, lambda: None)
    timers.schedule("b", 200, lambda: None)
    timers.schedule("c", 50, lambda: None)
    assert len(calls) == 2
