"""Log dirs that failed, and the error a request for a partition in one gets (KIP-112).

An I/O error (ENOSPC, EIO, ...) while a log writes, rolls, indexes, flushes, snapshots or
checkpoints in a log dir takes the whole dir offline, as Kafka's ``LogDirFailureChannel`` does:
from then on no log in it is written or read, and every request for its partitions answers
KAFKA_STORAGE_ERROR, while the other log dirs go on.  A dir comes back only with a restart of
the broker that finds it healthy (Kafka asks for the same): nothing here is on disk, so a
restart forgets every failure.  The logs of an offline dir are closed without a flush, a
checkpoint or the clean-shutdown marker, so the next open recovers them from their last
checkpointed recovery point, and a batch whose append failed is never acknowledged.

Threads: any.  A failure can be found by the event-loop thread (appends, reads), the log
flusher's (fsyncs, checkpoints) or the log cleaner's; listeners are called on that thread, once
per dir, and must hand the news to their own thread themselves (``call_soon_threadsafe``).
"""

from __future__ import annotations

import errno
import logging
import threading
from collections.abc import Callable
from pathlib import Path

from odradek.protocol.errors import ErrorCode, KafkaError

log = logging.getLogger(__name__)

# Errors of the process rather than of the dir's disk: out of descriptors or memory says nothing
# about the dir, and taking it offline for them would stop serving data that is fine.
_NOT_THE_DIR = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOMEM, errno.EINTR})


def is_log_dir_failure(error: OSError) -> bool:
    """Whether ``error``, raised by I/O in a log dir, takes that dir offline."""
    return error.errno not in _NOT_THE_DIR


class KafkaStorageError(KafkaError):
    """A log's dir is offline, or went offline just now (Kafka's KafkaStorageException).

    Clients see KAFKA_STORAGE_ERROR (56), which they retry after refreshing metadata: in a
    cluster the partition's leadership moves to a replica in a healthy dir."""

    def __init__(self, log_dir: Path, message: str) -> None:
        super().__init__(ErrorCode.kafka_storage_error, message)
        self.log_dir = log_dir


class LogDirFailureChannel:
    """The offline log dirs of one broker, and who hears of a new one (see the module doc)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._offline: dict[Path, str] = {}
        self._listeners: list[Callable[[Path, str], None]] = []

    def add_listener(self, listener: Callable[[Path, str], None]) -> None:
        """``listener(log_dir, reason)`` is called once for each dir that goes offline later."""
        with self._lock:
            self._listeners.append(listener)

    def mark_offline(self, log_dir: Path, reason: BaseException | str) -> bool:
        """Take ``log_dir`` offline; True if it was online until now (and listeners were told)."""
        text = reason if isinstance(reason, str) else f"{type(reason).__name__}: {reason}"
        with self._lock:
            if log_dir in self._offline:
                return False
            self._offline[log_dir] = text
            listeners = list(self._listeners)
        log.error(
            "log dir %s is offline after an I/O error (%s): its partitions are no longer "
            "served until a restart of the broker finds the dir healthy",
            log_dir,
            text,
        )
        for listener in listeners:
            try:
                listener(log_dir, text)
            except Exception:
                log.exception("a log dir failure listener failed for %s", log_dir)
        return True

    def is_offline(self, log_dir: Path) -> bool:
        # Asked of every log by each periodic scan: no hashing while every dir is online.
        return bool(self._offline) and log_dir in self._offline

    def offline_dirs(self) -> dict[Path, str]:
        """Each offline dir, with the error that took it offline."""
        with self._lock:
            return dict(self._offline)

    def error_for(self, log_dir: Path, what: str) -> KafkaStorageError:
        """The error a request for a log of ``log_dir`` gets while the dir is offline."""
        reason = self._offline.get(log_dir, "offline")
        return KafkaStorageError(log_dir, f"{what}: log dir {log_dir} is offline ({reason})")
