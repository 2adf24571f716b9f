"""Consumer offset translation: a group's committed source offsets -> offsets in the aggregate.

A group that consumed source partition ``S`` up to committed offset ``c`` (the next record it
would read) fails over to the aggregate cluster. Its new offset in a target partition is the
target offset of the first copy of ``S`` whose origin offset is ``>= c``: everything before it
of ``S`` the group has consumed, everything from it on it has not.

**The search.** Within one target partition the copies of one source partition are in
increasing origin order (the mirror keeps per-partition order), with copies of other source
clusters and partitions in between. So ``f(t)`` = the origin offset of the first copy of ``S``
at target offset ``t`` or later is non-decreasing in ``t``, and the smallest ``t`` with
``f(t) >= c`` is found by binary search over ``[log start, high watermark)``. A probe at ``m``
reads forwards from ``m`` to the first copy of ``S`` (``TailScanner.first_copy``) and never past
the current upper end, which makes the search at most ``log2(n)`` probes, each bounded.

**Never ahead.** The answer is the first copy ``>= c`` when there is one; else (the group is
ahead of the mirror) the offset just after the last copy ``< c`` (the copies still to come are
read, some again: at least once, never skipped); no copy of ``S`` at all: the high watermark (every
copy of ``S`` comes after it). A probe that reads its bound of records without finding a copy
stops the search at its lower end, which is never past the answer (said in the output).

**Placed by key** (source and target partition counts differ): every target partition may hold
copies of every source partition; its offset is the minimum of the answers for the source
partitions that have copies there (a missing committed offset counts as 0).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from mirror.resume import ScanBoundExceeded

#: ``probe(lo, hi)``: the first copy of the source partition at target offset ``lo`` or later and
#: before ``hi`` as (target offset, origin offset), None when none; may raise ScanBoundExceeded.
Probe = Callable[[int, int], "tuple[int, int] | None"]

EXACT, MIRROR_BEHIND, NO_COPY, BOUND = "exact", "mirror-behind", "no-copy", "scan-bound"


@dataclass(frozen=True)
class Translation:
    """A translated offset in one target partition and how it was found (``how``: one of
    EXACT: the first copy >= the committed offset; MIRROR_BEHIND: after the last copy below it;
    NO_COPY: the source partition has no copy there (the high watermark); BOUND: a probe hit its
    bound, the search's lower end)."""

    offset: int
    how: str
    source_topic: str = ""
    source_partition: int = -1
    committed: int = -1


def search(probe: Probe, start: int, end: int, committed: int) -> Translation:
    """Binary search of one target partition ``[start, end)`` for one source partition (module docstring)."""
    lo, hi = start, end
    first_at_hi: tuple[int, int] | None = None  # the first copy at target offset >= hi; None: none before end
    try:
        while lo < hi:
            mid = (lo + hi) // 2
            found = probe(mid, hi)
            if found is None:  # no copy in [mid, hi): f(mid) = f(hi) >= committed
                hi = mid
            elif found[1] >= committed:
                hi, first_at_hi = mid, found
            else:
                lo = found[0] + 1
    except ScanBoundExceeded:
        return Translation(lo, BOUND)
    if first_at_hi is not None:
        return Translation(first_at_hi[0], EXACT)
    if lo > start:
        return Translation(lo, MIRROR_BEHIND)
    return Translation(end, NO_COPY)


def translate_topic(probes: Callable[[int, int], Probe], bounds: Mapping[int, tuple[int, int]],
                    source_topic: str, source_count: int, committed: Mapping[int, int]) -> dict[int, Translation]:
    """The translated offset of each target partition of one topic.

    ``probes(target_partition, source_partition)`` makes a Probe; ``bounds`` maps each target
    partition to (log start, high watermark); ``committed`` the group's committed offsets by
    source partition. Partitions kept (the counts match): target partition p from source
    partition p, for the committed ones. Placed by key: each target partition from every source
    partition, the minimum of those with copies there."""
    out: dict[int, Translation] = {}
    if source_count == len(bounds):
        for p, c in sorted(committed.items()):
            if p in bounds:
                t = search(probes(p, p), *bounds[p], c)
                out[p] = Translation(t.offset, t.how, source_topic, p, c)
        return out
    if not committed:
        return out
    for tp, (start, end) in sorted(bounds.items()):
        best: Translation | None = None
        for sp in range(source_count):
            c = committed.get(sp, 0)
            t = search(probes(tp, sp), start, end, c)
            if t.how == NO_COPY:
                continue
            if best is None or t.offset < best.offset or (t.offset == best.offset and t.how == BOUND):
                best = Translation(t.offset, t.how, source_topic, sp, c)
        out[tp] = best or Translation(end, NO_COPY, source_topic, -1, -1)
    return out
