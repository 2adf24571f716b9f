"""Long-poll fetches: a fetch short of ``min_bytes`` waits until appends bring enough bytes or
``max_wait_ms`` passes. Appends wake waiters directly; nothing polls the logs.
"""

from __future__ import annotations

from twisted.internet import defer

from broker.server.clock import Clock
from broker.server.purgatory import Delayed, Purgatory, TopicPartition


class _Waiter(Delayed[None]):
    __slots__ = ("bytes_needed",)

    def __init__(self, partitions: frozenset[TopicPartition], bytes_needed: int) -> None:
        super().__init__(partitions)
        self.bytes_needed = bytes_needed


class FetchPurgatory:
    """Parks fetches until their partitions grow by enough bytes or their wait runs out."""

    def __init__(self, clock: Clock) -> None:
        self._parked: Purgatory[_Waiter] = Purgatory(clock)

    def wait(self, partitions: frozenset[TopicPartition], bytes_needed: int, max_wait_ms: int) -> defer.Deferred[None]:
        """A Deferred that fires (with None) when the fetch should be answered."""
        return self._parked.park(_Waiter(partitions, bytes_needed), max_wait_ms, None)

    def notify_append(self, tp: TopicPartition, size: int) -> None:
        """Called after ``size`` bytes were appended to ``tp``; wakes fetches that now have enough."""
        for waiter in self._parked.watching(tp):
            waiter.bytes_needed -= size
            if waiter.bytes_needed <= 0:
                self._parked.complete(waiter, None)

    def wake_all(self) -> None:
        """Answer every parked fetch now (shutdown)."""
        for tp in self._parked.keys():
            for waiter in self._parked.watching(tp):
                self._parked.complete(waiter, None)

    def __len__(self) -> int:
        return len(self._parked)
