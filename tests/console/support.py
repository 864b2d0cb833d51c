"""What the console tests share: a broker serving the console, data to look at, and the browser.

The browser is Debian's chromium, driven by ``drive.mjs`` (playwright-core, installed by
``scripts/setup.sh --test`` into ``tests/console/node_modules``). Screenshots go to the test's
temporary folder and are copied to ``test-output/console/<test>/`` (ignored by git) so that a
run leaves them where people look.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from odradek.client.admin import GroupAdmin, TopicPartition
from odradek.client.data import DataClient
from odradek.client.data import TopicPartition as DataPartition
from odradek.protocol.records import Header, NewRecord, encode_batch

HERE = Path(__file__).parent
REPO = HERE.parent.parent
CHROMIUM = Path("/usr/bin/chromium")
NODE = shutil.which("node")
DRIVE_TIMEOUT_S = 300
BASE_TIMESTAMP_MS = 1_700_000_000_000


def browser_missing() -> str | None:
    """Why the browser tests cannot run here (``scripts/setup.sh --test`` installs it all)."""
    if NODE is None:
        return "node is not installed"
    if not CHROMIUM.exists():
        return "Debian's chromium is not installed"
    if not (HERE / "node_modules" / "playwright-core").is_dir():
        return "playwright-core is not installed (scripts/setup.sh --test)"
    return None


def require_browser() -> None:
    """Skip a browser test where no browser is installed, but fail it under CI, where
    ``scripts/setup.sh --test`` installs one (a skip there would hide a broken set-up)."""
    missing = browser_missing()
    if missing is None:
        return
    if os.environ.get("CI"):
        pytest.fail(f"the browser tests cannot run: {missing}")
    pytest.skip(missing)


def drive(scenario: str, base: str, out: Path, **options: Any) -> dict[str, Any]:
    """Run ``drive.mjs``'s ``scenario`` against the console at ``base``; what it saw. The
    screenshots are copied to ``test-output/console/<out's name>/``."""
    out.mkdir(parents=True, exist_ok=True)
    assert NODE is not None
    config = {"scenario": scenario, "base": base, "out": str(out), **options}
    done = subprocess.run(
        [NODE, str(HERE / "drive.mjs"), json.dumps(config)],
        cwd=HERE,
        capture_output=True,
        text=True,
        timeout=DRIVE_TIMEOUT_S,
    )
    kept = REPO / "test-output" / "console" / out.name
    shutil.rmtree(kept, ignore_errors=True)
    shutil.copytree(out, kept)
    results_file = out / "results.json"
    results: dict[str, Any] = json.loads(results_file.read_text()) if results_file.exists() else {}
    assert done.returncode == 0, (
        f"drive.mjs {scenario} failed (screenshots in {kept}):\n{done.stderr}\n{done.stdout}"
    )
    assert not results.get("page_errors"), results["page_errors"]
    return results


@dataclass
class Answer:
    status: int
    body: Any
    headers: dict[str, str]


def http(
    base: str,
    method: str,
    path: str,
    body: Any = None,
    raw: bytes | None = None,
    headers: dict[str, str] | None = None,
) -> Answer:
    """One request (a body as JSON, as the page sends it); the answer, its body decoded when
    it is JSON."""
    data = raw if raw is not None else None if body is None else json.dumps(body).encode()
    sent = {"Content-Type": "application/json"} if data is not None else {}
    request = urllib.request.Request(
        base + path, method=method, data=data, headers={**sent, **(headers or {})}
    )
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            payload = response.read()
            status, headers = response.status, dict(response.headers)
    except urllib.error.HTTPError as e:
        payload, status, headers = e.read(), e.code, dict(e.headers)
    kind = headers.get("Content-Type", "")
    return Answer(status, json.loads(payload) if "json" in kind else payload, headers)


def produce_records(client: DataClient, topic: str, partition: int, count: int) -> None:
    """``count`` records ``k<i>`` → ``{"n": i, "name": "record <i>"}`` with a header, record i
    stamped ``BASE_TIMESTAMP_MS + i`` seconds."""
    records = [
        NewRecord(
            f"k{i}".encode(),
            json.dumps({"n": i, "name": f"record {i}"}).encode(),
            (Header("source", b"console-test"),),
            BASE_TIMESTAMP_MS + i * 1000,
        )
        for i in range(count)
    ]
    client.produce(
        {DataPartition(topic, partition): encode_batch(records, now_ms=BASE_TIMESTAMP_MS)}
    )


def commit(bootstrap: str, group: str, offsets: dict[TopicPartition, int]) -> None:
    async def run() -> None:
        async with await GroupAdmin.connect(bootstrap) as admin:
            await admin.reset_offsets(group, offsets)

    asyncio.run(run())


def committed(bootstrap: str, group: str) -> dict[TopicPartition, int]:
    async def run() -> dict[TopicPartition, int]:
        async with await GroupAdmin.connect(bootstrap) as admin:
            return await admin.committed(group)

    return asyncio.run(run())


class BackgroundProducer:
    """Writes a record to a topic every ``interval_s`` until stopped: traffic for the live
    rates page to show (the page samples every 2 s and waits until it sees some)."""

    def __init__(self, bootstrap: str, topic: str, interval_s: float = 0.05) -> None:
        self._client = DataClient(bootstrap, client_id="console-test-load")
        self._topic = topic
        self._interval_s = interval_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self.written = 0

    def _run(self) -> None:
        tp = DataPartition(self._topic, 0)
        while not self._stop.wait(self._interval_s):
            self._client.produce(
                {tp: encode_batch([NewRecord(None, b"tick")], now_ms=int(time.time() * 1000))}
            )
            self.written += 1

    def __enter__(self) -> BackgroundProducer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(10)
        self._client.close()
