"""ZookeeperConsumerConnector: Kafka 0.8's high-level consumer, coordinated through ZooKeeper.

    connector = ZookeeperConsumerConnector({"zookeeper.connect": "zk:2181/logbus", "group.id": "loader"})
    streams = connector.create_message_streams({"page-views": 2})["page-views"]
    for message in streams[0]:           # MessageAndMetadata(topic, partition, offset, key, ...)
        handle(message)
    connector.commit_offsets()
    connector.shutdown()

How it works (DESIGN.md section 5, Kafka 0.8's algorithm):

- The connector registers the ephemeral ``/consumers/<group>/ids/<consumer id>`` with its
  subscription and watches the group's ``ids`` children, ``/brokers/ids`` and, for a topic
  filter, ``/brokers/topics``. Any change triggers a rebalance on the rebalance thread.
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
- Delivery is at least once: the offset committed for a partition is the one after the last
  message the stream iterator has handed to the application.
- Raw streams (``raw=True``, for copying programs such as the mirror-maker): the fetcher hands
  over each partition's fetched record batches undecoded (``RawChunk``); ``next_chunk()``
  returns them as they are, iteration decodes them.
"""

from __future__ import annotations

import json
import logging
import queue
import socket
import threading
import time
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from kazoo.exceptions import NodeExistsError, NoNodeError
from kazoo.recipe.watchers import ChildrenWatch

from broker.client.raw_chunk import RawChunk, multifetch_raw
from broker.client.rebalance import Blacklist, TopicFilter, Whitelist, range_assign, subscribed_threads, thread_ids
from broker.client.simple_consumer import (
    EARLIEST_TIME,
    LATEST_TIME,
    MessageAndMetadata,
    SimpleConsumer,
)
from broker.cluster.zk import BROKER_IDS, BROKER_TOPICS, ZkClient
from broker.config import ConfigError
from broker.protocol.errors import (
    ErrorCode,
    UnknownTopicOrPartitionError,
)

log = logging.getLogger(__name__)

__all__ = [
    "ConsumerConfig",
    "ConsumerTimeoutException",
    "ConsumerRebalanceFailedException",
    "KafkaStream",
    "MessageAndMetadata",
    "RawChunk",
    "Whitelist",
    "Blacklist",
    "ZookeeperConsumerConnector",
]


class ConsumerTimeoutException(Exception):
    """No message arrived within consumer.timeout.ms (the iterator can be used again)."""


class ConsumerRebalanceFailedException(Exception):
    """The consumer could not claim its partitions within rebalance.max.retries attempts."""


_RESET = {"smallest": EARLIEST_TIME, "earliest": EARLIEST_TIME, "largest": LATEST_TIME, "latest": LATEST_TIME}


