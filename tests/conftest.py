"""Settings for the whole suite."""

from hypothesis import settings

# Property tests assert behaviour, not speed: on a 2-core machine shared with brokers, Spark
# and other tests, one example can take longer than Hypothesis' default 200 ms deadline, which
# would fail a test that found nothing wrong.
settings.register_profile("odradek", deadline=None)
settings.load_profile("odradek")
