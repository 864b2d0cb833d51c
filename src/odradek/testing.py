"""Run a real odradek broker inside a test, the way users test Kafka applications without Docker.

``running_broker()`` starts a broker on a free port of 127.0.0.1 with a temporary data directory,
in a background thread with its own event loop, so synchronous clients (confluent-kafka,
kafka-python) and asyncio clients alike can use it from the test. The pytest fixture
``odradek_broker`` yields one per test; ``odradek_bootstrap`` is just its address.

``BrokerProcess`` runs ``odradek serve`` as a child process instead, for tests that kill it.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Coroutine, Iterator
from concurrent.futures import Future
from pathlib import Path
from typing import Any, TypeVar

import pytest

from odradek.clock import Clock
from odradek.config import BrokerConfig
from odradek.server.broker import Broker

T = TypeVar("T")

_START_TIMEOUT_S = 30


class RunningBroker:
    """A broker serving on its own thread; ``bootstrap`` is its ``host:port``."""

    def __init__(
        self, data_dir: Path, overrides: dict[str, str] | None = None, clock: Clock | None = None
    ) -> None:
        self.data_dir = data_dir
        self.overrides = dict(overrides or {})
        self.clock = clock
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self.broker: Broker | None = None
        self.port = 0

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> RunningBroker:
        props = {"log.dirs": str(self.data_dir), "listeners": f"PLAINTEXT://127.0.0.1:{self.port}"}
        props.update(self.overrides)
        started: Future[None] = Future()
        loop = asyncio.new_event_loop()
        self._loop = loop

        def run() -> None:
            asyncio.set_event_loop(loop)
            try:
                self.broker = Broker(BrokerConfig(props), self.clock)
                loop.run_until_complete(self.broker.start())
            except BaseException as e:
                started.set_exception(e)
                return
            self.port = self.broker.bound[1]
            started.set_result(None)
            loop.run_forever()

        self._thread = threading.Thread(target=run, name="odradek-broker", daemon=True)
        self._thread.start()
        started.result(timeout=_START_TIMEOUT_S)
        return self

    def call(self, coro: Coroutine[Any, Any, T], timeout: float = 30) -> T:
        """Run ``coro`` on the broker's loop and return its result (for looking inside)."""
        assert self._loop is not None
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout)

    def stop(self) -> None:
        """A clean shutdown, as SIGTERM gives."""
        if self._loop is None or self.broker is None:
            return
        self.call(self.broker.stop())
        self._loop.call_soon_threadsafe(self._loop.stop)
        assert self._thread is not None
        self._thread.join(timeout=10)
        self._loop.close()
        self._loop = None
        self.broker = None

    def restart(self) -> RunningBroker:
        """Stop cleanly and start again on the same port and data."""
        self.stop()
        return self.start()


@contextlib.contextmanager
def running_broker(
    data_dir: str | Path | None = None, clock: Clock | None = None, **overrides: str
) -> Iterator[RunningBroker]:
    """A broker for the duration of the block. Overrides use Kafka's names with ``_`` for ``.``:
    ``running_broker(num_partitions="3")`` sets ``num.partitions=3``."""
    own_dir = data_dir is None
    directory = Path(tempfile.mkdtemp(prefix="odradek-")) if own_dir else Path(data_dir or "")
    props = {key.replace("_", "."): value for key, value in overrides.items()}
    broker = RunningBroker(directory, props, clock).start()
    try:
        yield broker
    finally:
        broker.stop()
        if own_dir:
            shutil.rmtree(directory, ignore_errors=True)


class BrokerProcess:
    """``odradek serve`` as a child process on a free port, for crash and CLI tests."""

    def __init__(self, data_dir: Path, *extra_args: str, port: int = 0) -> None:
        self.data_dir = data_dir
        self.extra_args = extra_args
        self.port = port
        self.process: subprocess.Popen[str] | None = None
        self.output: list[str] = []

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> BrokerProcess:
        command = [
            sys.executable,
            "-m",
            "odradek",
            "serve",
            "--data-dir",
            str(self.data_dir),
            "--listen",
            f"127.0.0.1:{self.port}",
            *self.extra_args,
        ]
        self.process = subprocess.Popen(
            command,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        assert self.process.stdout is not None
        deadline = time.monotonic() + _START_TIMEOUT_S
        while time.monotonic() < deadline:
            line = self.process.stdout.readline()
            if not line:
                raise RuntimeError("broker exited before listening:\n" + "".join(self.output))
            self.output.append(line)
            found = re.search(r"listening on [^ ]+:(\d+)", line)
            if found:
                self.port = int(found.group(1))
                threading.Thread(target=self._drain, daemon=True).start()
                return self
        raise RuntimeError("broker did not start listening:\n" + "".join(self.output))

    def _drain(self) -> None:
        assert self.process is not None and self.process.stdout is not None
        for line in self.process.stdout:
            self.output.append(line)

    def kill(self) -> None:
        """kill -9: no shutdown work at all."""
        assert self.process is not None
        self.process.kill()
        self.process.wait()

    def terminate(self, timeout: float = 20) -> int:
        assert self.process is not None
        self.process.send_signal(signal.SIGTERM)
        return self.process.wait(timeout)


@pytest.fixture
def odradek_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningBroker]:
    """A fresh broker for one test, with ``auto.create.topics.enable`` on as Kafka's default."""
    with running_broker(tmp_path_factory.mktemp("odradek")) as broker:
        yield broker


@pytest.fixture
def odradek_bootstrap(odradek_broker: RunningBroker) -> str:
    return odradek_broker.bootstrap
