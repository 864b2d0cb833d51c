"""The slow link's delay line: every item held its delay, released in arrival order."""

from __future__ import annotations

import pytest

from odradek.torture.delay import DelayLine


def test_nothing_is_due_before_its_delay() -> None:
    line: DelayLine[str] = DelayLine(0.2)
    line.hold("a", now=10.0)
    assert line.due(10.19) == []
    assert line.due(10.2) == ["a"]
    assert len(line) == 0


def test_items_leave_in_the_order_they_came() -> None:
    line: DelayLine[int] = DelayLine(0.1)
    for n, at in enumerate((1.0, 1.0, 1.05, 1.2)):
        line.hold(n, now=at)
    assert line.due(1.16) == [0, 1, 2]
    assert line.due(1.3) == [3]


def test_the_wait_is_until_the_oldest_is_due() -> None:
    line: DelayLine[str] = DelayLine(0.3)
    assert line.wait_s(5.0) is None
    line.hold("a", now=5.0)
    line.hold("b", now=5.1)
    assert line.wait_s(5.1) == pytest.approx(0.2)
    assert line.wait_s(6.0) == 0.0


def test_everything_held_can_be_let_go_at_once() -> None:
    line: DelayLine[str] = DelayLine(10)
    line.hold("a", now=0)
    line.hold("b", now=1)
    assert line.release_all() == ["a", "b"]
    assert line.due(100) == []


def test_a_negative_delay_is_refused() -> None:
    with pytest.raises(ValueError):
        DelayLine(-1)
