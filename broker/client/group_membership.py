"""One member of a consumer group in Kafka's classic group protocol: find the coordinator,
JoinGroup and SyncGroup, heartbeat from a background thread, commit and fetch offsets,
LeaveGroup.

It knows groups, not records: ``GroupConsumer`` gives it the JoinGroup metadata and, for when
this member is the leader, the function that turns the members' metadata into assignments.
Calls come from one user thread; the heartbeat thread only sends heartbeats (on a connection
of its own) and raises flags the user thread acts on at its next call: ``need_rejoin`` and a
forgotten coordinator.
"""

from __future__ import annotations

import enum
import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from typing import NamedTuple, TypeVar

from broker.client.connection import BrokerConnection, BrokerConnectionError
from broker.client.security import PLAINTEXT, ClientSecurity
from broker.protocol.consumer_protocol import PROTOCOL_TYPE, decode_assignment
from broker.protocol.errors import CoordinatorNotAvailableError, ErrorCode, KafkaError, error_for_code
from broker.protocol.messages import ApiKey

log = logging.getLogger(__name__)

Address = tuple[str, int]
TopicPartitionKey = tuple[str, int]
Key = TypeVar("Key", bound=TopicPartitionKey)  # a (topic, partition) pair, or a named one

FIND_COORDINATOR_VERSION = 2
JOIN_GROUP_VERSION = 5
SYNC_GROUP_VERSION = 3
HEARTBEAT_VERSION = 3
LEAVE_GROUP_VERSION = 3
OFFSET_COMMIT_VERSION = 7
OFFSET_FETCH_VERSION = 5


class Action(enum.Enum):
    """What a group error code asks of the member."""

    RETRY = "retry"  # the same request again, after a backoff
    REDISCOVER = "rediscover"  # find the coordinator again, then retry
    REJOIN = "rejoin"  # the generation is over: rejoin (keeping the member id)
    RESET_MEMBER = "reset"  # the coordinator forgot us: rejoin as a new member
    FATAL = "fatal"  # a configuration or authorization problem: raise


#: Group error codes and what each asks for; a code not listed is FATAL.
GROUP_ERROR_ACTIONS: dict[int, Action] = {
    ErrorCode.COORDINATOR_LOAD_IN_PROGRESS: Action.RETRY,
    ErrorCode.REQUEST_TIMED_OUT: Action.RETRY,
    ErrorCode.NETWORK_EXCEPTION: Action.REDISCOVER,
    ErrorCode.COORDINATOR_NOT_AVAILABLE: Action.REDISCOVER,
    ErrorCode.NOT_COORDINATOR: Action.REDISCOVER,
    ErrorCode.REBALANCE_IN_PROGRESS: Action.REJOIN,
    ErrorCode.ILLEGAL_GENERATION: Action.REJOIN,
    ErrorCode.MEMBER_ID_REQUIRED: Action.REJOIN,
    ErrorCode.UNKNOWN_MEMBER_ID: Action.RESET_MEMBER,
}


class Generation(NamedTuple):
    """A completed join: the generation, our member id in it and the chosen assignor."""

    generation_id: int
    member_id: str
    protocol: str | None


NO_GENERATION = Generation(-1, "", None)

#: leader's assignor: (protocol name, {member id: subscription bytes}) -> {member id: assignment bytes}
AssignFn = Callable[[str, Mapping[str, bytes]], Mapping[str, bytes]]


class _Retry(Exception):
    """Internal: the request should be tried again (the action has been applied)."""


