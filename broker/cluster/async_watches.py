"""Many data watches, none of which waits on a read.

kazoo's ``DataWatch`` reads a znode again after each change with a blocking ``get`` on one
worker thread, so watch events are handled one round trip at a time: at 10,000 partition
states (a failover moves a third of them) that alone takes seconds. Here each read is
``get_async`` with a completion callback, so the reads of many events are in flight together.
After a lost connection or session (kazoo forgets its watchers then) every watched path is read
and watched again.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import ConnectionClosedError, ConnectionLoss, NoNodeError, SessionExpiredError
from kazoo.protocol.states import WatchedEvent

log = logging.getLogger(__name__)

#: ``callback(data, stat)``: data and stat are None while the node is missing; returning False
#: ends the watch
DataCallback = Callable[[bytes | None, Any], bool | None]
#: reads that fail with these are read again when the connection is back (``_on_state``)
_DISCONNECTED = (ConnectionClosedError, ConnectionLoss, SessionExpiredError)


class AsyncDataWatches:
    """Data watches by path, each read asynchronously (see the module docstring)."""

    def __init__(self, client: KazooClient) -> None:
        self._client = client
        self._callbacks: dict[str, DataCallback] = {}
        self._interrupted = False
        client.add_listener(self._on_state)

    def __len__(self) -> int:
        return len(self._callbacks)

    def watch(self, path: str, callback: DataCallback) -> None:
        """Call ``callback`` soon with the node's data, then after each change (on kazoo's
        callback thread: it must not block)."""
        self._callbacks[path] = callback
        self._read(path)

    def _read(self, path: str) -> None:
        self._ask(self._client.get_async, path, self._got)

    def _ask(self, call: Callable[..., Any], path: str, then: Callable[[str, Any], None]) -> None:
        """``call(path)`` with our watch, ``then(path, result)`` on kazoo's callback thread."""
        try:
            result = call(path, watch=self._on_event)
        except _DISCONNECTED:
            return
        result.rawlink(lambda done: then(path, done))

    def _on_event(self, event: WatchedEvent) -> None:
        if event.path in self._callbacks:
            self._read(event.path)

    def _got(self, path: str, done: Any) -> None:
        callback = self._callbacks.get(path)
        if callback is None:
            return
        try:
            data, stat = done.get(block=False)
        except NoNodeError:
            self._watch_creation(path)
            data, stat = None, None
        except _DISCONNECTED:
            return
        except Exception:
            log.exception("reading %s for its watch failed", path)
            return
        try:
            keep = callback(data, stat)
        except Exception:
            log.exception("the watch callback of %s failed", path)
            return
        if keep is False:
            self._callbacks.pop(path, None)

    def _watch_creation(self, path: str) -> None:
        self._ask(self._client.exists_async, path, self._created_meanwhile)

    def _created_meanwhile(self, path: str, done: Any) -> None:
        try:
            stat = done.get(block=False)
        except Exception:
            return
        if stat is not None and path in self._callbacks:
            self._read(path)

    def _on_state(self, state: str) -> None:
        """Connected again after a lost connection or session, read and watch every path again
        (on a thread of its own, as kazoo's DataWatch does): kazoo drops its watchers whenever
        the connection drops."""
        if state in (KazooState.SUSPENDED, KazooState.LOST):
            self._interrupted = True
        elif state == KazooState.CONNECTED and self._interrupted:
            self._interrupted = False
            self._client.handler.spawn(self._read_all)

    def _read_all(self) -> None:
        for path in list(self._callbacks):
            self._read(path)
