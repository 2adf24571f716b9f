"""A source cluster reached by ``bootstrap.servers``: ``num.streams`` members of a standard Kafka
consumer group (``GroupConsumer``), so any Kafka-compatible cluster can be mirrored.

Each member is one ``GroupStream``, used by one copying thread: its ``next_chunk`` polls and
hands out the records of one source partition at a time (offset order), the shape the mirror's
bulk path takes; an idle poll raises ConsumerTimeoutException so the thread can notice a stop.
Every member subscribes to the whitelist as a regex pattern (a blacklist becomes a pattern that
matches every other name), so a matching topic created later joins at the next metadata refresh
(``metadata.max.age.ms``) without a restart.

Commits, with the mirror's guarantee (only offsets whose records the producer has flushed):

- GroupConsumer is not thread-safe, so only the member's own thread uses it. The committer
  (``MirrorMaker.commit``: gate closed, positions snapshot, flush) hands each member the flushed
  snapshot (``commit`` -> ``GroupStream.offer``); the member commits it at its next loop turn,
  before it polls, keeping only its own partitions of this assignment that it has copied from
  (the offset is above the first one it fetched: a snapshot older than a rebalance is dropped).
- A rebalance (``on_revoke``, which the consumer calls on this thread before it rejoins): the
  member drops the chunks it has not handed out, flushes the producer (senders held at the gate)
  and commits the positions of the partitions it gives up, so their next owner starts right
  after what this one copied: no duplicates from a rebalance, only from a crash (the window
  since the last commit).
- Shutdown: each member's lock is taken once its current poll returns (the copying threads have
  stopped by then); the last snapshot is committed and ``close()`` revokes (flush, commit of the
  newest positions) and leaves the group, so the final commit happens before the members close.

Target topics are created with the source's partition count (Metadata) and the topic's config
overrides from DescribeConfigs (default configs when the source refuses it). Lag: Metadata for
the leaders, ListOffsets for the high watermarks (``mirror.stats.MetadataLagProbe``).
"""

from __future__ import annotations

import itertools
import logging
import re
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from broker.client.connection import BrokerConnectionError
from broker.client.group_consumer import GroupConsumer
from broker.client.security import ClientSecurity
from broker.client.simple_consumer import MessageAndMetadata
from broker.client.zk_consumer import ConsumerTimeoutException
from broker.protocol.errors import KafkaError
from mirror.config import SourceConfig
from mirror.errors import MirrorError
from mirror.group_props import group_consumer_props, poll_timeout
from mirror.stats import MetadataLagProbe
from mirror.topics import TargetAdmin

log = logging.getLogger("mirror.group")

TP = tuple[str, int]
#: TopicFilter.pattern_name -> the subscription pattern made from its regex (full-match semantics).
PATTERNS = {"white_list": "(?:{})", "black_list": r"(?!(?:{})\Z).*"}


def topic_pattern(topic_filter: Any) -> re.Pattern:
    """The group subscription pattern of a whitelist/blacklist (``broker.client.rebalance``)."""
    return re.compile(PATTERNS[topic_filter.pattern_name].format(topic_filter.regex))