class GroupMembership:
    """Membership of ``group_id``; see the module docstring for who calls what."""

    def __init__(
        self,
        group_id: str,
        client_id: str,
        brokers: Callable[[], Iterable[Address]],
        *,
        session_timeout_ms: int,
        rebalance_timeout_ms: int,
        heartbeat_interval_ms: int,
        request_timeout_ms: int,
        retry_backoff_ms: int,
        security: ClientSecurity = PLAINTEXT,
    ) -> None:
        self.group_id = group_id
        self.client_id = client_id
        self.security = security
        self._brokers = brokers
        self.session_timeout_ms = session_timeout_ms
        self.rebalance_timeout_ms = rebalance_timeout_ms
        self.heartbeat_interval = heartbeat_interval_ms / 1000.0
        self.max_poll_interval = rebalance_timeout_ms / 1000.0
        self.request_timeout = request_timeout_ms / 1000.0
        self.retry_backoff = retry_backoff_ms / 1000.0
        self._lock = threading.Lock()
        self.generation = NO_GENERATION
        self.is_leader = False
        self._rejoin_needed = True
        self._joining = False
        self._coordinator: tuple[int, str, int] | None = None
        self._conn: BrokerConnection | None = None  # user thread
        self._conn_target: tuple[int, str, int] | None = None
        self._last_poll = time.monotonic()
        self._closed = threading.Event()
        self._heartbeat = threading.Thread(target=self._heartbeat_loop, name=f"heartbeat-{group_id}", daemon=True)
        self._heartbeat.start()

    # ------------------------------------------------------------------ state

    @property
    def need_rejoin(self) -> bool:
        return self._rejoin_needed or self.generation == NO_GENERATION

    @property
    def coordinator(self) -> tuple[int, str, int] | None:
        return self._coordinator

    def request_rejoin(self) -> None:
        """Rejoin at the next ``join`` (subscription or partition counts changed)."""
        self._rejoin_needed = True

    def polled(self) -> None:
        """The application called poll: it is alive for max.poll.interval.ms more."""
        self._last_poll = time.monotonic()

    def _apply(self, code: int, seen: Generation | None = None) -> Action:
        """Act on a group error code; ``seen`` ignores codes about a generation already replaced."""
        action = GROUP_ERROR_ACTIONS.get(code, Action.FATAL)
        with self._lock:
            if seen is not None and seen != self.generation:
                return action
            if action is Action.REDISCOVER:
                self._coordinator = None
            elif action is Action.REJOIN:
                self._rejoin_needed = True
            elif action is Action.RESET_MEMBER:
                self.generation = NO_GENERATION
                self._rejoin_needed = True
        return action

    def _coordinator_failed(self, coordinator: tuple[int, str, int] | None) -> None:
        with self._lock:
            if self._coordinator == coordinator:
                self._coordinator = None

    # ------------------------------------------------------------------ coordinator

    def ensure_coordinator(self, deadline: float) -> bool:
        """Know the coordinator (FindCoordinator through any broker); False when the deadline passed."""
        while self._coordinator is None:
            errors = []
            for host, port in list(dict.fromkeys(self._brokers())):
                remaining = deadline - time.monotonic()
                try:
                    with BrokerConnection(host, port, client_id=self.client_id, security=self.security,
                                          timeout=max(min(self.request_timeout, remaining), 0.5)) as conn:
                        found = conn.request(ApiKey.FIND_COORDINATOR, FIND_COORDINATOR_VERSION,
                                             {"key": self.group_id, "key_type": 0})
                except (BrokerConnectionError, OSError) as exc:
                    errors.append(str(exc))
                    continue
                code = found["error_code"]
                if code == ErrorCode.NONE:
                    with self._lock:
                        self._coordinator = (found["node_id"], found["host"], found["port"])
                    log.info("group %s: coordinator is broker %s at %s:%s", self.group_id, *self._coordinator)
                    return True
                if GROUP_ERROR_ACTIONS.get(code, Action.FATAL) is Action.FATAL:
                    raise error_for_code(code, f"FindCoordinator for group {self.group_id!r}: "
                                               f"{found.get('error_message') or ErrorCode(code).name}")
                errors.append(ErrorCode(code).name)
                break
            if time.monotonic() + self.retry_backoff > deadline:
                log.debug("group %s: no coordinator yet: %s", self.group_id, "; ".join(errors))
                return False
            time.sleep(self.retry_backoff)
        return True

    def _request(self, api_key: ApiKey, version: int, body: dict, timeout: float | None = None) -> dict:
        """One request to the coordinator on the user thread's connection.

        A lost connection forgets the coordinator and raises CoordinatorNotAvailableError."""
        target = self._coordinator
        if target is None:
            raise CoordinatorNotAvailableError(f"group {self.group_id!r} has no known coordinator")
        try:
            if self._conn is None or self._conn_target != target:
                self._close_conn()
                self._conn = BrokerConnection(target[1], target[2], client_id=self.client_id, security=self.security,
                                              timeout=self.request_timeout)
                self._conn_target = target
            self._conn._sock.settimeout(timeout or self.request_timeout)
            return self._conn.request(api_key, version, body)
        except (BrokerConnectionError, OSError) as exc:
            self._close_conn()
            self._coordinator_failed(target)
            raise CoordinatorNotAvailableError(
                f"coordinator {target[1]}:{target[2]} of group {self.group_id!r}: {exc}") from None

    def _close_conn(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None
            self._conn_target = None

    # ------------------------------------------------------------------ join

    def join(self, protocols: list[tuple[str, bytes]], assign: AssignFn,
             deadline: float) -> list[TopicPartitionKey] | None:
        """JoinGroup then SyncGroup until a generation is complete; our assigned partitions.

        None when no generation was complete by ``deadline`` (a JoinGroup parked at the
        coordinator waits for the other members whatever the deadline)."""
        self._joining = True
        try:
            while not self._closed.is_set():
                if not self.ensure_coordinator(deadline):
                    return None
                try:
                    return self._join_once(protocols, assign)
                except (_Retry, CoordinatorNotAvailableError) as exc:
                    log.debug("group %s: join again: %s", self.group_id, exc)
                if time.monotonic() + self.retry_backoff > deadline:
                    return None  # the next call carries on (the member id is kept)
                time.sleep(self.retry_backoff)
            return None
        finally:
            self._joining = False

    def _join_once(self, protocols: list[tuple[str, bytes]], assign: AssignFn) -> list[TopicPartitionKey]:
        member_id = self.generation.member_id
        joined = self._request(ApiKey.JOIN_GROUP, JOIN_GROUP_VERSION, {
            "group_id": self.group_id,
            "session_timeout_ms": self.session_timeout_ms,
            "rebalance_timeout_ms": self.rebalance_timeout_ms,
            "member_id": member_id,
            "group_instance_id": None,
            "protocol_type": PROTOCOL_TYPE,
            "protocols": [{"name": name, "metadata": metadata} for name, metadata in protocols],
        }, timeout=self.rebalance_timeout_ms / 1000.0 + self.request_timeout)
        code = joined["error_code"]
        if code == ErrorCode.MEMBER_ID_REQUIRED:  # Kafka 2.2+: join again with the id it gave us
            with self._lock:
                self.generation = Generation(-1, joined["member_id"], None)
            raise _Retry("member id required")
        self._check("JoinGroup", code)
        generation = Generation(joined["generation_id"], joined["member_id"], joined["protocol_name"])
        with self._lock:  # joined but not yet synced: a rejoin after a SyncGroup error keeps this member id
            self.generation = generation
            self._rejoin_needed = True
        is_leader = joined["leader"] == joined["member_id"]
        assignments: Mapping[str, bytes] = {}
        if is_leader:
            members = {m["member_id"]: bytes(m["metadata"]) for m in joined["members"]}
            assignments = assign(generation.protocol or "", members)
        synced = self._request(ApiKey.SYNC_GROUP, SYNC_GROUP_VERSION, {
            "group_id": self.group_id,
            "generation_id": generation.generation_id,
            "member_id": generation.member_id,
            "group_instance_id": None,
            "assignments": [{"member_id": m, "assignment": a} for m, a in assignments.items()],
        }, timeout=self.rebalance_timeout_ms / 1000.0 + self.request_timeout)
        self._check("SyncGroup", synced["error_code"])
        with self._lock:
            self.is_leader = is_leader
            self._rejoin_needed = False
        self._last_poll = time.monotonic()
        partitions = decode_assignment(bytes(synced["assignment"]))
        log.info("group %s: generation %d, member %s%s, assigned %s", self.group_id, generation.generation_id,
                 generation.member_id, " (leader)" if is_leader else "", partitions)
        return partitions

    def _check(self, what: str, code: int) -> None:
        """Nothing for NONE; else apply the code's action and raise _Retry (or the error when fatal)."""
        if code == ErrorCode.NONE:
            return
        if self._apply(code) is Action.FATAL:
            raise error_for_code(code, f"{what} for group {self.group_id!r}: {_name(code)}")
        raise _Retry(f"{what}: {_name(code)}")

    # ------------------------------------------------------------------ offsets

    def commit(self, offsets: Mapping[Key, int], deadline: float) -> None:
        """OffsetCommit with our generation; raises the group's error (after acting on it) or
        CoordinatorNotAvailableError when no coordinator answered before ``deadline``."""
        topics: dict[str, list[dict]] = {}
        for (topic, partition), offset in sorted(offsets.items()):
            topics.setdefault(topic, []).append({"partition_index": partition, "committed_offset": int(offset),
                                                 "committed_leader_epoch": -1, "committed_metadata": ""})

        def body(generation: Generation) -> dict:
            return {"group_id": self.group_id, "generation_id": generation.generation_id,
                    "member_id": generation.member_id, "group_instance_id": None,
                    "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()]}

        def codes(answer: dict) -> list[int]:
            return [p["error_code"] for t in answer["topics"] for p in t["partitions"]]

        self._retrying(ApiKey.OFFSET_COMMIT, OFFSET_COMMIT_VERSION, body, codes, deadline, "OffsetCommit")

    def fetch_committed(self, partitions: Iterable[TopicPartitionKey],
                        deadline: float) -> dict[TopicPartitionKey, int | None]:
        """The group's committed offsets (None where nothing was committed)."""
        topics: dict[str, list[int]] = {}
        for topic, partition in sorted(set(partitions)):
            topics.setdefault(topic, []).append(partition)
        if not topics:
            return {}

        def body(generation: Generation) -> dict:
            return {"group_id": self.group_id,
                    "topics": [{"name": t, "partition_indexes": ps} for t, ps in topics.items()]}

        def codes(answer: dict) -> list[int]:
            return [answer.get("error_code", 0)] + [p["error_code"] for t in answer["topics"] for p in t["partitions"]]

        answer = self._retrying(ApiKey.OFFSET_FETCH, OFFSET_FETCH_VERSION, body, codes, deadline, "OffsetFetch")
        return {(t["name"], p["partition_index"]): (p["committed_offset"] if p["committed_offset"] >= 0 else None)
                for t in answer["topics"] for p in t["partitions"]}

    def _retrying(self, api_key: ApiKey, version: int, body: Callable[[Generation], dict],
                  codes: Callable[[dict], list[int]], deadline: float, what: str) -> dict:
        """Send until an answer without error; coordinator errors are retried until ``deadline``,
        generation errors mark a rejoin and are raised."""
        while True:
            if not self.ensure_coordinator(deadline):
                raise CoordinatorNotAvailableError(f"{what}: no coordinator for group {self.group_id!r} in time")
            generation = self.generation
            try:
                answer = self._request(api_key, version, body(generation))
            except CoordinatorNotAvailableError:
                if time.monotonic() + self.retry_backoff > deadline:
                    raise
                time.sleep(self.retry_backoff)
                continue
            code = next((c for c in codes(answer) if c), ErrorCode.NONE)
            if code == ErrorCode.NONE:
                return answer
            action = self._apply(code, generation)
            if action in (Action.RETRY, Action.REDISCOVER) and time.monotonic() + self.retry_backoff <= deadline:
                time.sleep(self.retry_backoff)
                continue
            raise error_for_code(code, f"{what} for group {self.group_id!r} failed: {_name(code)}"
                                 + (" (the group is rebalancing; rejoin and try again)"
                                    if action in (Action.REJOIN, Action.RESET_MEMBER) else ""))

    # ------------------------------------------------------------------ leaving

    def leave(self) -> None:
        """LeaveGroup (best effort), so the others rebalance now rather than after our session timeout."""
        generation = self.generation
        with self._lock:
            self.generation = NO_GENERATION
            self._rejoin_needed = True
        if not generation.member_id or self._coordinator is None:
            return
        try:
            answer = self._request(ApiKey.LEAVE_GROUP, LEAVE_GROUP_VERSION, {
                "group_id": self.group_id, "members": [{"member_id": generation.member_id, "group_instance_id": None}]})
            if answer["error_code"]:
                log.info("group %s: LeaveGroup: %s", self.group_id, _name(answer["error_code"]))
        except KafkaError as exc:
            log.info("group %s: LeaveGroup failed: %s", self.group_id, exc)

    def close(self) -> None:
        """Stop the heartbeat thread and close the connections (call ``leave`` first)."""
        self._closed.set()
        if self._heartbeat is not threading.current_thread():
            self._heartbeat.join(self.request_timeout + 1)
        self._close_conn()

    # ------------------------------------------------------------------ heartbeats

    def _heartbeat_loop(self) -> None:
        conn: BrokerConnection | None = None
        target = None
        while not self._closed.wait(self.heartbeat_interval):
            generation, coordinator = self.generation, self._coordinator
            # Heartbeats go on while a rebalance waits for our rejoin (they keep the session
            # alive), but not while JoinGroup/SyncGroup are parked at the coordinator.
            if self._joining or generation == NO_GENERATION or coordinator is None:
                continue
            if time.monotonic() - self._last_poll > self.max_poll_interval:
                if not self._rejoin_needed:
                    log.warning("group %s: poll not called within max.poll.interval.ms: no more heartbeats; "
                                "the next poll rejoins", self.group_id)
                    self._apply(ErrorCode.REBALANCE_IN_PROGRESS, generation)
                continue
            try:
                if conn is None or target != coordinator:
                    if conn is not None:
                        conn.close()
                    conn, target = None, coordinator
                    conn = BrokerConnection(coordinator[1], coordinator[2], client_id=self.client_id, security=self.security,
                                            timeout=self.request_timeout)
                answer = conn.request(ApiKey.HEARTBEAT, HEARTBEAT_VERSION, {
                    "group_id": self.group_id, "generation_id": generation.generation_id,
                    "member_id": generation.member_id, "group_instance_id": None})
            except (BrokerConnectionError, OSError) as exc:
                log.info("group %s: heartbeat failed: %s", self.group_id, exc)
                if conn is not None:
                    conn.close()
                conn = None
                self._coordinator_failed(coordinator)
                continue
            code = answer["error_code"]
            if code:
                log.debug("group %s: heartbeat: %s", self.group_id, _name(code))
                self._apply(code, generation)
        if conn is not None:
            conn.close()


def _name(code: int) -> str:
    return ErrorCode(code).name if code in ErrorCode._value2member_map_ else f"error {code}"
