"""What the replica layer needs of time: the reactor in the broker, a task.Clock in tests.

Declared here as typing Protocols because Twisted's IReactorTime and IDelayedCall are zope
interfaces, which the type checker cannot use as types.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol


class DelayedCall(Protocol):
    def active(self) -> bool: ...

    def cancel(self) -> None: ...


class Clock(Protocol):
    def seconds(self) -> float: ...

    def callLater(self, delay: float, callable: Callable[..., Any], *args: Any, **kw: Any) -> Any: ...


def millis(clock: Clock) -> Callable[[], int]:
    """The clock's time in milliseconds, as a callable (what Partition takes)."""
    return lambda: int(clock.seconds() * 1000)
