"""Deduplication by origin: the bounded index of the origins a partition's loads have written.

A record copied by a mirror carries ``logbus.origin`` headers (``broker.protocol.origin``); the
first one names where it was born (cluster id, topic, partition, offset), the same for a copy of
a copy. A mirror that crashes and restarts copies again what it copied since its last commit,
so one birth can reach the aggregate cluster several times. The loader writes each birth once:
a record whose birth it already wrote, in this range or in an earlier committed one, is dropped
and counted (``duplicates_dropped`` in the task stats and the manifest). Records without an
origin header (or whose first origin does not parse) are never dropped.

The index is kept per loaded topic-partition, and in it per *source* (cluster id, topic,
partition of the birth):

- ``hi``: the highest birth offset written from that source;
- the birth offsets written in the window ``(hi - window, hi]``, as runs ``[a, b)``.

A birth above ``hi`` is new. One inside the window is a duplicate when the window holds it (a
first copy that arrives out of order, e.g. after a producer retry, is still written). One at
or below ``hi - window`` is dropped as a duplicate too, and counted apart (``below_window``):
a mirror copies each source partition in order, so only a copy made again (a resumed mirror, a
second path) arrives that far behind what the same source already wrote. ``window`` is the
loader key ``dedup.origin.window.offsets``: it bounds the index to at most ``window`` offsets
(and so at most ``window`` runs) per source, however long the load; contiguous copies make one
run. 0 turns deduplication off.

The index travels with the offsets: the plan pins each partition's starting index (so a rerun
drops exactly the same records), each range's task returns the index after it (also in its
files' commit summary, for a run finished from its files), and the committed manifest holds
the merged index the next plan starts from. A partition split into several ranges of one run
loads them at the same time: each range after the first reads the origins of up to ``window``
offsets before its start into its index first (``RangeTask.lookback``).
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Mapping
from typing import Any

from broker.protocol.origin import HEADER, parse_origin

__all__ = ["OriginIndex", "NEW", "DUPLICATE", "BELOW_WINDOW", "NO_ORIGIN", "add_run"]

NEW, DUPLICATE, BELOW_WINDOW, NO_ORIGIN = 0, 1, 2, 3

Source = tuple[str, str, int]  # the birth's (cluster id, topic, partition)


def add_run(runs: list[list[int]], offset: int) -> None:
    """Append ``offset`` to sorted runs ``[a, b)`` (``offset`` at or above the last run's end)."""
    if runs and runs[-1][1] == offset:
        runs[-1][1] = offset + 1
    else:
        runs.append([offset, offset + 1])


class _Written:
    """One source's part of the index: ``hi`` and the runs ``[a, b)`` of written offsets in the window."""

    __slots__ = ("hi", "runs", "first")

    def __init__(self, hi: int = -1, runs: list[list[int]] | None = None) -> None:
        self.hi = hi
        self.runs: list[list[int]] = runs if runs is not None else []
        self.first = 0  # runs before this one are below the window (dropped lazily)

    def floor(self, window: int) -> int:
        """The lowest offset the window still tells apart."""
        return self.hi - window + 1

    def check(self, offset: int, window: int) -> int:
        """NEW (and now recorded), DUPLICATE or BELOW_WINDOW."""
        if offset > self.hi:  # the common case, inlined: a new highest birth
            runs = self.runs
            if runs and runs[-1][1] == offset:
                runs[-1][1] = offset + 1
            else:
                runs.append([offset, offset + 1])
            self.hi = offset
            if runs[self.first][1] <= offset - window + 1:
                self._trim(window)
            return NEW
        if offset < self.floor(window):
            return BELOW_WINDOW
        runs = self.runs
        i = bisect.bisect_right(runs, offset, lo=self.first, key=lambda r: r[0]) - 1
        if i >= self.first and offset < runs[i][1]:
            return DUPLICATE
        # a first copy arriving out of order, inside the window: record it
        if i >= self.first and runs[i][1] == offset:
            runs[i][1] = offset + 1
            if i + 1 < len(runs) and runs[i + 1][0] == offset + 1:
                runs[i][1] = runs[i + 1][1]
                del runs[i + 1]
        elif i + 1 < len(runs) and runs[i + 1][0] == offset + 1:
            runs[i + 1][0] = offset
        else:
            runs.insert(i + 1, [offset, offset + 1])
        return NEW

    def _trim(self, window: int) -> None:
        floor = self.floor(window)
        runs = self.runs
        while self.first < len(runs) and runs[self.first][1] <= floor:
            self.first += 1
        if self.first > 64 and self.first * 2 > len(runs):
            del runs[:self.first]
            self.first = 0

    def window_runs(self, window: int) -> list[list[int]]:
        """The runs inside the window, the first one cut at the floor."""
        floor = self.floor(window)
        return [[max(a, floor), b] for a, b in self.runs[self.first:] if b > floor]


class OriginIndex:
    """The origins written to one topic-partition, bounded by ``window`` offsets per source."""

    def __init__(self, window: int, sources: Mapping[Source, _Written] | None = None) -> None:
        if window < 1:
            raise ValueError(f"the origin window must be at least 1, not {window}")
        self.window = window
        self.sources: dict[Source, _Written] = dict(sources or {})
        self._by_prefix: dict[bytes, _Written] = {}  # header value up to the offset -> its source

    # --- checking -----------------------------------------------------------------------------
    def check(self, headers: Iterable | None) -> int:
        """NEW (recorded as written), DUPLICATE, BELOW_WINDOW, or NO_ORIGIN (no origin header that
        parses: never dropped) for a record with these headers."""
        for item in headers or ():
            if item[0] != HEADER or item[1] is None:
                continue
            value = item[1] if type(item[1]) is bytes else bytes(item[1])
            prefix, _, digits = value.rpartition(b":")
            written = self._by_prefix.get(prefix)
            if written is None or not digits.isdigit():
                origin = parse_origin(value)
                if origin is None:
                    continue  # not an origin: the next one may be
                source = (origin.cluster_id, origin.topic, origin.partition)
                written = self.sources.get(source)
                if written is None:
                    written = self.sources[source] = _Written()
                self._by_prefix[prefix] = written
                return written.check(origin.offset, self.window)
            return written.check(int(digits), self.window)
        return NO_ORIGIN

    # --- combining and storing ----------------------------------------------------------------
    def merge(self, other: OriginIndex) -> OriginIndex:
        """One index holding what both hold (the ranges of one partition loaded side by side), within
        this index's window."""
        out = OriginIndex(self.window)
        for source in sorted(set(self.sources) | set(other.sources)):
            parts = [(ix.sources[source], ix.window) for ix in (self, other) if source in ix.sources]
            hi = max(w.hi for w, _ in parts)
            floor = hi - self.window + 1
            runs: list[list[int]] = []
            for a, b in sorted(r for w, window in parts for r in w.window_runs(window)):
                a = max(a, floor)
                if b <= a:
                    continue
                if runs and a <= runs[-1][1]:
                    runs[-1][1] = max(runs[-1][1], b)
                else:
                    runs.append([a, b])
            out.sources[source] = _Written(hi, runs)
        return out

    def to_json(self) -> dict[str, Any]:
        """A JSON-able document, in a fixed order (``from_json`` reads it back)."""
        return {"window": self.window, "sources": [
            {"cluster": c, "topic": t, "partition": p, "hi": w.hi, "runs": w.window_runs(self.window)}
            for (c, t, p), w in sorted(self.sources.items())]}

    @classmethod
    def from_json(cls, doc: Mapping[str, Any] | None, window: int | None = None) -> OriginIndex:
        """The index of ``doc`` (None: empty); ``window`` replaces the document's own (its runs are
        cut to it)."""
        doc = doc or {}
        index = cls(int(window if window is not None else doc["window"]))
        for s in doc.get("sources", ()):
            written = _Written(int(s["hi"]), [[int(a), int(b)] for a, b in s.get("runs", ())])
            written.runs = written.window_runs(index.window)
            index.sources[(str(s["cluster"]), str(s["topic"]), int(s["partition"]))] = written
        return index

    def offsets_held(self) -> int:
        """How many offsets the index holds (at most ``window`` per source)."""
        return sum(b - a for w in self.sources.values() for a, b in w.window_runs(self.window))

    def __len__(self) -> int:
        return len(self.sources)
