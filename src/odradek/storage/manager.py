"""All partition logs of a broker, across its log directories."""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from odradek.clock import Clock
from odradek.storage.checkpoint import read_checkpoint, write_checkpoint
from odradek.storage.fileio import fsync_directory, open_file_system, sync_file_system
from odradek.storage.flusher import BackgroundJob, LogFlusher
from odradek.storage.formats import (
    CLEAN_SHUTDOWN_MARKER,
    DELETE_DIR_SUFFIX,
    HIGH_WATERMARK_CHECKPOINT,
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    parse_partition_dir_name,
    partition_dir_name,
)
from odradek.storage.log import LogConfig, PartitionLog
from odradek.storage.log_dir_failure import (
    KafkaStorageError,
    LogDirFailureChannel,
    is_log_dir_failure,
)
from odradek.storage.open_files import OpenFiles
from odradek.storage.segment import LogSegment

log = logging.getLogger(__name__)

# Threads that open and close logs: enough for the disk to take many fsyncs and reads at once.
_IO_THREADS = 16
# Threads that create new logs while the broker serves: creating files is mostly system calls
# (made without the GIL), but each thread's Python part competes with the event loop for the
# GIL, so few (4 made 4,000 logs 1.8x as fast as 1; 16, 2.5x).
_CREATE_THREADS = 4


def _on_threads(
    work: Callable[[PartitionLog], object], logs: list[PartitionLog]
) -> list[BaseException | None]:
    """Run ``work`` on every log, on a pool of threads; the exception of each, or None."""

    def guarded(partition_log: PartitionLog) -> BaseException | None:
        try:
            work(partition_log)
        except Exception as e:
            log.exception("%s: failed", partition_log.directory)
            return e
        return None

    if len(logs) < 2:
        return [guarded(partition_log) for partition_log in logs]
    with ThreadPoolExecutor(min(_IO_THREADS, len(logs)), "log-io") as pool:
        return list(pool.map(guarded, logs))


@dataclass(frozen=True, slots=True)
class _CheckpointSnapshot:
    """The checkpointed offsets of every log dir, as they were when taken (``seq``-th)."""

    seq: int
    recovery_points: dict[Path, dict[tuple[str, int], int]]
    log_start_offsets: dict[Path, dict[tuple[str, int], int]]
    high_watermarks: dict[Path, dict[tuple[str, int], int]]


