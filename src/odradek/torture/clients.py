"""The campaign's clients in a process of their own, and the handle the runner drives it by.

librdkafka runs in this child process, never in the runner's: a client library that aborts
(an assertion in C under a fault) then ends only the clients, and the runner still removes
everything it made, notes the crash and starts the clients again (a new generation, so values
stay unique; the transactional id stays, so the new producer fences the old one).

The child (``python -m odradek.torture.clients run|read-back ...``) appends every operation to
the history file as a JSON line as it happens, and takes commands on standard input, one a line,
answering each on standard output:

``stop-producers``  flush and stop the producers → ``producers-stopped``
``drain S``         wait up to S seconds for every group's committed offsets to reach the
                    partitions' ends → ``drained ok|timeout``
``stop``            stop the consumers and the offset monitor → ``failure <text>`` lines, then
                    ``stopped``

End of input (the runner went away) stops everything. ``read-back`` reads every partition back
in both isolation levels (:func:`~odradek.torture.workload.read_back`) and prints ``done``.
"""

from __future__ import annotations

import argparse
import logging
import queue
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import IO

from odradek.torture.history import History
from odradek.torture.workload import (
    GROUPS,
    IDEMPOTENT_TOPIC,
    MEMBERS_PER_GROUP,
    TOPICS,
    TRANSACTIONAL_TOPIC,
    GroupConsumer,
    IdempotentProducer,
    OffsetMonitor,
    TransactionalProducer,
    Worker,
    end_offsets,
    read_back,
)

log = logging.getLogger("odradek.torture")


class ClientsError(RuntimeError):
    """The clients' process died or did not answer in time."""


# -- the child ------------------------------------------------------------------------------


def _workers(args: argparse.Namespace, history: History) -> list[Worker]:
    suffix = f".g{args.generation}" if args.generation else ""
    workers: list[Worker] = [
        IdempotentProducer(
            f"i{n}{suffix}", args.bootstrap, IDEMPOTENT_TOPIC, args.partitions, history, args.rate
        )
        for n in (1, 2)
    ]
    workers.append(
        TransactionalProducer(
            f"t1{suffix}",
            "torture-t1",
            args.bootstrap,
            TRANSACTIONAL_TOPIC,
            args.partitions,
            history,
            args.seed * 1000 + args.generation,
        )
    )
    for group, isolation in GROUPS.items():
        for member in range(1, MEMBERS_PER_GROUP + 1):
            workers.append(
                GroupConsumer(
                    f"{group}-{member}{suffix}",
                    group,
                    args.bootstrap,
                    TOPICS,
                    isolation,
                    history,
                )
            )
    workers.append(OffsetMonitor(args.bootstrap, list(GROUPS), history))
    return workers


def _drain(args: argparse.Namespace, monitor: OffsetMonitor, timeout_s: float) -> bool:
    targets: dict[tuple[str, str, int], int] = {}
    for group, isolation in GROUPS.items():
        for topic in TOPICS:
            ends = end_offsets(args.bootstrap, topic, args.partitions, isolation)
            for partition, end in enumerate(ends):
                targets[(group, topic, partition)] = end
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if all(end <= 0 or monitor.latest.get(key, 0) >= end for key, end in targets.items()):
            return True
        time.sleep(0.5)
    return False


def _run(args: argparse.Namespace) -> int:
    with open(args.history, "a") as sink:
        history = History(sink=sink)
        workers = _workers(args, history)
        monitor = next(w for w in workers if isinstance(w, OffsetMonitor))
        producers = [
            w for w in workers if isinstance(w, IdempotentProducer | TransactionalProducer)
        ]
        for worker in workers:
            worker.start()
        print("started", flush=True)
        for line in sys.stdin:
            command = line.split()
            if not command:
                continue
            if command[0] == "stop-producers":
                for producer in producers:
                    producer.stop()
                print("producers-stopped", flush=True)
            elif command[0] == "drain":
                drained = _drain(args, monitor, float(command[1]))
                print(f"drained {'ok' if drained else 'timeout'}", flush=True)
            elif command[0] == "stop":
                break
        for worker in workers:
            worker.stop()
        for group in GROUPS:
            monitor.fetch(group)
        for worker in workers:
            for failure in worker.failures:
                print(f"failure {failure}", flush=True)
            if isinstance(worker, IdempotentProducer):
                for error in worker.fatal_errors:
                    print(f"failure {worker.name}: fatal {error}", flush=True)
        print("stopped", flush=True)
    return 0


