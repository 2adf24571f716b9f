"""The console's background collector: one sample of the cluster per interval into the lag history.

Each round runs off the reactor (``run``: the thread pool in the console, a direct call in
tests): the reader's blocking ``sample()``, then every group's committed offsets recorded
against the log end offsets of the same round, the history evaluated into a ``LagView`` and the
``/metrics`` text rendered. The reactor thread then only publishes the round, so pages never wait
for a large cluster's evaluation. Rounds do not overlap (``LoopingCall`` waits for each), so the
history has one writer. A failed round keeps the last good one and its error is shown on the
pages; the next round tries again.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from twisted.internet import defer, task, threads

from broker.console import lag_metrics
from broker.console.lag_history import LagHistory, LagView
from broker.console.reader import ClusterSample


@dataclass(frozen=True)
class Round:
    """What one round publishes: the sample, when it was recorded, the lag view and the metrics text."""

    sample: ClusterSample
    time: float
    view: LagView
    metrics: bytes


Run = Callable[[Callable[[], Round]], "defer.Deferred[Round]"]


class Collector:
    """Samples ``sample()`` every ``interval`` seconds of ``clock``; ``latest`` is the last good round."""

    def __init__(self, sample: Callable[[], ClusterSample], history: LagHistory, clock: Any, interval: float,
                 run: Run = threads.deferToThread) -> None:
        self._sample = sample
        self.history = history
        self.clock = clock
        self.interval = interval
        self._run = run
        self.latest: Round | None = None
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
        """One round, published; its failure is kept as ``error`` (the loop goes on)."""
        return self._run(lambda: self.record(self._sample())).addCallbacks(self.publish, self._failed)

    def record(self, sample: ClusterSample) -> Round:
        """Record ``sample``'s committed offsets against its log end offsets at the clock's time, and evaluate."""
        now = self.now()
        for group, committed in sample.committed.items():
            self.history.record(now, group, committed, sample.ends)
        self.history.retain(set(sample.committed) | set(sample.groups))  # a group whose OffsetFetch failed keeps its history
        view = self.history.view(now)
        return Round(sample, now, view, lag_metrics.render(view).encode())

    def publish(self, finished: Round) -> None:
        self.latest, self.rounds = finished, self.rounds + 1
        self.error = "; ".join(finished.sample.errors) or None

    def apply(self, sample: ClusterSample) -> None:
        """``record`` and ``publish`` in the calling thread (the first sample, benchmarks)."""
        self.publish(self.record(sample))

    def _failed(self, failure: Any) -> None:
        self.error = f"the last sample failed: {failure.getErrorMessage()}"
