"""Partition logs on disk, in Kafka's layout: segments, indexes, checkpoints, recovery."""

from odradek.storage.log import (
    AppendInfo,
    LogConfig,
    OffsetOutOfRange,
    PartitionLog,
    ReadSlice,
)
from odradek.storage.manager import LogManager

__all__ = [
    "AppendInfo",
    "LogConfig",
    "LogManager",
    "OffsetOutOfRange",
    "PartitionLog",
    "ReadSlice",
]
