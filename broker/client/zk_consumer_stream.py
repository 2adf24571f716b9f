"""KafkaStream: what the application iterates (Kafka 0.8's KafkaStream and ConsumerIterator).

The fetchers put chunks of one partition's messages (or undecoded RawChunks, on a raw stream) into
a stream's queue; iterating hands them out one by one and moves the partition's consumed offset,
the one the connector commits.
"""

from __future__ import annotations

import queue
from collections.abc import Iterator
from typing import TYPE_CHECKING

from broker.client.raw_chunk import RawChunk
from broker.client.simple_consumer import MessageAndMetadata

if TYPE_CHECKING:
    from broker.client.zk_consumer import ZookeeperConsumerConnector


class ConsumerTimeoutException(Exception):
    """No message arrived within consumer.timeout.ms (the iterator can be used again)."""


class PartitionTopicInfo:
    """One owned partition: where its fetcher is, what the application has consumed."""

    __slots__ = ("topic", "partition", "stream", "fetch_offset", "consumed_offset", "committed_offset", "stale",
                 "last_error")

    def __init__(self, topic: str, partition: int, stream: KafkaStream, offset: int | None) -> None:
        self.topic = topic
        self.partition = partition
        self.stream = stream
        self.fetch_offset = offset  # None: not known yet, reset by auto.offset.reset
        self.consumed_offset = offset
        self.committed_offset = offset
        self.stale = False
        self.last_error: str | None = None

    def __repr__(self) -> str:
        return f"<{self.topic}-{self.partition} fetch={self.fetch_offset} consumed={self.consumed_offset}>"


_SHUTDOWN = object()


class KafkaStream:
    """An iterable of MessageAndMetadata fed by the fetchers; one per consumer thread id.

    Iterate it from one thread. With consumer.timeout.ms set, ``next()`` raises
    ConsumerTimeoutException when nothing arrives in time (iteration may continue after it);
    after ``shutdown()`` it ends. A raw stream's fetcher queues RawChunks instead of messages.
    """

    def __init__(self, connector: ZookeeperConsumerConnector, thread_id: str, max_chunks: int, timeout_ms: int,
                 raw: bool = False) -> None:
        self._connector = connector
        self.thread_id = thread_id
        self.raw = raw
        self.queue: queue.Queue = queue.Queue(max_chunks)
        self._timeout = None if timeout_ms < 0 else timeout_ms / 1000.0
        self._chunk: list | None = None
        self._pos = 0
        self._info: PartitionTopicInfo | None = None

    def __iter__(self) -> Iterator[MessageAndMetadata]:
        return self

    def __next__(self) -> MessageAndMetadata:
        while True:
            chunk = self._chunk
            if chunk is not None:
                if type(chunk) is RawChunk:
                    chunk = self._chunk = chunk.decode()
                    self._pos = 0
                pos = self._pos
                if pos < len(chunk):
                    info = self._info
                    if not info.stale:  # type: ignore[union-attr]
                        message = chunk[pos]
                        self._pos = pos + 1
                        info.consumed_offset = message[2] + 1  # type: ignore[union-attr]
                        return message
                self._chunk = None
            self._take_chunk()

    def _take_chunk(self) -> None:
        """Block until the next fetched chunk with messages not yet handed out is current."""
        while True:
            try:
                item = self.queue.get(timeout=self._timeout)
            except queue.Empty:
                raise ConsumerTimeoutException(self._connector._timeout_message(self)) from None
            if item is _SHUTDOWN:
                self.queue.put(_SHUTDOWN)  # stay ended
                raise StopIteration
            info, messages = item
            if info.stale:
                continue
            # skip what was already handed out (a refetch after an error)
            if type(messages) is RawChunk:
                consumed = info.consumed_offset
                if consumed is not None and messages.min_offset < consumed:
                    if messages.next_offset <= consumed:
                        continue
                    messages.min_offset = consumed
            elif info.consumed_offset is not None and messages[0][2] < info.consumed_offset:
                messages = [m for m in messages if m[2] >= info.consumed_offset]
                if not messages:
                    continue
            self._info = info
            self._chunk = messages
            self._pos = 0
            return

    def next_chunk(self) -> list[MessageAndMetadata] | RawChunk:
        """The next messages in bulk: the rest of the chunk being iterated, else the next fetched
        chunk (never empty; all of one partition, in offset order). On a raw stream a fetched
        chunk comes as a RawChunk (records from its ``min_offset`` up to its ``next_offset``).

        Every message returned counts as handed to the application at once (the consumed
        offset moves past the last one, or to a RawChunk's ``next_offset``). Raises
        ConsumerTimeoutException and StopIteration like ``next()``; the two may be mixed on one
        stream (from one thread)."""
        while True:
            chunk = self._chunk
            if chunk is not None:
                pos = self._pos
                self._chunk = None
                info = self._info
                if type(chunk) is RawChunk:
                    if not info.stale:
                        info.consumed_offset = chunk.next_offset
                        return chunk
                elif pos < len(chunk) and not info.stale:  # type: ignore[union-attr]
                    rest = chunk[pos:] if pos else chunk
                    self._pos = len(chunk)
                    info.consumed_offset = rest[-1][2] + 1  # type: ignore[union-attr]
                    return rest
            self._take_chunk()

    def clear(self) -> None:
        """Drop queued chunks and the chunk being iterated (rebalance)."""
        self._chunk = None
        try:
            while True:
                self.queue.get_nowait()
        except queue.Empty:
            pass

    def _shutdown(self) -> None:
        self.clear()
        try:
            self.queue.put_nowait(_SHUTDOWN)
        except queue.Full:
            pass
