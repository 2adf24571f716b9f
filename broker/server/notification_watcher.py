"""What the ACL store and the dynamic-config listener share: ZooKeeper change notifications
(kazoo's thread) handed to the reactor, the new ones read off the reactor thread, applied on it,
one pass at a time so an older read never overwrites a newer one."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Generic, TypeVar

from twisted.internet import threads
from twisted.logger import Logger

if TYPE_CHECKING:
    from broker.server.broker import Broker

log = Logger()
Found = TypeVar("Found")


class NotificationWatcher(Generic[Found]):
    """Subclasses say how to read what the notifications since the last pass name (blocking,
    ``read_new``) and how to apply it (on the reactor, ``apply``)."""

    what = "changes"  # for the log line when a pass fails

    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self._stopped = False
        self._reading = False
        self._again = False

    def stop(self) -> None:
        self._stopped = True

    def on_notifications(self, children: list[str]) -> None:
        """kazoo's watch callback (its thread): hand the work to the reactor."""
        if not self._stopped:
            self.broker.reactor.callFromThread(self._process)

    def read_new(self) -> Found:
        raise NotImplementedError

    def apply(self, found: Found) -> None:
        raise NotImplementedError

    def _process(self) -> None:
        if self._reading:
            self._again = True
            return
        self._reading = True
        d = threads.deferToThread(self.read_new)
        d.addCallback(self.apply)
        d.addErrback(lambda f: log.failure("applying {what}", f, what=self.what))
        d.addBoth(self._done)

    def _done(self, _: Any) -> None:
        self._reading = False
        if self._again and not self._stopped:
            self._again = False
            self._process()
