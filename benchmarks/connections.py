"""A client's round trip beside many idle and busy connections (issue 21).

One broker (``odradek serve`` in a child process, RLIMIT_NOFILE ``--nofile``), a one-partition
topic ``probe`` and an 8-partition topic ``busy``. A probe client (the project's blocking client,
one connection) sends a Metadata v12 request for ``probe`` every ``--interval-ms`` for
``--duration`` seconds and times each round trip, in three phases:

- **alone**: nothing else connected;
- **idle**: beside ``--idle`` (5,000) connections that each sent ApiVersions once and then
  nothing (opened by this process);
- **idle+busy**: beside those and ``--busy`` (200) connections that produce without pause
  (pipelined Produce requests of one 100-byte record, one in flight each, acks=1), from a child
  process (:func:`odradek.bench.wire.raw_load`).

Printed: the probe's round trips (count, p50, p99, max in ms), the broker's CPU over the phase
(in cores) and, for the busy phase, the busy connections' requests per second. Target (issue 21):
p99 under 50 ms beside 5,000 idle and 200 busy connections on a quiet machine. The probe, the
idle sockets, the busy load and the broker share the machine's cores: on a loaded machine the
probe measures the machine as much as the broker. Numbers are printed, never asserted::

    python benchmarks/connections.py [--idle 5000] [--busy 200] [--duration 10]
"""

from __future__ import annotations

import argparse
import multiprocessing
import resource
import shutil
import socket
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from odradek.bench.scenarios import cpu_seconds
from odradek.bench.wire import raw_load
from odradek.client.blocking import BlockingConnection
from odradek.client.core import API_VERSIONS, METADATA, request_frame
from odradek.testing import BrokerProcess

PROBE_TOPIC = "probe"
BUSY_TOPIC = "busy"
CREATE_TOPICS = 19


def create_topics(bootstrap: str) -> None:
    with BlockingConnection.open(bootstrap) as connection:
        connection.request(
            CREATE_TOPICS,
            {
                "topics": [
                    {"name": PROBE_TOPIC, "num_partitions": 1, "replication_factor": 1},
                    {"name": BUSY_TOPIC, "num_partitions": 8, "replication_factor": 1},
                ],
                "timeout_ms": 30_000,
            },
            version=5,
        )


def open_idle(address: tuple[str, int], count: int) -> list[socket.socket]:
    """``count`` connections that each sent ApiVersions and read the answer."""
    frame = request_frame(API_VERSIONS, 0, {}, client_id="idle")
    sockets = []
    for _ in range(count):
        s = socket.create_connection(address, timeout=30)
        s.sendall(frame)
        size = int.from_bytes(_read_exactly(s, 4), "big")
        _read_exactly(s, size)
        sockets.append(s)
    return sockets


def _read_exactly(s: socket.socket, size: int) -> bytes:
    data = bytearray()
    while len(data) < size:
        chunk = s.recv(size - len(data))
        if not chunk:
            raise ConnectionError("broker closed an idle connection")
        data += chunk
    return bytes(data)


def probe(bootstrap: str, duration_s: float, interval_ms: float) -> list[float]:
    """Round trips in ms of Metadata requests for the probe topic, one every ``interval_ms``."""
    rtts: list[float] = []
    fields = {"topics": [{"name": PROBE_TOPIC}], "allow_auto_topic_creation": False}
    with BlockingConnection.open(bootstrap, client_id="probe") as connection:
        deadline = time.monotonic() + duration_s
        next_at = time.monotonic()
        while time.monotonic() < deadline:
            began = time.perf_counter()
            connection.request(METADATA, fields, version=12)
            rtts.append((time.perf_counter() - began) * 1000)
            next_at += interval_ms / 1000
            pause = next_at - time.monotonic()
            if pause > 0:
                time.sleep(pause)
    return rtts


def busy_load(bootstrap: str, connections: int, duration_s: float, out: Any) -> None:
    result = raw_load(
        bootstrap,
        BUSY_TOPIC,
        record_size=100,
        batch_records=1,
        connections=connections,
        window=1,
        duration_s=duration_s,
    )
    out.put((result.requests, result.seconds, result.errors, result.first_error))


def summary(name: str, rtts: list[float], cpu: float, extra: str = "") -> str:
    ordered = sorted(rtts)
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
    return (
        f"{name:>10} {len(rtts):>7} {statistics.median(ordered):>8.2f} {p99:>8.2f} "
        f"{ordered[-1]:>8.2f} {cpu:>10.2f}  {extra}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--idle", type=int, default=5000)
    parser.add_argument("--busy", type=int, default=200)
    parser.add_argument("--duration", type=float, default=10.0)
    parser.add_argument("--interval-ms", type=float, default=5.0)
    parser.add_argument("--nofile", type=int, default=20_000)
    args = parser.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = args.idle + args.busy + 100
    if soft < wanted:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, max(wanted, soft)), hard))
    work = Path(tempfile.mkdtemp(prefix="odradek-connections-"))
    broker = BrokerProcess(work / "data", nofile=args.nofile)
    idle: list[socket.socket] = []
    try:
        broker.start()
        assert broker.process is not None
        pid = broker.process.pid
        create_topics(broker.bootstrap)
        address = (broker.host, broker.port)
        print(
            f"{'phase':>10} {'probes':>7} {'p50 ms':>8} {'p99 ms':>8} {'max ms':>8} "
            f"{'broker CPU':>10}"
        )

        def phase(name: str, extra: str = "") -> None:
            cpu = cpu_seconds(pid) or 0.0
            began = time.monotonic()
            rtts = probe(broker.bootstrap, args.duration, args.interval_ms)
            cores = ((cpu_seconds(pid) or 0.0) - cpu) / (time.monotonic() - began)
            print(summary(name, rtts, cores, extra), flush=True)

        phase("alone")
        began = time.monotonic()
        idle = open_idle(address, args.idle)
        print(f"  ({args.idle} idle connections opened in {time.monotonic() - began:.1f} s)")
        phase("idle")
        results: Any = multiprocessing.get_context("spawn").Queue()
        # The load runs a little past the probe on both sides: the probe sees it whole.
        loader = multiprocessing.get_context("spawn").Process(
            target=busy_load,
            args=(broker.bootstrap, args.busy, args.duration + 4, results),
        )
        loader.start()
        time.sleep(2)  # the load's connections open and reach their pace
        phase("idle+busy")
        loader.join(args.duration + 120)
        requests, seconds, errors, first_error = results.get(timeout=10)
        print(
            f"  busy: {args.busy} connections, {requests / seconds:,.0f} requests/s, "
            f"{errors} errors{f' ({first_error})' if first_error else ''}"
        )
    finally:
        for s in idle:
            s.close()
        if broker.process is not None and broker.process.poll() is None:
            broker.terminate(120)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
