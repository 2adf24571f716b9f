"""Kafka's ZooKeeper layout through kazoo: broker registration, topics, partition state.

Paths and JSON follow Apache Kafka's own so zkCli, Burrow and kafka-manager can read them.
The API is blocking (kazoo's); the Twisted server calls it from threads, or briefly on the
reactor thread for calls that need one round trip.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError, UnimplementedError
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.recipe.watchers import ChildrenWatch, DataWatch

from broker.cluster.async_watches import AsyncDataWatches
from broker.cluster.multi_read import MAX_PATHS, multi_get_async
from broker.cluster.zkdata import (
    BASE_PATHS,
    AclChangeZNode,
    AclEntry,
    AclZNode,
    BrokerIdsZNode,
    BrokerIdZNode,
    BrokerInfo,
    ConfigChangeNotificationZNode,
    ConfigEntityZNode,
    ConfigType,
    ControlledShutdownZNode,
    ControllerEpochZNode,
    ControllerZNode,
    DeleteTopicsZNode,
    PartitionState,
    TopicPartitionStateZNode,
    TopicsZNode,
    TopicZNode,
)
from broker.config import Listener
from broker.protocol.errors import InvalidTopicError, TopicAlreadyExistsError
from broker.security.acl import AccessControlEntry, AclOperation, AclPermissionType, PatternType, ResourcePattern, ResourceType

log = logging.getLogger(__name__)

__all__ = [
    "BrokerIdInUseError", "BrokerInfo", "PartitionState", "ZkClient", "ZkConnectionError", "ZkError",
    "ZkSessionLostError", "ZkVersionConflictError", "split_connect_string", "validate_topic_name",
]

#: how long a /config/changes notification is kept (Kafka's 15 minutes)
CONFIG_CHANGE_EXPIRY_MS = 15 * 60 * 1000
_TOPIC_NAME = re.compile(r"^[a-zA-Z0-9._-]{1,249}$")


class ZkError(Exception):
    """Base of the errors this module raises; messages are one line."""


class ZkConnectionError(ZkError):
    """ZooKeeper could not be reached in time."""


class BrokerIdInUseError(ZkError):
    """Another live broker (another ZooKeeper session) holds /brokers/ids/<id>."""


class ZkSessionLostError(ZkError):
    """The call failed because the session expired or the connection closed (a paused or
    partitioned broker); a new session follows and the broker re-reads its state then."""


class ZkVersionConflictError(ZkError):
    """A conditional update lost: the node changed (or vanished) since it was read."""


def restart_wait_s(stale_wait_s: float) -> float:
    """How long a restarted broker waits for its own earlier registration to expire: ZooKeeper
    expires sessions in tick buckets and late when busy, so well past the session timeout."""
    return max(3 * stale_wait_s, stale_wait_s + 10.0)


def split_connect_string(connect: str) -> tuple[str, str]:
    """Split ``host:port[,host:port]/chroot`` into (hosts, chroot); chroot is '' when absent."""
    hosts, slash, chroot = connect.strip().partition("/")
    chroot = ("/" + chroot.strip("/")) if slash and chroot.strip("/") else ""
    return hosts, chroot


def validate_topic_name(name: str) -> None:
    """Kafka's rule: 1-249 of [a-zA-Z0-9._-], and not '.' or '..'."""
    if name in (".", "..") or not _TOPIC_NAME.match(name):
        raise InvalidTopicError(f"invalid topic name {name!r}: use 1-249 of [a-zA-Z0-9._-], not '.' or '..'")


