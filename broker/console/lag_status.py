"""A Burrow-like status of a consumer's partition from its recent lag samples: pure functions.

A partition is evaluated over its last ``window`` samples (one per collector interval):

- OK: the latest lag is 0, or there are fewer samples than the window holds;
- STOP: lag > 0 and the committed offset has not moved for ``stop_after`` seconds or more;
- STALL: lag > 0 and the committed offset did not move over the whole window;
- WARN: the committed offset moves but lag is never 0 in the window and grew from its first
  sample to its last;
- OK otherwise (the consumer keeps up, or is catching up).

A group's status is its worst partition's (STOP > STALL > WARN > OK).
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Sequence
from dataclasses import dataclass


class Status(enum.IntEnum):
    """Ordered from best to worst, so a group's status is ``max`` of its partitions'."""

    OK = 0
    WARN = 1
    STALL = 2
    STOP = 3


@dataclass(frozen=True, slots=True)
class Sample:
    """One observation of a group's partition: when, its committed offset and the log end offset."""

    time: float
    committed: int
    end: int

    @property
    def lag(self) -> int:
        return max(self.end - self.committed, 0)


def partition_status(samples: Sequence[Sample], window: int, now: float, since: float, stop_after: float) -> Status:
    """The status of one partition from its samples (oldest first); ``since`` is when its committed
    offset last changed (or was first seen)."""
    if not samples or samples[-1].lag == 0:
        return Status.OK
    if now - since >= stop_after:
        return Status.STOP
    recent = samples[-window:]
    if len(recent) < window:
        return Status.OK
    if all(s.committed == recent[0].committed for s in recent):
        return Status.STALL
    if all(s.lag > 0 for s in recent) and recent[-1].lag > recent[0].lag:
        return Status.WARN
    return Status.OK


def group_status(statuses: Iterable[Status]) -> Status:
    """The worst of a group's partition statuses (OK for a group without any)."""
    return max(statuses, default=Status.OK)
