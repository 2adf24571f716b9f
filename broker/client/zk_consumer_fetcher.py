"""Fetcher threads of the ZooKeeper consumer (Kafka 0.8's ConsumerFetcherManager and
ConsumerFetcherThread): one thread per leader broker fetches the partitions the connector owns
there into the streams' queues; a leader-finder thread looks up the leader of partitions that
have none (new, or sent back after NOT_LEADER, unknown partition or a connection error).
"""

from __future__ import annotations

import logging
import queue
import threading

from broker.client.raw_chunk import multifetch_raw
from broker.client.simple_consumer import SimpleConsumer
from broker.client.zk_consumer_config import OFFSET_RESET_TIMES, ConsumerConfig
from broker.client.zk_consumer_stream import PartitionTopicInfo
from broker.cluster.zk import ZkClient
from broker.protocol.errors import ErrorCode

log = logging.getLogger(__name__)


class ConsumerFetcherThread(threading.Thread):
    """Fetches every partition this connector owns on one broker into the streams' queues."""

    def __init__(self, manager: ConsumerFetcherManager, broker_id: int, host: str, port: int) -> None:
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
                                  client_id=cfg.client_id or cfg.group_id, security=cfg.security)
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
                if result.next_offset > info.fetch_offset:
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
        offsets = consumer.get_offsets_before(info.topic, info.partition, OFFSET_RESET_TIMES[cfg.auto_offset_reset], 1)
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


class ConsumerFetcherManager:
    """Fetcher threads by leader broker, and the leader-finder thread for partitions without one."""

    def __init__(self, config: ConsumerConfig, zk: ZkClient) -> None:
        self.config = config
        self.zk = zk
        self.lock = threading.Lock()
        self.fetchers: dict[int, ConsumerFetcherThread] = {}
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

    def fetcher_failed(self, fetcher: ConsumerFetcherThread, error: str) -> None:
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
        zk = self.zk
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
                protocol = self.config.security.protocol
                ep = broker.endpoint_for(protocol)
                if ep is None and protocol != "PLAINTEXT":
                    self.last_error = f"broker {broker.id} has no {protocol} listener"
                    continue
                if ep is None:
                    ep = broker.endpoints[0] if broker.endpoints else None
                host, port = (ep.host, ep.port) if ep is not None else (broker.host, broker.port)
                with self.lock:
                    if self.stopped or info.stale or self.orphans.get((info.topic, info.partition)) is not info:
                        continue
                    del self.orphans[(info.topic, info.partition)]
                    fetcher = self.fetchers.get(broker.id)
                    if fetcher is None or (fetcher.host, fetcher.port) != (host, port) or fetcher.stopped:
                        if fetcher is not None:
                            fetcher.stop()
                        fetcher = ConsumerFetcherThread(self, broker.id, host or "127.0.0.1", port)
                        self.fetchers[broker.id] = fetcher
                        fetcher.start()
                    fetcher.add(info)
