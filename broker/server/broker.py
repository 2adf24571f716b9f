"""The broker service: opens the logs, joins the cluster in ZooKeeper, listens, runs timers.

``start`` is blocking and runs before the reactor; everything after runs on the reactor thread,
with ZooKeeper calls pushed to the thread pool.
"""

from __future__ import annotations

import time
from typing import Any, Generic, TypeVar

from twisted.internet import defer, threads
from twisted.internet.task import LoopingCall
from twisted.logger import Logger
from twisted.protocols.tls import TLSMemoryBIOFactory

from broker.cluster.controller import Controller, request_controlled_shutdown
from broker.cluster.ids import ProducerIdAllocator, get_or_create_cluster_id
from broker.cluster.offset_store import ZkOffsetStore
from broker.cluster.zk import ZkClient
from broker.cluster.zkdata import BrokerIdsZNode
from broker.config import BrokerConfig, Listener
from broker.coordinator.coordinator import GroupCoordinator
from broker.coordinator.group import GroupConfig
from broker.security.authorizer import AclAuthorizer, parse_super_users
from broker.server.acls import AclStore
from broker.server.cluster_watch import ClusterWatch
from broker.server.connection import KafkaServerFactory
from broker.server.dispatch import Dispatcher
from broker.server.dynamic_configs import ConfigChangeListener
from broker.server.handlers import ALL_HANDLERS
from broker.server.kafka_client import InterBrokerLink
from broker.server.log_cleaner import LogCleanerService
from broker.server.metadata import BrokerEndpoint, MetadataCache
from broker.server.metrics import BrokerMetrics, listen_metrics
from broker.server.partition_states import ZkPartitionStates
from broker.server.replica_fetcher import ReplicaFetcherManager
from broker.server.replica_manager import ReplicaManager
from broker.server.replication_quota import ReplicationQuota
from broker.server.request_context import NO_REQUEST, RequestContext
from broker.server.tls import ServerTlsContext
from broker.server.topics import FoundTopic, TopicAdmin, read_topic
from broker.storage.cleaner import CleanerProcesses
from broker.storage.cleaner_manager import LogCleanerManager
from broker.storage.config import LogConfig
from broker.storage.manager import LogManager

log = Logger()

#: a fetch session reads all its partitions at least this often (and three times per
#: replica.lag.time.max.ms): see broker.server.fetch_session
SESSION_RESCAN_MAX_S = 10.0
ComponentT = TypeVar("ComponentT")

FLUSH_CHECK_MAX_INTERVAL_MS = 1000
CONTROLLED_SHUTDOWN_TIMEOUT_S = 8.0


def now_ms() -> int:
    return int(time.time() * 1000)


class StartedComponent(Generic[ComponentT]):
    """A part of the Broker that start() creates (kept in ``_<name>``); reading it before then
    is a programming error, so it is typed as always present."""

    def __init__(self, what: str) -> None:
        self.what = what
        self.attribute = ""

    def __set_name__(self, owner: type, name: str) -> None:
        self.attribute = f"_{name}"

    def __get__(self, broker: Any, owner: type | None = None) -> ComponentT:
        component: ComponentT | None = getattr(broker, self.attribute)
        if component is None:
            raise RuntimeError(f"the broker's {self.what} exists once the broker has started")
        return component