class LogManager:
    """All partition logs across ``log.dirs``.

    Format: each log dir holds ``<topic>-<partition>`` directories, the checkpoint files
    ``recovery-point-offset-checkpoint``, ``log-start-offset-checkpoint`` and
    ``replication-offset-checkpoint`` (the high watermarks) (see
    :mod:`odradek.storage.formats`), and, between a clean :meth:`close` and the next
    :meth:`open`, the empty file ``.kafka_cleanshutdown``.

    Crash: without the clean-shutdown marker, every log is opened with recovery from its
    checkpointed recovery point; checkpoints are replaced atomically.  A new partition's
    directory entry is made durable by the next checkpoint (which fsyncs the log dir) or the
    log's first flush, whichever comes first, not by an fsync per partition created (Kafka
    too defers it to the log's first flush): an OS crash before either can lose the empty
    directory, which is created again when the partition opens.  The recovery points come
    from the logs, which move them only past what is fsynced, so a checkpoint never claims more
    than the disk holds.  A partition directory renamed for deletion (``*-delete``) but not yet
    removed is removed at open.  After an unclean open, or one that removed such a directory,
    the checkpoints are rewritten at once: recovery trusts what lies below a checkpointed point,
    so no stale entry may outlive the open.  A clean :meth:`close` on Linux writes what each log
    has left without fsyncs and then syncs each log dir's file system once (syncfs(2)), rather
    than fsyncing every file and directory of every log; the checkpoints and the
    clean-shutdown marker are written only after that sync has succeeded, so a crash before
    it, or a sync that fails, leaves the dir to be recovered at the next open, as before.

    The manager owns the log flusher (:mod:`odradek.storage.flusher`), one thread that fsyncs
    the segments a roll seals (Kafka's flush on roll), the logs :meth:`flush_due` finds due, and
    writes the checkpoints of :meth:`checkpoint_in_background`.  Checkpoint writes, from that
    thread or the caller's, are serialised and a write older than the last one written is
    skipped, so the files never go back in time.

    Every log's segment files share one bound on the descriptors they hold open
    (:mod:`odradek.storage.open_files`, half of RLIMIT_NOFILE by default).  :meth:`open` and
    :meth:`close` work on the logs from a pool of threads, each log on one of them, since most
    of that time is spent waiting for the disk (reads, fsyncs).

    A log dir where I/O fails (at open, in a log's append, roll, read or flush, or in a
    checkpoint) goes offline (:mod:`odradek.storage.log_dir_failure`, the channel is
    :attr:`failures`): its logs refuse every call with KAFKA_STORAGE_ERROR, no partition is
    created in it, and it gets no more checkpoints, flushes, retention or clean-shutdown
    marker, so that the next open recovers its logs.  The other dirs go on.  Opening fails only
    when every dir is offline (Kafka then stops the broker).

    Caller: the server, from the event-loop thread.  It should call :meth:`flush_due` and
    :meth:`checkpoint_in_background` periodically (and :meth:`checkpoint` after DeleteRecords,
    so that a raised log start offset survives a restart), :meth:`apply_retention` every
    ``log.retention.check.interval.ms``, close what :meth:`take_retired` hands out (off the event
    loop if it likes), and :meth:`close` on shutdown, after :meth:`wait_for_flushes` if it does
    not want :meth:`close` to block on the flusher.  The log cleaner
    (:mod:`odradek.storage.cleaner`) works on the logs this manager holds.
    """

    def __init__(
        self,
        log_dirs: list[Path],
        clock: Clock,
        *,
        open_files: OpenFiles | None = None,
        failures: LogDirFailureChannel | None = None,
    ) -> None:
        if not log_dirs:
            raise ValueError("at least one log dir is needed")
        self.log_dirs = list(log_dirs)
        self.failures = failures or LogDirFailureChannel()
        # Partitions found in dirs that failed at open, with their dir, and the dirs that failed
        # before they could even be listed (they may hold any partition): creating such a log
        # afresh elsewhere would hide its data, and give the partition two logs once the dir
        # is back (Kafka refuses it too).
        self._stranded: dict[tuple[str, int], Path] = {}
        self._unlisted: list[Path] = []
        self._clock = clock
        self._logs: dict[tuple[str, int], PartitionLog] = {}
        # The logs that may hold retired segments (each adds itself as it retires one), so that
        # take_retired, asked twice a second, does not visit every log.
        self._retiring: set[PartitionLog] = set()
        self._next_dir = 0
        self.flusher = LogFlusher()
        self.open_files = open_files or OpenFiles(clock=clock)
        self._checkpoint_lock = threading.Lock()
        self._checkpoints_taken = 0
        self._checkpoint_written = 0

    def open(self, config_for: Callable[[str], LogConfig]) -> None:
        """Open every partition log found in the log dirs, recovering them after a crash.  A dir
        that cannot be read goes offline, its logs left closed; raises
        :class:`~odradek.storage.log_dir_failure.KafkaStorageError` if every dir is offline."""
        rewrite_checkpoints = False
        for log_dir in self.log_dirs:
            if self.failures.is_offline(log_dir):
                continue
            opened: dict[tuple[str, int], PartitionLog] = {}
            try:
                rewrite_checkpoints |= self._open_dir(log_dir, config_for, opened)
            except OSError as e:
                if not is_log_dir_failure(e):
                    raise
                self.failures.mark_offline(log_dir, e)
                for partition_log in opened.values():
                    partition_log.close()
                self._note_stranded(log_dir)
                continue
            for partition_log in opened.values():
                self._hold(partition_log)
        if not self.online_dirs():
            raise KafkaStorageError(self.log_dirs[0], "every log dir is offline")
        if rewrite_checkpoints:
            # Recovery trusts the batches below a checkpointed recovery point. After a crash
            # the files may still name a deleted partition, or a point past a log's recovered
            # end: a partition created under that name, or appends past that end, must not
            # inherit it if the broker crashes again before the next periodic checkpoint.
            self.checkpoint()

    def _note_stranded(self, log_dir: Path) -> None:
        try:
            names = [entry.name for entry in log_dir.iterdir()]
        except OSError:
            self._unlisted.append(log_dir)
            return
        for key in map(parse_partition_dir_name, names):
            if key is not None:
                self._stranded.setdefault(key, log_dir)

    def hold_offline(self, topic: str, partition: int, config: LogConfig) -> PartitionLog | None:
        """The log of a partition that may be in a dir that failed as it opened, held as an
        offline stand-in (:meth:`PartitionLog.in_offline_dir`): its partition answers
        KAFKA_STORAGE_ERROR, as Kafka's offline partitions do.  None if no such dir can hold
        it (then its log can be created)."""
        key = (topic, partition)
        held = self._logs.get(key)
        if held is not None:
            return held
        log_dir = self._stranded.get(key) or (self._unlisted[0] if self._unlisted else None)
        if log_dir is None:
            return None
        partition_log = PartitionLog.in_offline_dir(
            log_dir / partition_dir_name(topic, partition), config, self._clock, self.failures
        )
        self._logs[key] = partition_log
        return partition_log

    def _open_dir(
        self,
        log_dir: Path,
        config_for: Callable[[str], LogConfig],
        opened: dict[tuple[str, int], PartitionLog],
    ) -> bool:
        """Open the logs of one dir into ``opened``; whether the checkpoints need rewriting."""
        rewrite_checkpoints = False
        log_dir.mkdir(parents=True, exist_ok=True)
        recovery_points = read_checkpoint(log_dir / RECOVERY_POINT_CHECKPOINT)
        start_offsets = read_checkpoint(log_dir / LOG_START_OFFSET_CHECKPOINT)
        high_watermarks = read_checkpoint(log_dir / HIGH_WATERMARK_CHECKPOINT)
        marker = log_dir / CLEAN_SHUTDOWN_MARKER
        clean = marker.exists()
        found: list[tuple[tuple[str, int], Path]] = []
        keys: set[tuple[str, int]] = set()
        # scandir: the entries' types come with the listing, not a stat of each partition.
        with os.scandir(log_dir) as listing:
            names = sorted(e.name for e in listing if e.is_dir())
        for name in names:
            entry = log_dir / name
            if name.endswith(DELETE_DIR_SUFFIX):
                log.info("removing %s, left over from a partition deletion", entry)
                shutil.rmtree(entry)
                rewrite_checkpoints = True
                continue
            parsed = parse_partition_dir_name(name)
            if parsed is None:
                continue
            if parsed in self._logs:
                raise RuntimeError(
                    f"partition {parsed} is in both {self._logs[parsed].directory} and {entry}"
                )
            if parsed in keys:
                raise RuntimeError(f"partition {parsed} is twice in {log_dir}")
            keys.add(parsed)
            found.append((parsed, entry))
        if not clean and found:
            log.info("recovering %d logs in %s after an unclean shutdown", len(found), log_dir)

        def open_log(
            item: tuple[tuple[str, int], Path], offsets: tuple[int, int, int]
        ) -> PartitionLog:
            key, directory = item
            return PartitionLog.open(
                directory,
                config_for(key[0]),
                self._clock,
                recovery_point=offsets[0],
                log_start_offset=offsets[1],
                high_watermark=offsets[2],
                needs_recovery=not clean,
                flusher=self.flusher,
                open_files=self.open_files,
                failures=self.failures,
            )

        offsets = [
            (recovery_points.get(k, 0), start_offsets.get(k, 0), high_watermarks.get(k, 0))
            for k, _ in found
        ]
        # Opening is mostly waiting for reads of small files: many logs at once.  Every log
        # that opened is collected before a failure is raised, so that the caller closes it.
        failure: BaseException | None = None
        with ThreadPoolExecutor(_IO_THREADS, "log-open") as pool:
            futures = [
                pool.submit(open_log, item, o) for item, o in zip(found, offsets, strict=True)
            ]
            for (key, _), future in zip(found, futures, strict=True):
                try:
                    opened[key] = future.result()
                except BaseException as e:
                    failure = failure or e
        if failure is not None:
            raise failure
        # Removed only once every log is open, so a crash during recovery recovers again.
        if clean:
            marker.unlink()
            fsync_directory(log_dir)
        else:
            rewrite_checkpoints = True
        return rewrite_checkpoints

    def get(self, topic: str, partition: int) -> PartitionLog | None:
        return self._logs.get((topic, partition))

    def create(self, topic: str, partition: int, config: LogConfig) -> PartitionLog:
        """The log of a new partition, in the next log dir in turn; the existing one if any."""
        existing = self._logs.get((topic, partition))
        if existing is not None:
            return existing
        return self._hold(self.prepare(topic, [partition], config)[0])

    def _hold(self, partition_log: PartitionLog) -> PartitionLog:
        self._logs[(partition_log.topic, partition_log.partition)] = partition_log
        partition_log.retiring = self._retiring
        if partition_log.has_retired:
            self._retiring.add(partition_log)
        return partition_log

    def prepare(
        self,
        topic: str,
        partitions: list[int],
        config: LogConfig,
        *,
        leader_epoch: int | None = None,
    ) -> list[PartitionLog]:
        """New logs of ``topic``'s ``partitions``, each in the next log dir in turn, created on
        disk but not held by the manager: the disk work of :meth:`create` for many partitions,
        for a thread of the caller's (not the event loop), followed by :meth:`add` on the logs'
        thread.  With ``leader_epoch``, each log's epoch cache starts with it at offset 0 (what
        the partition's first leader writes).  Made on a pool of threads: creating files is
        mostly waiting for the file system."""
        for partition in partitions:
            if not topic or topic in (".", "..") or os.sep in topic or partition < 0:
                raise ValueError(f"cannot store a partition named {topic!r}-{partition}")
        online = self.online_dirs()
        if not online:
            raise KafkaStorageError(self.log_dirs[0], f"{topic}: no log dir is online")
        for partition in partitions:
            if self._unlisted or (topic, partition) in self._stranded:
                raise KafkaStorageError(
                    self.log_dirs[0],
                    f"cannot create a log for {topic}-{partition}: it may be in an offline log dir",
                )
        directories = []
        for partition in partitions:
            log_dir = online[self._next_dir % len(online)]
            self._next_dir += 1  # a lost increment between threads only skews the round robin
            directories.append((log_dir, partition_dir_name(topic, partition)))

        def make(place: tuple[Path, str]) -> PartitionLog:
            log_dir, name = place
            try:
                partition_log = PartitionLog.open(
                    log_dir / name,
                    config,
                    self._clock,
                    flusher=self.flusher,
                    open_files=self.open_files,
                    failures=self.failures,
                    new=True,
                )
                if leader_epoch is not None:
                    partition_log.assign_epoch_start_offset(leader_epoch, 0)
            except OSError as e:
                if not is_log_dir_failure(e):
                    raise
                self.failures.mark_offline(log_dir, e)
                raise self.failures.error_for(log_dir, f"creating {name}") from e
            return partition_log

        if len(directories) < 2:
            return [make(d) for d in directories]
        with ThreadPoolExecutor(min(_CREATE_THREADS, len(directories)), "log-create") as pool:
            return list(pool.map(make, directories))

    def add(self, partition_log: PartitionLog) -> PartitionLog:
        """Hold a log made by :meth:`prepare`; the one held already if its partition has one
        (then ``partition_log`` is closed unused)."""
        key = (partition_log.topic, partition_log.partition)
        existing = self._logs.get(key)
        if existing is not None and existing is not partition_log:
            partition_log.close(flush=False)
            return existing
        return self._hold(partition_log)

    def delete(self, topic: str, partition: int) -> None:
        partition_log = self._logs.pop((topic, partition), None)
        if partition_log is None:
            return
        if partition_log.offline:
            # Nothing is removed from a failed dir: a broker that finds the directory there
            # after a restart removes it as a partition it no longer hosts.
            partition_log.close()
            return
        partition_log.delete()

    def all_logs(self) -> list[PartitionLog]:
        return list(self._logs.values())

    def online_logs(self) -> list[PartitionLog]:
        """The logs whose dir is online (what maintenance and the cleaner work on)."""
        offline = self.failures.offline_dirs()
        if not offline:
            return list(self._logs.values())
        return [p for p in self._logs.values() if p.log_dir not in offline]

    def online_dirs(self) -> list[Path]:
        return [d for d in self.log_dirs if not self.failures.is_offline(d)]

    def logs_in(self, log_dir: Path) -> list[PartitionLog]:
        """The logs kept in ``log_dir`` (an offline dir's included)."""
        return [p for p in self._logs.values() if p.log_dir == log_dir]

    def sizes_in(self, log_dir: Path) -> list[tuple[str, int, int]]:
        """``(topic, partition, bytes)`` of each log kept in ``log_dir`` (DescribeLogDirs)."""
        return [
            (log.topic, log.partition, log.size_bytes())
            for log in self._logs.values()
            if log.log_dir == log_dir
        ]

    def update_config(self, topic: str, config: LogConfig) -> None:
        """Use ``config`` for ``topic``'s logs from now on (segment sizes apply to new segments)."""
        for (log_topic, _), partition_log in self._logs.items():
            if log_topic == topic:
                partition_log.config = config

    def flush_due(self) -> None:
        """Hand the flusher the logs with data left unflushed for longer than their
        ``flush_ms``; returns at once, and each log's recovery point moves when its fsyncs end."""
        now = self._clock.monotonic_ms()
        for partition_log in self.online_logs():
            flush_ms = partition_log.config.flush_ms
            if (
                flush_ms is not None
                and partition_log.has_unflushed
                and now - partition_log.last_flush_ms >= flush_ms
            ):
                partition_log.flush_in_background()

    def wait_for_flushes(self, timeout: float | None = None) -> bool:
        """Block until the flusher has ended every job handed to it so far (a thread of the
        caller's, or a test); False if ``timeout`` seconds passed first."""
        return self.flusher.wait_idle(timeout)

    def apply_retention(self) -> int:
        """Delete the segments retention lets go in every log (see
        :meth:`PartitionLog.apply_retention`); the moved log start offsets are checkpointed by
        the flusher thread.  Returns how many segments went."""
        deleted = 0
        for partition_log in self.online_logs():
            # A dir that goes offline just now is logged by the channel.
            with contextlib.suppress(KafkaStorageError):
                deleted += partition_log.apply_retention()
        if deleted:
            self.checkpoint_in_background()
        return deleted

    def take_retired(self) -> list[LogSegment]:
        """Segments removed from their logs whose fds are now due to close."""
        # Asked twice a second; only the logs that retired segments are visited.
        due: list[LogSegment] = []
        for partition_log in list(self._retiring):
            due += partition_log.take_retired()
            if not partition_log.has_retired:
                self._retiring.discard(partition_log)
        return due

    def checkpoint(self) -> None:
        """Write the recovery points and log start offsets of every log dir, now, on the
        calling thread."""
        self._write_checkpoints(self._snapshot())

    def checkpoint_in_background(self) -> BackgroundJob:
        """The offsets as they are now, written by the flusher thread (after the flushes handed
        to it before).  The returned job tells when the files are written."""
        snapshot = self._snapshot()
        return self.flusher.call(
            f"checkpoint {snapshot.seq}", lambda: self._write_checkpoints(snapshot)
        )

    def _snapshot(self) -> _CheckpointSnapshot:
        # On the logs' thread: reading a recovery point takes in the log's finished flushes.
        self._checkpoints_taken += 1
        recovery_points: dict[Path, dict[tuple[str, int], int]] = {d: {} for d in self.log_dirs}
        start_offsets: dict[Path, dict[tuple[str, int], int]] = {d: {} for d in self.log_dirs}
        high_watermarks: dict[Path, dict[tuple[str, int], int]] = {d: {} for d in self.log_dirs}
        offline = self.failures.offline_dirs()
        for key, partition_log in self._logs.items():
            log_dir = partition_log.log_dir
            if log_dir in recovery_points and log_dir not in offline:
                recovery_points[log_dir][key] = partition_log.recovery_point
                start_offsets[log_dir][key] = partition_log.log_start_offset
                high_watermarks[log_dir][key] = partition_log.high_watermark
        return _CheckpointSnapshot(
            self._checkpoints_taken, recovery_points, start_offsets, high_watermarks
        )

    def _write_checkpoints(self, snapshot: _CheckpointSnapshot) -> None:
        with self._checkpoint_lock:
            # A background write can come after a newer one from the caller's thread (after
            # DeleteRecords): writing it would move a log start offset back.
            if snapshot.seq <= self._checkpoint_written:
                return
            for log_dir in self.online_dirs():
                # An offline dir keeps the checkpoints it had when it failed: what its logs
                # hold past them was never fsynced for sure, so recovery rereads it.
                try:
                    write_checkpoint(
                        log_dir / RECOVERY_POINT_CHECKPOINT, snapshot.recovery_points[log_dir]
                    )
                    write_checkpoint(
                        log_dir / LOG_START_OFFSET_CHECKPOINT, snapshot.log_start_offsets[log_dir]
                    )
                    write_checkpoint(
                        log_dir / HIGH_WATERMARK_CHECKPOINT, snapshot.high_watermarks[log_dir]
                    )
                except OSError as e:
                    if not is_log_dir_failure(e):
                        raise
                    self.failures.mark_offline(log_dir, e)
            self._checkpoint_written = snapshot.seq

    def _open_file_systems(self) -> dict[Path, int]:
        """A descriptor for :func:`~odradek.storage.fileio.sync_file_system` on each online log
        dir; none where the system lacks syncfs, or for a dir that cannot be opened (its logs
        then fsync their own files, and fail as that dir fails)."""
        opened: dict[Path, int] = {}
        for log_dir in self.online_dirs():
            try:
                fd = open_file_system(log_dir)
            except OSError:
                continue
            if fd is None:
                break
            opened[log_dir] = fd
        return opened

    def close(self) -> None:
        """Flush and close every log, checkpoint, and mark each log dir cleanly shut down.

        Flushes the flusher has not finished are waited for first: they fsync what the final
        flush would otherwise fsync again, and a checkpoint of theirs must not land after the
        final one (it would be skipped, but not its fsyncs)."""
        self.flusher.wait_idle()
        logs = list(self._logs.values())
        # Opened before the logs write their last bytes, so that the sync reports the errors
        # of their writeback.
        file_systems = self._open_file_systems()
        try:
            # Each log writes what it has left (indexes, epochs, producer state snapshot) on
            # many threads, since each file costs a few system calls; where the system has
            # syncfs, one sync per log dir then makes all of it durable, where every log would
            # otherwise fsync each of its files and its directory.  Without syncfs, each log
            # fsyncs its own, and on many threads the file system commits many fsyncs
            # together.  (A log in an offline dir only closes its fds.)
            errors = _on_threads(
                lambda pl: pl.close(flush=True, sync=pl.log_dir not in file_systems), logs
            )
            failures: list[BaseException] = []
            for partition_log, error in zip(logs, errors, strict=True):
                if isinstance(error, OSError) and is_log_dir_failure(error):
                    # That dir gets no clean-shutdown marker: the next open recovers it.
                    self.failures.mark_offline(partition_log.log_dir, error)
                elif error is not None:
                    failures.append(error)
            if failures:
                # No clean-shutdown marker: the next open recovers.
                raise failures[0]
            for log_dir, fd in file_systems.items():
                if self.failures.is_offline(log_dir):
                    continue
                try:
                    sync_file_system(fd)
                except OSError as e:
                    if not is_log_dir_failure(e):
                        raise
                    # Neither its checkpoints nor its marker are written: the next open
                    # recovers its logs from the recovery points it had.
                    self.failures.mark_offline(log_dir, e)
        finally:
            for fd in file_systems.values():
                os.close(fd)
        # Only now: the recovery points the closed logs report (their log ends) are durable.
        self.checkpoint()
        self._logs.clear()
        self._retiring.clear()
        for log_dir in self.online_dirs():
            try:
                fd = os.open(log_dir / CLEAN_SHUTDOWN_MARKER, os.O_WRONLY | os.O_CREAT, 0o644)
                try:
                    os.fsync(fd)
                finally:
                    os.close(fd)
                fsync_directory(log_dir)
            except OSError as e:
                if not is_log_dir_failure(e):
                    raise
                self.failures.mark_offline(log_dir, e)
