"""Produce and Fetch probes that time every request, for the tests (and the benchmark) of what a
ZooKeeper fault does to partitions it does not concern.

A :class:`Probe` sends, on a thread of its own per partition, a Produce (acks=1) then a Fetch of
what it wrote, one request at a time, each on a connection whose read times out past the
request's own timeout: a request not answered by then is recorded as unanswered. The tests assert
the answers; the latencies are only reported (:meth:`ProbeReport.summary`), never asserted.
"""

from __future__ import annotations

import statistics
import threading
import time
from dataclasses import dataclass, field

from odradek.client.core import ClientError
from odradek.protocol.errors import ErrorCode
from tests.server.conftest import FETCH, FETCH_VERSION, KafkaConnection, batch_of

# Produce's timeout field, and how long past it an answer may come before it counts as missing.
REQUEST_TIMEOUT_MS = 10_000
ANSWER_MARGIN_S = 5.0
UNANSWERED = -1


@dataclass(frozen=True, slots=True)
class Sample:
    kind: str  # "produce" or "fetch"
    topic: str
    partition: int
    latency_ms: float
    error: int  # the partition's error code; UNANSWERED when no answer came in time


@dataclass
class ProbeReport:
    samples: list[Sample] = field(default_factory=list)

    def of(self, kind: str) -> list[Sample]:
        return [s for s in self.samples if s.kind == kind]

    def unanswered(self) -> list[Sample]:
        return [s for s in self.samples if s.error == UNANSWERED]

    def failed(self) -> list[Sample]:
        return [s for s in self.samples if s.error not in (ErrorCode.none, UNANSWERED)]

    def summary(self, label: str) -> str:
        lines = [label]
        for kind in ("produce", "fetch"):
            latencies = sorted(s.latency_ms for s in self.of(kind) if s.error != UNANSWERED)
            if not latencies:
                lines.append(f"  {kind}: no answers")
                continue
            p99 = latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))]
            lines.append(
                f"  {kind}: n={len(self.of(kind))} p50={statistics.median(latencies):.1f} ms "
                f"p99={p99:.1f} ms max={latencies[-1]:.1f} ms "
                f"unanswered={sum(1 for s in self.of(kind) if s.error == UNANSWERED)}"
            )
        return "\n".join(lines)


class Probe:
    """Produce-then-fetch loops against ``targets`` (address, topic, partition) until stopped."""

    def __init__(self, targets: list[tuple[str, str, int]]) -> None:
        self.report = ProbeReport()
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._threads = [
            threading.Thread(target=self._run, args=target, name=f"probe-{target[1]}", daemon=True)
            for target in targets
        ]

    def start(self) -> Probe:
        for thread in self._threads:
            thread.start()
        return self

    def count(self) -> int:
        with self._lock:
            return len(self.report.samples)

    def wait_for(self, more: int, timeout_s: float = 120) -> None:
        """Until ``more`` requests more have been answered (or found unanswered)."""
        target = self.count() + more
        deadline = time.monotonic() + timeout_s
        while self.count() < target:
            assert time.monotonic() < deadline, f"the probes made {self.count()} of {target}"
            time.sleep(0.05)

    def stop(self) -> ProbeReport:
        self._stopping.set()
        for thread in self._threads:
            thread.join(REQUEST_TIMEOUT_MS / 1000 + ANSWER_MARGIN_S + 10)
        return self.report

    def _record(self, sample: Sample) -> None:
        with self._lock:
            self.report.samples.append(sample)

    def _run(self, address: str, topic: str, partition: int) -> None:
        connection: KafkaConnection | None = None
        value = 0
        while not self._stopping.is_set():
            if connection is None:
                connection = KafkaConnection(address, REQUEST_TIMEOUT_MS / 1000 + ANSWER_MARGIN_S)
            value += 1
            kind, started = "produce", time.monotonic()
            try:
                written = connection.produce(topic, partition, batch_of(b"%d" % value))
                self._record(self._sample(kind, topic, partition, started, written.error_code))
                if written.error_code != ErrorCode.none:
                    continue
                kind, started = "fetch", time.monotonic()
                fields = connection.fetch_request_fields([(topic, partition, written.base_offset)])
                response = connection.request(FETCH, FETCH_VERSION, **fields)
                (topic_answer,) = response.responses
                (answer,) = topic_answer.partitions
                self._record(self._sample(kind, topic, partition, started, answer.error_code))
            except (ClientError, OSError):
                # No answer within the request's timeout and the margin: the connection is
                # dropped (its answer, if one comes, would be out of step) and made again.
                self._record(Sample(kind, topic, partition, _ms_since(started), UNANSWERED))
                connection.close()
                connection = None
        if connection is not None:
            connection.close()

    @staticmethod
    def _sample(kind: str, topic: str, partition: int, started: float, error: int) -> Sample:
        return Sample(kind, topic, partition, _ms_since(started), int(error))


def _ms_since(started: float) -> float:
    return (time.monotonic() - started) * 1000
