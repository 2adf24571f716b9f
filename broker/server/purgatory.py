"""Parked requests: each waits on some partitions until an event there completes it or its
timeout runs out. The shared bookkeeping of the fetch and produce purgatories.

Nothing polls: whoever moves a partition (an append, a high watermark) asks the purgatory for
the requests watching it. Timers come from the injected clock (the reactor, or a task.Clock).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, Generic, TypeVar

from twisted.internet import defer

from broker.server.clock import Clock, DelayedCall

ResultT = TypeVar("ResultT")
TopicPartition = tuple[str, int]
Key = TopicPartition


class Delayed(Generic[ResultT]):
    """One parked request: the keys it watches and the Deferred that answers it."""

    __slots__ = ("keys", "deferred", "timer")

    def __init__(self, keys: Iterable[Key]) -> None:
        self.keys = frozenset(keys)
        self.deferred: defer.Deferred[ResultT] = defer.Deferred()
        self.timer: DelayedCall | None = None


DelayedT = TypeVar("DelayedT", bound=Delayed[Any])


class Purgatory(Generic[DelayedT]):
    """Requests by the keys they watch; each completes once, by an event or by its timeout."""

    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self._by_key: dict[Key, set[DelayedT]] = {}

    def park(self, delayed: DelayedT, timeout_ms: int, timeout_result: Any) -> defer.Deferred[Any]:
        """Watch ``delayed``'s keys; it answers ``timeout_result`` if nothing completes it in time."""
        for key in delayed.keys:
            self._by_key.setdefault(key, set()).add(delayed)
        delayed.timer = self._clock.callLater(max(timeout_ms, 0) / 1000.0, self.complete, delayed, timeout_result)
        return delayed.deferred

    def watching(self, key: Key) -> Sequence[DelayedT]:
        """The requests parked on ``key`` (a copy: completing them while iterating is safe)."""
        parked = self._by_key.get(key)
        return list(parked) if parked else ()  # no list made for a key nothing waits on (most appends)

    def keys(self) -> list[Key]:
        return list(self._by_key)

    def complete(self, delayed: DelayedT, result: Any) -> None:
        """Answer ``delayed`` with ``result`` (once: later completions are ignored)."""
        if delayed.deferred.called:
            return
        if delayed.timer is not None and delayed.timer.active():
            delayed.timer.cancel()
        for key in delayed.keys:
            parked = self._by_key.get(key)
            if parked is not None:
                parked.discard(delayed)
                if not parked:
                    del self._by_key[key]
        delayed.deferred.callback(result)

    def __len__(self) -> int:
        return len({d for parked in self._by_key.values() for d in parked})