@dataclass
class ConsumerConfig:
    """The ZooKeeper consumer's settings, under Kafka 0.8's key names and defaults."""

    zookeeper_connect: str
    group_id: str
    consumer_id: str | None = None
    client_id: str | None = None
    auto_commit_enable: bool = True
    auto_commit_interval_ms: int = 60000
    auto_offset_reset: str = "largest"
    consumer_timeout_ms: int = -1
    fetch_message_max_bytes: int = 1024 * 1024
    fetch_min_bytes: int = 1
    fetch_wait_max_ms: int = 100
    queued_max_message_chunks: int = 10
    refresh_leader_backoff_ms: int = 200
    socket_timeout_ms: int = 30000
    zookeeper_session_timeout_ms: int = 6000
    zookeeper_connection_timeout_ms: int = 6000
    rebalance_max_retries: int = 4
    rebalance_backoff_ms: int = 2000
    other: dict[str, str] = field(default_factory=dict)

    _INTS = ("auto.commit.interval.ms", "consumer.timeout.ms", "fetch.message.max.bytes", "fetch.min.bytes",
             "fetch.wait.max.ms", "queued.max.message.chunks", "refresh.leader.backoff.ms", "socket.timeout.ms",
             "zookeeper.session.timeout.ms", "zookeeper.connection.timeout.ms", "rebalance.max.retries",
             "rebalance.backoff.ms")

    @classmethod
    def from_props(cls, props: Mapping[str, Any]) -> ConsumerConfig:
        """Build from Kafka-named keys; raises ConfigError naming a bad key."""
        p = {str(k).strip(): str(v).strip() for k, v in props.items()}
        for key in ("zookeeper.connect", "group.id"):
            if not p.get(key):
                raise ConfigError(f"Missing required configuration {key}")
        kwargs: dict[str, Any] = {"zookeeper_connect": p.pop("zookeeper.connect"), "group_id": p.pop("group.id")}
        for key in cls._INTS:
            if key in p:
                raw = p.pop(key)
                try:
                    kwargs[key.replace(".", "_")] = int(raw)
                except ValueError:
                    raise ConfigError(f"Invalid value {raw!r} for configuration {key}: not an integer") from None
        if "auto.commit.enable" in p or "enable.auto.commit" in p:
            raw = p.pop("auto.commit.enable", None) or p.pop("enable.auto.commit")
            if raw.lower() not in ("true", "false"):
                raise ConfigError(f"Invalid value {raw!r} for configuration auto.commit.enable: not a boolean")
            kwargs["auto_commit_enable"] = raw.lower() == "true"
        if "auto.offset.reset" in p:
            raw = p.pop("auto.offset.reset").lower()
            if raw not in _RESET:
                raise ConfigError(f"Invalid value {raw!r} for configuration auto.offset.reset: "
                                  "use smallest, largest, earliest or latest")
            kwargs["auto_offset_reset"] = raw
        for key in ("consumer.id", "client.id"):
            if p.get(key):
                kwargs[key.replace(".", "_")] = p.pop(key)
        kwargs["other"] = p
        if kwargs.get("fetch_message_max_bytes", 1) <= 0:
            raise ConfigError("Invalid value for configuration fetch.message.max.bytes: must be positive")
        return cls(**kwargs)


class PartitionTopicInfo:
    """One owned partition: where its fetcher is, what the application has consumed."""

    __slots__ = ("topic", "partition", "stream", "fetch_offset", "consumed_offset", "committed_offset", "stale",
                 "last_error")

    def __init__(self, topic: str, partition: int, stream: KafkaStream, offset: int | None) -> None:
        self.topic = topic
        self.partition = partition
        self.stream = stream
        self.fetch_offset = offset  # None: not known yet, reset by auto.offset.reset
        self.consumed_offset = offset
        self.committed_offset = offset
        self.stale = False
        self.last_error: str | None = None

    def __repr__(self) -> str:
        return f"<{self.topic}-{self.partition} fetch={self.fetch_offset} consumed={self.consumed_offset}>"


_SHUTDOWN = object()


