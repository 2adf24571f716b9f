"""Fetched record bytes handed over undecoded: ``RawChunk`` and the Fetch that makes them.

For programs that copy records rather than read them (the mirror-maker): decoding every record
into a tuple only to encode it again costs more than the copy itself. The ZooKeeper consumer's
raw streams (``raw=True``) carry RawChunks; ``RawChunk.decode()`` gives the usual messages.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from broker.client.simple_consumer import decode_message_set
from broker.protocol.errors import KafkaError
from broker.protocol.records import Tail, iter_batches
from broker.protocol.records.layout import CURRENT_MAGIC

if TYPE_CHECKING:
    from broker.client.simple_consumer import SimpleConsumer


@dataclass(slots=True, eq=False)
class RawChunk:
    """The whole record batches of one partition's fetch, as the broker sent them.

    ``min_offset``: records below it were handed out already (a fetch may start inside a
    batch). ``next_offset``: the offset after the last whole batch (where the next fetch starts).
    ``legacy``: some batch is a v0/v1 message set. Every v2 batch's CRC has been checked."""

    topic: str
    partition: int
    data: bytes = b""
    min_offset: int = 0
    next_offset: int = -1
    legacy: bool = False
    high_watermark: int = -1
    error: KafkaError | None = None

    def __bool__(self) -> bool:
        """True when it holds a whole batch with offsets at or past ``min_offset``."""
        return self.error is None and self.next_offset > self.min_offset

    def decode(self) -> list:
        """Its records as MessageAndMetadata (offsets from ``min_offset`` on, control records skipped)."""
        return decode_message_set(self.topic, self.partition, self.data, self.min_offset)[0]

    def __repr__(self) -> str:
        return (f"<RawChunk {self.topic}-{self.partition} [{self.min_offset}, {self.next_offset}) "
                f"{len(self.data)} bytes{' legacy' if self.legacy else ''}>")


def scan(data: bytes | bytearray) -> tuple[int, int, bool]:
    """(end of the whole batches, next offset or -1, any legacy batch) of fetched record bytes.

    Checks each batch's length, magic and CRC (CorruptRecordError, InvalidRecordError), as the
    decoding fetch does; a trailing partial batch (a fetch cut at max_bytes) is left out."""
    end, next_offset, legacy = 0, -1, False
    for pos, header in iter_batches(data, Tail.STOP):
        end = pos + header.size
        next_offset = header.next_offset  # of a legacy message: its offset + 1, the last offset it holds
        legacy = legacy or header.magic != CURRENT_MAGIC
    return end, next_offset, legacy


def multifetch_raw(consumer: SimpleConsumer, requests: Sequence[tuple], max_wait_ms: int,
                   min_bytes: int) -> dict[tuple[str, int], RawChunk]:
    """One Fetch through ``consumer`` for (topic, partition, offset, max_bytes) requests;
    {(topic, partition): RawChunk}, a partition's error in ``.error``."""
    results: dict[tuple[str, int], RawChunk] = {}
    for tp, fetched in consumer.multifetch(requests, max_wait_ms, min_bytes, decode=False).items():
        offset = fetched.next_offset  # undecoded: still the requested offset
        chunk = RawChunk(tp[0], tp[1], min_offset=offset, next_offset=offset, high_watermark=fetched.high_watermark,
                         error=fetched.error)
        if fetched.error is None and fetched.records:
            data = bytes(fetched.records)
            end, next_offset, chunk.legacy = scan(data)
            chunk.data = data if end == len(data) else data[:end]
            if next_offset > offset:
                chunk.next_offset = next_offset
        results[tp] = chunk
    return results
