"""collect_and_freeze: one full collection, then the survivors out of the collector's reach;
run again, it thaws first, so cycles among earlier survivors are collected too.
FreezeAfterSlowCollections: a slow full collection has its survivors frozen at the next turn."""

from __future__ import annotations

import gc
import weakref

from broker.server.heap import FreezeAfterSlowCollections, collect_and_freeze


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


class _Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_only_a_slow_full_collection_schedules_one_freeze_until_it_has_run() -> None:
    scheduled: list = []
    clock = _Clock()
    hook = FreezeAfterSlowCollections(scheduled.append, slow_s=0.010, clock=clock)

    def collection(generation: int, seconds: float) -> None:
        hook("start", {"generation": generation})
        clock.now += seconds
        hook("stop", {"generation": generation, "collected": 0, "uncollectable": 0})

    collection(0, 1.0)
    collection(1, 1.0)  # young generations: never, however long
    collection(2, 0.009)
    assert scheduled == []
    collection(2, 0.011)
    collection(2, 0.5)  # the first freeze has not run yet: not asked twice
    assert len(scheduled) == 1
    try:
        scheduled.pop()()
        assert hook.freezes == 1 and gc.get_freeze_count() > 0
        collection(2, 0.011)
        assert len(scheduled) == 1
    finally:
        gc.unfreeze()


def test_the_survivors_of_a_real_full_collection_leave_the_collector() -> None:
    scheduled: list = []
    hook = FreezeAfterSlowCollections(scheduled.append, slow_s=0.0).install()
    try:
        kept, _ = _cycle()
        garbage, garbage_ref = _cycle()
        del garbage
        gc.collect()
        assert garbage_ref() is None and len(scheduled) == 1
        assert any(o is kept for o in gc.get_objects(generation=2))
        scheduled.pop()()
        assert not any(o is kept for g in range(3) for o in gc.get_objects(generation=g))
        assert kept.other is not None and kept.other.other is kept  # frozen, not freed
    finally:
        hook.uninstall()
        gc.unfreeze()
    assert hook not in gc.callbacks