class KafkaStream:
    """An iterable of MessageAndMetadata fed by the fetchers; one per consumer thread id.

    Iterate it from one thread. With consumer.timeout.ms set, ``next()`` raises
    ConsumerTimeoutException when nothing arrives in time (iteration may continue after it);
    after ``shutdown()`` it ends. A raw stream's fetcher queues RawChunks instead of messages.
    """

    def __init__(self, connector: ZookeeperConsumerConnector, thread_id: str, max_chunks: int, timeout_ms: int,
                 raw: bool = False) -> None:
        self._connector = connector
        self.thread_id = thread_id
        self.raw = raw
        self.queue: queue.Queue = queue.Queue(max_chunks)
        self._timeout = None if timeout_ms < 0 else timeout_ms / 1000.0
        self._chunk: list | None = None
        self._pos = 0
        self._info: PartitionTopicInfo | None = None

    def __iter__(self) -> Iterator[MessageAndMetadata]:
        return self

    def __next__(self) -> MessageAndMetadata:
        while True:
            chunk = self._chunk
            if chunk is not None:
                if type(chunk) is RawChunk:
                    chunk = self._chunk = chunk.decode()
                    self._pos = 0
                pos = self._pos
                if pos < len(chunk):
                    info = self._info
                    if not info.stale:  # type: ignore[union-attr]
                        message = chunk[pos]
                        self._pos = pos + 1
                        info.consumed_offset = message[2] + 1  # type: ignore[union-attr]
                        return message
                self._chunk = None
            self._take_chunk()

    def _take_chunk(self) -> None:
        """Block until the next fetched chunk with messages not yet handed out is current."""
        while True:
            try:
                item = self.queue.get(timeout=self._timeout)
            except queue.Empty:
                raise ConsumerTimeoutException(self._connector._timeout_message(self)) from None
            if item is _SHUTDOWN:
                self.queue.put(_SHUTDOWN)  # stay ended
                raise StopIteration
            info, messages = item
            if info.stale:
                continue
            # skip what was already handed out (a refetch after an error)
            if type(messages) is RawChunk:
                consumed = info.consumed_offset
                if consumed is not None and messages.min_offset < consumed:
                    if messages.next_offset <= consumed:
                        continue
                    messages.min_offset = consumed
            elif info.consumed_offset is not None and messages[0][2] < info.consumed_offset:
                messages = [m for m in messages if m[2] >= info.consumed_offset]
                if not messages:
                    continue
            self._info = info
            self._chunk = messages
            self._pos = 0
            return

    def next_chunk(self) -> list[MessageAndMetadata] | RawChunk:
        """The next messages in bulk: the rest of the chunk being iterated, else the next fetched
        chunk (never empty; all of one partition, in offset order). On a raw stream a fetched
        chunk comes as a RawChunk (records from its ``min_offset`` up to its ``next_offset``).

        Every message returned counts as handed to the application at once (the consumed
        offset moves past the last one, or to a RawChunk's ``next_offset``). Raises
        ConsumerTimeoutException and StopIteration like ``next()``; the two may be mixed on one
        stream (from one thread)."""
        while True:
            chunk = self._chunk
            if chunk is not None:
                pos = self._pos
                self._chunk = None
                info = self._info
                if type(chunk) is RawChunk:
                    if not info.stale:  # type: ignore[union-attr]
                        info.consumed_offset = chunk.next_offset  # type: ignore[union-attr]
                        return chunk
                elif pos < len(chunk) and not info.stale:  # type: ignore[union-attr]
                    rest = chunk[pos:] if pos else chunk
                    self._pos = len(chunk)
                    info.consumed_offset = rest[-1][2] + 1  # type: ignore[union-attr]
                    return rest
            self._take_chunk()

    def clear(self) -> None:
        """Drop queued chunks and the chunk being iterated (rebalance)."""
        self._chunk = None
        try:
            while True:
                self.queue.get_nowait()
        except queue.Empty:
            pass

    def _shutdown(self) -> None:
        self.clear()
        try:
            self.queue.put_nowait(_SHUTDOWN)
        except queue.Full:
            pass


