"""Replica assignment for new topics and partitions, Kafka's rack-unaware scheme.

Brokers are sorted; partition p's first replica (its preferred leader) is broker
(start + p) mod n, so leaders go round-robin. The followers of p sit at fixed distances
from the first replica; the distance pattern shifts by one after every n partitions, so
that the partitions led by one broker do not all put their followers on the same brokers.
The start and the initial shift are random unless given, as in Kafka.
"""

from __future__ import annotations

import random
from collections.abc import Iterable
from typing import Protocol

from broker.protocol.errors import InvalidPartitionsError, InvalidReplicationFactorError

__all__ = ["assign_replicas"]



class RandRange(Protocol):
    """What the assignment draws from: ``random`` (the module) or a seeded ``random.Random``."""

    def randrange(self, start: int, stop: int | None = ..., step: int = ...) -> int: ...

def assign_replicas(
    broker_ids: Iterable[int],
    num_partitions: int,
    replication_factor: int,
    start_index: int | None = None,
    rng: RandRange = random,
    start_partition: int = 0,
) -> dict[int, list[int]]:
    """Map partition -> replica broker ids (first = preferred leader).

    ``start_index`` fixes both the first leader's position and the initial follower shift
    (random otherwise, drawn from ``rng``). ``start_partition`` numbers the partitions from
    there, for adding partitions to an existing topic.
    """
    brokers = sorted(set(int(b) for b in broker_ids))
    n = len(brokers)
    if num_partitions <= 0:
        raise InvalidPartitionsError(f"Number of partitions must be larger than 0, got {num_partitions}.")
    if replication_factor <= 0:
        raise InvalidReplicationFactorError(f"Replication factor must be larger than 0, got {replication_factor}.")
    if replication_factor > n:
        raise InvalidReplicationFactorError(
            f"Replication factor: {replication_factor} larger than available brokers: {n}."
        )
    if start_index is not None and start_index < 0:
        raise ValueError(f"start_index must be >= 0, got {start_index}")

    first_offset = start_index if start_index is not None else rng.randrange(n)
    shift = start_index if start_index is not None else rng.randrange(n)
    result: dict[int, list[int]] = {}
    for partition in range(start_partition, start_partition + num_partitions):
        if partition > 0 and partition % n == 0:
            shift += 1  # a new round of leaders: move the followers relative to them
        first = (partition + first_offset) % n
        replicas = [brokers[first]]
        for j in range(replication_factor - 1):
            # distance 1..n-1 from the first replica, never 0, so replicas are distinct
            distance = 1 + (shift + j) % (n - 1)
            replicas.append(brokers[(first + distance) % n])
        result[partition] = replicas
    return result
