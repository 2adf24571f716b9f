"""Cluster metadata for logbus's clients: brokers, topics' partitions and their leaders.

Two ways to find the cluster:

- ``bootstrap.servers``: a Metadata request to any broker known so far (the bootstrap list
  first), as every Kafka client does;
- ``zookeeper.connect``: the original design's discovery — live brokers from
  ``/brokers/ids`` (watched), topics from ``/brokers/topics`` (watched), partition leaders from
  ``/brokers/topics/<t>/partitions/<p>/state``. A topic missing from ZooKeeper is asked of a
  live broker once (a Metadata request, which auto-creates it when the broker allows).

Reads (``leader``, ``partitions``, ``broker_address``) take no lock and never block; ``fetch``
blocks until the topics are known or its timeout passes, and ``request_update`` marks the
cached view stale (after NOT_LEADER_OR_FOLLOWER, a lost connection, an unknown topic) so the
next ``maybe_update`` refreshes it. Thread-safe.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable
from typing import TYPE_CHECKING

from broker.client.connection import BrokerConnection, BrokerConnectionError
from broker.client.security import PLAINTEXT, ClientSecurity
from broker.protocol.errors import (
    ErrorCode,
    InvalidTopicError,
    KafkaError,
    UnknownTopicOrPartitionError,
    error_class,
    error_for_code,
)
from broker.protocol.messages import ApiKey

if TYPE_CHECKING:
    from broker.cluster.zk import ZkClient

log = logging.getLogger(__name__)

METADATA_VERSION = 8


class KafkaTimeoutError(TimeoutError):
    """A client-side deadline passed (metadata not found, record not delivered in time)."""


class TopicInfo:
    """Partitions of one topic: ``leaders[p]`` is the leader's broker id, or -1 when none.

    Immutable once built (a refresh builds a new one), so its lists are computed once."""

    __slots__ = ("name", "leaders", "partitions", "available")

    def __init__(self, name: str, leaders: dict[int, int] | None = None) -> None:
        self.name = name
        self.leaders = dict(leaders or {})
        self.partitions = sorted(self.leaders)
        self.available = [p for p in self.partitions if self.leaders[p] >= 0]

    def __repr__(self) -> str:
        return f"TopicInfo({self.name!r}, {self.leaders!r})"


def parse_servers(servers: str | Iterable[str]) -> list[tuple[str, int]]:
    """``"h1:9092,h2:9092"`` -> [(host, port)]; ValueError naming a bad entry."""
    items = servers.split(",") if isinstance(servers, str) else list(servers)
    result = []
    for item in (i.strip() for i in items):
        if not item:
            continue
        host, _, port = item.rpartition(":")
        if not host or not port.isdigit():
            raise ValueError(f"broker address must be host:port, not {item!r}")
        result.append((host.strip("[]"), int(port)))
    if not result:
        raise ValueError("no broker addresses given")
    return result


class ClusterMetadata:
    """What a client knows of the cluster, from bootstrap brokers or from ZooKeeper."""

    def __init__(
        self,
        bootstrap_servers: str | None = None,
        zookeeper_connect: str | None = None,
        *,
        client_id: str = "logbus",
        request_timeout_ms: int = 30000,
        retry_backoff_ms: int = 100,
        metadata_max_age_ms: int = 300000,
        allow_auto_create_topics: bool = True,
        zookeeper_session_timeout_ms: int = 18000,
        zookeeper_connection_timeout_ms: int | None = None,
        listener_name: str = "PLAINTEXT",
        security: ClientSecurity = PLAINTEXT,
    ) -> None:
        if not bootstrap_servers and not zookeeper_connect:
            raise ValueError("set bootstrap.servers (or zookeeper.connect) to find the brokers")
        self.bootstrap = parse_servers(bootstrap_servers) if bootstrap_servers else []
        self.client_id = client_id
        self.request_timeout = request_timeout_ms / 1000.0
        self.retry_backoff = retry_backoff_ms / 1000.0
        self.max_age = metadata_max_age_ms / 1000.0
        self.allow_auto_create_topics = allow_auto_create_topics
        self.listener_name = listener_name
        self.security = security
        self._brokers: dict[int, tuple[str, int]] = {}
        self._topics: dict[str, TopicInfo] = {}
        self._wanted: set[str] = set()
        self._lock = threading.RLock()  # held by whoever refreshes
        self._conn: BrokerConnection | None = None
        self._stale = True
        self._last_update = 0.0
        self._last_error = ""
        self._closed = False
        self._listeners: list = []
        self._zk: ZkClient | None = None
        self._unwatch: list = []
        if zookeeper_connect and not bootstrap_servers:
            self._start_zk(zookeeper_connect, zookeeper_session_timeout_ms, zookeeper_connection_timeout_ms)

    # ------------------------------------------------------------------ reads (no lock)

    @property
    def uses_zookeeper(self) -> bool:
        return self._zk is not None

    def topic(self, name: str) -> TopicInfo | None:
        return self._topics.get(name)

    def partitions(self, topic: str) -> list[int] | None:
        info = self._topics.get(topic)
        return info.partitions if info else None

    def leader(self, topic: str, partition: int) -> int | None:
        """The leader's broker id, or None when unknown (no leader, or topic not fetched)."""
        info = self._topics.get(topic)
        if info is None:
            return None
        leader = info.leaders.get(partition, -1)
        return leader if leader >= 0 and leader in self._brokers else None

    def broker_address(self, broker_id: int) -> tuple[str, int] | None:
        return self._brokers.get(broker_id)

    def brokers(self) -> dict[int, tuple[str, int]]:
        return dict(self._brokers)

    @property
    def stale(self) -> bool:
        return self._stale or (time.monotonic() - self._last_update) > self.max_age

    def add_listener(self, callback) -> None:
        """``callback()`` after every successful refresh (on the refreshing thread)."""
        self._listeners.append(callback)

    # ------------------------------------------------------------------ updates

    def request_update(self) -> None:
        """Mark the cached metadata stale; the next ``maybe_update``/``fetch`` refreshes it."""
        self._stale = True

    def maybe_update(self, timeout: float | None = None) -> bool:
        """Refresh the wanted topics if stale; False (no exception) when it could not."""
        if not self.stale:
            return True
        try:
            self._refresh(set(self._wanted), timeout if timeout is not None else self.request_timeout)
            return True
        except (KafkaError, BrokerConnectionError, OSError, KafkaTimeoutError) as exc:
            self._last_error = str(exc)
            log.debug("metadata refresh failed: %s", exc)
            return False

    def fetch(self, topics: Iterable[str], timeout: float) -> dict[str, TopicInfo]:
        """Block until every topic in ``topics`` is known with its partitions.

        Raises UnknownTopicOrPartitionError when the cluster says a topic does not exist (and
        will not create it), InvalidTopicError for a bad name, and KafkaTimeoutError when the
        brokers cannot be reached or the topics do not appear within ``timeout`` seconds."""
        wanted = list(topics)
        deadline = time.monotonic() + timeout
        with self._lock:
            self._wanted.update(wanted)
        unknown_answers = 0
        while True:
            missing = [t for t in wanted if t not in self._topics or not self._topics[t].leaders]
            if not missing:
                return {t: self._topics[t] for t in wanted}
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                reason = self._last_error or f"topic(s) {', '.join(missing)} not present in metadata"
                raise KafkaTimeoutError(f"Failed to get metadata for {', '.join(missing)} within {timeout:g} s: {reason}")
            try:
                errors = self._refresh(set(self._wanted), remaining)
            except (BrokerConnectionError, OSError, KafkaTimeoutError) as exc:
                self._last_error = str(exc)
                time.sleep(min(self.retry_backoff, max(deadline - time.monotonic(), 0)))
                continue
            for name in missing:
                code = errors.get(name)
                if code == ErrorCode.INVALID_TOPIC_EXCEPTION:
                    raise InvalidTopicError(f"invalid topic name {name!r}")
                if code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
                    unknown_answers += 1
                    # Asked with auto-creation and still unknown (a few times, in case a
                    # creation elsewhere is still spreading): the cluster will not create it.
                    if unknown_answers >= 3 or not self.allow_auto_create_topics:
                        raise UnknownTopicOrPartitionError(
                            f"topic {name!r} does not exist"
                            + ("" if not self.allow_auto_create_topics else " and the brokers do not auto-create topics")
                        )
                elif code not in (None, ErrorCode.NONE) and not error_class(code).invalid_metadata:
                    raise error_for_code(code, f"metadata for topic {name!r}")
                elif code is not None:
                    self._last_error = f"topic {name!r}: {ErrorCode(code).name}"
            if [t for t in wanted if t not in self._topics or not self._topics[t].leaders]:
                time.sleep(min(self.retry_backoff, max(deadline - time.monotonic(), 0)))

    def close(self) -> None:
        self._closed = True
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None
            for cancel in self._unwatch:
                cancel()
            self._unwatch.clear()
            if self._zk is not None:
                self._zk.stop()
                self._zk = None

    # ------------------------------------------------------------------ internals

    def _refresh(self, topics: set[str], timeout: float) -> dict[str, int]:
        """One refresh; returns each asked topic's error code (0 when fine)."""
        with self._lock:
            if self._zk is not None:
                errors = self._refresh_from_zk(topics, timeout)
            else:
                errors = self._refresh_from_broker(topics, timeout)
            self._stale = False
            self._last_update = time.monotonic()
        for callback in list(self._listeners):
            try:
                callback()
            except Exception:
                log.exception("metadata listener failed")
        return errors

    def _metadata_request(self, topics: set[str] | None, timeout: float) -> dict:
        deadline = time.monotonic() + timeout
        body = {
            "topics": None if topics is None else [{"name": t} for t in sorted(topics)],
            "allow_auto_topic_creation": self.allow_auto_create_topics,
        }
        errors = []
        if self._conn is not None:
            try:
                self._conn._sock.settimeout(max(min(self.request_timeout, deadline - time.monotonic()), 0.05))
                return self._conn.request(ApiKey.METADATA, METADATA_VERSION, body)
            except (BrokerConnectionError, OSError) as exc:
                errors.append(str(exc))
                self._conn.close()
                self._conn = None
        candidates = list(dict.fromkeys(list(self._brokers.values()) + self.bootstrap))
        for host, port in candidates:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            try:
                conn = BrokerConnection(host, port, client_id=self.client_id, timeout=min(self.request_timeout, remaining),
                                        security=self.security)
            except (BrokerConnectionError, OSError) as exc:
                errors.append(str(exc))
                continue
            try:
                response = conn.request(ApiKey.METADATA, METADATA_VERSION, body)
            except (BrokerConnectionError, OSError) as exc:
                errors.append(f"broker {host}:{port}: {exc}")
                conn.close()
                continue
            self._conn = conn
            return response
        raise BrokerConnectionError(
            "no broker reachable: " + ("; ".join(dict.fromkeys(errors)) or "no broker addresses known")
        )

    def _refresh_from_broker(self, topics: set[str], timeout: float) -> dict[str, int]:
        response = self._metadata_request(topics, timeout)
        brokers = {b["node_id"]: (b["host"], b["port"]) for b in response["brokers"]}
        new_topics = dict(self._topics)
        errors: dict[str, int] = {}
        for t in response["topics"]:
            errors[t["name"]] = t["error_code"]
            if t["error_code"] != ErrorCode.NONE and not t["partitions"]:
                new_topics.pop(t["name"], None)
                continue
            new_topics[t["name"]] = TopicInfo(
                t["name"], {p["partition_index"]: p["leader_id"] for p in t["partitions"]}
            )
        self._brokers = brokers
        self._topics = new_topics
        return errors

    # ZooKeeper discovery -------------------------------------------------------------------

    def _start_zk(self, connect: str, session_timeout_ms: int, connection_timeout_ms: int | None) -> None:
        from broker.cluster.zk import ZkClient, ZkError  # kazoo only when asked for

        zk = ZkClient(connect, session_timeout_ms=session_timeout_ms, connection_timeout_ms=connection_timeout_ms)
        try:
            zk.start()
        except ZkError as exc:
            raise KafkaTimeoutError(str(exc)) from None
        self._zk = zk
        self._zk_topics: set[str] = set()
        self._unwatch.append(zk.watch_brokers(self._on_brokers_changed))
        self._unwatch.append(zk.watch_topics(self._on_topics_changed))

    def _on_brokers_changed(self, ids: list[int]) -> None:
        # kazoo's callback thread: only note the change; the next refresh reads the nodes
        self._zk_broker_ids = list(ids)
        self._brokers_dirty = True
        self._stale = True  # leaders may have moved

    def _read_brokers(self) -> None:
        zk = self._zk
        if zk is None or self._closed:
            return
        self._brokers_dirty = False
        brokers = {}
        for bid in getattr(self, "_zk_broker_ids", None) or sorted(zk.live_brokers()):
            info = zk.broker_info(bid)
            if info is None:
                continue
            endpoint = info.endpoint(self.listener_name)
            if endpoint is not None:
                brokers[bid] = (endpoint.host or "127.0.0.1", endpoint.port)
            elif info.host and info.port > 0:
                brokers[bid] = (info.host, info.port)
        self._brokers = brokers

    def _on_topics_changed(self, names: list[str]) -> None:
        self._zk_topics = set(names)
        if self._wanted & self._zk_topics - set(self._topics):
            self._stale = True

    def _refresh_from_zk(self, topics: set[str], timeout: float) -> dict[str, int]:
        zk = self._zk
        assert zk is not None
        if not self._brokers or getattr(self, "_brokers_dirty", True):
            self._read_brokers()
        errors: dict[str, int] = {}
        new_topics = dict(self._topics)
        for name in sorted(topics):
            assignment = zk.topic_assignment(name)
            if assignment is None and self.allow_auto_create_topics and self._brokers:
                # Ask a broker: its Metadata answer creates the topic when the broker allows.
                try:
                    answer = self._metadata_request({name}, timeout)
                    errors[name] = answer["topics"][0]["error_code"] if answer["topics"] else 0
                except (BrokerConnectionError, OSError) as exc:
                    self._last_error = str(exc)
                assignment = zk.topic_assignment(name)
            if assignment is None:
                errors[name] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                new_topics.pop(name, None)
                continue
            leaders = {}
            for partition in assignment:
                state = zk.partition_state(name, partition)
                leaders[partition] = state.leader if state is not None else -1
            errors[name] = ErrorCode.NONE if all(leader >= 0 for leader in leaders.values()) else ErrorCode.LEADER_NOT_AVAILABLE
            new_topics[name] = TopicInfo(name, leaders)
        self._topics = new_topics
        return errors