class _Fetcher(threading.Thread):
    """Fetches every partition this connector owns on one broker into the streams' queues."""

    def __init__(self, manager: _FetcherManager, broker_id: int, host: str, port: int) -> None:
        super().__init__(name=f"logbus-fetcher-{broker_id}", daemon=True)
        self.manager = manager
        self.broker_id = broker_id
        self.host = host
        self.port = port
        self.partitions: dict[tuple[str, int], PartitionTopicInfo] = {}
        self.lock = threading.Lock()
        self.wake = threading.Event()
        self.stopped = False

    def add(self, info: PartitionTopicInfo) -> None:
        with self.lock:
            self.partitions[(info.topic, info.partition)] = info
        self.wake.set()

    def stop(self) -> None:
        self.stopped = True
        self.wake.set()

    def run(self) -> None:
        cfg = self.manager.config
        consumer = SimpleConsumer(self.host, self.port, timeout=cfg.socket_timeout_ms / 1000.0,
                                  client_id=cfg.client_id or cfg.group_id)
        try:
            self._loop(consumer, cfg)
        except Exception as exc:  # connection failure or anything unexpected: hand partitions back
            if not self.stopped:
                msg = f"broker {self.broker_id} at {self.host}:{self.port}: {exc}"
                log.warning("fetcher failed: %s", msg)
                self.manager.fetcher_failed(self, msg)
        finally:
            consumer.close()

    def _loop(self, consumer: SimpleConsumer, cfg: ConsumerConfig) -> None:
        size = cfg.fetch_message_max_bytes
        while not self.stopped:
            with self.lock:
                infos = [i for i in self.partitions.values() if not i.stale]
            if not infos:
                self.wake.wait(0.2)
                self.wake.clear()
                continue
            for info in infos:
                if info.fetch_offset is None:
                    self._reset(consumer, info, cfg)
            results = self._fetch(consumer, cfg, infos, size)
            if self.stopped:
                return
            self.manager.last_error = None
            for info in infos:
                result = results.get((info.topic, info.partition))
                if result is None or info.stale:
                    continue
                if result.error is not None:
                    code = result.error.code
                    if code == ErrorCode.OFFSET_OUT_OF_RANGE:
                        log.warning("%s-%d: offset %s out of range; resetting to %s", info.topic, info.partition,
                                    info.fetch_offset, cfg.auto_offset_reset)
                        self._reset(consumer, info, cfg)
                    else:
                        with self.lock:
                            self.partitions.pop((info.topic, info.partition), None)
                        self.manager.orphan(info, f"{info.topic}-{info.partition} on broker {self.broker_id}: {result.error}")
                    continue
                if result:
                    if not self._put(info, result):
                        return
                if result.next_offset > info.fetch_offset:  # type: ignore[operator]
                    info.fetch_offset = result.next_offset

    @staticmethod
    def _fetch(consumer: SimpleConsumer, cfg: ConsumerConfig, infos: list[PartitionTopicInfo], size: int) -> dict:
        """{(topic, partition): MessageSet or RawChunk}: raw streams' partitions fetched undecoded."""
        decoded = [(i.topic, i.partition, i.fetch_offset, size) for i in infos if not i.stream.raw]
        raw = [(i.topic, i.partition, i.fetch_offset, size) for i in infos if i.stream.raw]
        results: dict = {}
        if decoded:
            results.update(consumer.multifetch(decoded, max_wait_ms=cfg.fetch_wait_max_ms,
                                               min_bytes=cfg.fetch_min_bytes))
        if raw:
            results.update(multifetch_raw(consumer, raw, 0 if decoded else cfg.fetch_wait_max_ms,
                                          cfg.fetch_min_bytes))
        return results

    def _reset(self, consumer: SimpleConsumer, info: PartitionTopicInfo, cfg: ConsumerConfig) -> None:
        offsets = consumer.get_offsets_before(info.topic, info.partition, _RESET[cfg.auto_offset_reset], 1)
        offset = offsets[0] if offsets else 0
        info.fetch_offset = offset
        info.consumed_offset = offset

    def _put(self, info: PartitionTopicInfo, messages: list) -> bool:
        q = info.stream.queue
        item = (info, messages)
        while not self.stopped and not info.stale:
            try:
                q.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return not self.stopped


