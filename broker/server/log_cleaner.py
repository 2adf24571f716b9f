"""The broker's log cleaner: ``log.cleaner.threads`` worker threads, off the reactor, each taking
the dirtiest compacted log (broker.storage.cleaner_manager) and cleaning it (broker.storage.cleaner):
the pass's work runs in one of as many cleaner processes, the thread waits and swaps the result
in. The reactor only wakes the workers every ``log.cleaner.backoff.ms``.
"""

from __future__ import annotations

from typing import Any

from twisted.internet import threads
from twisted.internet.task import LoopingCall
from twisted.logger import Logger
from twisted.python.threadpool import ThreadPool

from broker.storage.cleaner import CleanStats
from broker.storage.cleaner_manager import LogCleanerManager

log = Logger()


class LogCleanerService:
    """Schedules cleaner passes; ``manager`` holds the state and the numbers (metrics read them)."""

    def __init__(self, reactor: Any, manager: LogCleanerManager, threads: int, backoff_ms: int) -> None:
        self.reactor = reactor
        self.manager = manager
        self.threads = max(1, threads)
        self.backoff_s = max(backoff_ms, 10) / 1000.0
        self._pool = ThreadPool(self.threads, self.threads, name="log-cleaner")
        self._loop = LoopingCall(self.wake)
        self._loop.clock = reactor
        self._busy = 0
        self._running = False

    def start(self) -> None:
        self._running = True
        self._pool.start()
        self._loop.start(self.backoff_s, now=False).addErrback(lambda f: log.failure("log cleaner loop failed", f))

    def wake(self) -> None:
        """Give every idle worker a pass (each finds its own log; none found: it waits for the next wake)."""
        while self._running and self._busy < self.threads:
            self._busy += 1
            d = threads.deferToThreadPool(self.reactor, self._pool, self._work)
            d.addCallbacks(self._done, self._failed)

    def _work(self) -> CleanStats | None:
        plog = self.manager.grab_dirtiest()
        return None if plog is None else self.manager.clean(plog)

    def _done(self, stats: CleanStats | None) -> None:
        self._busy -= 1
        if stats is not None and self._running:
            self.reactor.callLater(0, self.wake)  # more may be dirty: go on without waiting for the backoff

    def _failed(self, failure: Any) -> None:
        self._busy -= 1
        log.failure("log cleaner pass failed", failure)

    def stop(self) -> None:
        """Stop scheduling and wait for passes under way (a pass ends within one segment group)."""
        self._running = False
        if self._loop.running:
            self._loop.stop()
        self._pool.stop()
        if self.manager.processes is not None:
            self.manager.processes.close()
