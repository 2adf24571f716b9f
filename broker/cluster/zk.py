"""Kafka's ZooKeeper layout through kazoo: broker registration, topics, partition state.

Paths and JSON follow Apache Kafka's own so zkCli, Burrow and kafka-manager can read them.
The API is blocking (kazoo's); the Twisted server calls it from threads, or briefly on the
reactor thread for calls that need one round trip.
"""

from __future__ import annotations

import json
import logging
import re
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.recipe.watchers import ChildrenWatch

from broker.config import Listener
from broker.protocol.errors import InvalidTopicError, TopicAlreadyExistsError

log = logging.getLogger(__name__)

BROKER_IDS = "/brokers/ids"
BROKER_TOPICS = "/brokers/topics"
CONFIG_TOPICS = "/config/topics"
DELETE_TOPICS = "/admin/delete_topics"
CONSUMERS = "/consumers"
#: Created by ensure_paths(); /controller and /controller_epoch belong to the controller.
BASE_PATHS = (BROKER_IDS, BROKER_TOPICS, CONFIG_TOPICS, DELETE_TOPICS, CONSUMERS)

_TOPIC_NAME = re.compile(r"^[a-zA-Z0-9._-]{1,249}$")


class ZkError(Exception):
    """Base of the errors this module raises; messages are one line."""


class ZkConnectionError(ZkError):
    """ZooKeeper could not be reached in time."""


class BrokerIdInUseError(ZkError):
    """Another live broker (another ZooKeeper session) holds /brokers/ids/<id>."""


class ZkVersionConflictError(ZkError):
    """A conditional update lost: the node changed (or vanished) since it was read."""


@dataclass(frozen=True)
class BrokerInfo:
    """A registered broker as read from /brokers/ids/<id>."""

    id: int
    host: str | None
    port: int
    rack: str | None
    endpoints: list[Listener]

    def endpoint(self, name: str = "PLAINTEXT") -> Listener | None:
        """The endpoint for listener ``name``, if the broker has one."""
        return next((e for e in self.endpoints if e.name == name), None)


@dataclass(frozen=True)
class PartitionState:
    """Leader and ISR of one partition; ``zk_version`` is for conditional updates."""

    leader: int
    leader_epoch: int
    isr: list[int]
    controller_epoch: int
    zk_version: int


def split_connect_string(connect: str) -> tuple[str, str]:
    """Split ``host:port[,host:port]/chroot`` into (hosts, chroot); chroot is '' when absent."""
    hosts, slash, chroot = connect.strip().partition("/")
    chroot = ("/" + chroot.strip("/")) if slash and chroot.strip("/") else ""
    return hosts, chroot


def validate_topic_name(name: str) -> None:
    """Kafka's rule: 1-249 of [a-zA-Z0-9._-], and not '.' or '..'."""
    if name in (".", "..") or not _TOPIC_NAME.match(name):
        raise InvalidTopicError(f"invalid topic name {name!r}: use 1-249 of [a-zA-Z0-9._-], not '.' or '..'")


