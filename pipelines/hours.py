"""Per event hour accounting of a range: every record read lands in exactly one column.

``read`` counts every record of the range by its event hour (``pipelines.event_time``), whatever
became of it; ``rows`` the rows written into the hour's ``dt=/hour=`` directory (late rows too
under ``late_data: reopen``); ``late`` the records that arrived after their hour had closed;
``errors`` the undecodable ones (``_errors/``); ``duplicates`` the copies dropped by origin.
So ``read == rows + errors + duplicates + (late unless reopened)``: what ``logbus audit``
counts at the cluster is checked against ``read`` (``pipelines.completeness``).
Hours are epoch hours (epoch ms // 1 h) as strings (JSON keys); ``none`` is an unknown event time.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import numpy as np

COLUMNS = ("read", "rows", "late", "errors", "duplicates")
NONE = "none"  # the key of records without an event time (pipelines.event_time.NO_HOUR)
_NO_HOUR = int(np.iinfo(np.int64).min)
HourCounts = dict[str, dict[str, int]]


def add(tally: HourCounts, column: str, hours: np.ndarray | Iterable[int]) -> None:
    """Count each of ``hours`` (one per record) into ``column``."""
    values, counts = np.unique(np.asarray(hours, dtype=np.int64), return_counts=True)
    for hour, n in zip(values.tolist(), counts.tolist()):
        row = tally.setdefault(NONE if hour == _NO_HOUR else str(hour), dict.fromkeys(COLUMNS, 0))
        row[column] += n


def merge(into: HourCounts, other: Mapping[str, Mapping[str, int]] | None) -> HourCounts:
    """``into`` plus ``other``, column by column (returns ``into``)."""
    for hour, row in (other or {}).items():
        mine = into.setdefault(str(hour), dict.fromkeys(COLUMNS, 0))
        for column in COLUMNS:
            mine[column] += int(row.get(column, 0))
    return into


def sorted_counts(tally: Mapping[str, Mapping[str, int]]) -> HourCounts:
    """The tally with its hours in numeric order (a stable JSON form)."""
    return {h: dict(tally[h]) for h in sorted(tally, key=lambda h: _NO_HOUR if h == NONE else int(h))}


def unaccounted(row: Mapping[str, int], policy: str) -> int:
    """Records of the hour read but neither written, refused nor dropped on purpose (0 when whole)."""
    moved = 0 if policy == "reopen" else row.get("late", 0)
    return row.get("read", 0) - row.get("rows", 0) - row.get("errors", 0) - row.get("duplicates", 0) - moved


__all__ = ["NONE", "COLUMNS", "HourCounts", "add", "merge", "sorted_counts", "unaccounted"]
