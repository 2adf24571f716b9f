"""The lag history the console keeps in memory, and the view of it the pages read.

Per partition of each group only the last ``window`` samples are kept (what its status is judged
on), and per group its total lag at each of the last ``keep`` rounds (the chart): memory grows
with partitions x window, not partitions x history. ``view(now)`` evaluates everything once per
round into an immutable ``LagView``, so a page or a scrape costs what it shows, not what the
cluster holds. The history is changed by one round at a time (the collector's); the pages only
read views.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field

from broker.console.lag_status import Sample, Status, group_status, partition_status

TopicPartition = tuple[str, int]


@dataclass(frozen=True)
class PartitionLag:
    lag: int
    status: Status


@dataclass(frozen=True)
class GroupLag:
    """One group as of a round: its status, each partition's lag and status, its total lag over time."""

    status: Status
    partitions: dict[TopicPartition, PartitionLag]
    series: tuple[tuple[float, int], ...]

    @property
    def total(self) -> int:
        return sum(p.lag for p in self.partitions.values())


@dataclass(frozen=True)
class LagView:
    """Every group's lag and status as of ``time``."""

    time: float
    groups: dict[str, GroupLag] = field(default_factory=dict)

    def group(self, name: str) -> GroupLag:
        return self.groups.get(name) or GroupLag(Status.OK, {}, ())


class LagHistory:
    """The last ``window`` samples per (group, topic, partition), when each committed offset last
    moved, and the last ``keep`` total lags per group."""

    def __init__(self, keep: int = 60, window: int = 10, stop_after: float = 600.0) -> None:
        self.keep = keep
        self.window = window
        self.stop_after = stop_after
        self._samples: dict[str, dict[TopicPartition, deque[Sample]]] = {}
        self._since: dict[str, dict[TopicPartition, float]] = {}
        self._totals: dict[str, deque[tuple[float, int]]] = {}

    def record(self, now: float, group: str, committed: Mapping[TopicPartition, int],
               ends: Mapping[TopicPartition, int]) -> None:
        """One round's offsets of ``group``; partitions without a known log end keep their old samples."""
        parts = self._samples.setdefault(group, {})
        since = self._since.setdefault(group, {})
        for tp in [tp for tp in parts if tp not in committed]:
            del parts[tp]
            since.pop(tp, None)
        for tp, offset in committed.items():
            if tp not in ends:
                continue
            samples = parts.get(tp)
            if samples is None:
                samples = parts[tp] = deque(maxlen=self.window)
            if not samples or samples[-1].committed != offset:
                since[tp] = now
            samples.append(Sample(now, offset, ends[tp]))
        total = sum(s[-1].lag for s in parts.values())
        self._totals.setdefault(group, deque(maxlen=self.keep)).append((now, total))

    def retain(self, groups: set[str]) -> None:
        """Forget every group not in ``groups`` (deleted, or gone from the cluster)."""
        for group in [g for g in self._samples if g not in groups]:
            del self._samples[group], self._since[group], self._totals[group]

    def groups(self) -> list[str]:
        return sorted(self._samples)

    def partitions(self, group: str) -> dict[TopicPartition, list[Sample]]:
        """The kept samples of each partition of ``group``, oldest first."""
        return {tp: list(s) for tp, s in sorted(self._samples.get(group, {}).items())}

    def total_lag(self, group: str) -> list[tuple[float, int]]:
        """The group's lag summed over its partitions, per round (the chart's points)."""
        return list(self._totals.get(group, ()))

    def evaluate(self, group: str, now: float) -> GroupLag:
        """The group's lag and status per partition and its own status, as of ``now``."""
        since = self._since.get(group, {})
        partitions = {tp: PartitionLag(s[-1].lag, partition_status(list(s), self.window, now, since[tp], self.stop_after))
                      for tp, s in sorted(self._samples.get(group, {}).items()) if s}
        return GroupLag(group_status(p.status for p in partitions.values()), partitions, tuple(self.total_lag(group)))

    def view(self, now: float) -> LagView:
        """Every group evaluated once: what the pages and ``/metrics`` read until the next round."""
        return LagView(now, {g: self.evaluate(g, now) for g in self.groups()})
