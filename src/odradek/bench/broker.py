"""A broker under test: ``python -m odradek serve`` as a child process of the harness.

A child process rather than the in-process broker of :mod:`odradek.testing`, so that the broker has
a core and a GIL of its own and can be killed with SIGKILL. Unlike the test helper it timestamps its
start (spawn → "listening" line) for the recovery scenario, reports its resident memory, and needs
no pytest.
"""

from __future__ import annotations

import collections
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Protocol

START_TIMEOUT_S = 600.0  # recovering a large unflushed log takes a while
_LISTENING = re.compile(r"listening on [^ ]+:(\d+)")


def rss_bytes(pid: int) -> int | None:
    """Resident set size of a local process (VmRSS of /proc/<pid>/status), None if unknown."""
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


class BrokerFailed(RuntimeError):
    """The broker exited or never said it was listening."""


class BrokerProcess(Protocol):
    """What the scenarios need of a broker process the harness started: odradek's
    :class:`ChildBroker` or a peer broker of :mod:`odradek.bench.peer`."""

    spawned_at: float  # time.monotonic() of the latest spawn

    @property
    def bootstrap(self) -> str: ...

    @property
    def pid(self) -> int: ...

    def spawn(self) -> None: ...

    def start(self) -> float: ...

    def output(self) -> str: ...

    def rss(self) -> int | None: ...

    def alive(self) -> bool: ...

    def kill(self) -> None: ...

    def stop(self, timeout: float = 60) -> None: ...


class ClusterBroker(Protocol):
    """What the cluster scenarios that a peer runs too need of one broker of a cluster."""

    @property
    def bootstrap(self) -> str: ...

    @property
    def process(self) -> subprocess.Popen[str] | None: ...


class BrokerCluster(Protocol):
    """A cluster under test, as the throughput and latency scenarios of
    :mod:`odradek.bench.cluster` use it: odradek's :class:`~odradek.testing.RunningCluster`
    or Apache Kafka's :class:`~odradek.bench.peer.KafkaCluster`. Brokers by id, 1..3."""

    @property
    def brokers(self) -> Mapping[int, ClusterBroker]: ...

    @property
    def bootstrap(self) -> str: ...


class ChildBroker:
    """One broker process over ``data_dir``; restartable on the same port and data."""

    def __init__(self, data_dir: Path, overrides: tuple[str, ...] = (), port: int = 0) -> None:
        self.data_dir = data_dir
        self.overrides = overrides
        self.port = port
        self.process: subprocess.Popen[str] | None = None
        self.spawned_at = 0.0
        self.listening_at: float | None = None
        self._listening = threading.Event()
        self._tail: collections.deque[str] = collections.deque(maxlen=50)

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def pid(self) -> int:
        assert self.process is not None, "broker not started"
        return self.process.pid

    def command(self) -> list[str]:
        """The command line of the broker process (a peer broker's class gives its own)."""
        command = [sys.executable, "-m", "odradek", "serve", "--data-dir", str(self.data_dir)]
        command += ["--listen", f"127.0.0.1:{self.port}"]
        for override in self.overrides:
            command += ["-o", override]
        return command

    def spawn(self) -> None:
        """Start the process without waiting; :meth:`wait_listening` waits."""
        command = self.command()
        # A new event per process: the reader of a killed predecessor may still be at its EOF.
        listening = threading.Event()
        self._listening = listening
        self.listening_at = None
        self._tail.clear()
        self.spawned_at = time.monotonic()
        self.process = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        threading.Thread(
            target=self._read_output, args=(self.process, listening), daemon=True
        ).start()

    def _read_output(self, process: subprocess.Popen[str], listening: threading.Event) -> None:
        assert process.stdout is not None
        for line in process.stdout:
            if listening is not self._listening:
                continue  # a predecessor's last words
            self._tail.append(line)
            if not listening.is_set():
                found = _LISTENING.search(line)
                if found:
                    self.listening_at = time.monotonic()
                    self.port = int(found.group(1))
                    listening.set()
        listening.set()  # wake a waiter: the process has gone

    def wait_listening(self, timeout: float = START_TIMEOUT_S) -> float:
        """Seconds from spawn to the "listening" line."""
        assert self.process is not None
        if not self._listening.wait(timeout):
            raise BrokerFailed(f"broker not listening after {timeout:.0f} s:\n{self.output()}")
        if self.listening_at is None:
            self.process.wait(30)
            raise BrokerFailed(
                f"broker exited ({self.process.returncode}) before listening:\n{self.output()}"
            )
        return self.listening_at - self.spawned_at

    def start(self) -> float:
        self.spawn()
        return self.wait_listening()

    def output(self) -> str:
        return "".join(self._tail)

    def rss(self) -> int | None:
        return rss_bytes(self.pid) if self.alive() else None

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def kill(self) -> None:
        """SIGKILL: the broker does no shutdown work at all."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
        if self.process is not None:
            self.process.wait()

    def stop(self, timeout: float = 60) -> None:
        """SIGTERM, a clean shutdown; SIGKILL if it does not finish in ``timeout``."""
        if self.process is None or self.process.poll() is not None:
            return
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
