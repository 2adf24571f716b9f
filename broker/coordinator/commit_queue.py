"""Group commit for OffsetCommit: one ZooKeeper write batch in flight at a time.

Commits that arrive while a batch is being written wait and go together in the next batch;
a partition committed several times meanwhile is written once, with its latest offset. Each
OffsetCommit is answered when the batch holding it is in ZooKeeper, so an acknowledged commit
is durable and a restarted or new coordinator reads it back.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from twisted.internet import defer
from twisted.logger import Logger

from broker.cluster.offset_store import Committed, Key, ZkOffsetStore
from broker.protocol.errors import ErrorCode

log = Logger()


class CommitQueue:
    def __init__(self, store: ZkOffsetStore, run_in_thread: Callable[..., defer.Deferred]) -> None:
        self.store = store
        self.run_in_thread = run_in_thread
        self.written: dict[Key, Committed] = {}  # what this broker last wrote: which znodes exist
        self._pending: dict[Key, Committed] = {}
        self._waiters: list[tuple[list[Key], defer.Deferred]] = []
        self._in_flight: defer.Deferred | None = None
        self.batches = 0
        self.writes = 0
        self.offsets = 0

    def commit(self, entries: dict[Key, Committed]) -> defer.Deferred:
        """Deferred of {key: error code} once ``entries`` are in ZooKeeper."""
        d: defer.Deferred = defer.Deferred()
        if not entries:
            d.callback({})
            return d
        self.offsets += len(entries)
        self._pending.update(entries)
        self._waiters.append((list(entries), d))
        self._kick()
        return d

    def stats(self) -> str:
        return f"{self.offsets} offsets committed in {self.writes} znode writes, {self.batches} ZooKeeper batches"

    def forget_group(self, group: str) -> None:
        for key in [k for k in self.written if k[0] == group]:
            del self.written[key]

    def forget(self, keys: list[Key]) -> None:
        """These offsets' znodes were deleted (OffsetDelete): the next commit creates them again."""
        for key in keys:
            self.written.pop(key, None)

    def idle(self) -> defer.Deferred:
        """Fires when nothing is pending or being written (shutdown)."""
        if self._in_flight is None and not self._pending:
            return defer.succeed(None)
        d: defer.Deferred = defer.Deferred()
        self._waiters.append(([], d))
        self._kick()
        return d

    def _kick(self) -> None:
        if self._in_flight is not None or not self._waiters:
            return
        batch, self._pending = self._pending, {}
        waiters, self._waiters = self._waiters, []
        known = {k: self.written[k] for k in batch if k in self.written}
        self.batches += 1
        self.writes += len(batch)
        d = self._in_flight = self.run_in_thread(self.store.write, batch, known)

        def done(errors: Any) -> None:
            if not isinstance(errors, dict):
                log.failure("writing offsets to ZooKeeper", errors)
                errors = {k: ErrorCode.COORDINATOR_NOT_AVAILABLE for k in batch}
            for key, code in errors.items():
                if code == ErrorCode.NONE:
                    self.written[key] = batch[key]
            self._in_flight = None
            for keys, waiter in waiters:
                waiter.callback({k: errors.get(k, ErrorCode.NONE) for k in keys})
            self._kick()

        d.addBoth(done)
