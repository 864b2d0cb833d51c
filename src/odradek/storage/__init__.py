"""Partition logs on disk, in Kafka's layout: segments, indexes, checkpoints, recovery."""

from odradek.storage.log import (
    AppendInfo,
    EpochTruncation,
    LogConfig,
    OffsetOutOfRange,
    PartitionLog,
    ReadSlice,
    UnexpectedAppendOffset,
)
from odradek.storage.log_dir_failure import KafkaStorageError, LogDirFailureChannel
from odradek.storage.manager import LogManager

__all__ = [
    "AppendInfo",
    "EpochTruncation",
    "KafkaStorageError",
    "LogConfig",
    "LogDirFailureChannel",
    "LogManager",
    "OffsetOutOfRange",
    "PartitionLog",
    "ReadSlice",
    "UnexpectedAppendOffset",
]
