"""The campaign's shell: network, ZooKeeper, brokers, clients, nemesis, read-back, check, cleanup.

:func:`run_campaign` makes a bridge and one network namespace per broker
(:class:`~odradek.torture.network.Network`) and a bounded filesystem for each broker's log dir
(:class:`~odradek.torture.disk.BoundedDisk`), starts Debian's ZooKeeper on the bridge and the
brokers (``odradek serve``) each in its namespace with :class:`~odradek.testing.RunningCluster`,
creates two replicated topics (one for idempotent producers, one for transactions), runs the
workload (:mod:`~odradek.torture.workload`) while the nemesis works through the seed's plan
(:func:`~odradek.torture.schedule.plan`), then heals everything, lets the groups catch up, reads
every partition back in both isolation levels, and checks the history
(:func:`~odradek.torture.checker.check`).

A broker that dies without the nemesis killing it (a crash under a fault) is noted, with the
time and the end of its log, and started again once the fault of that moment is healed, so the
campaign runs to its end and the checker judges what the crash did to the history.

Everything it made — processes (the slow links' delayers too), namespaces and their veth pairs
and iptables rules, the bridge, the log dirs' filesystems, the data directory — is removed on the
way out, whether the campaign passed, failed or was interrupted (Ctrl-C is
:class:`KeyboardInterrupt`; the CLI turns SIGTERM into one).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import re
import shutil
import signal
import subprocess
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from odradek.client.admin import ClusterAdmin, PartitionReplicas
from odradek.client.core import ClientError
from odradek.protocol.record_batch import HEADER_SIZE, iter_headers
from odradek.storage.checkpoint import read_checkpoint
from odradek.storage.formats import RECOVERY_POINT_CHECKPOINT
from odradek.torture import schedule
from odradek.torture.checker import Summary, Violation, check, summarize
from odradek.torture.clients import ClientsError, ClientsProcess
from odradek.torture.disk import BoundedDisk, DiskError, DiskErrors, remove_stale
from odradek.torture.history import History, Nemesis, op_time
from odradek.torture.network import Network, NetworkError
from odradek.torture.workload import TOPICS

if TYPE_CHECKING:
    from odradek.testing import RunningCluster, ZooKeeperServer

log = logging.getLogger("odradek.torture")

RESTART_TIMEOUT_S = 60  # a killed broker's ZooKeeper session must end before it can register
DRAIN_TIMEOUT_S = 90
PRODUCERS_STOP_TIMEOUT_S = 180  # the producers flush what they hold (message.timeout.ms 60 s)
READ_BACK_TIMEOUT_S = 300
WATCH_INTERVAL_S = 0.5  # how often brokers are looked at while a fault lasts
DEATH_LOG_LINES = 8  # of a broker that died, the last lines of its log in the report
DELAYER_SPARE_S = 60  # a slow link's delayer ends by itself this long after its fault should

SETTINGS = {
    "zookeeper.session.timeout.ms": "6000",
    "replica.lag.time.max.ms": "10000",
    "offsets.topic.num.partitions": "3",
    "transaction.state.log.num.partitions": "3",
    "unclean.leader.election.enable": "false",
}


@dataclass(frozen=True)
class Options:
    duration_s: float = 300
    seed: int = 0
    brokers: int = 3
    partitions: int = 3
    history_path: Path | None = None
    rate_per_s: float = 50  # records per second per idempotent producer
    settings: dict[str, str] = field(default_factory=dict)  # broker configs over the campaign's
    kinds: tuple[str, ...] = schedule.DEFAULT_KINDS  # the kinds of fault dealt
    log_dir_bytes: int = 256 << 20  # each broker's log dir filesystem


@dataclass
class Report:
    options: Options
    plan: list[schedule.Fault]
    history: History
    injected: Counter[str] = field(default_factory=Counter)
    skipped: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    summary: Summary | None = None
    violations: list[Violation] = field(default_factory=list)
    client_failures: list[str] = field(default_factory=list)
    deaths: list[str] = field(default_factory=list)  # brokers that died unbidden, and how
    wall_s: float = 0.0
    broker_logs: dict[int, str] = field(default_factory=dict)  # broker id → all its runs' log

    def write(self, path: Path) -> list[Path]:
        """The history at ``path`` (JSON lines) and each broker's log beside it
        (``<path>.broker-<id>.log``); the files written."""
        self.history.write(path)
        written = [path]
        for broker, text in sorted(self.broker_logs.items()):
            log_path = path.with_name(f"{path.name}.broker-{broker}.log")
            log_path.write_text(text)
            written.append(log_path)
        return written

    @property
    def ok(self) -> bool:
        return not self.violations

    def describe(self) -> str:
        lines = [
            f"campaign seed={self.options.seed} duration={self.options.duration_s:.0f}s "
            f"brokers={self.options.brokers} wall={self.wall_s:.0f}s",
            "faults injected: "
            + (", ".join(f"{kind}={n}" for kind, n in sorted(self.injected.items())) or "none"),
        ]
        lines.extend(f"fault skipped: {why}" for why in self.skipped)
        lines.extend(f"note: {note}" for note in self.notes)
        lines.extend(f"broker died: {death}" for death in self.deaths)
        if self.summary is not None:
            s = self.summary
            lines.append(
                f"records: sent={s.sent} acknowledged={s.acknowledged} "
                f"indeterminate={s.indeterminate} reads={s.read}; transactions: "
                f"committed={s.transactions_committed} aborted={s.transactions_aborted}; "
                f"group commits acknowledged={s.commits_acknowledged}"
            )
        lines.extend(f"client failure: {f}" for f in self.client_failures)
        lines.append(f"violations: {len(self.violations)}")
        lines.extend(v.describe() for v in self.violations[:20])
        if len(self.violations) > 20:
            lines.append(f"... and {len(self.violations) - 20} more")
        return "\n".join(lines)


class Campaign:
    """One run; :meth:`run` returns its :class:`Report` and always cleans up."""

    def __init__(self, options: Options, out: TextIO) -> None:
        self.options = options
        self.out = out
        self.plan = schedule.plan(options.seed, options.duration_s, options.brokers, options.kinds)
        self.network = Network(range(1, options.brokers + 1))
        self.directory = Path(tempfile.mkdtemp(prefix="odradek-torture-"))
        # Each broker's data directory (RunningCluster's broker-<id>) is its own filesystem.
        self.disks = {
            b: BoundedDisk(self.directory / f"broker-{b}", options.log_dir_bytes)
            for b in range(1, options.brokers + 1)
        }
        self.down: set[int] = set()  # brokers the nemesis stopped, until it starts them again
        self.started = 0.0  # when the nemesis started (time.monotonic())
        self.history_path = self.directory / "history.jsonl"
        # The nemesis's own operations; the clients' are in history_path.
        self.nemesis_history = History()
        self.report = Report(options, self.plan, History())
        self.zookeeper: ZooKeeperServer | None = None
        self.cluster: RunningCluster | None = None
        self.clients: ClientsProcess | None = None
        self.broker_logs: dict[int, list[str]] = {}  # every run of each broker, in order
        self.found_dead: dict[int, str] = {}  # broker → when it was found dead (unbidden)
        self.current: schedule.Fault | None = None  # the fault in force

    def say(self, line: str) -> None:
        print(line, file=self.out, flush=True)

    # -- set-up and tear-down ---------------------------------------------------------------

    def _start(self) -> None:
        from odradek.testing import RunningCluster, ZooKeeperServer

        self.network.create()
        for stale in remove_stale():
            self.say(f"removed {stale}, left mounted by a campaign that was killed")
        for disk in self.disks.values():
            disk.mount()
        self.zookeeper = ZooKeeperServer(
            self.directory / "zookeeper", host=self.network.zookeeper_ip
        ).start()
        replication = min(3, self.options.brokers)
        settings = {
            **SETTINGS,
            "default.replication.factor": str(replication),
            "offsets.topic.replication.factor": str(replication),
            "transaction.state.log.replication.factor": str(replication),
            "transaction.state.log.min.isr": str(min(2, replication)),
            "min.insync.replicas": str(min(2, replication)),
            **self.options.settings,
        }
        ids = range(1, self.options.brokers + 1)
        self.cluster = RunningCluster(
            self.directory,
            self.options.brokers,
            zookeeper=self.zookeeper,
            settings=settings,
            hosts={b: self.network.ip(b) for b in ids},
            wrappers={b: self.network.wrapper(b) for b in ids},
        )
        self.cluster.start()
        self.say(
            f"cluster up: brokers {self.cluster.bootstrap}, zookeeper {self.zookeeper.connect}"
        )
        self._create_topics(replication)

    def _create_topics(self, replication: int) -> None:
        async def create() -> None:
            async with await ClusterAdmin.connect(self.bootstrap, timeout_s=30) as admin:
                for topic in TOPICS:
                    await admin.create_topic(topic, self.options.partitions, replication)

        asyncio.run(create())
        for topic in TOPICS:
            self._wait(functools.partial(self._leaders_known, topic), 60, f"leaders of {topic}")

    def _describe(self, topic: str) -> list[PartitionReplicas] | None:
        """The topic's partitions as a live broker describes them (None when none answers)."""

        async def describe() -> list[PartitionReplicas]:
            async with await ClusterAdmin.connect(self.bootstrap, timeout_s=5) as admin:
                cluster = await admin.describe_cluster([topic], with_min_isr=False)
                return cluster.partitions()

        try:
            return asyncio.run(asyncio.wait_for(describe(), 10))
        except (ClientError, OSError, TimeoutError):
            return None

    def _leaders_known(self, topic: str) -> bool:
        partitions = self._describe(topic)
        return (
            partitions is not None
            and len(partitions) == self.options.partitions
            and all(p.leader is not None for p in partitions)
        )

    @property
    def bootstrap(self) -> str:
        assert self.cluster is not None
        return self.cluster.bootstrap

    def _cleanup(self) -> None:
        if self.clients is not None:
            self.clients.kill()
        if self.cluster is not None:
            for broker_id, broker in self.cluster.brokers.items():
                process = broker.process
                if process is not None and process.poll() is None:
                    with contextlib.suppress(OSError):
                        process.send_signal(signal.SIGCONT)
                        process.kill()
                    with contextlib.suppress(subprocess.SubprocessError):
                        process.wait(10)
                    log.debug("broker %d killed", broker_id)
            for broker_id in self.cluster.brokers:
                self._keep_log(broker_id)
        if self.zookeeper is not None:
            zookeeper = self.zookeeper.process
            if zookeeper is not None and zookeeper.poll() is None:
                with contextlib.suppress(OSError):
                    zookeeper.send_signal(signal.SIGCONT)
            with contextlib.suppress(Exception):
                self.zookeeper.kill()
        try:
            self.network.remove()
        except Exception as e:
            self.say(f"could not remove the network: {e}")
        for disk in self.disks.values():
            try:
                disk.unmount()
            except DiskError as e:
                self.say(f"could not remove a log dir's filesystem: {e}")
        shutil.rmtree(self.directory, ignore_errors=True)
        left = self.network.leftovers()
        left += [str(d.path) for d in self.disks.values() if d.is_mounted()]
        if left:
            self.say(f"left behind (remove by hand): {left}")

    # -- the run ------------------------------------------------------------------------------

    def run(self) -> Report:
        started = time.monotonic()
        finished = False
        try:
            self.say("plan:")
            for fault in self.plan:
                self.say(f"  {fault.describe()}")
            self._start()
            self._start_clients()
            self._nemesis()
            self._heal_all()
            self._finish_workload()
            self._note_disk_use()
            finished = True
        finally:
            recorded = History.read(self.history_path).ops() if self.history_path.exists() else ()
            self._cleanup()
            self.report.wall_s = time.monotonic() - started
            ops = sorted((*recorded, *self.nemesis_history.ops()), key=op_time)
            self.report.history = History(ops)
            self.report.broker_logs = {b: "".join(runs) for b, runs in self.broker_logs.items()}
            # Kept also when the campaign stopped short: what happened until then.
            if self.options.history_path is not None:
                try:
                    written = self.report.write(self.options.history_path)
                    if not finished:
                        self.say(
                            "the history so far and the brokers' logs: "
                            + ", ".join(str(p) for p in written)
                        )
                except OSError as e:
                    self.say(f"could not write the history: {e}")
        self.say(f"checking {len(ops)} operations")
        self.report.summary = summarize(ops)
        self.report.violations = check(ops)
        return self.report

    def _start_clients(self, generation: int = 0) -> None:
        self.clients = ClientsProcess(
            self.bootstrap,
            self.history_path,
            self.directory / "clients.log",
            self.options.partitions,
            self.options.seed,
            self.options.rate_per_s,
            generation,
        ).start()

    def _check_clients(self) -> None:
        """Start the clients again if they died (a crash of the client library is noted as a
        client failure: it is not the broker's)."""
        assert self.clients is not None
        if self.clients.alive():
            return
        failure = f"the clients' process (generation {self.clients.generation}) died: "
        self.report.client_failures.append(failure + self.clients.log_tail(5))
        self.say(f"warning: {failure}starting them again")
        self.clients.kill()
        self._start_clients(self.clients.generation + 1)

    def _nemesis(self) -> None:
        start = self.started = time.monotonic()
        for fault in self.plan:
            self._hold(start + fault.at - time.monotonic())
            self._revive()
            self._check_clients()
            self.say(f"nemesis: {fault.describe()}")
            self._inject(fault)
            self._revive()
        self._hold(start + self.options.duration_s - time.monotonic())

    def _hold(self, seconds: float, tick: Callable[[], object] | None = None) -> None:
        """Let ``seconds`` pass, noting any broker that dies meanwhile (and calling ``tick``
        every so often)."""
        end = time.monotonic() + seconds
        while (left := end - time.monotonic()) > 0:
            time.sleep(min(left, WATCH_INTERVAL_S))
            self._watch()
            if tick is not None:
                tick()

    def _dead(self) -> list[int]:
        """Brokers whose process ended though the nemesis did not stop them."""
        assert self.cluster is not None
        return [
            b
            for b, broker in self.cluster.brokers.items()
            if b not in self.down
            and broker.process is not None
            and broker.process.poll() is not None
        ]

    def _watch(self) -> None:
        """Note when each broker that died since it was last looked at was found dead."""
        for broker in self._dead():
            if broker not in self.found_dead:
                at = time.monotonic() - self.started if self.started else 0.0
                during = f" during {self.current.describe()}" if self.current else ""
                self.found_dead[broker] = f"t={at:.1f}s{during}"
                self.say(f"warning: broker {broker} died (found at t={at:.1f}s{during})")

    def _revive(self) -> None:
        """Start again every broker that died unbidden, once its death and the end of its log
        are in the report."""
        assert self.cluster is not None
        self._watch()
        for broker in self._dead():
            process = self.cluster.brokers[broker].process
            assert process is not None
            tail = self.cluster.output(broker).splitlines()[-DEATH_LOG_LINES:]
            self.report.deaths.append(
                f"broker {broker} exited with {process.returncode}, found at "
                f"{self.found_dead.pop(broker, '?')}; its last lines:\n    " + "\n    ".join(tail)
            )
            self.say(f"starting broker {broker} again")
            try:
                self._restart(broker)
            except RuntimeError as e:
                first = str(e).splitlines()[0] if str(e) else ""
                self.report.deaths.append(f"broker {broker} could not be started again: {first}")

    def _record(self, phase: str, fault: schedule.Fault, detail: str) -> None:
        self.nemesis_history.add(Nemesis(phase, fault.kind, detail, time.monotonic()))  # type: ignore[arg-type]

    def _inject(self, fault: schedule.Fault) -> None:
        assert self.cluster is not None and self.zookeeper is not None
        kind, brokers = fault.kind, fault.brokers
        live = [b for b in brokers if self.cluster.is_running(b)]
        if (
            kind in (schedule.KILL, schedule.PAUSE, schedule.CORRUPT, schedule.FAILING_DISK)
            and not live
        ):
            self.report.skipped.append(f"{fault.describe()}: broker not running")
            return
        detail = fault.describe()
        self.current = fault
        try:
            if kind == schedule.CORRUPT:
                self._corrupt(fault)
            elif kind == schedule.FULL_DISK:
                self._fill_disk(fault)
            elif kind == schedule.FAILING_DISK:
                self._fail_disk(fault)
            else:
                self._fault(fault, detail)
        finally:
            self.current = None

    def _fault(self, fault: schedule.Fault, detail: str) -> None:
        assert self.cluster is not None and self.zookeeper is not None
        kind, brokers = fault.kind, fault.brokers
        if kind == schedule.SLOW:
            try:
                max_s = fault.duration + DELAYER_SPARE_S
                self.network.slow(brokers[0], fault.delay_ms, max_s)
            except NetworkError as e:
                self.report.skipped.append(f"{detail}: {e}")
                self.network.heal()
                return
        self._record("start", fault, detail)
        if kind == schedule.KILL:
            self.down.add(brokers[0])
            self.cluster.kill(brokers[0])
        elif kind == schedule.PAUSE:
            self.cluster.pause(brokers[0])
        elif kind == schedule.PAUSE_ZOOKEEPER:
            assert self.zookeeper.process is not None
            self.zookeeper.process.send_signal(signal.SIGSTOP)
        elif kind in (schedule.ISOLATE, schedule.SPLIT):
            others = [b for b in self.network.brokers if b not in brokers]
            self.network.cut_between(brokers, others)
            for broker in brokers:
                self.network.cut(broker, self.network.zookeeper_ip)
        elif kind == schedule.CUT_ZOOKEEPER:
            self.network.cut(brokers[0], self.network.zookeeper_ip)
        elif kind == schedule.LOSSY:
            self.network.lose(brokers[0], fault.probability)
        self.report.injected[kind] += 1
        self._hold(fault.duration)
        if kind == schedule.KILL:
            self._restart(brokers[0])
            self.down.discard(brokers[0])
        elif kind == schedule.PAUSE:
            self.cluster.resume(brokers[0])
        elif kind == schedule.PAUSE_ZOOKEEPER:
            assert self.zookeeper.process is not None
            self.zookeeper.process.send_signal(signal.SIGCONT)
        else:
            self.network.heal()
        if kind == schedule.SLOW:
            detail += "; " + "; ".join(self.network.delayer_reports)
            self.network.delayer_reports.clear()
            self.say(f"nemesis: healed {detail}")
        self._record("end", fault, detail)

    def _keep_log(self, broker: int) -> None:
        """Keep what the broker's last run logged (a restart replaces its process object)."""
        assert self.cluster is not None
        process = self.cluster.brokers.get(broker)
        if process is not None and process.output:
            self.broker_logs.setdefault(broker, []).append("".join(process.output))
            process.output = []

    def _restart(self, broker: int) -> None:
        assert self.cluster is not None
        self._keep_log(broker)
        deadline = time.monotonic() + RESTART_TIMEOUT_S
        while True:
            try:
                self.cluster.start_broker(broker)
                return
            except RuntimeError as e:
                # A start that failed (its old ZooKeeper session not yet ended) may have
                # recovered the logs already: what it logged is kept.
                self.broker_logs.setdefault(broker, []).append(str(e))
                if time.monotonic() > deadline:
                    raise
                log.info("broker %d did not start yet: %s", broker, str(e).splitlines()[0])
                time.sleep(1)

    def _corrupt(self, fault: schedule.Fault) -> None:
        """kill -9 the fault's broker, flip one byte of a batch its active segment holds past its
        recovery point (what recovery after a crash checks: Kafka too trusts what lies below it),
        start it again."""
        assert self.cluster is not None
        broker = fault.brokers[0]
        followed = [
            (p.topic, p.partition)
            for topic in TOPICS
            for p in self._describe(topic) or []
            if p.leader != broker and broker in p.replicas
        ]
        self.down.add(broker)
        self.cluster.kill(broker)
        data = self.cluster.brokers[broker].data_dir
        recovery_points = read_checkpoint(data / RECOVERY_POINT_CHECKPOINT)
        candidates = []
        for topic, partition in followed:
            directory = data / f"{topic}-{partition}"
            segments = sorted(directory.glob("*.log"))
            if not segments:
                continue
            segment = segments[-1]
            point = recovery_points.get((topic, partition), 0)
            content = segment.read_bytes()
            for header in iter_headers(content):
                if header.base_offset >= point and header.size > HEADER_SIZE:
                    candidates.append((segment, header.position, header.size))
        if candidates:
            segment, position, size = candidates[int(fault.pick * len(candidates))]
            at = position + HEADER_SIZE + int(fault.pick * 997) % (size - HEADER_SIZE)
            with open(segment, "r+b") as f:
                f.seek(at)
                byte = f.read(1)
                f.seek(at)
                f.write(bytes([byte[0] ^ 0xFF]))
            detail = f"{fault.describe()}: flipped byte {at} of {segment.relative_to(data)}"
            self._record("start", fault, detail)
            self.report.injected[fault.kind] += 1
            self.say(f"nemesis: {detail}")
        else:
            self.report.skipped.append(
                f"{fault.describe()}: no batch past the recovery point in what broker {broker} "
                "follows"
            )
        self._hold(fault.duration)
        self._keep_log(broker)  # the killed run's log: not where this recovery is looked for
        runs_before = len(self.broker_logs.get(broker, []))
        self._restart(broker)
        self.down.discard(broker)
        if candidates:
            # Recovery (the CRC of every batch past the recovery point) must have found it.
            found = [
                line.strip()
                for text in [
                    *self.broker_logs.get(broker, [])[runs_before:],
                    self.cluster.output(broker),
                ]
                for line in text.splitlines()
                if "truncating" in line
                and str(segment.name) in line
                and f"/{segment.parent.name}/" in line
            ]
            note = found[-1] if found else f"broker {broker} did not report truncating {segment}"
            self.report.notes.append(f"corrupt: {note}")
            self._record("end", fault, note)

    def _fill_disk(self, fault: schedule.Fault) -> None:
        """Fill the broker's log dir to ENOSPC for the fault's duration, then free it.  The
        dir is the broker's only one: once an append fails there the broker halts, as Kafka
        does with every log dir offline, and is started again once the disk has room."""
        assert self.cluster is not None
        broker = fault.brokers[0]
        disk = self.disks[broker]
        process = self.cluster.brokers[broker]
        seen = len(process.output)
        # A halt is this fault's doing, not a death to report.
        self.down.add(broker)
        ballast = disk.fill()
        detail = (
            f"{fault.describe()}: {ballast / 2**20:.1f} MiB of ballast, "
            f"{disk.free_bytes()} bytes free"
        )
        self._record("start", fault, detail)
        self.report.injected[fault.kind] += 1
        self.say(f"nemesis: {detail}")
        try:
            self._hold(fault.duration, tick=disk.fill)  # what the broker freed is taken again
        finally:
            disk.free()
            self.down.discard(broker)
        said = errors_logged(process.output[seen:])
        self.report.notes.append(f"full-disk: broker {broker} logged {said}")
        self._record("end", fault, f"{fault.describe()}: ballast removed; broker logged {said}")
        self._after_disk_fault(broker, seen)

    def _fail_disk(self, fault: schedule.Fault) -> None:
        """Answer EIO to the broker's writes and flushes for the fault's duration
        (:class:`~odradek.torture.disk.DiskErrors`); as with a full disk, the broker halts once
        its only log dir is offline, and is started again after."""
        assert self.cluster is not None
        broker = fault.brokers[0]
        process = self.cluster.brokers[broker]
        assert process.process is not None
        seen = len(process.output)
        errors = DiskErrors(process.process.pid)
        self.down.add(broker)
        errors.start()
        self._record("start", fault, fault.describe())
        self.report.injected[fault.kind] += 1
        self.say(f"nemesis: {fault.describe()}")
        try:
            self._hold(fault.duration)
        finally:
            failed = errors.stop()
            self.down.discard(broker)
        if failed and process.process.poll() is None:  # strace could not attach
            self.report.skipped.append(f"{fault.describe()}: strace: {failed}")
        said = errors_logged(process.output[seen:])
        self.report.notes.append(f"failing-disk: broker {broker} logged {said}")
        self._record("end", fault, f"{fault.describe()}: disk healthy again; broker logged {said}")
        self._after_disk_fault(broker, seen)

    def _after_disk_fault(self, broker: int, seen: int) -> None:
        """Start again a broker that a disk fault made halt or take its log dir offline."""
        assert self.cluster is not None
        process = self.cluster.brokers[broker]
        assert process.process is not None
        if process.process.poll() is not None:
            halted = any("halting broker" in line for line in process.output[seen:])
            if not halted:
                return  # a death of its own: the watch reports it and starts it again
            self.say(f"nemesis: broker {broker} halted with its log dir offline: restarting it")
            self._restart(broker)
        elif any("is offline after an I/O error" in line for line in process.output[seen:]):
            # Its log dir stays offline until a restart, as Kafka's does (KIP-112): what an
            # operator does once the disk has room again.
            self.say(f"nemesis: broker {broker} took its log dir offline: restarting it")
            self.cluster.terminate(broker)
            self._restart(broker)

    def _note_disk_use(self) -> None:
        used = ", ".join(
            f"broker {b} {d.used_bytes() / 2**20:.1f} MiB" for b, d in sorted(self.disks.items())
        )
        self.report.notes.append(
            f"log dirs used (of {self.options.log_dir_bytes / 2**20:.0f} MiB each): {used}"
        )

    def _heal_all(self) -> None:
        assert self.cluster is not None and self.zookeeper is not None
        self.network.heal()
        for disk in self.disks.values():
            disk.free()
        if self.zookeeper.process is not None:
            self.zookeeper.process.send_signal(signal.SIGCONT)
        self._revive()
        for broker in self.cluster.brokers:
            if self.cluster.is_running(broker):
                self.cluster.resume(broker)
            elif broker in self.down:
                self._restart(broker)
                self.down.discard(broker)
        for topic in TOPICS:
            self._wait(functools.partial(self._leaders_known, topic), 120, f"leaders of {topic}")

    def _finish_workload(self) -> None:
        """Stop the producers, let the groups catch up, stop the consumers, read everything
        back (in a process of its own, once more if it dies)."""
        assert self.clients is not None
        self._check_clients()
        try:
            self.clients.send("stop-producers", "producers-stopped", PRODUCERS_STOP_TIMEOUT_S)
            self.say("producers stopped; letting the groups catch up")
            drained = self.clients.send(f"drain {DRAIN_TIMEOUT_S}", "drained", DRAIN_TIMEOUT_S + 60)
            if drained != "drained ok":
                self.say(f"warning: the groups did not catch up within {DRAIN_TIMEOUT_S} s")
            self.clients.send("stop", "stopped", 120)
        except ClientsError as e:
            self.report.client_failures.append(str(e))
            self.say(f"warning: {e}")
        self.report.client_failures += self.clients.failures
        self.clients.kill()
        self.say("reading every partition back")
        for attempt in (1, 2):
            try:
                self.clients.read_back(READ_BACK_TIMEOUT_S)
                return
            except ClientsError as e:
                self.report.client_failures.append(f"read-back {attempt}: {e}")

    @staticmethod
    def _wait(condition: Callable[[], object], timeout_s: float, what: str) -> None:
        from odradek.testing import wait_until

        wait_until(condition, timeout_s, interval_s=0.5, what=what)


_LOG_LEVEL = re.compile(r" (ERROR|WARNING|CRITICAL) (.*)")
_ADDRESS = re.compile(r"\d+\.\d+\.\d+\.\d+(:\d+)?")


def errors_logged(lines: list[str]) -> str:
    """What a broker's log lines hold of errors, in short: how many name ENOSPC or EIO (the
    disk faults'), and each distinct error or warning (addresses and numbers elided) with its
    count."""
    disk = ("No space left on device", "Input/output error")
    enospc = sum(any(error in line for error in disk) for line in lines)
    kinds: Counter[str] = Counter()
    for line in lines:
        found = _LOG_LEVEL.search(line)
        if found:
            kinds[_ADDRESS.sub("<address>", f"{found[1]} {found[2]}")] += 1
    listed = "; ".join(f"{n}x {kind}" for kind, n in kinds.most_common(5))
    return f"{enospc} lines naming ENOSPC or EIO" + (f", {listed}" if listed else ", no error")


def run_campaign(options: Options, out: TextIO) -> Report:
    return Campaign(options, out).run()
