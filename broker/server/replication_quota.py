"""Replication throttling, as Kafka's ``--throttle``: a rate in bytes/s per broker
(``leader.replication.throttled.rate`` for what a leader sends its followers,
``follower.replication.throttled.rate`` for what a follower fetches) that applies only to the
replicas a topic names in ``leader.replication.throttled.replicas`` /
``follower.replication.throttled.replicas`` (``partition:broker,...``, or ``*`` for all), so a
reassignment's copying does not starve producers and consumers.

The rate is measured over a sliding window of ``windows`` samples of ``window_s`` seconds (Kafka:
11 of 1 s); while it is over, throttled partitions are left out of fetches. No Twisted here.
"""

from __future__ import annotations

import functools
import time
from collections import deque
from collections.abc import Callable

from broker.storage.config import ALL_REPLICAS, LogConfig, parse_throttled_replicas

UNLIMITED = (1 << 63) - 1  # Kafka's default rate: Long.MAX_VALUE, no throttle
#: The broker keys of the two rates (per broker, or cluster-wide with --entity-default).
THROTTLE_RATES = ("leader.replication.throttled.rate", "follower.replication.throttled.rate")
LEADER_REPLICAS = "leader.replication.throttled.replicas"
FOLLOWER_REPLICAS = "follower.replication.throttled.replicas"


class ReplicationQuota:
    """Bytes recorded in time windows; ``exceeded()`` while their rate is above ``rate``."""

    def __init__(self, rate: int = UNLIMITED, window_s: float = 1.0, windows: int = 11,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.rate = rate
        self.window_s = window_s
        self.windows = windows
        self.clock = clock
        self._samples: deque[list[float]] = deque()  # [window start, bytes]
        self.throttled_bytes = 0  # all recorded, for metrics

    @property
    def limited(self) -> bool:
        return self.rate < UNLIMITED

    def record(self, size: int) -> None:
        now = self.clock()
        if not self._samples or now - self._samples[-1][0] >= self.window_s:
            self._samples.append([now, 0.0])
        self._samples[-1][1] += size
        self.throttled_bytes += size
        self._expire(now)

    def observed_rate(self) -> float:
        """Bytes/s over the kept windows (at least one window long, so a first burst is not divided by ~0)."""
        now = self.clock()
        self._expire(now)
        if not self._samples:
            return 0.0
        elapsed = max(now - self._samples[0][0], self.window_s)
        return sum(b for _, b in self._samples) / elapsed

    def exceeded(self) -> bool:
        return self.limited and self.observed_rate() > self.rate

    def _expire(self, now: float) -> None:
        horizon = now - self.window_s * self.windows
        while self._samples and self._samples[0][0] < horizon:
            self._samples.popleft()


@functools.lru_cache(maxsize=1024)
def _replicas(value: str | None) -> frozenset[tuple[int, int]] | str:
    try:
        return parse_throttled_replicas(value)
    except ValueError:  # refused when set; an old znode's bad value throttles nothing
        return frozenset()


def is_throttled(config: LogConfig, key: str, partition: int, broker_id: int) -> bool:
    """Whether the topic's ``key`` (leader./follower.replication.throttled.replicas) names this replica."""
    replicas = _replicas(config.other.get(key))
    return replicas == ALL_REPLICAS or (partition, broker_id) in replicas
