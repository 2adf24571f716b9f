"""ZookeeperConsumerConnector: Kafka 0.8's high-level consumer, coordinated through ZooKeeper.

    connector = ZookeeperConsumerConnector({"zookeeper.connect": "zk:2181/logbus", "group.id": "loader"})
    streams = connector.create_message_streams({"page-views": 2})["page-views"]
    for message in streams[0]:           # MessageAndMetadata(topic, partition, offset, key, ...)
        handle(message)
    connector.commit_offsets()
    connector.shutdown()

Kafka 0.8's split: settings in ``zk_consumer_config``, the streams the application iterates in
``zk_consumer_stream``, the fetcher threads in ``zk_consumer_fetcher``; this module is the
connector (registration, watches, rebalance, offsets). Its znodes: ``broker.cluster.zkdata``.

How it works (Kafka 0.8's algorithm):

- The connector registers the ephemeral ``/consumers/<group>/ids/<consumer id>`` with its
  subscription and watches the group's ``ids`` children, ``/brokers/ids`` and, for a topic
  filter, ``/brokers/topics`` and each matching topic's znode (partitions added); for static
  topics, their znodes. Any change triggers a rebalance on the rebalance thread.
- A rebalance stops the fetchers, clears the stream queues, commits (with auto commit),
  releases the partitions it owns (deletes its ``owners`` znodes), computes the range
  assignment (``broker.client.rebalance``) and claims its partitions by creating ephemeral
  ``/consumers/<group>/owners/<topic>/<partition>`` = consumer thread id. If a previous owner
  has not let go yet, it releases what it claimed and retries after ``rebalance.backoff.ms``,
  up to ``rebalance.max.retries`` times.
- Fetch offsets come from ``/consumers/<group>/offsets/<topic>/<partition>`` (decimal
  strings, as Kafka 0.8 writes them), else ``auto.offset.reset``.
- One fetcher thread per leader broker (found from the partition state znodes and the broker
  registrations) fetches with a SimpleConsumer and puts chunks of messages into the queue of
  the stream that owns the partition. NOT_LEADER, unknown partition and connection errors
  send the partition back to the leader-finder thread, which looks the leader up again.
- A ``rebalance_listener`` (Kafka's ConsumerRebalanceListener) hears of a rebalance twice:
  ``before_releasing_partitions`` with the partitions about to be given up (fetchers stopped,
  queues cleared), and ``before_starting_fetchers`` with the partitions claimed and their
  committed offsets; it may answer other start offsets (the mirror-maker's exact resume).
- Delivery is at least once: the offset committed for a partition is the one after the last
  message the stream iterator has handed to the application.
- Raw streams (``raw=True``, for copying programs such as the mirror-maker): the fetcher hands
  over each partition's fetched record batches undecoded (``RawChunk``); ``next_chunk()``
  returns them as they are, iteration decodes them.
"""

from __future__ import annotations

import logging
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Protocol

from broker.client.raw_chunk import RawChunk
from broker.client.rebalance import Blacklist, TopicFilter, Whitelist, range_assign, subscribed_threads, thread_ids
from broker.client.simple_consumer import MessageAndMetadata
from broker.client.zk_consumer_config import ConsumerConfig
from broker.client.zk_consumer_fetcher import ConsumerFetcherManager
from broker.client.zk_consumer_stream import ConsumerTimeoutException, KafkaStream, PartitionTopicInfo
from broker.cluster.offset_store import ZkOffsetStore
from broker.cluster.zk import ZkClient
from broker.cluster.zkdata import (
    BrokerIdsZNode,
    ConsumerIdsZNode,
    ConsumerIdZNode,
    ConsumerOwnerZNode,
    TopicsZNode,
)
from broker.protocol.errors import UnknownTopicOrPartitionError

log = logging.getLogger(__name__)

TP = tuple[str, int]


class ConsumerRebalanceListener(Protocol):
    """Told of each rebalance on the rebalance thread, with the connector's lock held."""

    def before_releasing_partitions(self, partitions: set[TP]) -> None:
        """The fetchers are stopped and the queues cleared; ``partitions`` are given up next."""

    def before_starting_fetchers(self, offsets: dict[TP, int | None]) -> Mapping[TP, int]:
        """The partitions just claimed, with their committed offsets (None: none); the answer
        holds the start offsets to use instead."""

__all__ = [
    "ConsumerConfig",
    "ConsumerTimeoutException",
    "ConsumerRebalanceFailedException",
    "KafkaStream",
    "MessageAndMetadata",
    "PartitionTopicInfo",
    "RawChunk",
    "Whitelist",
    "Blacklist",
    "ZookeeperConsumerConnector",
]


