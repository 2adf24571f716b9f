"""What a fetch asks of each partition and what the replica manager read there: the shapes the
Fetch handler, the fetch sessions and the read path share."""

from __future__ import annotations

from typing import NamedTuple

from broker.protocol.errors import ErrorCode
from broker.storage.file_slice import FileSlice

#: a slice smaller than this is answered as its bytes, read at once: os.sendfile waits a reactor
#: turn for the response bytes queued ahead of it, which costs more than copying a few KiB, and
#: a fetch of many small partitions would take a turn per partition (docs/performance.md)
COPY_BELOW_BYTES = 16 << 10


def answered_records(records: FileSlice) -> FileSlice | bytes:
    """``records`` as the fetch answers them: a small slice read into bytes, a large one as is
    (sent by sendfile; so is a slice the log lost bytes of since it was cut, which the sender
    then refuses)."""
    if records.size >= COPY_BELOW_BYTES:
        return records
    data = records.read_bytes()
    return data if len(data) == records.size else records


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
