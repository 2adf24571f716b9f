"""The broker service: opens the logs, joins the cluster in ZooKeeper, listens, runs timers.

``start`` is blocking and runs before the reactor; everything after runs on the reactor thread,
with ZooKeeper calls pushed to the thread pool.
"""

from __future__ import annotations

import time
from typing import Any

from twisted.internet import defer, threads
from twisted.internet.task import LoopingCall
from twisted.logger import Logger

from broker.cluster.ids import ProducerIdAllocator, get_or_create_cluster_id
from broker.cluster.zk import ZkClient
from broker.config import BrokerConfig, Listener
from broker.server.connection import KafkaServerFactory
from broker.server.delayed_fetch import FetchPurgatory
from broker.server.dispatch import Dispatcher
from broker.server.handlers import ALL_HANDLERS
from broker.server.metadata import BrokerEndpoint, MetadataCache
from broker.server.replica_manager import ReplicaManager
from broker.server.topics import TopicAdmin, read_topic
from broker.storage.config import LogConfig
from broker.storage.manager import LogManager

log = Logger()

BROKER_IDS_PATH = "/brokers/ids"
FLUSH_CHECK_MAX_INTERVAL_MS = 1000


def now_ms() -> int:
    return int(time.time() * 1000)


class Broker:
    """One logbus broker: logs, ZooKeeper membership, the Kafka listener, background work."""

    def __init__(self, config: BrokerConfig, reactor: Any = None) -> None:
        if reactor is None:
            from twisted.internet import reactor as default_reactor

            reactor = default_reactor
        self.reactor = reactor
        self.config = config
        self.broker_id = config.broker_id
        self.log_config = LogConfig.from_broker(config.props)
        self.metadata = MetadataCache()
        self.fetches = FetchPurgatory(reactor)
        self.dispatcher = Dispatcher(ALL_HANDLERS)
        self.topics = TopicAdmin(self)
        self.zk: ZkClient | None = None
        self.logs: LogManager | None = None
        self.replicas: ReplicaManager | None = None
        self.producer_ids: ProducerIdAllocator | None = None
        self.endpoints: list[Listener] = []
        self._ports: list[Any] = []
        self._loops: list[LoopingCall] = []
        self._stopping = False

    # -- start ------------------------------------------------------------------------------

    def start(self) -> None:
        """Open logs, listen, register in ZooKeeper, load topics. Blocking; raises on failure."""
        config = self.config
        started = time.monotonic()
        self.logs = LogManager(config.log_dirs, self.log_config)
        stats = self.logs.load_stats
        log.info(
            "log recovery: clean shutdown: {clean}, logs: {logs}, segments: {segments}, segments scanned: {scanned}, "
            "bytes truncated: {truncated}, indexes rebuilt: {rebuilt} ({dirs})",
            clean=stats.clean,
            logs=stats.logs_loaded,
            segments=stats.segments_loaded,
            scanned=stats.segments_recovered,
            truncated=stats.bytes_truncated,
            rebuilt=stats.indexes_rebuilt,
            dirs=", ".join(config.log_dirs),
        )
        self.replicas = ReplicaManager(self.broker_id, self.logs, self.log_config, self.metadata)
        self.zk = ZkClient(config.zookeeper_connect, session_timeout_ms=config.zookeeper_session_timeout_ms)
        self.zk.start(timeout=config.zookeeper_connection_timeout_ms / 1000.0)
        try:
            self.zk.ensure_paths()
            self.metadata.cluster_id = get_or_create_cluster_id(self.zk.client)
            self.producer_ids = ProducerIdAllocator(self.zk.client, self.broker_id)
            self._listen()
            # A broker restarted after kill -9 finds its old registration until that session expires.
            self.zk.register_broker(
                self.broker_id,
                self.endpoints,
                rack=config.broker_rack,
                stale_wait_s=config.zookeeper_session_timeout_ms / 1000.0 + 1.0,
            )
        except BaseException:
            self._abandon_start()
            raise
        self._load_cluster_state()
        self.zk.client.ChildrenWatch(BROKER_IDS_PATH, self._on_brokers_changed)
        self.zk.watch_topics(self._on_topics_changed)
        self._start_loops()
        log.info(
            "broker {id} started in {s:.2f}s, listening on {eps}, cluster {cluster}",
            id=self.broker_id,
            s=time.monotonic() - started,
            eps=", ".join(f"{e.name}://{e.host}:{e.port}" for e in self.endpoints),
            cluster=self.metadata.cluster_id,
        )

    def _listen(self) -> None:
        factory = KafkaServerFactory(self, self.dispatcher)
        bound: dict[str, int] = {}
        for listener in self.config.listeners:
            interface = "" if listener.host in ("", "0.0.0.0") else listener.host
            port = self.reactor.listenTCP(listener.port, factory, interface=interface, backlog=512)
            self._ports.append(port)
            bound[listener.name] = port.getHost().port
        self.endpoints = [
            Listener(ep.name, ep.host, ep.port or bound.get(ep.name, ep.port)) for ep in self.config.advertised_listeners
        ]

    def _abandon_start(self) -> None:
        for port in self._ports:
            port.stopListening()
        self._ports.clear()
        if self.zk is not None:
            self.zk.stop()
        if self.logs is not None:
            self.logs.shutdown()

    def _load_cluster_state(self) -> None:
        zk = self.zk
        self._set_brokers(zk.live_brokers())
        for topic in zk.all_topics():
            self._apply_topic(topic, read_topic(zk, topic))

    def _start_loops(self) -> None:
        config = self.config
        flush_interval = min(config.log_flush_scheduler_interval_ms, FLUSH_CHECK_MAX_INTERVAL_MS)
        for interval_ms, work in (
            (config.log_retention_check_interval_ms, lambda: self.logs.retention_pass(now_ms())),
            (flush_interval, lambda: self.logs.flush_pass(now_ms())),
            (config.log_flush_offset_checkpoint_interval_ms, lambda: self.logs.checkpoint()),
        ):
            loop = LoopingCall(work)
            loop.clock = self.reactor
            loop.start(interval_ms / 1000.0, now=False).addErrback(lambda f: log.failure("background task failed", f))
            self._loops.append(loop)

    # -- cluster state ----------------------------------------------------------------------

    def refresh_topic(self, topic: str) -> defer.Deferred[None]:
        """Re-read one topic from ZooKeeper and apply it here."""
        d = threads.deferToThread(read_topic, self.zk, topic)
        d.addCallback(lambda found: self._apply_topic(topic, found))
        return d

    def _apply_topic(self, topic: str, found: Any) -> None:
        if found is None:
            if topic in self.metadata.topics:
                log.info("topic {topic} was deleted", topic=topic)
                self.replicas.remove_topic(topic)
            return
        partitions, overrides = found
        self.replicas.apply_topic(topic, partitions, overrides)

    def _on_topics_changed(self, topics: list[str]) -> None:
        """ZooKeeper watch (kazoo thread): topics were created or deleted."""
        if not self._stopping:
            self.reactor.callFromThread(self._sync_topics, set(topics))

    def _sync_topics(self, topics: set[str]) -> None:
        known = set(self.metadata.topics)
        for topic in topics - known:
            self.refresh_topic(topic).addErrback(lambda f, t=topic: log.failure("loading topic {t}", f, t=t))
        for topic in known - topics:
            self.replicas.remove_topic(topic)

    def _on_brokers_changed(self, children: list[str]) -> None:
        """ZooKeeper watch (kazoo thread): brokers joined or left."""
        if self._stopping:
            return False
        self.reactor.callFromThread(
            lambda: threads.deferToThread(self.zk.live_brokers).addCallbacks(
                self._set_brokers, lambda f: log.failure("reading live brokers", f)
            )
        )
        return None

    def _set_brokers(self, brokers: dict[int, Any]) -> None:
        self.metadata.brokers = {
            broker_id: BrokerEndpoint(broker_id, info.host, info.port, info.rack) for broker_id, info in brokers.items()
        }
        self.metadata.controller_id = min(brokers) if brokers else -1

    # -- appends ------------------------------------------------------------------------------

    def appended(self, topic: str, partition: int, size: int) -> None:
        """Called by Produce after an append: wakes fetches waiting on this partition."""
        self.fetches.notify_append((topic, partition), size)

    # -- stop -------------------------------------------------------------------------------

    def stop(self) -> defer.Deferred[None]:
        """Stop listening, answer parked fetches, close logs cleanly, leave ZooKeeper."""
        self._stopping = True
        for loop in self._loops:
            if loop.running:
                loop.stop()
        self.fetches.wake_all()
        stopped = [defer.maybeDeferred(port.stopListening) for port in self._ports]
        d = defer.DeferredList(stopped)

        def close(_: Any) -> None:
            if self.logs is not None:
                self.logs.shutdown()
            if self.zk is not None:
                self.zk.stop()
            log.info("broker {id} stopped cleanly", id=self.broker_id)

        d.addCallback(close)
        return d
