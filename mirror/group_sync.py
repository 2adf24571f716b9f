"""``--sync.group.offsets``: the mirror keeps consumer groups' offsets in the aggregate cluster in
step with their offsets in the sources (off by default; MirrorMaker 2's sync.group.offsets).

Every ``sync.group.offsets.interval.ms`` each source's groups (but the mirror's own) are
translated as ``consumer-groups --translate-from`` does (``broker.tools.translate_offsets``, the
search in ``mirror.translate``), restricted to the topics the mirror copies. A target partition
that gets offsets from several sources (a target topic they share) takes the smallest, so no
source's records are skipped. An offset is committed only

- when the group has no active member in the aggregate cluster (state Empty or Dead): a group
  that runs there owns its offsets, and
- when it is ahead of what the group has committed there (never moved back: a group that failed
  over and read on is not rewound), as MirrorMaker 2 does.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from broker.client.connection import BrokerConnectionError
from broker.protocol.errors import KafkaError
from broker.tools import CommandError
from broker.tools.access import ClusterAccess
from mirror.config import SourceConfig

log = logging.getLogger("mirror.group_sync")

TopicPartition = tuple[str, int]


class GroupOffsetSync:
    """One background thread translating and committing groups' offsets (module docstring)."""

    def __init__(self, sources: list[SourceConfig], topic_filter: Any, target: ClusterAccess, interval_ms: int,
                 max_records: int, stop: threading.Event) -> None:
        self.sources = sources
        self.topic_filter = topic_filter
        self.target = target
        self.interval = interval_ms / 1000.0
        self.max_records = max_records
        self.stop = stop
        self.synced = 0  # offsets committed in the aggregate cluster, all groups
        self.passes = 0
        self._thread: threading.Thread | None = None
        self._warned: set[str] = set()

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name="mirror-group-sync", daemon=True)
        self._thread.start()

    def join(self, timeout: float) -> None:
        if self._thread is not None:
            self._thread.join(timeout)

    def _loop(self) -> None:
        while not self.stop.wait(self.interval):
            try:
                self.sync_once()
            except Exception as exc:  # noqa: BLE001 - a cluster away for a while: next interval
                log.warning("syncing group offsets: %s", exc)

    def sync_once(self) -> dict[str, dict[TopicPartition, int]]:
        """One pass over every source group; returns what was committed, by group."""
        from broker.tools import translate_offsets as tr

        plans: dict[str, dict[TopicPartition, int]] = {}
        for source in self.sources:
            try:
                groups = [g for g in tr.source_groups(source.consumer_props) if g != source.group]
            except (CommandError, OSError, BrokerConnectionError, KafkaError) as exc:
                self._warn(f"listing the groups of {source.name or source.path}: {exc}")
                continue
            for group in groups:
                try:
                    found = tr.read_source_props(source.consumer_props, group, source.topic_prefix)
                    found.committed = {tp: c for tp, c in found.committed.items() if self._copied(tp[0])}
                    if not found.committed:
                        continue
                    rows = tr.plan(found, self.target, group, [], self.max_records, warn=lambda line: log.debug(line))
                except (CommandError, OSError, BrokerConnectionError, KafkaError) as exc:
                    log.debug("group %s of %s not synced: %s", group, source.name or source.path, exc)
                    continue
                merged = plans.setdefault(group, {})
                for r in rows:
                    key = (r.topic, r.partition)
                    merged[key] = min(r.offset, merged.get(key, r.offset))
        done: dict[str, dict[TopicPartition, int]] = {}
        for group, offsets in sorted(plans.items()):
            try:
                state, current = tr.target_group(self.target, group)
                if state not in ("Empty", "Dead"):
                    continue  # active in the aggregate cluster: its own offsets
                ahead = {tp: o for tp, o in offsets.items() if o > current.get(tp, -1)}
                if not ahead:
                    continue
                tr.commit(self.target, group, [tr.Row(t, p, o, "", -1, -1, "") for (t, p), o in sorted(ahead.items())])
            except (CommandError, OSError, BrokerConnectionError, KafkaError) as exc:
                self._warn(f"committing group {group}'s offsets in the aggregate cluster: {exc}")
                continue
            done[group] = ahead
            self.synced += len(ahead)
            log.info("group %s: %d offsets synced into the aggregate cluster", group, len(ahead))
        self.passes += 1
        return done

    def _copied(self, topic: str) -> bool:
        """Whether the mirror copies ``topic`` (its whitelist/blacklist; internal topics never)."""
        if topic.startswith("__"):
            return False
        check = getattr(self.topic_filter, "is_topic_allowed", None)
        return bool(check(topic)) if check is not None else True

    def _warn(self, message: str) -> None:
        if message not in self._warned:
            self._warned.add(message)
            log.warning("%s", message)
