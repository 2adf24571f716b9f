"""collect_and_freeze: one full collection, then the survivors out of the collector's reach;
run again, it thaws first, so cycles among earlier survivors are collected too."""

from __future__ import annotations

import gc
import weakref

from broker.server.heap import collect_and_freeze


class _Node:
    def __init__(self) -> None:
        self.other: _Node | None = None


def _cycle() -> tuple[_Node, weakref.ref]:
    a, b = _Node(), _Node()
    a.other, b.other = b, a
    return a, weakref.ref(a)


def test_collects_first_then_freezes_and_a_later_run_collects_frozen_cycles() -> None:
    try:
        garbage, garbage_ref = _cycle()
        del garbage
        kept, kept_ref = _cycle()
        assert collect_and_freeze() > 0
        assert garbage_ref() is None  # unreachable before the freeze: collected, not frozen
        assert kept_ref() is kept and gc.get_freeze_count() > 0
        del kept  # a frozen cycle becomes garbage: a full collection alone does not see it
        gc.collect()
        assert kept_ref() is not None
        collect_and_freeze()  # thaws first
        assert kept_ref() is None
    finally:
        gc.unfreeze()
