"""acks=all: a produce waits until the high watermark passes its batch, or its timeout runs out.

The leader's high watermark moves when followers fetch (``check``); a lost leadership answers
NOT_LEADER_OR_FOLLOWER at once (``fail_all``). Nothing polls.
"""

from __future__ import annotations

from collections.abc import Callable

from twisted.internet import defer

from broker.protocol.errors import ErrorCode
from broker.server.clock import Clock
from broker.server.purgatory import Delayed, Purgatory, TopicPartition


class _Waiter(Delayed[int]):
    __slots__ = ("required_offset",)

    def __init__(self, tp: TopicPartition, required_offset: int) -> None:
        super().__init__((tp,))
        self.required_offset = required_offset


class ProducePurgatory:
    """Parks acks=all appends per partition; each fires with an error code."""

    def __init__(self, clock: Clock) -> None:
        self._parked: Purgatory[_Waiter] = Purgatory(clock)

    def wait(self, tp: TopicPartition, required_offset: int, timeout_ms: int) -> defer.Deferred[int]:
        """A Deferred firing with ErrorCode.NONE once the HW reaches ``required_offset``,
        REQUEST_TIMED_OUT after ``timeout_ms``, or another error from ``check``/``fail_all``."""
        return self._parked.park(_Waiter(tp, required_offset), timeout_ms, ErrorCode.REQUEST_TIMED_OUT)

    def check(self, tp: TopicPartition, completion: Callable[[int], int | None]) -> None:
        """The HW of ``tp`` moved: answer the appends ``completion(required_offset)`` says are
        done (an error code), leaving those it answers None for."""
        for waiter in self._parked.watching(tp):
            code = completion(waiter.required_offset)
            if code is not None:
                self._parked.complete(waiter, code)

    def fail_all(self, tp: TopicPartition, code: int = ErrorCode.NOT_LEADER_OR_FOLLOWER) -> None:
        for waiter in self._parked.watching(tp):
            self._parked.complete(waiter, code)

    def wake_all(self, code: int = ErrorCode.NOT_LEADER_OR_FOLLOWER) -> None:
        for tp in self._parked.keys():
            self.fail_all(tp, code)

    def __len__(self) -> int:
        return len(self._parked)
