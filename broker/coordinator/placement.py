"""Which broker coordinates a group: a pure function of the group id and the live broker ids.

Every broker computes the same answer from the same live list (``/brokers/ids``), so any
broker can answer FindCoordinator and a broker that is not the coordinator knows to answer
NOT_COORDINATOR. The hash is Java's ``String.hashCode`` made non-negative as Kafka's
``Utils.abs`` does, so the spread matches what a Kafka user would expect of
``abs(groupId.hashCode) % n``.
"""

from __future__ import annotations

from collections.abc import Iterable


def java_string_hash(text: str) -> int:
    """Java's ``String.hashCode`` (over UTF-16 code units), as a signed 32-bit int."""
    h = 0
    data = text.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def coordinator_for(group_id: str, live_broker_ids: Iterable[int]) -> int | None:
    """The coordinating broker id of ``group_id``, or None when no broker is alive."""
    ids = sorted(live_broker_ids)
    if not ids:
        return None
    return ids[(java_string_hash(group_id) & 0x7FFFFFFF) % len(ids)]