def _read_back(args: argparse.Namespace) -> int:
    with open(args.history, "a") as sink:
        history = History(sink=sink)
        for topic in TOPICS:
            read_back(args.bootstrap, topic, args.partitions, "read_uncommitted", history)
            read_back(args.bootstrap, topic, args.partitions, "read_committed", history)
    print("done", flush=True)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m odradek.torture.clients")
    parser.add_argument("action", choices=("run", "read-back"))
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--history", type=Path, required=True)
    parser.add_argument("--partitions", type=int, required=True)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--generation", type=int, default=0)
    parser.add_argument("--rate", type=float, default=50)
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    return _run(args) if args.action == "run" else _read_back(args)


# -- the runner's handle --------------------------------------------------------------------


class ClientsProcess:
    """The runner's side: starts the child, sends it commands, waits for its answers."""

    def __init__(
        self,
        bootstrap: str,
        history: Path,
        log_path: Path,
        partitions: int,
        seed: int,
        rate: float,
        generation: int = 0,
    ) -> None:
        self.bootstrap = bootstrap
        self.history = history
        self.log_path = log_path
        self.partitions = partitions
        self.seed = seed
        self.rate = rate
        self.generation = generation
        self.process: subprocess.Popen[str] | None = None
        self._lines: queue.Queue[str | None] = queue.Queue()
        self.failures: list[str] = []

    def _command(self, action: str) -> list[str]:
        return [
            sys.executable,
            "-m",
            "odradek.torture.clients",
            action,
            "--bootstrap",
            self.bootstrap,
            "--history",
            str(self.history),
            "--partitions",
            str(self.partitions),
            "--seed",
            str(self.seed),
            "--generation",
            str(self.generation),
            "--rate",
            str(self.rate),
        ]

    def _spawn(self, action: str) -> subprocess.Popen[str]:
        with open(self.log_path, "a") as err:
            process = subprocess.Popen(
                self._command(action),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=err,
                text=True,
            )
        self._lines = queue.Queue()
        threading.Thread(target=self._pump, args=(process.stdout,), daemon=True).start()
        return process

    def _pump(self, stream: IO[str] | None) -> None:
        assert stream is not None
        for line in stream:
            self._lines.put(line.rstrip("\n"))
        self._lines.put(None)

    def _expect(self, word: str, timeout_s: float) -> str:
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                line = self._lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                raise ClientsError(
                    f"the clients did not answer {word!r} in {timeout_s:.0f} s"
                ) from None
            if line is None:
                raise ClientsError(f"the clients exited before {word!r}: {self.log_tail()}")
            if line.startswith("failure "):
                self.failures.append(line.removeprefix("failure "))
            elif line.startswith(word):
                return line

    def start(self) -> ClientsProcess:
        self.process = self._spawn("run")
        self._expect("started", 60)
        return self

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def send(self, command: str, answer: str, timeout_s: float) -> str:
        assert self.process is not None and self.process.stdin is not None
        try:
            self.process.stdin.write(command + "\n")
            self.process.stdin.flush()
        except OSError as e:
            raise ClientsError(f"the clients are gone: {e}: {self.log_tail()}") from e
        return self._expect(answer, timeout_s)

    def read_back(self, timeout_s: float) -> None:
        process = self._spawn("read-back")
        try:
            self._expect("done", timeout_s)
        finally:
            self._end(process)

    def kill(self) -> None:
        if self.process is not None:
            self._end(self.process)

    @staticmethod
    def _end(process: subprocess.Popen[str]) -> None:
        if process.poll() is None:
            process.kill()
        process.wait()
        for stream in (process.stdin, process.stdout):
            if stream is not None:
                stream.close()

    def log_tail(self, lines: int = 15) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return ""
        kept = [line for line in text.splitlines() if not line.startswith("%")]
        return "\n".join(kept[-lines:])


if __name__ == "__main__":
    sys.exit(main())
