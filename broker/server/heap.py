"""The broker process's heap and Python's cyclic garbage collector.

A broker holds hundreds of thousands of long-lived objects (partitions, logs, segments,
watches). Each full (generation 2) collection walks all of them: about 100 ms of the reactor
on this project's test machine at 1,000 partitions, roughly once a second under a stream of
large Metadata answers, and every request waits behind it. ``collect_and_freeze`` does one full
collection and then moves everything alive out of the collector's generations (``gc.freeze``),
so later full collections walk only what came after. Run again periodically, it first thaws
everything, so cycles among objects frozen earlier are collected too.

Objects made between two passes (a topic of thousands of partitions created after the start)
would be walked by every full collection until the next pass: ``FreezeAfterSlowCollections``
freezes them as soon as one full collection shows it, by its duration.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable
from typing import Any

REFREEZE_INTERVAL_S = 600.0
# A full collection walking little (the young objects of requests in flight) takes about a
# millisecond on the test machine; 10 ms is thousands of partitions' objects left unfrozen.
SLOW_FULL_COLLECTION_S = 0.010


def collect_and_freeze() -> int:
    """Thaw, collect everything unreachable, freeze what is left; returns the frozen count."""
    gc.unfreeze()
    gc.collect()
    gc.freeze()
    return gc.get_freeze_count()


class FreezeAfterSlowCollections:
    """A ``gc.callbacks`` hook: after a full collection slower than ``slow_s``, freeze what is alive.

    The collection has just removed the garbage, so the freeze (cheap: no walk) takes the
    survivors out of later full collections' reach. It runs through ``schedule`` (the reactor's
    ``callFromThread``: a collection may happen in any thread, and ``gc.freeze`` is not called
    from inside the collector). Cycles frozen this way that later become garbage wait for the
    next ``collect_and_freeze``, which thaws first.
    """

    def __init__(self, schedule: Callable[[Callable[[], None]], object], slow_s: float = SLOW_FULL_COLLECTION_S,
                 clock: Callable[[], float] = time.perf_counter) -> None:
        self._schedule = schedule
        self._slow_s = slow_s
        self._clock = clock
        self._started: float | None = None
        self._pending = False
        self.freezes = 0

    def __call__(self, phase: str, info: dict[str, Any]) -> None:
        if info.get("generation") != 2:
            return
        if phase == "start":
            self._started = self._clock()
            return
        started, self._started = self._started, None
        if started is not None and self._clock() - started > self._slow_s and not self._pending:
            self._pending = True
            self._schedule(self._freeze)

    def _freeze(self) -> None:
        self._pending = False
        gc.freeze()
        self.freezes += 1

    def install(self) -> FreezeAfterSlowCollections:
        gc.callbacks.append(self)
        return self

    def uninstall(self) -> None:
        if self in gc.callbacks:
            gc.callbacks.remove(self)