class GroupStream:
    """One group member and its copying thread's stream; see the module docstring."""

    def __init__(self, source: GroupSource, props: dict[str, str], pattern: re.Pattern, timeout: float,
                 flushed: Callable[[], bool]) -> None:
        self.source = source
        self.timeout = timeout
        self._flushed = flushed
        self._lock = threading.Lock()  # held while the consumer is in use
        self._chunks: deque[list[MessageAndMetadata]] = deque()
        self._pending: dict[TP, int] | None = None  # the committer's last flushed snapshot
        self._pending_lock = threading.Lock()
        self._floors: dict[TP, int] = {}  # first offset fetched per partition in this assignment
        self._committed: dict[TP, int] = {}
        self.closed = False
        self.consumer = GroupConsumer(props, on_assign=self._on_assign, on_revoke=self._on_revoke)
        self.consumer.subscribe(pattern=pattern)

    def next_chunk(self) -> list[MessageAndMetadata]:
        """The next records of one source partition, in offset order (ConsumerTimeoutException: none)."""
        if self._chunks:
            return self._chunks.popleft()
        with self._lock:
            if self.closed:
                raise StopIteration
            self._commit_pending()
            records = self.consumer.poll(self.timeout)
            for tp, group in itertools.groupby(records, key=lambda m: (m.topic, m.partition)):
                chunk = list(group)
                self._floors.setdefault(tp, chunk[0].offset)
                self._chunks.append(chunk)
        if not self._chunks:
            raise ConsumerTimeoutException()
        return self._chunks.popleft()

    def offer(self, positions: dict[TP, int]) -> None:
        """From the committer: positions whose records are flushed; committed at the next loop turn."""
        with self._pending_lock:
            self._pending = positions

    def try_close(self, timeout: float) -> bool:
        """Commit the last snapshot and close (revoke: flush and commit, leave) once the consumer is free."""
        if not self._lock.acquire(timeout=timeout):
            return False
        try:
            if not self.closed:
                self.closed = True
                self._commit_pending()
                try:
                    self.consumer.close()
                except (KafkaError, BrokerConnectionError, OSError) as exc:
                    log.warning("source %s: closing a member: %s", self.source.name, exc)
        finally:
            self._lock.release()
        return True

    # ------------------------------------------------------------------ on the member's thread

    def _commit_pending(self) -> None:
        with self._pending_lock:
            pending, self._pending = self._pending, None
        if pending:
            owned = self.consumer.assignment()
            self._commit({tp: off for tp, off in pending.items()
                          if tp in owned and off > self._floors.get(tp, off)})

    def _commit(self, offsets: dict[TP, int]) -> bool:
        """OffsetCommit of the offsets that changed; False (logged) when the group refused it."""
        changed = {tp: off for tp, off in offsets.items() if self._committed.get(tp) != off}
        if not changed:
            return True
        try:
            self.consumer.commit(changed)
        except (KafkaError, BrokerConnectionError, OSError) as exc:
            log.info("source %s: commit of %d offsets failed (the next commit or owner covers them): %s",
                     self.source.name, len(changed), exc)
            return False
        self._committed.update(changed)
        return True

    def _on_assign(self, partitions: set) -> None:
        self._floors = {}
        self._committed = {}
        listener = self.source.listener
        if listener is None or not partitions:
            return
        try:
            committed = self.consumer.committed(partitions)
        except (KafkaError, BrokerConnectionError, OSError) as exc:
            log.warning("source %s: committed offsets not read (%s): no exact resume for this assignment",
                        self.source.name, exc)
            return
        starts = listener.before_starting_fetchers({(tp[0], tp[1]): off for tp, off in committed.items()})
        for tp, offset in starts.items():
            self.consumer.seek(tp, offset)

    def _on_revoke(self, partitions: set) -> None:
        self._chunks.clear()
        positions = self.source.positions
        mine = {tp: positions.pop(tp) for tp in partitions if tp in self._floors and tp in positions}
        self._floors = {}
        if mine and self._flushed() and self._commit(mine):
            log.info("source %s: rebalance: committed %d partitions before giving them up", self.source.name,
                     len(mine))


