"""A reactor whose turns the test takes by hand, for work spread over turns (broker.server.turns)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


class HandTurnedReactor:
    """What ``callLater(0, ...)`` schedules runs at the next ``turn()``, not within the current
    one (a real reactor polls its sockets in between; task.Clock would run it at once)."""

    def __init__(self) -> None:
        self.pending: list[_Call] = []

    def callLater(self, _delay: float, f: Callable[..., Any], *args: Any) -> _Call:  # noqa: N802 - IReactorTime's name
        call = _Call(lambda: f(*args))
        self.pending.append(call)
        return call

    def turn(self) -> None:
        calls, self.pending = self.pending, []
        for call in calls:
            if not call.cancelled:
                call.run()


class _Call:
    def __init__(self, run: Callable[[], Any]) -> None:
        self.run, self.cancelled = run, False

    def cancel(self) -> None:
        self.cancelled = True
