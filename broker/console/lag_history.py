"""The lag history the console keeps in memory: the last samples of every group's partitions.

Filled by the collector once per interval, read by the pages, the charts and ``/metrics``.
Not thread-safe on its own: the collector records on the reactor thread, where pages read.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping

from broker.console.lag_status import Sample, Status, group_status, partition_status

TopicPartition = tuple[str, int]


class LagHistory:
    """Up to ``keep`` samples per (group, topic, partition), and when each committed offset last moved."""

    def __init__(self, keep: int = 60, window: int = 10, stop_after: float = 600.0) -> None:
        self.keep = max(keep, window)
        self.window = window
        self.stop_after = stop_after
        self._samples: dict[str, dict[TopicPartition, deque[Sample]]] = {}
        self._since: dict[tuple[str, TopicPartition], float] = {}

    def record(self, now: float, group: str, committed: Mapping[TopicPartition, int],
               ends: Mapping[TopicPartition, int]) -> None:
        """One round's offsets of ``group``; partitions without a known log end keep their old samples."""
        parts = self._samples.setdefault(group, {})
        for tp in [tp for tp in parts if tp not in committed]:
            del parts[tp]
            self._since.pop((group, tp), None)
        for tp, offset in committed.items():
            if tp not in ends:
                continue
            samples = parts.setdefault(tp, deque(maxlen=self.keep))
            if not samples or samples[-1].committed != offset:
                self._since[(group, tp)] = now
            samples.append(Sample(now, offset, ends[tp]))

    def retain(self, groups: set[str]) -> None:
        """Forget every group not in ``groups`` (deleted, or gone from the cluster)."""
        for group in [g for g in self._samples if g not in groups]:
            for tp in self._samples.pop(group):
                self._since.pop((group, tp), None)

    def groups(self) -> list[str]:
        return sorted(self._samples)

    def partitions(self, group: str) -> dict[TopicPartition, list[Sample]]:
        """The samples of each partition of ``group``, oldest first."""
        return {tp: list(s) for tp, s in sorted(self._samples.get(group, {}).items())}

    def partition_statuses(self, group: str, now: float) -> dict[TopicPartition, Status]:
        return {tp: partition_status(list(s), self.window, now, self._since[(group, tp)], self.stop_after)
                for tp, s in sorted(self._samples.get(group, {}).items())}

    def status(self, group: str, now: float) -> Status:
        """The group's Burrow-like status: its worst partition's."""
        return group_status(self.partition_statuses(group, now).values())

    def lag(self, group: str) -> dict[TopicPartition, int]:
        """The latest lag of each partition of ``group``."""
        return {tp: s[-1].lag for tp, s in sorted(self._samples.get(group, {}).items()) if s}

    def total_lag(self, group: str) -> list[tuple[float, int]]:
        """The group's lag summed over its partitions, per sample time (the chart's points)."""
        totals: dict[float, int] = {}
        for samples in self._samples.get(group, {}).values():
            for s in samples:
                totals[s.time] = totals.get(s.time, 0) + s.lag
        return sorted(totals.items())