class ConsumerRebalanceFailedException(Exception):
    """The consumer could not claim its partitions within rebalance.max.retries attempts."""


def _consumer_id(group: str) -> str:
    return f"{group}_{socket.gethostname()}-{int(time.time() * 1000)}-{uuid.uuid4().hex[:8]}"


class ZookeeperConsumerConnector:
    """Kafka 0.8's high-level consumer: a group member coordinated through ZooKeeper."""

    def __init__(self, config: Mapping[str, Any] | ConsumerConfig) -> None:
        self.config = config if isinstance(config, ConsumerConfig) else ConsumerConfig.from_props(config)
        cfg = self.config
        self.group = cfg.group_id
        self.consumer_id = cfg.consumer_id or _consumer_id(cfg.group_id)
        self.zk = ZkClient(cfg.zookeeper_connect, session_timeout_ms=cfg.zookeeper_session_timeout_ms,
                           connection_timeout_ms=cfg.zookeeper_connection_timeout_ms)
        self.zk.start()
        self.offset_store = ZkOffsetStore(self.zk.kazoo)
        self._lock = threading.RLock()
        self._subscription: dict[str, int] | None = None
        self._pattern = "static"
        self._filter: TopicFilter | None = None
        self._streams: dict[tuple[str | None, str], KafkaStream] = {}
        self._all_streams: list[KafkaStream] = []
        self._owned: dict[tuple[str, int], PartitionTopicInfo] = {}
        self._claimed: dict[tuple[str, int], str] = {}
        self._rebalance_needed = threading.Event()
        self._closed = threading.Event()
        self._threads: list[threading.Thread] = []
        self._unwatch: list[Callable[[], None]] = []
        self.rebalance_count = 0
        self.last_rebalance_error: str | None = None
        self.rebalance_listener: ConsumerRebalanceListener | None = None
        self._watched_topics: set[str] = set()  # topics of a filter whose partition count is watched
        self.fetchers = ConsumerFetcherManager(cfg, self.zk)
        self.zk.add_new_session_callback(self._on_new_session)

    # ------------------------------------------------------------------ streams

    def create_message_streams(self, topic_count: Mapping[str, int], raw: bool = False) -> dict[str, list[KafkaStream]]:
        """Streams per topic: {"topic": n} gives n streams for it; each stream is iterable.

        ``raw``: the streams' ``next_chunk()`` gives undecoded RawChunks (see KafkaStream)."""
        if not topic_count:
            raise ValueError("create_message_streams needs at least one topic")
        existing = set(self.zk.all_topics())
        missing = sorted(t for t in topic_count if t not in existing)
        if missing:
            raise UnknownTopicOrPartitionError(
                f"topic {', '.join(repr(t) for t in missing)} does not exist in {self.config.zookeeper_connect}")
        result: dict[str, list[KafkaStream]] = {}
        with self._lock:
            self._check_unsubscribed()
            for topic, n in topic_count.items():
                if int(n) < 1:
                    raise ValueError(f"topic {topic!r}: the number of streams must be at least 1")
                streams = [self._new_stream(tid, raw) for tid in thread_ids(self.consumer_id, int(n))]
                for s in streams:
                    self._streams[(topic, s.thread_id)] = s
                result[topic] = streams
            self._subscription = {t: int(n) for t, n in topic_count.items()}
            self._pattern = "static"
        self._start()
        return result

    def create_message_streams_by_filter(self, topic_filter: TopicFilter, num_streams: int = 1,
                                         raw: bool = False) -> list[KafkaStream]:
        """``num_streams`` streams fed by every topic the Whitelist/Blacklist allows, now and later.

        ``raw``: the streams' ``next_chunk()`` gives undecoded RawChunks (see KafkaStream)."""
        if not isinstance(topic_filter, (Whitelist, Blacklist)):
            raise TypeError("topic_filter must be a Whitelist or a Blacklist")
        if num_streams < 1:
            raise ValueError("the number of streams must be at least 1")
        with self._lock:
            self._check_unsubscribed()
            streams = [self._new_stream(tid, raw) for tid in thread_ids(self.consumer_id, num_streams)]
            for s in streams:
                self._streams[(None, s.thread_id)] = s
            self._subscription = {topic_filter.regex: num_streams}
            self._pattern = topic_filter.pattern_name
            self._filter = topic_filter
        self._start()
        return streams

    def _new_stream(self, tid: str, raw: bool = False) -> KafkaStream:
        s = KafkaStream(self, tid, self.config.queued_max_message_chunks, self.config.consumer_timeout_ms, raw)
        self._all_streams.append(s)
        return s

    def _check_unsubscribed(self) -> None:
        if self._closed.is_set():
            raise RuntimeError("the connector has been shut down")
        if self._subscription is not None:
            raise RuntimeError("create_message_streams may be called once per connector")

    def _start(self) -> None:
        self._register()
        # the first rebalance runs here, so a failure reaches the caller
        self._rebalance_with_retries()
        self._unwatch.append(self.zk.watch_children(ConsumerIdsZNode.path(self.group), self._on_change))
        self._unwatch.append(self.zk.watch_children(BrokerIdsZNode.path(), self._on_change))
        if self._filter is not None:
            self._unwatch.append(self.zk.watch_children(TopicsZNode.path(), self._on_change))
        else:
            for topic in self._subscription or {}:
                self.zk.watch_topic(topic, self._on_data_change)
        self._spawn(self._rebalance_loop, "logbus-rebalance")
        if self.config.auto_commit_enable:
            self._spawn(self._auto_commit_loop, "logbus-autocommit")

    def _spawn(self, target: Any, name: str) -> None:
        t = threading.Thread(target=target, name=f"{name}-{self.consumer_id}", daemon=True)
        self._threads.append(t)
        t.start()

    # ------------------------------------------------------------------ registration and watches

    def _registration(self) -> bytes:
        return ConsumerIdZNode.encode(self._subscription, self._pattern)

    def _register(self) -> None:
        path = ConsumerIdZNode.path(self.group, self.consumer_id)
        data = self._registration()
        if self.zk.create(path, data, ephemeral=True, retry=True):
            return
        # ours from this session (a retry), or a leftover of our previous session: replace it
        found = self.zk.read(path)
        if found is not None and found[1].ephemeralOwner == self.zk.session_id:
            self.zk.set_data(path, data)
        else:
            self.zk.delete(path)
            self.zk.create(path, data, ephemeral=True)

    def _on_change(self, children: list[str]) -> None:
        if not self._closed.is_set():
            self._rebalance_needed.set()

    def _on_data_change(self, data: Any, stat: Any, *args: Any) -> bool | None:
        if self._closed.is_set():
            return False
        self._rebalance_needed.set()
        return None

    def _on_new_session(self) -> None:
        if self._closed.is_set() or self._subscription is None:
            return
        log.warning("consumer %s: new ZooKeeper session; registering again and rebalancing", self.consumer_id)
        try:
            self._register()
        except Exception:
            log.exception("re-registering consumer %s failed", self.consumer_id)
        self._rebalance_needed.set()

    # ------------------------------------------------------------------ rebalance

    def _rebalance_loop(self) -> None:
        while not self._closed.is_set():
            if not self._rebalance_needed.wait(0.5):
                continue
            if self._closed.is_set():
                return
            self._rebalance_needed.clear()
            try:
                self._rebalance_with_retries()
            except Exception as exc:
                self.last_rebalance_error = str(exc)
                log.error("consumer %s: %s; trying again", self.consumer_id, exc)
                self._closed.wait(self.config.rebalance_backoff_ms / 1000.0)
                self._rebalance_needed.set()

    def _rebalance_with_retries(self) -> None:
        cfg = self.config
        last: Exception | None = None
        for attempt in range(max(cfg.rebalance_max_retries, 1)):
            if self._closed.is_set():
                return
            try:
                if self._rebalance_once():
                    self.rebalance_count += 1
                    self.last_rebalance_error = None
                    return
                last = None
            except Exception as exc:  # ZooKeeper connection loss and the like: retry
                log.warning("consumer %s: rebalance attempt %d failed: %s", self.consumer_id, attempt + 1, exc)
                last = exc
            self._closed.wait(cfg.rebalance_backoff_ms / 1000.0)
        reason = f": {last}" if last else " (partitions still owned by other consumers)"
        raise ConsumerRebalanceFailedException(
            f"{self.consumer_id} can't rebalance after {cfg.rebalance_max_retries} retries{reason}")

    def _my_topics(self, all_topics: list[str]) -> list[str]:
        if self._filter is not None:
            return [t for t in all_topics if not t.startswith("__") and self._filter.is_topic_allowed(t)]
        return [t for t in (self._subscription or {}) if t in all_topics]

    def _read_registrations(self) -> dict[str, dict]:
        regs: dict[str, dict] = {}
        for cid in self.zk.children(ConsumerIdsZNode.path(self.group)):
            found = self.zk.read(ConsumerIdZNode.path(self.group, cid))
            if found is None:
                continue
            try:
                regs[cid] = ConsumerIdZNode.decode(found[0])
            except ValueError:
                log.warning("ignoring unreadable registration of consumer %s", cid)
        return regs

    def _rebalance_once(self) -> bool:
        """One attempt; False when some partition is still owned by another consumer."""
        with self._lock:
            if self._closed.is_set():
                return True
            if not self.zk.live_brokers():
                log.warning("consumer %s: no brokers are registered; waiting for one", self.consumer_id)
                self._release_all()
                return True
            if not self.zk.exists(ConsumerIdZNode.path(self.group, self.consumer_id)):
                self._register()
            all_topics = self.zk.all_topics()
            my_topics = self._my_topics(all_topics)
            if self._filter is not None:  # partitions added to a matching topic rebalance too
                for topic in my_topics:
                    if topic not in self._watched_topics:
                        self._watched_topics.add(topic)
                        self.zk.watch_topic(topic, self._on_data_change)
            regs = self._read_registrations()
            regs.setdefault(self.consumer_id, ConsumerIdZNode.decode(self._registration()))
            threads_by_topic = subscribed_threads(regs, all_topics)
            sub = self._subscription or {}
            wanted: dict[tuple[str, int], str] = {}
            for topic in my_topics:
                assignment = self.zk.topic_assignment(topic)
                if not assignment:
                    continue
                n = next(iter(sub.values())) if self._filter is not None else sub[topic]
                mine = set(thread_ids(self.consumer_id, n))
                for tid, parts in range_assign(assignment, threads_by_topic.get(topic, [])).items():
                    if tid in mine:
                        for p in parts:
                            wanted[(topic, p)] = tid
            if wanted and wanted == self._claimed and set(self._owned) == set(wanted) and self._still_own(wanted):
                return True  # nothing changed for us (e.g. the watch firing as it is set): keep fetching
            self._release_all()
            claimed: list[tuple[str, int]] = []
            for (topic, partition), tid in sorted(wanted.items()):
                if not self._claim(topic, partition, tid):
                    log.info("consumer %s: %s-%d still owned by another consumer; will retry", self.consumer_id,
                             topic, partition)
                    for t, p in claimed:
                        self._release(t, p)
                    return False
                claimed.append((topic, partition))
            infos = []
            committed = self.offset_store.read(self.group, wanted, with_metadata=False)
            starts = {tp: (known.offset if (known := committed.get(tp)) is not None else None) for tp in wanted}
            if self.rebalance_listener is not None:
                starts.update(self.rebalance_listener.before_starting_fetchers(dict(starts)))
            for (topic, partition), tid in sorted(wanted.items()):
                stream = self._streams.get((topic, tid)) or self._streams[(None, tid)]
                info = PartitionTopicInfo(topic, partition, stream, starts[(topic, partition)])
                self._owned[(topic, partition)] = info
                infos.append(info)
            log.info("consumer %s owns %s", self.consumer_id,
                     ", ".join(f"{t}-{p}" for t, p in sorted(wanted)) or "no partitions")
            self.fetchers.start_connections(infos)
            return True

    def _release_all(self) -> None:
        """Stop fetching, drop queued data, commit what was consumed, give up every partition."""
        self.fetchers.stop_connections()
        for info in self._owned.values():
            info.stale = True
        for stream in self._all_streams:
            stream.clear()
        if self.rebalance_listener is not None and self._owned:
            self.rebalance_listener.before_releasing_partitions(set(self._owned))
        if self.config.auto_commit_enable and self._owned:
            try:
                self._commit(self._owned.values())
            except Exception:
                log.exception("consumer %s: committing offsets before a rebalance failed", self.consumer_id)
        self._owned = {}
        for topic, partition in list(self._claimed):
            self._release(topic, partition)

    def _owned_by_us(self, topic: str, partition: int, tid: str | None) -> Any:
        """The stat of the owner znode when this session's thread ``tid`` holds it, else None."""
        found = self.zk.read(ConsumerOwnerZNode.path(self.group, topic, partition))
        if found is None:
            return None
        raw, stat = found
        return stat if ConsumerOwnerZNode.decode(raw) == tid and stat.ephemeralOwner == self.zk.session_id else None

    def _still_own(self, wanted: dict[tuple[str, int], str]) -> bool:
        return all(self._owned_by_us(topic, partition, tid) is not None for (topic, partition), tid in wanted.items())

    def _claim(self, topic: str, partition: int, tid: str) -> bool:
        path = ConsumerOwnerZNode.path(self.group, topic, partition)
        if not self.zk.create(path, ConsumerOwnerZNode.encode(tid), ephemeral=True):
            if self._owned_by_us(topic, partition, tid) is None:
                return False
        self._claimed[(topic, partition)] = tid
        return True

    def _release(self, topic: str, partition: int) -> None:
        tid = self._claimed.pop((topic, partition), None)
        stat = self._owned_by_us(topic, partition, tid)
        if stat is not None:
            self.zk.delete(ConsumerOwnerZNode.path(self.group, topic, partition), version=stat.version)

    # ------------------------------------------------------------------ offsets

    def _commit(self, infos: Iterable[PartitionTopicInfo], timeout: float | None = None) -> None:
        timeout = timeout if timeout is not None else self.config.zookeeper_session_timeout_ms / 1000.0
        changed = {info: info.consumed_offset for info in list(infos)
                   if info.consumed_offset is not None and info.consumed_offset != info.committed_offset}
        self.offset_store.commit(self.group, {(i.topic, i.partition): offset for i, offset in changed.items()}, timeout)
        for info, offset in changed.items():
            info.committed_offset = offset

    def commit_offsets(self) -> None:
        """Write the consumed offset of every owned partition to ZooKeeper (only changed ones)."""
        with self._lock:
            self._commit(self._owned.values())

    def _auto_commit_loop(self) -> None:
        interval = self.config.auto_commit_interval_ms / 1000.0
        while not self._closed.wait(interval):
            try:
                self.commit_offsets()
            except Exception as exc:
                log.warning("consumer %s: auto commit failed: %s", self.consumer_id, exc)

    # ------------------------------------------------------------------ state and shutdown

    def owned_partitions(self) -> dict[tuple[str, int], str]:
        """{(topic, partition): consumer thread id} this connector owns now."""
        with self._lock:
            return dict(self._claimed)

    def consumed_offsets(self) -> dict[tuple[str, int], int | None]:
        with self._lock:
            return {tp: i.consumed_offset for tp, i in self._owned.items()}

    def _timeout_message(self, stream: KafkaStream) -> str:
        timeout = self.config.consumer_timeout_ms
        detail = self.fetchers.last_error or self.last_rebalance_error
        parts = [f"no message within consumer.timeout.ms={timeout}"]
        if detail:
            parts.append(f"last error: {detail}")
        return "; ".join(parts)

    def shutdown(self) -> None:
        """Stop fetching, commit (with auto commit), end the streams and close the ZooKeeper session.

        Never hangs on an unreachable ZooKeeper: the final commit is skipped (and logged) when
        ZooKeeper does not answer within the session timeout."""
        if self._closed.is_set():
            return
        self._closed.set()
        self._rebalance_needed.set()
        self._cancel_watches()
        self.fetchers.shutdown()
        wait = self.config.zookeeper_session_timeout_ms / 1000.0
        if self._lock.acquire(timeout=wait):
            try:
                if self.config.auto_commit_enable and self.zk.connected:
                    try:
                        self._commit(self._owned.values(), timeout=wait)
                    except Exception as exc:
                        log.warning("consumer %s: final commit failed: %s", self.consumer_id, exc)
            finally:
                self._lock.release()
        else:
            log.warning("consumer %s: a rebalance is stuck (ZooKeeper unreachable?); no final commit", self.consumer_id)
        for stream in self._all_streams:
            stream._shutdown()
        self.zk.stop()  # fails any ZooKeeper call still pending in our threads
        for t in self._threads:
            if t is not threading.current_thread():
                t.join(timeout=10)

    def _cancel_watches(self) -> None:
        for cancel in self._unwatch:
            cancel()

    def _abort(self) -> None:
        """Stop as a killed process would: no commit, no release; the ZooKeeper session just ends.

        For tests and for failure drills."""
        self._closed.set()
        self._rebalance_needed.set()
        self._cancel_watches()
        self.fetchers.stopped = True
        self.fetchers.wake.set()
        with self.fetchers.lock:
            fetchers = list(self.fetchers.fetchers.values())
        for f in fetchers:
            f.stop()
        self.zk.stop()
        for stream in self._all_streams:
            stream._shutdown()

    def __enter__(self) -> ZookeeperConsumerConnector:
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()
