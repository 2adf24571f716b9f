"""What a fetch asks of each partition and what the replica manager read there: the shapes the
Fetch handler, the fetch sessions and the read path share."""

from __future__ import annotations

from typing import NamedTuple

from broker.protocol.errors import ErrorCode
from broker.storage.file_slice import FileSlice


class FetchWanted(NamedTuple):
    """One partition of a fetch: where to read, how much, under which leader epoch (-1: any)."""

    topic: str
    partition: int
    offset: int
    max_bytes: int
    leader_epoch: int = -1


class FetchedPartition(NamedTuple):
    topic: str
    partition: int
    error_code: int = ErrorCode.NONE
    high_watermark: int = -1
    log_start_offset: int = -1
    records: FileSlice | bytes | None = None  # bytes: down-converted for an old client
    records_after_fetch_offset: int = 0  # records served past the fetch offset, counted by offsets
    at_end: bool = False  # the fetch offset was the end of what the fetcher may read: nothing to send


class FetchResult(NamedTuple):
    """What a fetch read: per partition in request order, the bytes, and whether any failed."""

    partitions: list[FetchedPartition]
    size: int
    failed: bool
