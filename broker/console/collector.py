"""The console's background collector: one sample of the cluster per interval into the lag history.

Each round runs the reader's blocking ``sample()`` off the reactor (``run``: the thread pool in
the console, a direct call in tests) and records every group's committed offsets against the
log end offsets of the same round. A failed round keeps the last good sample and its error is
shown on the pages; the next round tries again.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from twisted.internet import defer, task, threads

from broker.console.lag_history import LagHistory
from broker.console.reader import ClusterSample

Run = Callable[[Callable[[], ClusterSample]], "defer.Deferred[ClusterSample]"]


class Collector:
    """Samples ``sample()`` every ``interval`` seconds of ``clock``; ``latest`` is the last good sample."""

    def __init__(self, sample: Callable[[], ClusterSample], history: LagHistory, clock: Any, interval: float,
                 run: Run = threads.deferToThread) -> None:
        self._sample = sample
        self.history = history
        self.clock = clock
        self.interval = interval
        self._run = run
        self.latest: ClusterSample | None = None
        self.latest_time: float | None = None
        self.error: str | None = None
        self.rounds = 0
        self._loop = task.LoopingCall(self.round)
        self._loop.clock = clock

    def now(self) -> float:
        return float(self.clock.seconds())

    def start(self, first: ClusterSample | None = None) -> None:
        """Record ``first`` (a sample already taken) at once, then sample every interval."""
        if first is not None:
            self.apply(first)
        self._loop.start(self.interval, now=first is None)

    def stop(self) -> None:
        if self._loop.running:
            self._loop.stop()

    def round(self) -> defer.Deferred[None]:
        """One sample, recorded; its failure is kept as ``error`` (the loop goes on)."""
        return self._run(self._sample).addCallbacks(self.apply, self._failed)

    def apply(self, sample: ClusterSample) -> None:
        """Record ``sample``'s committed offsets against its log end offsets, at the clock's time."""
        now = self.now()
        for group, committed in sample.committed.items():
            self.history.record(now, group, committed, sample.ends)
        self.history.retain(set(sample.committed))
        self.latest, self.latest_time, self.rounds = sample, now, self.rounds + 1
        self.error = "; ".join(sample.errors) or None

    def _failed(self, failure: Any) -> None:
        self.error = f"the last sample failed: {failure.getErrorMessage()}"