def _json(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode()


def _parse_endpoint(text: str) -> Listener:
    name, _, rest = text.partition("://")
    host, _, port = rest.rpartition(":")
    return Listener(name, host.strip("[]"), int(port))


class ZkClient:
    """One ZooKeeper session of a broker or tool, with Kafka's paths.

    Threads: watch and state callbacks run on kazoo's callback thread; keep them short and
    hand work to another thread (or ``reactor.callFromThread``) rather than block there.
    """

    def __init__(
        self,
        connect: str,
        session_timeout_ms: int = 18000,
        connection_timeout_ms: int | None = None,
    ) -> None:
        self.connect = connect.strip()
        self.hosts, self.chroot = split_connect_string(self.connect)
        self.session_timeout_ms = session_timeout_ms
        self.connection_timeout_ms = connection_timeout_ms or session_timeout_ms
        self._zk = KazooClient(hosts=self.connect, timeout=session_timeout_ms / 1000.0)
        self._listeners: list[Callable[[str], None]] = []
        self._new_session_callbacks: list[Callable[[], None]] = []
        self._registration: dict[str, Any] | None = None
        self._session_lost = False
        self._stopping = False
        self._zk.add_listener(self._on_state)

    @classmethod
    def from_config(cls, config: Any) -> ZkClient:
        """Build from a BrokerConfig (zookeeper.connect and its timeouts)."""
        return cls(
            config.zookeeper_connect,
            config.zookeeper_session_timeout_ms,
            config.zookeeper_connection_timeout_ms,
        )

    # ------------------------------------------------------------------ lifecycle

    def start(self, timeout: float | None = None) -> None:
        """Connect (creating the chroot if missing, as Kafka does) and create the base paths."""
        timeout = timeout if timeout is not None else self.connection_timeout_ms / 1000.0
        if self.chroot:
            self._create_chroot(timeout)
        self._stopping = False
        try:
            self._zk.start(timeout=timeout)
        except KazooTimeoutError:
            self._zk.stop()
            self._zk.close()
            raise ZkConnectionError(f"cannot connect to ZooKeeper at {self.connect} within {timeout:g}s") from None
        self.ensure_paths()

    def _create_chroot(self, timeout: float) -> None:
        bare = KazooClient(hosts=self.hosts, timeout=self.session_timeout_ms / 1000.0)
        try:
            bare.start(timeout=timeout)
            bare.ensure_path(self.chroot)
        except KazooTimeoutError:
            raise ZkConnectionError(f"cannot connect to ZooKeeper at {self.hosts} within {timeout:g}s") from None
        finally:
            bare.stop()
            bare.close()

    def stop(self) -> None:
        """Close the session; its ephemeral nodes (the broker registration) vanish at once."""
        self._stopping = True
        self._zk.stop()
        self._zk.close()

    def __enter__(self) -> ZkClient:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def connected(self) -> bool:
        return bool(self._zk.connected)

    @property
    def session_id(self) -> int | None:
        """The current session id, or None before the first connection."""
        cid = self._zk.client_id
        return cid[0] if cid else None

    @property
    def kazoo(self) -> KazooClient:
        """The underlying kazoo client, for recipes (locks, elections) this class lacks."""
        return self._zk

    client = kazoo  # the same, under the name tests and tools reach for

    def ensure_paths(self) -> None:
        """Create Kafka's persistent top-level paths when missing."""
        for path in BASE_PATHS:
            self._zk.retry(self._zk.ensure_path, path)

    # ------------------------------------------------------------------ session state

    def add_state_listener(self, callback: Callable[[str], None]) -> None:
        """Call ``callback(state)`` on "CONNECTED", "SUSPENDED" (connection lost, session may
        live) and "LOST" (session expired: ephemerals are gone). Runs on kazoo's thread and
        must not block or call ZooKeeper."""
        self._listeners.append(callback)

    def remove_state_listener(self, callback: Callable[[str], None]) -> None:
        if callback in self._listeners:
            self._listeners.remove(callback)

    def add_new_session_callback(self, callback: Callable[[], None]) -> None:
        """Call ``callback()`` on a worker thread each time a new session replaces a lost one.

        The broker registration is redone automatically before the callbacks run; use this
        to redo other ephemeral state (controller candidacy, consumer registration)."""
        self._new_session_callbacks.append(callback)

    def _on_state(self, state: str) -> None:
        if state == KazooState.LOST:
            if not self._stopping:
                self._session_lost = True
        elif state == KazooState.CONNECTED and self._session_lost:
            self._session_lost = False
            threading.Thread(target=self._renew_session, name="zk-new-session", daemon=True).start()
        for cb in list(self._listeners):
            try:
                cb(str(state))
            except Exception:
                log.exception("ZooKeeper state listener failed")

    def _renew_session(self) -> None:
        """Runs after a session expiry: register again, then notify callbacks."""
        log.warning("ZooKeeper session expired; new session 0x%x", self.session_id or 0)
        if self._registration is not None:
            try:
                self.register_broker(**self._registration)
            except Exception:
                log.exception("re-registering broker after session expiry failed")
        for cb in list(self._new_session_callbacks):
            try:
                cb()
            except Exception:
                log.exception("new-session callback failed")

    # ------------------------------------------------------------------ brokers

    def register_broker(
        self,
        broker_id: int,
        endpoints: Sequence[Listener | tuple[str, str, int]],
        rack: str | None = None,
        jmx_port: int = -1,
        security_protocol_map: Mapping[str, str] | None = None,
        stale_wait_s: float = 0.0,
    ) -> None:
        """Write /brokers/ids/<id> (ephemeral) in Kafka's v4 JSON.

        If another session holds the id: wait up to ``stale_wait_s`` for it to expire (a
        restart after kill -9 finds its old node until the session timeout), then raise
        BrokerIdInUseError. Registering again on our own session just updates the node.
        ``security_protocol_map`` (listener.security.protocol.map) maps each endpoint's
        listener name to its protocol; only the endpoints' names are written, as Kafka does."""
        eps = [Listener(*ep) for ep in endpoints]
        plain = next((e for e in eps if e.name == "PLAINTEXT"), None)
        data = {
            "listener_security_protocol_map": {e.name: (security_protocol_map or {}).get(e.name, e.name) for e in eps},
            "endpoints": [str(e) for e in eps],
            "jmx_port": jmx_port,
            "host": plain.host if plain else None,
            "timestamp": str(int(time.time() * 1000)),
            "port": plain.port if plain else -1,
            "version": 4,
            "rack": rack,
        }
        path = f"{BROKER_IDS}/{broker_id}"
        deadline = time.monotonic() + stale_wait_s
        while True:
            try:
                self._zk.retry(self._zk.create, path, _json(data), ephemeral=True, makepath=True)
                break
            except NodeExistsError:
                try:
                    raw, stat = self._zk.get(path)
                except NoNodeError:
                    continue  # the old owner just expired: try again
                if stat.ephemeralOwner == self.session_id:
                    self._zk.set(path, _json(data))
                    break
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    holder = ",".join(json.loads(raw or b"{}").get("endpoints") or []) or "unknown endpoints"
                    raise BrokerIdInUseError(
                        f"broker.id {broker_id} is already registered in ZooKeeper at {self.connect} "
                        f"by a live broker ({holder})"
                    ) from None
                gone = threading.Event()
                if self._zk.exists(path, watch=lambda _e: gone.set()) is not None:
                    gone.wait(min(remaining, 0.5))
        self._registration = {
            "broker_id": broker_id, "endpoints": eps, "rack": rack, "jmx_port": jmx_port,
            "security_protocol_map": data["listener_security_protocol_map"],
        }

    def deregister_broker(self, broker_id: int) -> None:
        """Remove our registration (a clean shutdown does it by closing the session anyway)."""
        self._registration = None
        try:
            self._zk.delete(f"{BROKER_IDS}/{broker_id}")
        except NoNodeError:
            pass

    def broker_info(self, broker_id: int) -> BrokerInfo | None:
        """One registered broker, or None when it is not live."""
        try:
            raw, _ = self._zk.retry(self._zk.get, f"{BROKER_IDS}/{broker_id}")
        except NoNodeError:
            return None
        d = json.loads(raw)
        return BrokerInfo(
            id=broker_id,
            host=d.get("host"),
            port=int(d.get("port", -1)),
            rack=d.get("rack"),
            endpoints=[_parse_endpoint(e) for e in d.get("endpoints") or []],
        )

    def live_brokers(self) -> dict[int, BrokerInfo]:
        """Every registered (live) broker by id."""
        result: dict[int, BrokerInfo] = {}
        for child in self._children(BROKER_IDS):
            if child.isdigit() and (info := self.broker_info(int(child))) is not None:
                result[info.id] = info
        return dict(sorted(result.items()))

    def watch_brokers(self, callback: Callable[[list[int]], None]) -> Callable[[], None]:
        """Call ``callback(sorted live broker ids)`` now and on each change (kazoo's thread).

        Returns a function that cancels the watch."""
        return self._watch_children(BROKER_IDS, lambda ids: callback(sorted(int(i) for i in ids if i.isdigit())))

    # ------------------------------------------------------------------ topics

    def create_topic(
        self, name: str, assignment: Mapping[int, Sequence[int]], config: Mapping[str, str] | None = None
    ) -> None:
        """Write /config/topics/<t> then /brokers/topics/<t> (the node the controller watches)."""
        validate_topic_name(name)
        if not assignment:
            raise ValueError("a topic needs at least one partition")
        topic_path = f"{BROKER_TOPICS}/{name}"
        if self._zk.retry(self._zk.exists, topic_path) is not None:
            raise TopicAlreadyExistsError(f"Topic '{name}' already exists.")
        self.set_topic_config(name, config or {})
        partitions = {str(p): [int(b) for b in replicas] for p, replicas in sorted(assignment.items())}
        try:
            self._zk.create(topic_path, _json({"version": 1, "partitions": partitions}), makepath=True)
        except NodeExistsError:
            raise TopicAlreadyExistsError(f"Topic '{name}' already exists.") from None

    def topic_assignment(self, name: str) -> dict[int, list[int]] | None:
        """Partition -> replica list of a topic, or None if the topic does not exist."""
        try:
            raw, _ = self._zk.retry(self._zk.get, f"{BROKER_TOPICS}/{name}")
        except NoNodeError:
            return None
        parts = json.loads(raw).get("partitions", {})
        return {int(p): list(r) for p, r in sorted(parts.items(), key=lambda kv: int(kv[0]))}

    def set_topic_assignment(self, name: str, assignment: Mapping[int, Sequence[int]]) -> None:
        """Replace a topic's assignment (adding partitions, reassignment)."""
        partitions = {str(p): [int(b) for b in r] for p, r in sorted(assignment.items())}
        self._zk.retry(self._zk.set, f"{BROKER_TOPICS}/{name}", _json({"version": 1, "partitions": partitions}))

    def all_topics(self) -> list[str]:
        """Every topic name, sorted."""
        return sorted(self._children(BROKER_TOPICS))

    def topic_config(self, name: str) -> dict[str, str]:
        """Per-topic overrides from /config/topics/<t>; empty when none."""
        try:
            raw, _ = self._zk.retry(self._zk.get, f"{CONFIG_TOPICS}/{name}")
        except NoNodeError:
            return {}
        return {str(k): str(v) for k, v in (json.loads(raw).get("config") or {}).items()}

    def set_topic_config(self, name: str, config: Mapping[str, str]) -> None:
        """Create or replace /config/topics/<t>."""
        path = f"{CONFIG_TOPICS}/{name}"
        data = _json({"version": 1, "config": {str(k): str(v) for k, v in config.items()}})
        try:
            self._zk.retry(self._zk.create, path, data, makepath=True)
        except NodeExistsError:
            self._zk.retry(self._zk.set, path, data)

    def delete_topic(self, name: str) -> None:
        """Remove the topic's nodes (assignment, partition states, config, deletion request)."""
        for path in (f"{BROKER_TOPICS}/{name}", f"{CONFIG_TOPICS}/{name}", f"{DELETE_TOPICS}/{name}"):
            try:
                self._zk.retry(self._zk.delete, path, recursive=True)
            except NoNodeError:
                pass

    def request_topic_deletion(self, name: str) -> None:
        """Mark a topic for deletion the way Kafka's tools do (/admin/delete_topics/<t>)."""
        try:
            self._zk.retry(self._zk.create, f"{DELETE_TOPICS}/{name}", b"", makepath=True)
        except NodeExistsError:
            pass

    def pending_topic_deletions(self) -> list[str]:
        """Topics marked for deletion and not yet deleted."""
        return sorted(self._children(DELETE_TOPICS))

    def watch_topics(self, callback: Callable[[list[str]], None]) -> Callable[[], None]:
        """Call ``callback(sorted topic names)`` now and whenever /brokers/topics changes.

        Later calls run on kazoo's thread. Returns a function that cancels the watch."""
        return self._watch_children(BROKER_TOPICS, lambda names: callback(sorted(names)))

    def watch_topic_deletions(self, callback: Callable[[list[str]], None]) -> Callable[[], None]:
        """Like watch_topics, for /admin/delete_topics."""
        return self._watch_children(DELETE_TOPICS, lambda names: callback(sorted(names)))

    # ------------------------------------------------------------------ partition state

    def set_partition_state(
        self,
        topic: str,
        partition: int,
        leader: int,
        leader_epoch: int,
        isr: Iterable[int],
        controller_epoch: int,
        version: int | None = None,
    ) -> int:
        """Write .../partitions/<p>/state and return its new zk version.

        With ``version`` the write succeeds only if the node is still at that version, else
        ZkVersionConflictError; without it the node is created or overwritten."""
        path = f"{BROKER_TOPICS}/{topic}/partitions/{partition}/state"
        data = _json({
            "controller_epoch": controller_epoch,
            "leader": leader,
            "version": 1,
            "leader_epoch": leader_epoch,
            "isr": [int(b) for b in isr],
        })
        if version is not None:
            try:
                return self._zk.set(path, data, version=version).version
            except (BadVersionError, NoNodeError):
                raise ZkVersionConflictError(
                    f"partition state of {topic}-{partition} is no longer at zk version {version}"
                ) from None
        while True:
            try:
                return self._zk.retry(self._zk.set, path, data).version
            except NoNodeError:
                try:
                    self._zk.create(path, data, makepath=True)
                    return 0
                except NodeExistsError:
                    continue

    def partition_state(self, topic: str, partition: int) -> PartitionState | None:
        """Leader, epochs and ISR of a partition, or None when no state was written yet."""
        try:
            raw, stat = self._zk.retry(self._zk.get, f"{BROKER_TOPICS}/{topic}/partitions/{partition}/state")
        except NoNodeError:
            return None
        d = json.loads(raw)
        return PartitionState(
            leader=int(d["leader"]),
            leader_epoch=int(d["leader_epoch"]),
            isr=[int(b) for b in d["isr"]],
            controller_epoch=int(d["controller_epoch"]),
            zk_version=stat.version,
        )

    # ------------------------------------------------------------------ helpers

    def _children(self, path: str) -> list[str]:
        try:
            return list(self._zk.retry(self._zk.get_children, path))
        except NoNodeError:
            return []

    def _watch_children(self, path: str, callback: Callable[[list[str]], None]) -> Callable[[], None]:
        """A ChildrenWatch whose callback errors are logged (the watch goes on)."""
        cancelled = threading.Event()
        self._zk.retry(self._zk.ensure_path, path)

        def on_children(children: list[str]) -> bool | None:
            if cancelled.is_set():
                return False  # tells kazoo to drop the watch
            try:
                callback(children)
            except Exception:
                log.exception("ZooKeeper watch callback on %s failed", path)
            return None

        ChildrenWatch(self._zk, path, on_children)
        return cancelled.set


# ---------------------------------------------------------------------- additions for the controller

CONTROLLER = "/controller"
CONTROLLER_EPOCH = "/controller_epoch"
CONTROLLED_SHUTDOWN = "/admin/controlled_shutdown"


def parse_partition_state(raw: bytes | None, stat: Any) -> PartitionState | None:
    """A state znode's bytes (as a DataWatch delivers them) as a PartitionState; None if absent."""
    if raw is None or stat is None:
        return None
    d = json.loads(raw)
    return PartitionState(
        leader=int(d["leader"]),
        leader_epoch=int(d["leader_epoch"]),
        isr=[int(b) for b in d["isr"]],
        controller_epoch=int(d.get("controller_epoch", 0)),
        zk_version=stat.version,
    )


def parse_assignment(raw: bytes | None) -> dict[int, list[int]] | None:
    """/brokers/topics/<t> bytes as partition -> replicas; None if absent."""
    if raw is None:
        return None
    parts = json.loads(raw).get("partitions", {})
    return {int(p): [int(b) for b in r] for p, r in sorted(parts.items(), key=lambda kv: int(kv[0]))}


def partition_state_path(topic: str, partition: int) -> str:
    return f"{BROKER_TOPICS}/{topic}/partitions/{partition}/state"


def create_partition_state(
    zk: ZkClient, topic: str, partition: int, leader: int, leader_epoch: int, isr: Iterable[int], controller_epoch: int
) -> int:
    """Create a partition's first state; ZkVersionConflictError if one exists already."""
    data = _json({
        "controller_epoch": controller_epoch,
        "leader": leader,
        "version": 1,
        "leader_epoch": leader_epoch,
        "isr": [int(b) for b in isr],
    })
    try:
        zk.kazoo.create(partition_state_path(topic, partition), data, makepath=True)
    except NodeExistsError:
        raise ZkVersionConflictError(f"partition state of {topic}-{partition} exists already") from None
    return 0
