"""acks=all: a produce waits until the high watermark passes its batch, or its timeout runs out.

The leader's high watermark moves when followers fetch (``check``); a lost leadership answers
NOT_LEADER_OR_FOLLOWER at once (``fail_all``). Nothing polls.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from twisted.internet import defer

from broker.protocol.errors import ErrorCode

TopicPartition = tuple[str, int]


class _Waiter:
    __slots__ = ("tp", "required_offset", "deferred", "timer")

    def __init__(self, tp: TopicPartition, required_offset: int) -> None:
        self.tp = tp
        self.required_offset = required_offset
        self.deferred: defer.Deferred[int] = defer.Deferred()
        self.timer: Any = None


class ProducePurgatory:
    """Parks acks=all appends per partition; each fires with an error code."""

    def __init__(self, reactor: Any) -> None:
        self._reactor = reactor
        self._by_partition: dict[TopicPartition, set[_Waiter]] = {}

    def wait(self, tp: TopicPartition, required_offset: int, timeout_ms: int) -> defer.Deferred[int]:
        """A Deferred firing with ErrorCode.NONE once the HW reaches ``required_offset``,
        REQUEST_TIMED_OUT after ``timeout_ms``, or another error from ``check``/``fail_all``."""
        waiter = _Waiter(tp, required_offset)
        self._by_partition.setdefault(tp, set()).add(waiter)
        waiter.timer = self._reactor.callLater(max(timeout_ms, 0) / 1000.0, self._complete, waiter, ErrorCode.REQUEST_TIMED_OUT)
        return waiter.deferred

    def check(self, tp: TopicPartition, high_watermark: int, enough_replicas: Callable[[], bool]) -> None:
        """The HW of ``tp`` moved: answer the appends it now covers."""
        waiters = self._by_partition.get(tp)
        if not waiters:
            return
        for waiter in list(waiters):
            if high_watermark >= waiter.required_offset:
                code = ErrorCode.NONE if enough_replicas() else ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND
                self._complete(waiter, code)

    def fail_all(self, tp: TopicPartition, code: int = ErrorCode.NOT_LEADER_OR_FOLLOWER) -> None:
        for waiter in list(self._by_partition.get(tp, ())):
            self._complete(waiter, code)

    def wake_all(self, code: int = ErrorCode.NOT_LEADER_OR_FOLLOWER) -> None:
        for tp in list(self._by_partition):
            self.fail_all(tp, code)

    def _complete(self, waiter: _Waiter, code: int) -> None:
        if waiter.deferred.called:
            return
        if waiter.timer is not None and waiter.timer.active():
            waiter.timer.cancel()
        waiters = self._by_partition.get(waiter.tp)
        if waiters is not None:
            waiters.discard(waiter)
            if not waiters:
                del self._by_partition[waiter.tp]
        waiter.deferred.callback(code)

    def __len__(self) -> int:
        return sum(len(w) for w in self._by_partition.values())
