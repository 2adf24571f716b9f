"""Large work spread over reactor turns: one bounded step per turn, so that the small requests
of other connections are answered between the steps of a large answer (issue 20)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from twisted.internet import defer
from twisted.internet.task import Cooperator


def _one_step() -> bool:
    return True  # asked after each step: the turn ends there


class Turns:
    """Runs step iterators one step per reactor turn (several of them take turns)."""

    def __init__(self, reactor: Any) -> None:
        self._cooperator = Cooperator(terminationPredicateFactory=lambda: _one_step,
                                      scheduler=lambda tick: reactor.callLater(0, tick))

    def run(self, steps: Iterator[Any]) -> defer.Deferred[Any]:
        """Fires (with ``steps``) once every step has run, or with the error a step raised."""
        return self._cooperator.cooperate(steps).whenDone()
