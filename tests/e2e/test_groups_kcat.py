"""Balanced consumers of ``kcat -G`` (librdkafka's C API) against a real odradek broker."""

from __future__ import annotations

import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator

import pytest

from odradek.testing import RunningBroker

from .groups_support import (
    HEARTBEAT_MS,
    SESSION_MS,
    describe,
    group_broker,
    partition_of,
    produce_everywhere,
    split_among,
    wait_until,
)

pytestmark = pytest.mark.skipif(shutil.which("kcat") is None, reason="kcat is not installed")


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningBroker]:
    yield from group_broker(tmp_path_factory.mktemp("groups-kcat"))


class Kcat:
    """``kcat -G group topic`` printing ``partition value`` lines, read by a thread."""

    def __init__(self, bootstrap: str, group: str, topic: str, name: str) -> None:
        self.name = name
        self.lines: list[tuple[int, bytes]] = []
        self.process = subprocess.Popen(
            [
                "kcat",
                "-b",
                bootstrap,
                "-G",
                group,
                "-f",
                "%p %s\\n",
                "-u",
                "-q",
                "-X",
                f"client.id={name}",
                "-X",
                f"session.timeout.ms={SESSION_MS}",
                "-X",
                f"heartbeat.interval.ms={HEARTBEAT_MS}",
                "-X",
                "auto.offset.reset=earliest",
                "-X",
                "auto.commit.interval.ms=100",
                topic,
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            partition, _, value = line.rstrip(b"\n").partition(b" ")
            self.lines.append((int(partition), value))

    def stop(self, sig: int = signal.SIGTERM) -> None:
        if self.process.poll() is None:
            self.process.send_signal(sig)
        self.process.wait(10)
        self._reader.join(5)


@pytest.fixture
def kcats() -> Iterator[Callable[..., Kcat]]:
    started: list[Kcat] = []

    def make(*args: str) -> Kcat:
        k = Kcat(*args)
        started.append(k)
        return k

    yield make
    for k in started:
        k.stop(signal.SIGKILL)


def test_two_kcats_split_six_partitions_and_a_killed_one_is_replaced(
    bootstrap: str, make_topic: Callable[..., str], topic_name: str, kcats: Callable[..., Kcat]
) -> None:
    topic = make_topic(topic_name, 6)
    group = f"kcat-{topic}"
    a, b = kcats(bootstrap, group, topic, "kcat-a"), kcats(bootstrap, group, topic, "kcat-b")
    wait_until(split_among(bootstrap, group, 2, topic), what="2 members")
    sent = produce_everywhere(bootstrap, topic, 5, prefix="one")
    wait_until(lambda: len(a.lines) + len(b.lines) >= len(sent), what="the records")
    time.sleep(0.3)  # a duplicate would arrive now
    assert sorted(v for _, v in a.lines + b.lines) == sorted(sent)
    parts_a, parts_b = {p for p, _ in a.lines}, {p for p, _ in b.lines}
    assert parts_a.isdisjoint(parts_b) and parts_a | parts_b == set(range(6))
    assert all(partition_of(v) == p for p, v in a.lines + b.lines)

    b.stop(signal.SIGKILL)
    killed = time.monotonic()
    wait_until(split_among(bootstrap, group, 1, topic), what="the survivor alone")
    assert time.monotonic() - killed >= SESSION_MS / 1000 * 0.8
    (member,) = describe(bootstrap, group).members
    assert member.client_id == "kcat-a"
    sent = produce_everywhere(bootstrap, topic, 2, prefix="two")
    # (b may not have committed what it read before it died: a may read some of that again.)
    wait_until(lambda: set(sent) <= {v for _, v in a.lines}, what="the survivor to read everything")


def test_kcat_commits_and_a_new_kcat_resumes(
    bootstrap: str, make_topic: Callable[..., str], topic_name: str, kcats: Callable[..., Kcat]
) -> None:
    topic = make_topic(topic_name, 6)
    group = f"kcat-resume-{topic}"
    sent = produce_everywhere(bootstrap, topic, 3)
    first = kcats(bootstrap, group, topic, "first")
    wait_until(lambda: len(first.lines) >= len(sent), what="the first kcat to read all")
    first.stop()  # commits what it read, and leaves the group
    committed = describe(bootstrap, group)
    assert committed.state == "Empty"
    assert sum(p.committed or 0 for p in committed.partitions) == len(sent)
    later = produce_everywhere(bootstrap, topic, 1, prefix="later")
    second = kcats(bootstrap, group, topic, "second")
    wait_until(lambda: len(second.lines) >= len(later), what="the second kcat")
    time.sleep(0.3)
    assert sorted(v for _, v in second.lines) == sorted(later)
    second.stop()
    assert all(p.lag == 0 for p in describe(bootstrap, group).partitions)
