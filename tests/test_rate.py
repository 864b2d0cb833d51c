"""The windowed rate and Kafka's throttle time, by an injected clock."""

from __future__ import annotations

from odradek.clock import ManualClock
from odradek.rate import WindowedRate


def test_the_rate_spans_at_least_all_but_one_sample() -> None:
    clock = ManualClock()
    rate = WindowedRate(clock, samples=11, sample_ms=1000)
    rate.record(100)
    # One sample old: counted over ten seconds, not one, so a first burst is no spike.
    assert rate.rate() == 10.0
    clock.advance(20_000)
    rate.record(10)
    assert rate.rate() == 1.0  # the first sample has left the window


def test_the_throttle_time_brings_the_rate_back_to_its_bound() -> None:
    clock = ManualClock()
    rate = WindowedRate(clock, samples=2, sample_ms=1000)
    for _ in range(3):
        rate.record()
    # 3 per second over a one-second span against a bound of 2: wait half the span.
    assert rate.rate() == 3.0
    assert rate.throttle_ms(2) == 500
    assert rate.throttle_ms(3) == 0
    clock.advance(500)
    assert rate.throttle_ms(3) == 0
    # Holding back that long is enough: the three now spread over 1.5 s.
    assert rate.rate() == 2.0