class _FetcherManager:
    """Fetcher threads by leader broker, and the leader-finder thread for partitions without one."""

    def __init__(self, connector: ZookeeperConsumerConnector) -> None:
        self.connector = connector
        self.config = connector.config
        self.lock = threading.Lock()
        self.fetchers: dict[int, _Fetcher] = {}
        self.orphans: dict[tuple[str, int], PartitionTopicInfo] = {}
        self.wake = threading.Event()
        self.last_error: str | None = None
        self.stopped = False
        self.thread = threading.Thread(target=self._find_leaders, name="logbus-leader-finder", daemon=True)
        self.thread.start()

    def start_connections(self, infos: list[PartitionTopicInfo]) -> None:
        with self.lock:
            for info in infos:
                self.orphans[(info.topic, info.partition)] = info
        self.wake.set()

    def stop_connections(self) -> None:
        with self.lock:
            fetchers = list(self.fetchers.values())
            self.fetchers.clear()
            self.orphans.clear()
        for f in fetchers:
            f.stop()
        for f in fetchers:
            if f is not threading.current_thread():
                f.join(timeout=self.config.socket_timeout_ms / 1000.0 + 5)

    def shutdown(self) -> None:
        self.stopped = True
        self.wake.set()
        self.stop_connections()
        self.thread.join(timeout=10)

    def orphan(self, info: PartitionTopicInfo, error: str) -> None:
        info.last_error = error
        self.last_error = error
        with self.lock:
            if not info.stale:
                self.orphans[(info.topic, info.partition)] = info

    def fetcher_failed(self, fetcher: _Fetcher, error: str) -> None:
        self.last_error = error
        with self.lock:
            if self.fetchers.get(fetcher.broker_id) is fetcher:
                del self.fetchers[fetcher.broker_id]
            with fetcher.lock:
                infos = list(fetcher.partitions.values())
            for info in infos:
                info.last_error = error
                if not info.stale:
                    self.orphans[(info.topic, info.partition)] = info

    def _find_leaders(self) -> None:
        backoff = self.config.refresh_leader_backoff_ms / 1000.0
        zk = self.connector.zk
        while not self.stopped:
            self.wake.wait(backoff)
            self.wake.clear()
            if self.stopped:
                return
            with self.lock:
                pending = [i for i in self.orphans.values() if not i.stale]
            if not pending:
                continue
            try:
                brokers = zk.live_brokers()
            except Exception as exc:
                self.last_error = f"cannot read brokers from ZooKeeper: {exc}"
                continue
            for info in pending:
                try:
                    state = zk.partition_state(info.topic, info.partition)
                except Exception as exc:
                    self.last_error = f"cannot read {info.topic}-{info.partition} state from ZooKeeper: {exc}"
                    continue
                if state is None or state.leader < 0:
                    self.last_error = f"{info.topic}-{info.partition} has no leader"
                    continue
                broker = brokers.get(state.leader)
                if broker is None:
                    self.last_error = f"leader {state.leader} of {info.topic}-{info.partition} is not a live broker"
                    continue
                ep = broker.endpoint("PLAINTEXT") or (broker.endpoints[0] if broker.endpoints else None)
                host, port = (ep.host, ep.port) if ep is not None else (broker.host, broker.port)
                with self.lock:
                    if self.stopped or info.stale or self.orphans.get((info.topic, info.partition)) is not info:
                        continue
                    del self.orphans[(info.topic, info.partition)]
                    fetcher = self.fetchers.get(broker.id)
                    if fetcher is None or (fetcher.host, fetcher.port) != (host, port) or fetcher.stopped:
                        if fetcher is not None:
                            fetcher.stop()
                        fetcher = _Fetcher(self, broker.id, host or "127.0.0.1", port)
                        self.fetchers[broker.id] = fetcher
                        fetcher.start()
                    fetcher.add(info)


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
        self.ids_path = f"/consumers/{self.group}/ids"
        self.owners_path = f"/consumers/{self.group}/owners"
        self.offsets_path = f"/consumers/{self.group}/offsets"
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
        self._watches: list[ChildrenWatch] = []
        self.rebalance_count = 0
        self.last_rebalance_error: str | None = None
        self.fetchers = _FetcherManager(self)
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
        zk = self.zk.client
        self._watches.append(ChildrenWatch(zk, self.ids_path, self._on_change))
        self._watches.append(ChildrenWatch(zk, BROKER_IDS, self._on_change))
        if self._filter is not None:
            self._watches.append(ChildrenWatch(zk, BROKER_TOPICS, self._on_change))
        else:
            for topic in self._subscription or {}:
                zk.DataWatch(f"{BROKER_TOPICS}/{topic}", self._on_data_change)
        self._spawn(self._rebalance_loop, "logbus-rebalance")
        if self.config.auto_commit_enable:
            self._spawn(self._auto_commit_loop, "logbus-autocommit")

    def _spawn(self, target: Any, name: str) -> None:
        t = threading.Thread(target=target, name=f"{name}-{self.consumer_id}", daemon=True)
        self._threads.append(t)
        t.start()

    # ------------------------------------------------------------------ registration and watches

    def _registration(self) -> bytes:
        return json.dumps({"version": 1, "subscription": self._subscription, "pattern": self._pattern,
                           "timestamp": str(int(time.time() * 1000))}, separators=(",", ":")).encode()

    def _register(self) -> None:
        zk = self.zk.client
        path = f"{self.ids_path}/{self.consumer_id}"
        data = self._registration()
        try:
            zk.retry(zk.create, path, data, ephemeral=True, makepath=True)
        except NodeExistsError:
            # ours from this session (a retry), or a leftover of our previous session: replace it
            stat = zk.exists(path)
            if stat is not None and stat.ephemeralOwner == self.zk.session_id:
                zk.set(path, data)
            else:
                try:
                    zk.delete(path)
                except NoNodeError:
                    pass
                zk.create(path, data, ephemeral=True, makepath=True)

    def _on_change(self, children: list[str]) -> bool | None:
        if self._closed.is_set():
            return False
        self._rebalance_needed.set()
        return None

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
        zk = self.zk.client
        regs: dict[str, dict] = {}
        for cid in zk.get_children(self.ids_path):
            try:
                raw, _ = zk.get(f"{self.ids_path}/{cid}")
                regs[cid] = json.loads(raw)
            except NoNodeError:
                continue
            except ValueError:
                log.warning("ignoring unreadable registration of consumer %s", cid)
        return regs

    def _rebalance_once(self) -> bool:
        """One attempt; False when some partition is still owned by another consumer."""
        zk = self.zk.client
        with self._lock:
            if self._closed.is_set():
                return True
            if not self.zk.live_brokers():
                log.warning("consumer %s: no brokers are registered; waiting for one", self.consumer_id)
                self._release_all()
                return True
            if zk.exists(f"{self.ids_path}/{self.consumer_id}") is None:
                self._register()
            all_topics = self.zk.all_topics()
            my_topics = self._my_topics(all_topics)
            regs = self._read_registrations()
            regs.setdefault(self.consumer_id, json.loads(self._registration()))
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
            for (topic, partition), tid in sorted(wanted.items()):
                stream = self._streams.get((topic, tid)) or self._streams[(None, tid)]
                info = PartitionTopicInfo(topic, partition, stream, self._read_offset(topic, partition))
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
        if self.config.auto_commit_enable and self._owned:
            try:
                self._commit(self._owned.values())
            except Exception:
                log.exception("consumer %s: committing offsets before a rebalance failed", self.consumer_id)
        self._owned = {}
        for topic, partition in list(self._claimed):
            self._release(topic, partition)

    def _still_own(self, wanted: dict[tuple[str, int], str]) -> bool:
        zk = self.zk.client
        session = self.zk.session_id
        for (topic, partition), tid in wanted.items():
            try:
                raw, stat = zk.get(f"{self.owners_path}/{topic}/{partition}")
            except NoNodeError:
                return False
            if raw.decode() != tid or stat.ephemeralOwner != session:
                return False
        return True

    def _claim(self, topic: str, partition: int, tid: str) -> bool:
        zk = self.zk.client
        path = f"{self.owners_path}/{topic}/{partition}"
        try:
            zk.create(path, tid.encode(), ephemeral=True, makepath=True)
        except NodeExistsError:
            try:
                raw, stat = zk.get(path)
            except NoNodeError:
                return False
            if raw.decode() != tid or stat.ephemeralOwner != self.zk.session_id:
                return False
        self._claimed[(topic, partition)] = tid
        return True

    def _release(self, topic: str, partition: int) -> None:
        zk = self.zk.client
        tid = self._claimed.pop((topic, partition), None)
        path = f"{self.owners_path}/{topic}/{partition}"
        try:
            raw, stat = zk.get(path)
            if raw.decode() == tid and stat.ephemeralOwner == self.zk.session_id:
                zk.delete(path, version=stat.version)
        except NoNodeError:
            pass

    # ------------------------------------------------------------------ offsets

    def _read_offset(self, topic: str, partition: int) -> int | None:
        try:
            raw, _ = self.zk.client.get(f"{self.offsets_path}/{topic}/{partition}")
        except NoNodeError:
            return None
        try:
            return int(raw.decode().strip())
        except ValueError:
            log.warning("ignoring unreadable committed offset %r of %s-%d", raw, topic, partition)
            return None

    def _commit(self, infos: Any, timeout: float | None = None) -> None:
        zk = self.zk.client
        timeout = timeout if timeout is not None else self.config.zookeeper_session_timeout_ms / 1000.0
        for info in list(infos):
            offset = info.consumed_offset
            if offset is None or offset == info.committed_offset:
                continue
            path = f"{self.offsets_path}/{info.topic}/{info.partition}"
            data = str(offset).encode()
            try:
                zk.set_async(path, data).get(timeout=timeout)
            except NoNodeError:
                try:
                    zk.create_async(path, data, makepath=True).get(timeout=timeout)
                except NodeExistsError:
                    zk.set_async(path, data).get(timeout=timeout)
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

    def _abort(self) -> None:
        """Stop as a killed process would: no commit, no release; the ZooKeeper session just ends.

        For tests and for failure drills."""
        self._closed.set()
        self._rebalance_needed.set()
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