class Broker:
    """One logbus broker: logs, ZooKeeper membership, the Kafka listener, background work."""

    def __init__(self, config: BrokerConfig, reactor: Any = None) -> None:
        if reactor is None:
            from twisted.internet import reactor as default_reactor

            reactor = default_reactor
        self.reactor = reactor
        self.config = config
        self.broker_id = config.broker_id
        self.request: RequestContext = NO_REQUEST  # the identity of the request being dispatched (its connection sets it)
        self.log_config = LogConfig.from_broker(config.props)
        # reassign-partitions --throttle: what leaders send and followers fetch of throttled replicas
        self.leader_quota = ReplicationQuota(config.leader_replication_throttled_rate)
        self.follower_quota = ReplicationQuota(config.follower_replication_throttled_rate)
        self.metadata = MetadataCache()
        self.controller: Controller | None = None
        self.cluster_watch = ClusterWatch(self)
        self.config_changes = ConfigChangeListener(self)
        # authorizer.class.name set: every request is checked against the ACLs (kept by acl_store)
        self.authorizer: AclAuthorizer | None = None
        self.acl_store: AclStore | None = None
        if config.authorizer_class_name:
            self.authorizer = AclAuthorizer(parse_super_users(config.super_users), config.allow_everyone_if_no_acl_found)
            self.acl_store = AclStore(self, self.authorizer)
        self.dispatcher = Dispatcher(ALL_HANDLERS)
        self.metrics = BrokerMetrics(self)
        self.dispatcher.metrics = self.metrics
        self.metrics_port: int | None = None  # the bound metrics.port, once listening
        self.topics = TopicAdmin(self)
        self.inter_broker = InterBrokerLink(config.inter_broker_security())  # how followers reach leaders
        # Set by start(); read through the properties below, which refuse before then.
        self._zk: ZkClient | None = None
        self._logs: LogManager | None = None
        self._replicas: ReplicaManager | None = None
        self._producer_ids: ProducerIdAllocator | None = None
        self._coordinator: GroupCoordinator | None = None
        self.endpoints: list[Listener] = []
        self._ports: list[Any] = []
        self._loops: list[LoopingCall] = []
        # flush passes and offset checkpoints run in a worker thread, one at a time (a roll's fsync
        # of a whole segment takes seconds on a slow disk, and every connection would wait); held
        # while one runs, and taken at stop
        self._disk_work = defer.DeferredLock()
        self.log_cleaner: LogCleanerService | None = None  # when log.cleaner.enable
        self._stopping = False

    zk = StartedComponent[ZkClient]("ZooKeeper client")
    logs = StartedComponent[LogManager]("log manager")
    replicas = StartedComponent[ReplicaManager]("replica manager")
    producer_ids = StartedComponent[ProducerIdAllocator]("producer id allocator")
    coordinator = StartedComponent[GroupCoordinator]("group coordinator")

    @property
    def has_replicas(self) -> bool:
        """Whether start() has come as far as the replica manager (metrics read it if so)."""
        return self._replicas is not None

    # -- start ------------------------------------------------------------------------------

    def start(self) -> None:
        """Open logs, listen, register in ZooKeeper, load topics. Blocking; raises on failure."""
        config = self.config
        started = time.monotonic()
        self._logs = logs = LogManager(config.log_dirs, self.log_config)
        stats = logs.load_stats
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
        self._zk = zk = ZkClient(config.zookeeper_connect, session_timeout_ms=config.zookeeper_session_timeout_ms)
        try:
            zk.start(timeout=config.zookeeper_connection_timeout_ms / 1000.0)
        except BaseException:
            self._zk = None  # never connected: nothing to close
            logs.shutdown()
            raise
        self._replicas = ReplicaManager(
            self.broker_id,
            logs,
            self.log_config,
            self.metadata,
            self.reactor,
            ZkPartitionStates(zk),
            self.metrics,
            ReplicaFetcherManager(self),
            self.leader_quota,
            config.max_incremental_fetch_session_cache_slots,
            min(SESSION_RESCAN_MAX_S, config.replica_lag_time_max_ms / 1000.0 / 3),
        )
        self.turns = self._replicas.turns  # large answers (Metadata, Fetch of many partitions) a slice per reactor turn
        try:
            zk.ensure_paths()
            self.metadata.cluster_id = get_or_create_cluster_id(zk)
            self._producer_ids = ProducerIdAllocator(zk, self.broker_id)
            if self.acl_store is not None:
                self.acl_store.start()  # before listening: no request is judged on missing ACLs
            self._listen()
            # A broker restarted after kill -9 finds its old registration until that session expires.
            zk.register_broker(
                self.broker_id,
                self.endpoints,
                rack=config.broker_rack,
                security_protocol_map=config.listener_security_protocol_map,
                stale_wait_s=config.zookeeper_session_timeout_ms / 1000.0 + 1.0,
            )
        except BaseException:
            self._abandon_start()
            raise
        self._coordinator = GroupCoordinator(
            self.broker_id,
            self.reactor,
            GroupConfig(
                config.group_initial_rebalance_delay_ms,
                config.group_min_session_timeout_ms,
                config.group_max_session_timeout_ms,
            ),
            ZkOffsetStore(zk.client),
            threads.deferToThread,
            lambda: self.metadata.brokers.keys(),
        )
        self._set_brokers(zk.live_brokers())
        zk.watch_children(BrokerIdsZNode.path(), self._on_brokers_changed)
        self.config_changes.start()  # dynamic broker defaults first: the topics' logs are built on them
        self.cluster_watch.start()
        self.controller = Controller(
            zk,
            self.broker_id,
            unclean_default=config.unclean_leader_election_enable,
            auto_rebalance=config.auto_leader_rebalance_enable,
            rebalance_interval_s=float(config.leader_imbalance_check_interval_seconds),
            on_controller_change=lambda cid: self.reactor.callFromThread(self._set_controller, cid),
        )
        self.controller.start()
        self._start_loops()
        if config.log_cleaner_enable and config.log_cleaner_threads > 0:
            manager = LogCleanerManager(logs, config.log_cleaner_threads, config.log_cleaner_dedupe_buffer_size, now_ms,
                                        CleanerProcesses(config.log_cleaner_threads, config.log_cleaner_dedupe_buffer_size))
            self.log_cleaner = LogCleanerService(self.reactor, manager, config.log_cleaner_threads,
                                                 config.log_cleaner_backoff_ms)
            self.log_cleaner.start()
        log.info(
            "broker {id} started in {s:.2f}s, listening on {eps}, cluster {cluster}",
            id=self.broker_id,
            s=time.monotonic() - started,
            eps=", ".join(f"{e.name}://{e.host}:{e.port}" for e in self.endpoints),
            cluster=self.metadata.cluster_id,
        )

    def _listen(self) -> None:
        bound: dict[str, int] = {}
        for listener in self.config.listeners:
            interface = "" if listener.host in ("", "0.0.0.0") else listener.host
            security = self.config.security(listener.name)
            factory: Any = KafkaServerFactory(self, self.dispatcher, security)
            if security.ssl is not None:
                context: Any = ServerTlsContext(security.ssl, listener.name)
                factory = TLSMemoryBIOFactory(context, False, factory)
                factory.noisy = False
            port = self.reactor.listenTCP(listener.port, factory, interface=interface, backlog=512)
            self._ports.append(port)
            bound[listener.name] = port.getHost().port
        self.endpoints = [
            Listener(ep.name, ep.host, ep.port or bound.get(ep.name, ep.port)) for ep in self.config.advertised_listeners
        ]
        if self.config.metrics_port:
            # on the first listener's interface: where the broker already accepts clients
            first = self.config.listeners[0]
            interface = "" if first.host in ("", "0.0.0.0") else first.host
            port = listen_metrics(self.reactor, self.metrics, self.config.metrics_port, interface)
            self._ports.append(port)
            self.metrics_port = port.getHost().port

    def _abandon_start(self) -> None:
        for port in self._ports:
            port.stopListening()
        self._ports.clear()
        if self._zk is not None:
            self._zk.stop()
        if self._logs is not None:
            self._logs.shutdown()

    def _start_loops(self) -> None:
        config, logs, replicas = self.config, self.logs, self.replicas
        flush_interval = min(config.log_flush_scheduler_interval_ms, FLUSH_CHECK_MAX_INTERVAL_MS)
        for interval_ms, work in (
            (config.log_retention_check_interval_ms, lambda: logs.retention_pass(now_ms())),
            (flush_interval, lambda: self._disk_work.run(threads.deferToThread, logs.flush_pass, now_ms())),
            (config.log_flush_offset_checkpoint_interval_ms,
             lambda: self._disk_work.run(threads.deferToThread, logs.checkpoint)),
            (max(config.replica_lag_time_max_ms // 2, 100), lambda: replicas.shrink_isrs(config.replica_lag_time_max_ms)),
        ):
            loop = LoopingCall(work)
            loop.clock = self.reactor
            loop.start(interval_ms / 1000.0, now=False).addErrback(lambda f: log.failure("background task failed", f))
            self._loops.append(loop)

    # -- cluster state ----------------------------------------------------------------------

    def refresh_topic(self, topic: str) -> defer.Deferred[None]:
        """Re-read one topic (assignment, config, states) from ZooKeeper and apply it here."""
        d = threads.deferToThread(read_topic, self.zk, topic)
        return d.addCallback(lambda found: self.apply_found_topic(topic, found))

    def apply_found_topic(self, topic: str, found: FoundTopic | None) -> None:
        if found is None:
            if topic in self.metadata.topics:
                log.info("topic {topic} was deleted", topic=topic)
                self.replicas.remove_topic(topic)
            return
        self.replicas.apply_topic(topic, found.assignment, found.config, found.zxid)
        for partition, state in found.states.items():
            self.replicas.apply_state(topic, partition, state)

    def _on_brokers_changed(self, children: list[str]) -> None:
        """ZooKeeper watch (kazoo thread): brokers joined or left."""
        if self._stopping:
            return
        self.reactor.callFromThread(
            lambda: threads.deferToThread(self.zk.live_brokers).addCallbacks(
                self._set_brokers, lambda f: log.failure("reading live brokers", f)
            )
        )
        return None

    def _set_brokers(self, brokers: dict[int, Any]) -> None:
        self.metadata.set_brokers(
            {broker_id: {e.name: BrokerEndpoint(broker_id, e.host, e.port, info.rack) for e in info.endpoints}
             for broker_id, info in brokers.items()},
            self.config.inter_broker_listener,
        )
        if self._coordinator is not None:
            self._coordinator.brokers_changed()

    def _set_controller(self, controller_id: int) -> None:
        self.metadata.controller_id = controller_id

    # -- stop -------------------------------------------------------------------------------

    def stop(self) -> defer.Deferred[None]:
        """Controlled shutdown (leadership moves away first), then stop listening, answer
        parked requests, close logs cleanly, leave ZooKeeper."""
        if self.config.controlled_shutdown_enable and self._zk is not None and self._replicas is not None:
            d = self._controlled_shutdown()
            d.addBoth(lambda _: self._stop())
            return d
        return self._stop()

    def _controlled_shutdown(self) -> defer.Deferred[None]:
        """Ask the controller to move leadership off this broker; wait until it has (bounded)."""
        started = time.monotonic()

        def others_can_lead(shutting: set[int]) -> bool:
            # the controller never moves a leader to a broker shutting down too: with every
            # broker stopping at once (`logbus cluster down`) there is nothing to wait for
            live = self.metadata.brokers
            return any(
                any(r != self.broker_id and r in live and r not in shutting for r in p.isr)
                for p in self.replicas.led_partitions()
            )

        def check(shutting: set[int]) -> defer.Deferred[None] | None:
            if not others_can_lead(shutting):
                log.info("controlled shutdown: no partition led here has another live in-sync replica"
                         " that is not shutting down")
                return None
            if time.monotonic() - started > CONTROLLED_SHUTDOWN_TIMEOUT_S:
                log.warn("controlled shutdown: leadership did not move within {s}s", s=CONTROLLED_SHUTDOWN_TIMEOUT_S)
                return None
            from twisted.internet import task

            return task.deferLater(self.reactor, 0.1, lambda: None).addCallback(wait)

        def wait(_: Any) -> defer.Deferred[None]:
            return threads.deferToThread(self.zk.brokers_shutting_down).addCallback(check)

        if not self.replicas.led_partitions():
            return defer.succeed(None)
        log.info("controlled shutdown: moving leadership off broker {id}", id=self.broker_id)
        d = threads.deferToThread(request_controlled_shutdown, self.zk, self.broker_id)
        d.addCallback(wait)
        d.addErrback(lambda f: log.failure("controlled shutdown", f))
        return d

    def _stop(self) -> defer.Deferred[None]:
        self._stopping = True
        self.cluster_watch.stop()
        self.config_changes.stop()
        if self.acl_store is not None:
            self.acl_store.stop()
        if self.controller is not None:
            self.controller.stop()
        if self._replicas is not None:
            self._replicas.stop()  # answers parked fetches and produces
        for loop in self._loops:
            if loop.running:
                loop.stop()
        if self.log_cleaner is not None:
            self.log_cleaner.stop()
        stopped: list[defer.Deferred[Any]] = [defer.maybeDeferred(port.stopListening) for port in self._ports]
        stopped.append(self._disk_work.acquire())  # a flush or checkpoint under way ends before the logs close
        if self._coordinator is not None:
            stopped.append(self._coordinator.shutdown())  # acknowledged commits are in ZooKeeper
        d = defer.DeferredList(stopped)

        def close(_: Any) -> None:
            if self._logs is not None:
                self._logs.shutdown()
            if self._zk is not None:
                self._zk.stop()
            log.info("broker {id} stopped cleanly", id=self.broker_id)

        return d.addCallback(close)

