"""Partition logs on disk: segments, indexes, retention, flush, recovery. No network, no ZooKeeper."""

from broker.storage.config import LogConfig
from broker.storage.file_slice import FileSlice, SegmentFile
from broker.storage.log import AppendResult, LoadStats, PartitionLog, ReadResult
from broker.storage.manager import CLEAN_SHUTDOWN_FILE, LogManager

__all__ = [
    "AppendResult",
    "CLEAN_SHUTDOWN_FILE",
    "FileSlice",
    "LoadStats",
    "LogConfig",
    "LogManager",
    "PartitionLog",
    "ReadResult",
    "SegmentFile",
]
