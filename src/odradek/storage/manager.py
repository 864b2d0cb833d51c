"""All partition logs of a broker, across its log directories."""

from __future__ import annotations

import logging
import os
import shutil
from collections.abc import Callable
from pathlib import Path

from odradek.clock import Clock
from odradek.storage.checkpoint import read_checkpoint, write_checkpoint
from odradek.storage.fileio import fsync_directory
from odradek.storage.formats import (
    CLEAN_SHUTDOWN_MARKER,
    DELETE_DIR_SUFFIX,
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    parse_partition_dir_name,
    partition_dir_name,
)
from odradek.storage.log import LogConfig, PartitionLog
from odradek.storage.segment import LogSegment

log = logging.getLogger(__name__)


class LogManager:
    """All partition logs across ``log.dirs``.

    Format: each log dir holds ``<topic>-<partition>`` directories, the checkpoint files
    ``recovery-point-offset-checkpoint`` and ``log-start-offset-checkpoint`` (see
    :mod:`odradek.storage.formats`), and, between a clean :meth:`close` and the next
    :meth:`open`, the empty file ``.kafka_cleanshutdown``.

    Crash: without the clean-shutdown marker, every log is opened with recovery from its
    checkpointed recovery point; checkpoints are replaced atomically.  A partition directory
    renamed for deletion (``*-delete``) but not yet removed is removed at open.

    Caller: the server, from the event-loop thread.  It should call :meth:`flush_due` and
    :meth:`checkpoint` periodically (and :meth:`checkpoint` after DeleteRecords, so that a raised
    log start offset survives a restart), :meth:`apply_retention` every
    ``log.retention.check.interval.ms``, close what :meth:`take_retired` hands out (off the event
    loop if it likes), and :meth:`close` on shutdown.  The log cleaner
    (:mod:`odradek.storage.cleaner`) works on the logs this manager holds.
    """

    def __init__(self, log_dirs: list[Path], clock: Clock) -> None:
        if not log_dirs:
            raise ValueError("at least one log dir is needed")
        self.log_dirs = list(log_dirs)
        self._clock = clock
        self._logs: dict[tuple[str, int], PartitionLog] = {}
        self._next_dir = 0

    def open(self, config_for: Callable[[str], LogConfig]) -> None:
        """Open every partition log found in the log dirs, recovering them after a crash."""
        for log_dir in self.log_dirs:
            log_dir.mkdir(parents=True, exist_ok=True)
            recovery_points = read_checkpoint(log_dir / RECOVERY_POINT_CHECKPOINT)
            start_offsets = read_checkpoint(log_dir / LOG_START_OFFSET_CHECKPOINT)
            marker = log_dir / CLEAN_SHUTDOWN_MARKER
            clean = marker.exists()
            for entry in sorted(log_dir.iterdir()):
                if not entry.is_dir():
                    continue
                if entry.name.endswith(DELETE_DIR_SUFFIX):
                    log.info("removing %s, left over from a partition deletion", entry)
                    shutil.rmtree(entry)
                    continue
                parsed = parse_partition_dir_name(entry.name)
                if parsed is None:
                    continue
                if parsed in self._logs:
                    raise RuntimeError(
                        f"partition {parsed} is in both {self._logs[parsed].directory} and {entry}"
                    )
                if not clean:
                    log.info("recovering %s after an unclean shutdown", entry)
                self._logs[parsed] = PartitionLog.open(
                    entry,
                    config_for(parsed[0]),
                    self._clock,
                    recovery_point=recovery_points.get(parsed, 0),
                    log_start_offset=start_offsets.get(parsed, 0),
                    needs_recovery=not clean,
                )
            # Removed only once every log is open, so a crash during recovery recovers again.
            if clean:
                marker.unlink()
                fsync_directory(log_dir)

    def get(self, topic: str, partition: int) -> PartitionLog | None:
        return self._logs.get((topic, partition))

    def create(self, topic: str, partition: int, config: LogConfig) -> PartitionLog:
        """The log of a new partition, in the next log dir in turn; the existing one if any."""
        existing = self._logs.get((topic, partition))
        if existing is not None:
            return existing
        if not topic or topic in (".", "..") or os.sep in topic or partition < 0:
            raise ValueError(f"cannot store a partition named {topic!r}-{partition}")
        log_dir = self.log_dirs[self._next_dir % len(self.log_dirs)]
        self._next_dir += 1
        partition_log = PartitionLog.open(
            log_dir / partition_dir_name(topic, partition), config, self._clock
        )
        fsync_directory(log_dir)  # rare, and a partition that vanishes in a crash is worse
        self._logs[(topic, partition)] = partition_log
        return partition_log

    def delete(self, topic: str, partition: int) -> None:
        partition_log = self._logs.pop((topic, partition), None)
        if partition_log is not None:
            partition_log.delete()

    def all_logs(self) -> list[PartitionLog]:
        return list(self._logs.values())

    def update_config(self, topic: str, config: LogConfig) -> None:
        """Use ``config`` for ``topic``'s logs from now on (segment sizes apply to new segments)."""
        for (log_topic, _), partition_log in self._logs.items():
            if log_topic == topic:
                partition_log.config = config

    def flush_due(self) -> None:
        """fsync the logs with data left unflushed for longer than their ``flush_ms``."""
        now = self._clock.monotonic_ms()
        for partition_log in self._logs.values():
            flush_ms = partition_log.config.flush_ms
            if (
                flush_ms is not None
                and partition_log.has_unflushed
                and now - partition_log.last_flush_ms >= flush_ms
            ):
                partition_log.flush()

    def apply_retention(self) -> int:
        """Delete the segments retention lets go in every log (see
        :meth:`PartitionLog.apply_retention`); checkpoints the moved log start offsets.  Returns
        how many segments went."""
        deleted = sum(partition_log.apply_retention() for partition_log in self._logs.values())
        if deleted:
            self.checkpoint()
        return deleted

    def take_retired(self) -> list[LogSegment]:
        """Segments removed from their logs whose fds are now due to close."""
        return [s for partition_log in self._logs.values() for s in partition_log.take_retired()]

    def checkpoint(self) -> None:
        """Write the recovery points and log start offsets of every log dir."""
        for log_dir in self.log_dirs:
            logs = {
                key: partition_log
                for key, partition_log in self._logs.items()
                if partition_log.directory.parent == log_dir
            }
            write_checkpoint(
                log_dir / RECOVERY_POINT_CHECKPOINT,
                {key: pl.recovery_point for key, pl in logs.items()},
            )
            write_checkpoint(
                log_dir / LOG_START_OFFSET_CHECKPOINT,
                {key: pl.log_start_offset for key, pl in logs.items()},
            )

    def close(self) -> None:
        """Flush and close every log, checkpoint, and mark each log dir cleanly shut down."""
        for partition_log in self._logs.values():
            partition_log.flush()
        self.checkpoint()
        for partition_log in self._logs.values():
            partition_log.close()
        self._logs.clear()
        for log_dir in self.log_dirs:
            fd = os.open(log_dir / CLEAN_SHUTDOWN_MARKER, os.O_WRONLY | os.O_CREAT, 0o644)
            os.fsync(fd)
            os.close(fd)
            fsync_directory(log_dir)
