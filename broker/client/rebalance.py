"""The ZooKeeper consumer's partition assignment: Kafka 0.8's range algorithm, as pure functions.

For each topic, sort the partitions (as numbers) and the consumer thread ids (as strings,
as Kafka does), give consumer thread i the partitions i*N .. (i+1)*N-1 where
N = partitions // threads, and spread the remainder over the first threads: thread i gets
one extra partition when i < partitions % threads (Kafka's RangeAssignor semantics).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence


def thread_ids(consumer_id: str, n_streams: int) -> list[str]:
    """Kafka's consumer thread ids: ``<consumer id>-<i>`` for i in 0..n-1."""
    return [f"{consumer_id}-{i}" for i in range(n_streams)]


def range_assign(partitions: Iterable[int], consumer_threads: Iterable[str]) -> dict[str, list[int]]:
    """Assign one topic's partitions to consumer threads; every thread appears (maybe with [])."""
    parts = sorted(set(int(p) for p in partitions))
    threads = sorted(set(consumer_threads))
    result: dict[str, list[int]] = {t: [] for t in threads}
    if not threads:
        return result
    per, extra = divmod(len(parts), len(threads))
    for i, thread in enumerate(threads):
        start = per * i + min(i, extra)
        count = per + (1 if i < extra else 0)
        result[thread] = parts[start:start + count]
    return result


def assign(topic_partitions: Mapping[str, Sequence[int]],
           topic_threads: Mapping[str, Iterable[str]]) -> dict[tuple[str, int], str]:
    """The whole group's ownership: {(topic, partition): consumer thread id}."""
    owners: dict[tuple[str, int], str] = {}
    for topic, threads in topic_threads.items():
        for thread, parts in range_assign(topic_partitions.get(topic, ()), threads).items():
            for p in parts:
                owners[(topic, p)] = thread
    return owners


# --- topic filters (Kafka's Whitelist / Blacklist) ----------------------------------------------

class TopicFilter:
    """A regex over topic names; commas separate alternatives, as in Kafka's tools."""

    pattern_name = ""

    def __init__(self, regex: str) -> None:
        self.raw = regex
        self.regex = regex.strip().replace(",", "|").strip("\"'")
        try:
            self._re = re.compile(self.regex)
        except re.error as exc:
            raise ValueError(f"invalid topic filter regex {regex!r}: {exc}") from None

    def is_topic_allowed(self, topic: str) -> bool:
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.regex!r})"


class Whitelist(TopicFilter):
    """Topics whose whole name matches the regex."""

    pattern_name = "white_list"

    def is_topic_allowed(self, topic: str) -> bool:
        return self._re.fullmatch(topic) is not None


class Blacklist(TopicFilter):
    """Topics whose name does not match the regex."""

    pattern_name = "black_list"

    def is_topic_allowed(self, topic: str) -> bool:
        return self._re.fullmatch(topic) is None


def filter_for(pattern: str, regex: str) -> TopicFilter:
    """The filter of a registration's ``pattern`` ("white_list" / "black_list")."""
    return Whitelist(regex) if pattern == "white_list" else Blacklist(regex)


def subscribed_threads(registrations: Mapping[str, dict], topics: Sequence[str]) -> dict[str, list[str]]:
    """Topic -> consumer thread ids from every consumer's registration (/consumers/g/ids/<id>).

    A static subscription names its topics; a white_list/black_list one subscribes its n
    threads to every existing topic the pattern allows (internal topics excluded).
    """
    result: dict[str, list[str]] = {}
    for consumer_id, reg in registrations.items():
        pattern = reg.get("pattern", "static")
        for key, n in (reg.get("subscription") or {}).items():
            if pattern == "static":
                matched = [key]
            else:
                flt = filter_for(pattern, key)
                matched = [t for t in topics if not t.startswith("__") and flt.is_topic_allowed(t)]
            for topic in matched:
                result.setdefault(topic, []).extend(thread_ids(consumer_id, int(n)))
    return {t: sorted(ids) for t, ids in result.items()}