@dataclass(frozen=True)
class PartitionStateChange:
    """A controller's write of one partition state, conditional on the version it read."""

    topic: str
    partition: int
    leader: int
    leader_epoch: int
    isr: list[int]
    version: int


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
        self._async_watches = AsyncDataWatches(self._zk)  # the partition states' watches
        self._multi_read = True  # until the server refuses multiRead (ZooKeeper before 3.6)

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

    # ------------------------------------------------------------------ znodes by path (paths: broker.cluster.zkdata)

    # Each call is tried once unless ``retry``: then kazoo retries it through connection loss, without limit.

    def _call(self, retry: bool, method: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        return self._zk.retry(method, *args, **kwargs) if retry else method(*args, **kwargs)

    def read(self, path: str, retry: bool = False) -> tuple[bytes, Any] | None:
        """(data, stat) of a znode, or None when it does not exist."""
        try:
            raw, stat = self._call(retry, self._zk.get, path)
        except NoNodeError:
            return None
        return raw or b"", stat

    def exists(self, path: str, retry: bool = False) -> bool:
        return self._call(retry, self._zk.exists, path) is not None

    def children(self, path: str, retry: bool = False) -> list[str]:
        """The children's names; empty when the node does not exist."""
        try:
            return list(self._call(retry, self._zk.get_children, path))
        except NoNodeError:
            return []

    def create(self, path: str, data: bytes = b"", ephemeral: bool = False, retry: bool = False) -> bool:
        """Create a znode (and its missing parents); False when it exists already."""
        try:
            self._call(retry, self._zk.create, path, data, ephemeral=ephemeral, makepath=True)
        except NodeExistsError:
            return False
        return True

    def set_data(self, path: str, data: bytes, version: int = -1, retry: bool = False) -> int:
        """Overwrite a znode and return its new version. With ``version`` (not -1) only if the node is
        still at that version, else ZkVersionConflictError."""
        try:
            return int(self._call(retry, self._zk.set, path, data, version=version).version)
        except BadVersionError:
            raise ZkVersionConflictError(f"{path} is no longer at zk version {version}") from None

    def delete(self, path: str, version: int = -1, recursive: bool = False, retry: bool = False) -> None:
        """Delete a znode (only if still at ``version``, unless -1); a missing one is fine."""
        try:
            self._call(retry, self._zk.delete, path, version=version, recursive=recursive)
        except NoNodeError:
            pass

    def watch_children(self, path: str, callback: Callable[[list[str]], None]) -> Callable[[], None]:
        """Call ``callback(children)`` now and on each change (kazoo's thread), creating ``path`` if
        missing; callback errors are logged and the watch goes on. Returns a function that cancels it."""
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

    def watch_data(self, path: str, callback: Callable[..., bool | None]) -> None:
        """kazoo's DataWatch: ``callback(data, stat[, event])`` now and on each change (data and stat are
        None while the node is missing); the watch ends when the callback returns False."""
        DataWatch(self._zk, path, callback)

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

        If another session holds the id, wait (bounded, saying so in one log line) for it to expire:
        up to ``stale_wait_s`` when the holder advertises other endpoints (perhaps a live duplicate),
        and longer when it advertises ours, which only an earlier run of this very broker (killed,
        its port now ours) can have done: ZooKeeper may expire that session late. Then raise
        BrokerIdInUseError. Registering again on our own session just updates the node.
        ``security_protocol_map`` (listener.security.protocol.map) maps each endpoint's
        listener name to its protocol; only the endpoints' names are written, as Kafka does."""
        eps = [Listener(*ep) for ep in endpoints]
        protocols = {e.name: (security_protocol_map or {}).get(e.name, e.name) for e in eps}
        data = BrokerIdZNode.encode(eps, rack, jmx_port, protocols)
        path = BrokerIdZNode.path(broker_id)
        started = time.monotonic()
        announced = False
        while True:
            if self.create(path, data, ephemeral=True, retry=True):
                break
            # another session's node (or ours from before): see whose
            found = self.read(path)
            if found is None:
                continue  # the old owner just expired: try again
            raw, stat = found
            if stat.ephemeralOwner == self.session_id:
                self.set_data(path, data)
                break
            holder = BrokerIdZNode.decode(broker_id, raw).endpoints
            ours = sorted(map(str, holder)) == sorted(map(str, eps))
            bound = restart_wait_s(stale_wait_s) if ours else stale_wait_s
            remaining = started + bound - time.monotonic()
            if remaining <= 0:
                where = ",".join(str(e) for e in holder) or "unknown endpoints"
                raise BrokerIdInUseError(
                    f"broker.id {broker_id} is already registered in ZooKeeper at {self.connect} "
                    f"by a live broker ({where})"
                    + (f" and its session did not expire within {bound:g}s" if ours else "")
                ) from None
            if not announced:
                announced = True
                log.warning(
                    "broker.id %d is still registered by %s (session 0x%x); waiting up to %.0fs for ZooKeeper to expire it",
                    broker_id, "an earlier run of this broker" if ours else "another session", stat.ephemeralOwner, remaining,
                )
            gone = threading.Event()
            if self._zk.exists(path, watch=lambda _e, gone=gone: gone.set()) is not None:
                gone.wait(min(remaining, 0.5))
        self._registration = {
            "broker_id": broker_id, "endpoints": eps, "rack": rack, "jmx_port": jmx_port,
            "security_protocol_map": protocols,
        }

    def deregister_broker(self, broker_id: int) -> None:
        """Remove our registration (a clean shutdown does it by closing the session anyway)."""
        self._registration = None
        self.delete(BrokerIdZNode.path(broker_id))

    def broker_info(self, broker_id: int) -> BrokerInfo | None:
        """One registered broker, or None when it is not live."""
        found = self.read(BrokerIdZNode.path(broker_id), retry=True)
        return None if found is None else BrokerIdZNode.decode(broker_id, found[0])

    def live_brokers(self) -> dict[int, BrokerInfo]:
        """Every registered (live) broker by id."""
        result: dict[int, BrokerInfo] = {}
        for child in self.children(BrokerIdsZNode.path(), retry=True):
            if child.isdigit() and (info := self.broker_info(int(child))) is not None:
                result[info.id] = info
        return dict(sorted(result.items()))

    def watch_brokers(self, callback: Callable[[list[int]], None]) -> Callable[[], None]:
        """Call ``callback(sorted live broker ids)`` now and on each change (kazoo's thread).

        Returns a function that cancels the watch."""
        return self.watch_children(BrokerIdsZNode.path(), lambda ids: callback(sorted(int(i) for i in ids if i.isdigit())))

    # ------------------------------------------------------------------ topics

    def create_topic(
        self, name: str, assignment: Mapping[int, Sequence[int]], config: Mapping[str, str] | None = None
    ) -> None:
        """Write /config/topics/<t> then /brokers/topics/<t> (the node the controller watches)."""
        validate_topic_name(name)
        if not assignment:
            raise ValueError("a topic needs at least one partition")
        topic_path = TopicZNode.path(name)
        if self.exists(topic_path, retry=True):
            raise TopicAlreadyExistsError(f"Topic '{name}' already exists.")
        self.set_topic_config(name, config or {})
        if not self.create(topic_path, TopicZNode.encode(assignment)):
            raise TopicAlreadyExistsError(f"Topic '{name}' already exists.")

    def topic_assignment(self, name: str) -> dict[int, list[int]] | None:
        """Partition -> replica list of a topic, or None if the topic does not exist."""
        found = self.versioned_topic_assignment(name)
        return None if found is None else found[0]

    def versioned_topic_assignment(self, name: str) -> tuple[dict[int, list[int]], int] | None:
        """``topic_assignment`` and the zxid of its last change, which orders reads that finish out of
        order (across a deletion and re-creation too, unlike the znode's version)."""
        found = self.read(TopicZNode.path(name), retry=True)
        return None if found is None else (TopicZNode.decode(found[0]), found[1].mzxid)

    def set_topic_assignment(self, name: str, assignment: Mapping[int, Sequence[int]]) -> None:
        """Replace a topic's assignment (adding partitions, reassignment)."""
        self.set_data(TopicZNode.path(name), TopicZNode.encode(assignment), retry=True)

    def all_topics(self) -> list[str]:
        """Every topic name, sorted."""
        return sorted(self.children(TopicsZNode.path(), retry=True))

    def watch_topic(self, name: str, callback: Callable[..., bool | None]) -> None:
        """DataWatch on /brokers/topics/<t> (partitions added); see ``watch_data``."""
        self.watch_data(TopicZNode.path(name), callback)

    def topic_config(self, name: str) -> dict[str, str]:
        """Per-topic overrides from /config/topics/<t>; empty when none."""
        found = self.read(ConfigEntityZNode.path(ConfigType.TOPIC, name), retry=True)
        return {} if found is None else ConfigEntityZNode.decode(found[0])

    def set_topic_config(self, name: str, config: Mapping[str, str]) -> None:
        """Create or replace /config/topics/<t>."""
        path = ConfigEntityZNode.path(ConfigType.TOPIC, name)
        data = ConfigEntityZNode.encode(config)
        if not self.create(path, data, retry=True):
            self.set_data(path, data, retry=True)

    def entity_config(self, entity_type: str, name: str) -> dict[str, str]:
        """The dynamic config of /config/<type>/<name> (topics, brokers, users); empty when none."""
        found = self.read(ConfigEntityZNode.path(entity_type, name), retry=True)
        return {} if found is None else ConfigEntityZNode.decode(found[0])

    def change_entity_config(self, entity_type: str, name: str, config: Mapping[str, str]) -> None:
        """Replace /config/<type>/<name>, then add a /config/changes notification so every broker
        applies it (Kafka's AdminZkClient.changeConfigs)."""
        path = ConfigEntityZNode.path(entity_type, name)
        data = ConfigEntityZNode.encode(config)
        if not self.create(path, data, retry=True):
            self.set_data(path, data, retry=True)
        self._zk.retry(
            self._zk.create, ConfigChangeNotificationZNode.create_path(),
            ConfigChangeNotificationZNode.encode(entity_type, name), sequence=True, makepath=True,
        )
        self._purge_config_changes()

    def _purge_config_changes(self) -> None:
        """Delete notifications older than CONFIG_CHANGE_EXPIRY_MS, as Kafka's brokers do: every
        broker has applied them by then, and a broker that starts later reads the configs whole."""
        cutoff_ms = time.time() * 1000 - CONFIG_CHANGE_EXPIRY_MS
        for _, child in self.config_changes()[:-1]:  # the newest stays: it marks where brokers are
            path = f"{ConfigChangeNotificationZNode.path()}/{child}"
            stat = self._zk.exists(path)
            if stat is None or stat.ctime >= cutoff_ms:
                break
            self.delete(path)

    def config_changes(self) -> list[tuple[int, str]]:
        """(sequence number, znode name) of every pending /config/changes notification, oldest first."""
        prefix = ConfigChangeNotificationZNode.PREFIX
        found = [c for c in self.children(ConfigChangeNotificationZNode.path(), retry=True) if c.startswith(prefix)]
        return sorted((int(c[len(prefix):]), c) for c in found if c[len(prefix):].isdigit())

    def config_change(self, child: str) -> tuple[str, str] | None:
        """(entity type, name) a notification names; None when it is gone or unreadable."""
        found = self.read(f"{ConfigChangeNotificationZNode.path()}/{child}", retry=True)
        if found is None:
            return None
        try:
            return ConfigChangeNotificationZNode.decode(found[0])
        except (ValueError, KeyError):
            return None

    def watch_config_changes(self, callback: Callable[[list[str]], None]) -> Callable[[], None]:
        """Like watch_topics, for /config/changes (created if missing)."""
        return self.watch_children(ConfigChangeNotificationZNode.path(), callback)

    def delete_topic(self, name: str) -> None:
        """Remove the topic's nodes (assignment, partition states, config, deletion request)."""
        for path in (TopicZNode.path(name), ConfigEntityZNode.path(ConfigType.TOPIC, name), DeleteTopicsZNode.path(name)):
            self.delete(path, recursive=True, retry=True)

    def request_topic_deletion(self, name: str) -> None:
        """Mark a topic for deletion the way Kafka's tools do (/admin/delete_topics/<t>)."""
        self.create(DeleteTopicsZNode.path(name), retry=True)

    def pending_topic_deletions(self) -> list[str]:
        """Topics marked for deletion and not yet deleted."""
        return sorted(self.children(DeleteTopicsZNode.path(), retry=True))

    def watch_topics(self, callback: Callable[[list[str]], None]) -> Callable[[], None]:
        """Call ``callback(sorted topic names)`` now and whenever /brokers/topics changes.

        Later calls run on kazoo's thread. Returns a function that cancels the watch."""
        return self.watch_children(TopicsZNode.path(), lambda names: callback(sorted(names)))

    def watch_topic_deletions(self, callback: Callable[[list[str]], None]) -> Callable[[], None]:
        """Like watch_topics, for /admin/delete_topics."""
        return self.watch_children(DeleteTopicsZNode.path(), lambda names: callback(sorted(names)))

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
        path = TopicPartitionStateZNode.path(topic, partition)
        data = TopicPartitionStateZNode.encode(leader, leader_epoch, isr, controller_epoch)
        if version is not None:
            try:
                return self.set_data(path, data, version=version)
            except (ZkVersionConflictError, NoNodeError):
                raise ZkVersionConflictError(
                    f"partition state of {topic}-{partition} is no longer at zk version {version}"
                ) from None
        while True:
            try:
                return self.set_data(path, data, retry=True)
            except NoNodeError:
                if self.create(path, data):
                    return 0

    def set_partition_states(
        self, changes: Sequence[PartitionStateChange], controller_epoch: int, chunk: int = 500
    ) -> list[bool]:
        """``set_partition_state`` of many partitions, each only if its state is still at the change's
        zk version: True per change written, False where the version moved on. ``chunk`` changes per
        ZooKeeper transaction, the transactions pipelined (a failover's 10,000 changes: 20 requests
        for ZooKeeper to log, not 10,000); a transaction refused as a whole (one state moved on
        meanwhile) is written again change by change."""
        pending = []
        for i in range(0, len(changes), chunk):
            t = self._zk.transaction()
            for c in changes[i : i + chunk]:
                t.set_data(TopicPartitionStateZNode.path(c.topic, c.partition),
                           TopicPartitionStateZNode.encode(c.leader, c.leader_epoch, c.isr, controller_epoch), c.version)
            pending.append((changes[i : i + chunk], t.commit_async()))
        written: list[bool] = []
        for part, result in pending:
            try:
                ok = not any(isinstance(r, Exception) for r in result.get())
            except Exception:  # the connection dropped meanwhile: written again below, with retries
                ok = False
            written.extend([True] * len(part) if ok else self._set_partition_states_one_by_one(part, controller_epoch))
        return written

    def _set_partition_states_one_by_one(
        self, changes: Sequence[PartitionStateChange], controller_epoch: int
    ) -> list[bool]:
        pending = []
        for c in changes:
            data = TopicPartitionStateZNode.encode(c.leader, c.leader_epoch, c.isr, controller_epoch)
            pending.append(self._zk.set_async(TopicPartitionStateZNode.path(c.topic, c.partition), data, c.version))
        written = []
        for c, result in zip(changes, pending):
            try:
                result.get()
                written.append(True)
            except (BadVersionError, NoNodeError):
                written.append(False)
            except Exception:  # the connection dropped meanwhile: this one written again, with retries
                try:
                    self.set_partition_state(c.topic, c.partition, c.leader, c.leader_epoch, c.isr, controller_epoch,
                                             version=c.version)
                    written.append(True)
                except ZkVersionConflictError:
                    written.append(False)
        return written

    def create_partition_state(
        self, topic: str, partition: int, leader: int, leader_epoch: int, isr: Iterable[int], controller_epoch: int
    ) -> int:
        """Create a partition's first state; ZkVersionConflictError if one exists already."""
        data = TopicPartitionStateZNode.encode(leader, leader_epoch, isr, controller_epoch)
        if not self.create(TopicPartitionStateZNode.path(topic, partition), data):
            raise ZkVersionConflictError(f"partition state of {topic}-{partition} exists already")
        return 0

    def partition_states(self, topic: str, partitions: Iterable[int]) -> dict[int, PartitionState | None]:
        """``partition_state`` of many partitions of a topic: ``MAX_PATHS`` per multiRead, the
        requests pipelined (10,000 states: 0.05 s, not 1-2 s of one ``get`` each); a chunk whose
        request fails (a server before 3.6, a dropped connection) is read path by path."""
        wanted = list(partitions)
        chunks = [wanted[i : i + MAX_PATHS] for i in range(0, len(wanted), MAX_PATHS)]
        pending = [(chunk, multi_get_async(self._zk, [TopicPartitionStateZNode.path(topic, p) for p in chunk]))
                   for chunk in chunks if self._multi_read]
        found: dict[int, PartitionState | None] = {}
        for chunk, result in pending:
            try:
                answers = result.get()
            except UnimplementedError:
                self._multi_read = False
                continue
            except Exception:  # the connection dropped meanwhile: read path by path below
                continue
            for partition, answer in zip(chunk, answers):
                if isinstance(answer, NoNodeError):
                    found[partition] = None
                elif not isinstance(answer, Exception):
                    found[partition] = TopicPartitionStateZNode.decode(answer[0] or b"", answer[1].version)
        found.update(self._partition_states_one_by_one(topic, [p for p in wanted if p not in found]))
        return found

    def _partition_states_one_by_one(self, topic: str, partitions: list[int]) -> dict[int, PartitionState | None]:
        pending = [(p, self._zk.get_async(TopicPartitionStateZNode.path(topic, p))) for p in partitions]
        found: dict[int, PartitionState | None] = {}
        for partition, result in pending:
            try:
                raw, stat = result.get()
            except NoNodeError:
                found[partition] = None
                continue
            except Exception:  # the connection dropped meanwhile: this one read again, with retries
                found[partition] = self.partition_state(topic, partition)
                continue
            found[partition] = TopicPartitionStateZNode.decode(raw or b"", stat.version)
        return found

    def create_partition_states(
        self, topic: str, states: Mapping[int, tuple[int, list[int]]], controller_epoch: int, chunk: int = 500
    ) -> bool:
        """Create the first state (leader, ISR; leader epoch 0) of new partitions of ``topic``, ``chunk``
        partitions per ZooKeeper transaction, each guarded by the topic's znode: False (that chunk and
        the rest not created) when the topic was deleted meanwhile or a state exists already."""
        topic_path = TopicZNode.path(topic)
        partitions_path = f"{topic_path}/partitions"
        items = sorted(states.items())
        for i in range(0, len(items), chunk):
            stat = self._zk.retry(self._zk.exists, topic_path)
            if stat is None:
                return False
            t = self._zk.transaction()
            t.check(topic_path, stat.version)
            if self._zk.retry(self._zk.exists, partitions_path) is None:
                t.create(partitions_path)
            for partition, (leader, isr) in items[i : i + chunk]:
                t.create(f"{partitions_path}/{partition}")
                t.create(TopicPartitionStateZNode.path(topic, partition),
                         TopicPartitionStateZNode.encode(leader, 0, isr, controller_epoch))
            if any(isinstance(r, Exception) for r in t.commit()):
                return False
        return True

    def partition_state(self, topic: str, partition: int) -> PartitionState | None:
        """Leader, epochs and ISR of a partition, or None when no state was written yet."""
        found = self.read(TopicPartitionStateZNode.path(topic, partition), retry=True)
        return None if found is None else TopicPartitionStateZNode.decode(found[0], found[1].version)

    def watch_partition_state(self, topic: str, partition: int, callback: Callable[[PartitionState | None], bool | None]) -> None:
        """Call ``callback(state)`` soon and on each change of the partition's state znode (None while
        it is missing), on kazoo's callback thread; the watch ends when the callback returns False.
        The reads are asynchronous (``AsyncDataWatches``), so many watches do not queue on one thread."""

        def on_data(data: bytes | None, stat: Any) -> bool | None:
            if data is None or stat is None:
                return callback(None)
            return callback(TopicPartitionStateZNode.decode(data, stat.version))

        self._async_watches.watch(TopicPartitionStateZNode.path(topic, partition), on_data)

    # ------------------------------------------------------------------ the controller

    def controller(self) -> tuple[int, bool] | None:
        """(broker id holding /controller, whether our own session holds it), or None when nobody does."""
        found = self.read(ControllerZNode.path())
        if found is None:
            return None
        raw, stat = found
        return ControllerZNode.decode(raw), stat.ephemeralOwner == self.session_id

    def watch_controller(self, callback: Callable[..., bool | None]) -> None:
        """DataWatch on /controller; see ``watch_data``."""
        self.watch_data(ControllerZNode.path(), callback)

    def controller_epoch(self) -> tuple[int, int]:
        """(the current /controller_epoch, its znode version); created as 0 when missing."""
        path = ControllerEpochZNode.path()
        while True:
            found = self.read(path)
            if found is not None:
                return ControllerEpochZNode.decode(found[0]), found[1].version
            self.create(path, ControllerEpochZNode.encode(0))

    def claim_controller(self, broker_id: int) -> int | None:
        """Create /controller (ephemeral) and bump /controller_epoch in one transaction, so no
        controller ever runs unfenced: the new epoch, or None when another broker holds /controller."""
        data = ControllerZNode.encode(broker_id)
        while True:
            epoch, version = self.controller_epoch()
            txn = self._zk.transaction()
            txn.create(ControllerZNode.path(), data, ephemeral=True)
            txn.set_data(ControllerEpochZNode.path(), ControllerEpochZNode.encode(epoch + 1), version=version)
            created, bumped = txn.commit()
            if isinstance(created, NodeExistsError):
                return None
            if isinstance(bumped, BadVersionError):
                continue  # another controller's bump in between: read the epoch again
            for result in (created, bumped):
                if isinstance(result, Exception):
                    raise result
            return epoch + 1

    def bump_controller_epoch(self) -> int:
        """Bump /controller_epoch, conditionally on the version read (retrying); returns the new epoch."""
        while True:
            current, version = self.controller_epoch()
            try:
                self.set_data(ControllerEpochZNode.path(), ControllerEpochZNode.encode(current + 1), version=version)
                return current + 1
            except ZkVersionConflictError:
                continue

    def request_controlled_shutdown(self, broker_id: int) -> None:
        """Ask the controller to move leadership off ``broker_id`` (ephemeral, gone with the session)."""
        self.create(ControlledShutdownZNode.path(broker_id), ephemeral=True)

    def brokers_shutting_down(self) -> set[int]:
        """Brokers that asked for a controlled shutdown."""
        return {int(c) for c in self.children(ControlledShutdownZNode.path(), retry=True) if c.isdigit()}

    def watch_controlled_shutdowns(self, callback: Callable[[list[str]], None]) -> Callable[[], None]:
        """Like watch_brokers, for /admin/controlled_shutdown (created if missing)."""
        return self.watch_children(ControlledShutdownZNode.path(), callback)

    # ------------------------------------------------------------------ ACLs (Kafka's AclAuthorizer layout)

    def acl_patterns(self) -> list[ResourcePattern]:
        """Every resource pattern with an ACL znode, literal and prefixed (unknown types are skipped)."""
        found = []
        for pattern_type in (PatternType.LITERAL, PatternType.PREFIXED):
            root = AclZNode.root(pattern_type.name)
            for type_name in self.children(root, retry=True):
                try:
                    resource_type = ResourceType.from_zk_name(type_name)
                except ValueError:
                    continue
                for name in self.children(f"{root}/{type_name}", retry=True):
                    found.append(ResourcePattern(resource_type, name, pattern_type))
        return sorted(found)

    def acls(self, pattern: ResourcePattern) -> tuple[frozenset[AccessControlEntry], int]:
        """The entries of one resource pattern and the znode's version (-1: no znode). Entries
        whose operation or permission this broker does not know are left out."""
        found = self.read(self._acl_path(pattern), retry=True)
        if found is None:
            return frozenset(), -1
        entries = set()
        for e in AclZNode.decode(found[0]):
            try:
                entries.add(AccessControlEntry(e.principal, e.host, AclOperation.from_zk_name(e.operation),
                                               AclPermissionType.from_zk_name(e.permission_type)))
            except ValueError:
                log.warning("ignoring an ACL of %s with operation %r, permission %r", pattern, e.operation, e.permission_type)
        return frozenset(entries), found[1].version

    def set_acls(self, pattern: ResourcePattern, entries: frozenset[AccessControlEntry], version: int) -> None:
        """Store a pattern's entries if its znode is still at ``version`` (-1: absent), deleting it
        when there are none, then notify every broker; ZkVersionConflictError if it changed."""
        path = self._acl_path(pattern)
        data = AclZNode.encode(
            AclEntry(e.principal, e.permission_type.zk_name, e.operation.zk_name, e.host) for e in sorted(entries)
        )
        try:
            if version < 0:
                if not entries:
                    return
                self._zk.retry(self._zk.create, path, data, makepath=True)
            elif entries:
                self.set_data(path, data, version=version, retry=True)
            else:
                self._zk.retry(self._zk.delete, path, version=version)
        except (NodeExistsError, NoNodeError, BadVersionError):
            raise ZkVersionConflictError(f"{path} changed while it was updated") from None
        self._zk.retry(
            self._zk.create, AclChangeZNode.create_path(pattern.pattern_type.name),
            AclChangeZNode.encode(pattern.resource_type.zk_name, pattern.name, pattern.pattern_type.name),
            sequence=True, makepath=True,
        )
        self._purge_acl_changes(pattern.pattern_type)

    @staticmethod
    def _acl_path(pattern: ResourcePattern) -> str:
        return AclZNode.path(pattern.resource_type.zk_name, pattern.name, pattern.pattern_type.name)

    def acl_changes(self, pattern_type: PatternType) -> list[tuple[int, str]]:
        """(sequence number, znode name) of the pending ACL change notifications, oldest first."""
        prefix = AclChangeZNode.PREFIX
        found = [c for c in self.children(AclChangeZNode.path(pattern_type.name), retry=True) if c.startswith(prefix)]
        return sorted((int(c[len(prefix):]), c) for c in found if c[len(prefix):].isdigit())

    def acl_change(self, pattern_type: PatternType, child: str) -> ResourcePattern | None:
        """The resource pattern a notification names; None when it is gone or unreadable."""
        found = self.read(f"{AclChangeZNode.path(pattern_type.name)}/{child}", retry=True)
        if found is None:
            return None
        try:
            type_name, name, pattern = AclChangeZNode.decode(found[0])
            return ResourcePattern(ResourceType.from_zk_name(type_name), name, PatternType[pattern.upper()])
        except (ValueError, KeyError, UnicodeDecodeError):
            return None

    def watch_acl_changes(self, callback: Callable[[list[str]], None]) -> list[Callable[[], None]]:
        """Watch both notification paths (literal and extended), created if missing."""
        return [self.watch_children(AclChangeZNode.path(p.name), callback)
                for p in (PatternType.LITERAL, PatternType.PREFIXED)]

    def _purge_acl_changes(self, pattern_type: PatternType) -> None:
        """Drop notifications older than CONFIG_CHANGE_EXPIRY_MS (Kafka's 15 minutes), keeping the newest."""
        cutoff_ms = time.time() * 1000 - CONFIG_CHANGE_EXPIRY_MS
        for _, child in self.acl_changes(pattern_type)[:-1]:
            path = f"{AclChangeZNode.path(pattern_type.name)}/{child}"
            stat = self._zk.exists(path)
            if stat is None or stat.ctime >= cutoff_ms:
                break
            self.delete(path)
