"""Long-poll fetches: a fetch short of ``min_bytes`` waits until appends bring enough bytes or
``max_wait_ms`` passes. Appends wake waiters directly; nothing polls the logs.
"""

from __future__ import annotations

from typing import Any

from twisted.internet import defer

TopicPartition = tuple[str, int]


class _Waiter:
    __slots__ = ("partitions", "bytes_needed", "deferred", "timer")

    def __init__(self, partitions: frozenset[TopicPartition], bytes_needed: int) -> None:
        self.partitions = partitions
        self.bytes_needed = bytes_needed
        self.deferred: defer.Deferred[None] = defer.Deferred()
        self.timer: Any = None


class FetchPurgatory:
    """Parks fetches until their partitions grow by enough bytes or their wait runs out."""

    def __init__(self, reactor: Any) -> None:
        self._reactor = reactor
        self._by_partition: dict[TopicPartition, set[_Waiter]] = {}

    def wait(self, partitions: frozenset[TopicPartition], bytes_needed: int, max_wait_ms: int) -> defer.Deferred[None]:
        """A Deferred that fires (with None) when the fetch should be answered."""
        waiter = _Waiter(partitions, bytes_needed)
        for tp in partitions:
            self._by_partition.setdefault(tp, set()).add(waiter)
        waiter.timer = self._reactor.callLater(max_wait_ms / 1000.0, self._complete, waiter)
        return waiter.deferred

    def notify_append(self, tp: TopicPartition, size: int) -> None:
        """Called after ``size`` bytes were appended to ``tp``; wakes fetches that now have enough."""
        waiters = self._by_partition.get(tp)
        if not waiters:
            return
        for waiter in list(waiters):
            waiter.bytes_needed -= size
            if waiter.bytes_needed <= 0:
                self._complete(waiter)

    def wake_all(self) -> None:
        """Answer every parked fetch now (shutdown, leadership change)."""
        for waiters in list(self._by_partition.values()):
            for waiter in list(waiters):
                self._complete(waiter)

    def _complete(self, waiter: _Waiter) -> None:
        if waiter.deferred.called:
            return
        if waiter.timer is not None and waiter.timer.active():
            waiter.timer.cancel()
        for tp in waiter.partitions:
            waiters = self._by_partition.get(tp)
            if waiters is not None:
                waiters.discard(waiter)
                if not waiters:
                    del self._by_partition[tp]
        waiter.deferred.callback(None)

    def __len__(self) -> int:
        return len({w for waiters in self._by_partition.values() for w in waiters})