class GroupSource:
    """One source cluster given by ``bootstrap.servers``; the same methods as ``maker.Source``."""

    def __init__(self, cfg: SourceConfig) -> None:
        self.cfg = cfg
        self.name = cfg.name or f"source{cfg.index}"
        self.cluster_id = ""
        self.positions: dict[TP, int] = {}
        self.partition_counts: dict[str, int] = {}
        self.streams: list[GroupStream] = []
        self.probe: MetadataLagProbe | None = None
        self.owned: set[TP] | None = None  # members copy only what they were assigned: no fence needed
        self.skip: dict[TP, frozenset[int]] = {}  # offsets already in the target (exact resume, keyed)
        self.listener: Any = None  # the mirror's ExactResume: where a claimed partition resumes
        self.security = ClientSecurity.from_props(cfg.consumer_props)
        self._admin = TargetAdmin(cfg.bootstrap_servers, security=self.security)
        self._no_configs: set[str] = set()

    def start(self, topic_filter: Any, num_streams: int, stop: threading.Event, prepare=None,
              flushed: Callable[[], bool] | None = None, listener: Any = None) -> None:
        """Read the cluster id, then make ``num_streams`` members (they join on their first poll)."""
        self.listener = listener
        self.cluster_id = self._read_cluster_id(stop)
        if not self.cfg.name:
            self.name = self.cluster_id
        props = group_consumer_props(self.cfg.consumer_props)
        pattern = topic_pattern(topic_filter)
        timeout = poll_timeout(self.cfg.consumer_props)
        self.streams = [GroupStream(self, props, pattern, timeout, flushed or (lambda: False))
                        for _ in range(num_streams)]
        self.probe = MetadataLagProbe(self.cfg.bootstrap_servers, self.security)
        if prepare is not None:
            try:
                topics = self._admin.call(lambda a: a.list_topics())
                prepare(self, [t for t in topics if pattern.fullmatch(t) and not t.startswith("__")])
            except Exception as exc:  # noqa: BLE001 - only a head start; the copying threads do it anyway
                log.debug("listing the topics of %s: %s", self.name, exc)
        log.info("source %s (cluster %s, %s, group %s, group protocol): %d streams", self.name, self.cluster_id,
                 self.cfg.bootstrap_servers, self.cfg.group, len(self.streams))

    def _read_cluster_id(self, stop: threading.Event, timeout: float = 300.0) -> str:
        deadline = time.monotonic() + timeout
        while True:
            try:
                cluster_id = self._admin.cluster_id()
                if cluster_id:
                    return cluster_id
                problem = "Metadata has no cluster id (a broker before Kafka 0.10.1?)"
            except (KafkaError, BrokerConnectionError, OSError) as exc:
                problem = str(exc)
            if stop.is_set() or time.monotonic() > deadline:
                raise MirrorError(f"source {self.cfg.bootstrap_servers}: no cluster id: {problem}")
            stop.wait(1.0)

    def source_partition_count(self, topic: str, partition: int) -> int | None:
        """Partitions of a source topic (Metadata), cached until a higher partition shows up."""
        count = self.partition_counts.get(topic)
        if count is None or partition >= count:
            try:
                described = self._admin.call(lambda a: a.describe_topics([topic]))
            except KafkaError:
                return count  # no such topic (any more)
            count = len(described[0].partitions) if described and described[0].partitions else None
            if count is not None:
                self.partition_counts[topic] = count
        return count

    def topic_configs(self, topic: str) -> dict[str, str]:
        """The topic's config overrides (DescribeConfigs); {} (default configs) when refused."""
        try:
            return self._admin.call(lambda a: a.topic_configs(topic))
        except (KafkaError, BrokerConnectionError, OSError) as exc:
            if topic not in self._no_configs:
                self._no_configs.add(topic)
                log.warning("source %s: no configs for %s (%s): its target gets default configs", self.name, topic, exc)
            return {}

    def commit(self, positions: dict[TP, int]) -> int:
        """Hand the flushed snapshot to every member (each commits its own partitions); how many offered."""
        for stream in self.streams:
            stream.offer(positions)
        return len(positions)

    def shutdown(self, timeout: float = 60.0) -> None:
        """Close the members as their polls return (in any order: a member that leaves ends the
        rebalance another may be waiting in), then the probe and the admin connection."""
        open_streams = list(self.streams)
        deadline = time.monotonic() + timeout
        while open_streams and time.monotonic() < deadline:
            open_streams = [s for s in open_streams if not s.try_close(0.05)]
        if open_streams:
            log.warning("source %s: %d members still busy after %.0f s: not closed", self.name, len(open_streams),
                        timeout)
        if self.probe is not None:
            self.probe.close()
        self._admin.close()
