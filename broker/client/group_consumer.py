"""GroupConsumer: a member of a Kafka consumer group through the brokers' group coordinator,
with KafkaConsumer's semantics, over blocking sockets.

    consumer = GroupConsumer({"bootstrap.servers": "b1:9092", "group.id": "loader",
                              "auto.offset.reset": "earliest", "enable.auto.commit": "false"})
    consumer.subscribe(["page-views"])          # or subscribe(pattern=r"events\\..*")
    while running:
        for m in consumer.poll(1.0):            # MessageAndMetadata(topic, partition, offset, ...)
            handle(m)
        consumer.commit()                       # the positions of everything poll returned
    consumer.close()                            # commits (with auto commit) and leaves the group

It speaks the standard "consumer" protocol (``broker/protocol/consumer_protocol.py``), so it shares groups with
librdkafka, kafka-python and Java consumers, and its offsets are the group's offsets that
``logbus consumer-groups`` shows. ``poll`` does the work on the calling thread: it finds the
coordinator, (re)joins when the group rebalances (revoking, then assigning partitions, with
the optional ``on_revoke``/``on_assign`` callbacks), starts each partition at its committed
offset or by ``auto.offset.reset``, and fetches from the partition leaders with
``SimpleConsumer``. A background thread only heartbeats (``group_membership``).
Use a consumer from one thread.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any, NamedTuple

from broker.client.assignors import ASSIGNORS
from broker.client.closeable import Closeable
from broker.client.connection import BrokerConnectionError
from broker.client.group_config import GroupConsumerConfig
from broker.client.group_membership import GROUP_ERROR_ACTIONS, Action, GroupMembership
from broker.client.metadata import parse_servers
from broker.client.simple_consumer import MessageAndMetadata, MessageSet, SimpleConsumer
from broker.protocol.consumer_protocol import decode_subscription, encode_assignment, encode_subscription
from broker.protocol.errors import CorruptRecordError, ErrorCode, KafkaError, OffsetOutOfRangeError, ProtocolDecodeError

log = logging.getLogger(__name__)

__all__ = ["GroupConsumer", "NoOffsetForPartitionError", "TopicPartition"]


class TopicPartition(NamedTuple):
    topic: str
    partition: int


class NoOffsetForPartitionError(KafkaError):
    """Kafka's NoOffsetForPartitionException: nothing committed and auto.offset.reset=none."""

    code = ErrorCode.OFFSET_OUT_OF_RANGE


RebalanceCallback = Callable[[set[TopicPartition]], None]

def leader_moved(error: KafkaError) -> bool:
    """A Fetch (or ListOffsets) partition error worth refreshing metadata and retrying; a corrupt
    batch is retriable for a producer but does not heal by fetching it again."""
    return error.retriable and not isinstance(error, CorruptRecordError)


class GroupConsumer(Closeable):
    """A consumer-group member; see the module docstring. Config keys are Kafka's."""

    def __init__(self, config: Mapping[str, Any] | None = None, *, on_assign: RebalanceCallback | None = None,
                 on_revoke: RebalanceCallback | None = None, **kwargs: Any) -> None:
        self.config = GroupConsumerConfig.from_props(config, **kwargs)
        c = self.config
        self._bootstrap = parse_servers(c.bootstrap_servers)
        self._on_assign, self._on_revoke = on_assign, on_revoke
        self._backoff = c.retry_backoff_ms / 1000.0
        # cluster view
        self._brokers: dict[int, tuple[str, int]] = {}
        self._leaders: dict[str, dict[int, int]] = {}  # topic -> partition -> leader id
        self._metadata_stale = True
        self._metadata_at = self._metadata_tried = float("-inf")
        self._metadata_client: SimpleConsumer | None = None
        self._fetchers: dict[int, SimpleConsumer] = {}
        # subscription and assignment
        self._topics: set[str] = set()  # the subscribed topics (a pattern's current matches)
        self._pattern: re.Pattern | None = None
        self._subscribed = False
        self._group_topics: set[str] = set()  # as leader: every member's topics
        self._joined_counts: dict[str, int] = {}
        self._assignment: set[TopicPartition] = set()
        self._positions: dict[TopicPartition, int] = {}
        self._buffers: dict[TopicPartition, tuple[MessageSet, int]] = {}  # fetched, not yet returned
        self._committed_sent: dict[TopicPartition, int] = {}
        self._next_auto_commit = time.monotonic() + c.auto_commit_interval_ms / 1000.0
        self._closed = False
        self._membership = GroupMembership(
            c.group_id, c.client_id, self._candidates,
            session_timeout_ms=c.session_timeout_ms, rebalance_timeout_ms=c.max_poll_interval_ms,
            heartbeat_interval_ms=c.heartbeat_interval_ms, request_timeout_ms=c.request_timeout_ms,
            retry_backoff_ms=c.retry_backoff_ms, security=c.security,
        )

    # ------------------------------------------------------------------ public API

    def subscribe(self, topics: Iterable[str] | str | re.Pattern | None = None, *,
                  pattern: str | re.Pattern | None = None, on_assign: RebalanceCallback | None = None,
                  on_revoke: RebalanceCallback | None = None) -> None:
        """Subscribe to topics, or to every topic whose whole name matches ``pattern`` (a string
        starting with ``^`` or a compiled regex in ``topics`` counts as a pattern, as in librdkafka).
        New matching topics join the subscription at the next metadata refresh."""
        self._check_open()
        if isinstance(topics, re.Pattern) or (isinstance(topics, str) and topics.startswith("^")):
            topics, pattern = None, topics
        if (topics is None) == (pattern is None):
            raise ValueError("subscribe() takes topics or a pattern (one of them)")
        if pattern is not None:
            try:
                self._pattern = pattern if isinstance(pattern, re.Pattern) else re.compile(pattern)
            except re.error as exc:
                raise ValueError(f"invalid topic pattern {pattern!r}: {exc}") from None
            self._topics = set()
            self._metadata_stale = True
        else:
            names = [topics] if isinstance(topics, str) else list(topics or [])
            if not names or any(not isinstance(t, str) or not t.strip() for t in names):
                raise ValueError(f"subscribe() needs topic names, not {topics!r}")
            self._pattern, self._topics = None, set(names)
        self._on_assign = on_assign or self._on_assign
        self._on_revoke = on_revoke or self._on_revoke
        self._subscribed = True
        self._membership.request_rejoin()

    def subscription(self) -> set[str]:
        """The topics subscribed to now (for a pattern: those it matched at the last refresh)."""
        return set(self._topics)

    def unsubscribe(self) -> None:
        """Give up the partitions (committing them with auto commit) and leave the group."""
        self._check_open()
        self._revoke()
        self._membership.leave()
        self._topics, self._pattern, self._subscribed = set(), None, False

    def poll(self, timeout: float = 1.0, max_records: int | None = None) -> list[MessageAndMetadata]:
        """Records from the assigned partitions, waiting up to ``timeout`` seconds for some.

        Rebalances, offset resets and auto commits happen in here, on the calling thread."""
        self._check_open()
        if not self._subscribed:
            raise ValueError("subscribe() before poll()")
        limit = max_records if max_records and max_records > 0 else self.config.max_poll_records
        deadline = time.monotonic() + max(timeout, 0.0)
        self._membership.polled()
        while True:
            if self._ensure_ready(deadline):
                self._maybe_auto_commit()
                records = self._drain(limit)
                if records:
                    return records
                self._fetch(deadline)
                records = self._drain(limit)
                if records:
                    return records
            else:
                time.sleep(max(min(self._backoff, deadline - time.monotonic()), 0))
            if time.monotonic() >= deadline:
                return []

    def commit(self, offsets: Mapping[tuple[str, int], int] | None = None, sync: bool = True) -> None:
        """OffsetCommit of ``offsets`` (default: the position of every assigned partition, i.e.
        everything poll has returned). A failed sync commit raises the group's error (a
        rebalance: RebalanceInProgressError, IllegalGenerationError, UnknownMemberIdError — the
        next poll rejoins); with ``sync=False`` failures are only logged."""
        self._check_open()
        if offsets is None:
            wanted = {tp: self._positions[tp] for tp in self._assignment if tp in self._positions}
        else:
            wanted = {TopicPartition(*tp): int(offset) for tp, offset in offsets.items()}
        if not wanted:
            return
        # a sync commit retries coordinator errors for request.timeout.ms; an async one tries once
        deadline = time.monotonic() + (self.config.request_timeout_ms / 1000.0 if sync else 0.0)
        try:
            self._membership.commit(wanted, deadline)
        except KafkaError as exc:
            if sync:
                raise
            log.warning("group %s: commit failed: %s", self.config.group_id, exc)
            return
        self._committed_sent.update(wanted)

    def committed(self, partitions: Iterable[tuple[str, int]] | None = None) -> dict[TopicPartition, int | None]:
        """The group's committed offsets (None: nothing committed) of ``partitions`` (default: the assignment)."""
        self._check_open()
        wanted = [TopicPartition(*tp) for tp in (self._assignment if partitions is None else partitions)]
        found = self._membership.fetch_committed(wanted, time.monotonic() + self.config.request_timeout_ms / 1000.0)
        return {tp: found.get(tp) for tp in wanted}

    def position(self, partition: tuple[str, int]) -> int:
        """The offset of the next record poll will return for an assigned partition."""
        self._check_open()
        tp = TopicPartition(*partition)
        if tp not in self._assignment:
            raise ValueError(f"{tp.topic}-{tp.partition} is not assigned to this consumer")
        deadline = time.monotonic() + self.config.request_timeout_ms / 1000.0
        while tp not in self._positions and not self._init_positions(deadline):
            if time.monotonic() >= deadline:
                raise KafkaError(f"no position for {tp.topic}-{tp.partition} within request.timeout.ms")
            time.sleep(self._backoff)
            self._maybe_refresh_metadata()
        return self._positions[tp]

    def seek(self, partition: tuple[str, int], offset: int) -> None:
        """Make the next poll of an assigned partition start at ``offset``."""
        tp = TopicPartition(*partition)
        if tp not in self._assignment:
            raise ValueError(f"{tp.topic}-{tp.partition} is not assigned to this consumer")
        self._buffers.pop(tp, None)
        self._positions[tp] = int(offset)

    def assignment(self) -> set[TopicPartition]:
        """The partitions this member owns in the current generation."""
        return set(self._assignment)

    @property
    def member_id(self) -> str:
        return self._membership.generation.member_id

    def close(self) -> None:
        """Commit (with auto commit), call on_revoke, leave the group and close the connections."""
        if self._closed:
            return
        try:
            self._revoke(sync_commit=True)
            self._membership.leave()
        finally:
            self._closed = True
            self._membership.close()
            for client in [self._metadata_client, *self._fetchers.values()]:
                if client is not None:
                    client.close()
            self._fetchers.clear()

    # ------------------------------------------------------------------ group

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError("the consumer is closed")

    def _ensure_ready(self, deadline: float) -> bool:
        """Metadata fresh enough, coordinator known, generation joined, every position known."""
        self._maybe_refresh_metadata()
        membership = self._membership
        if not membership.ensure_coordinator(deadline):
            return False
        if membership.need_rejoin:
            self._revoke()
            self._group_topics = set()
            self._refresh_metadata()
            metadata = encode_subscription(self._topics)
            protocols = [(name, metadata) for name in self.config.assignors]
            assigned = membership.join(protocols, self._assign_group, deadline)
            if assigned is None:
                return False
            watched = self._group_topics if membership.is_leader else self._topics
            self._joined_counts = {t: len(self._leaders.get(t, {})) for t in watched}
            self._assign(assigned)
        if any(tp not in self._positions for tp in self._assignment):
            return self._init_positions(deadline)
        return True

    def _assign_group(self, protocol: str, members: Mapping[str, bytes]) -> dict[str, bytes]:
        """As leader: every member's assignment, by the chosen assignor over current partition counts."""
        subscriptions: dict[str, list[str]] = {}
        for member_id, metadata in members.items():
            try:
                subscriptions[member_id] = decode_subscription(metadata).topics
            except ProtocolDecodeError as exc:
                log.warning("group %s: member %s sent a subscription we cannot read (%s): no partitions for it",
                            self.config.group_id, member_id, exc)
                subscriptions[member_id] = []
        self._group_topics = set().union(*subscriptions.values()) if subscriptions else set()
        self._refresh_metadata()
        counts = {t: len(self._leaders.get(t, {})) for t in self._group_topics}
        plan = ASSIGNORS.get(protocol, ASSIGNORS["range"])(subscriptions, counts)
        return {member_id: encode_assignment(tps) for member_id, tps in plan.items()}

    def _assign(self, partitions: Iterable[tuple[str, int]]) -> None:
        self._assignment = {TopicPartition(*tp) for tp in partitions}
        self._positions.clear()
        self._buffers.clear()
        self._committed_sent.clear()
        if self._on_assign is not None:
            self._on_assign(set(self._assignment))

    def _revoke(self, sync_commit: bool = False) -> None:
        """Before a rejoin or leaving: commit (auto commit), on_revoke, forget the partitions.

        Before a rejoin the commit is tried once, so a dead coordinator does not hold up the
        rebalance; on close it retries for request.timeout.ms. Failures are logged."""
        if not self._assignment:
            return
        if self.config.enable_auto_commit:
            try:
                self.commit(sync=sync_commit)
            except KafkaError as exc:
                log.warning("group %s: commit on close failed: %s", self.config.group_id, exc)
        if self._on_revoke is not None:
            self._on_revoke(set(self._assignment))
        self._assignment = set()
        self._positions.clear()
        self._buffers.clear()

    def _maybe_auto_commit(self) -> None:
        now = time.monotonic()
        if not self.config.enable_auto_commit or now < self._next_auto_commit:
            return
        self._next_auto_commit = now + self.config.auto_commit_interval_ms / 1000.0
        changed: dict[tuple[str, int], int] = {tp: off for tp, off in self._positions.items()
                                               if tp in self._assignment and self._committed_sent.get(tp) != off}
        if changed:
            self.commit(changed, sync=False)

    def _init_positions(self, deadline: float) -> bool:
        """Committed offsets for partitions without a position, else auto.offset.reset."""
        missing = [tp for tp in self._assignment if tp not in self._positions]
        try:
            committed = self._membership.fetch_committed(missing, deadline)
        except KafkaError as exc:
            if GROUP_ERROR_ACTIONS.get(exc.code, Action.FATAL) is Action.FATAL:
                raise
            log.info("group %s: committed offsets not read yet: %s", self.config.group_id, exc)
            return False
        for tp in missing:
            offset = committed.get(tp)
            if offset is not None:
                self._positions[tp] = offset
        unset = [tp for tp in missing if tp not in self._positions]
        if not unset:
            return True
        reset = self.config.auto_offset_reset
        if reset is None:
            names = ", ".join(f"{t}-{p}" for t, p in sorted(unset))
            raise NoOffsetForPartitionError(f"no committed offset for {names} and auto.offset.reset is none")
        return self._reset_offsets(unset, reset)

    def _reset_offsets(self, partitions: Iterable[TopicPartition], reset: int) -> bool:
        """Positions by auto.offset.reset (``reset``: EARLIEST_TIME or LATEST_TIME; ListOffsets at
        each leader); False if some leader is unknown."""
        done = True
        for tp in partitions:
            leader = self._leader_of(tp)
            if leader is None:
                done = False
                continue
            try:
                found = self._fetcher(leader).get_offsets_before(tp.topic, tp.partition, reset)
            except (BrokerConnectionError, OSError):
                self._drop_fetcher(leader)
                done = False
                continue
            except KafkaError as exc:
                if not leader_moved(exc):
                    raise
                self._metadata_stale = True
                done = False
                continue
            self._positions[tp] = found[0] if found else 0
            self._buffers.pop(tp, None)
        return done

    # ------------------------------------------------------------------ fetching

    def _fetch(self, deadline: float) -> None:
        """One Fetch per leader of the partitions with nothing buffered; results into the buffers."""
        by_leader: dict[int, list[TopicPartition]] = {}
        for tp in self._assignment:
            if tp in self._buffers or tp not in self._positions:
                continue
            leader = self._leader_of(tp)
            if leader is not None:
                by_leader.setdefault(leader, []).append(tp)
        remaining = max(deadline - time.monotonic(), 0.0)
        if not by_leader:
            time.sleep(min(remaining, max(self._backoff, 0.01), self.config.fetch_max_wait_ms / 1000.0))
            return
        c = self.config
        count = sum(len(tps) for tps in by_leader.values())
        size = max(1, min(c.max_partition_fetch_bytes, c.fetch_max_bytes // count))
        wait_ms = int(min(c.fetch_max_wait_ms, remaining * 1000) // len(by_leader))
        for leader, tps in by_leader.items():
            try:
                results = self._fetcher(leader).multifetch(
                    [(tp.topic, tp.partition, self._positions[tp], size) for tp in tps],
                    max_wait_ms=wait_ms, min_bytes=c.fetch_min_bytes)
            except (BrokerConnectionError, OSError) as exc:
                log.info("fetch from broker %d failed: %s", leader, exc)
                self._drop_fetcher(leader)
                continue
            for key, messages in results.items():
                tp = TopicPartition(*key)
                if tp not in self._assignment or tp not in self._positions:
                    continue
                if messages.error is not None:
                    self._fetch_failed(tp, messages.error)
                elif messages:
                    self._buffers[tp] = (messages, 0)
                elif messages.next_offset > self._positions[tp]:
                    self._positions[tp] = messages.next_offset  # only markers or compacted records

    def _fetch_failed(self, tp: TopicPartition, error: KafkaError) -> None:
        if leader_moved(error):
            self._metadata_stale = True
        elif error.code == ErrorCode.OFFSET_OUT_OF_RANGE:
            reset = self.config.auto_offset_reset
            if reset is None:
                raise OffsetOutOfRangeError(f"offset {self._positions[tp]} of {tp.topic}-{tp.partition} is out of "
                                            "range and auto.offset.reset is none")
            log.warning("offset %d of %s-%d is out of range: resetting to %s", self._positions[tp], tp.topic,
                        tp.partition, self.config.reset_name)
            del self._positions[tp]
            self._reset_offsets([tp], reset)
        else:
            raise error

    def _drain(self, limit: int) -> list[MessageAndMetadata]:
        """Up to ``limit`` buffered records, advancing the positions past them."""
        out: list[MessageAndMetadata] = []
        for tp in list(self._buffers):
            messages, start = self._buffers.pop(tp)
            taken = messages[start:start + limit - len(out)]
            out += taken
            if taken:
                self._positions[tp] = taken[-1].offset + 1
            if start + len(taken) < len(messages):
                self._buffers[tp] = (messages, start + len(taken))
            else:
                self._positions[tp] = max(self._positions[tp], messages.next_offset)
            if len(out) >= limit:
                break
        return out

    # ------------------------------------------------------------------ metadata and connections

    def _candidates(self) -> list[tuple[str, int]]:
        """Brokers to ask for metadata or the coordinator: those known, then the bootstrap list."""
        return list(dict.fromkeys([*self._brokers.values(), *self._bootstrap]))

    def _leader_of(self, tp: TopicPartition) -> int | None:
        leader = self._leaders.get(tp.topic, {}).get(tp.partition, -1)
        if leader in self._brokers:
            return leader
        self._metadata_stale = True
        return None

    def _fetcher(self, broker_id: int) -> SimpleConsumer:
        client = self._fetchers.get(broker_id)
        if client is None:
            host, port = self._brokers[broker_id]
            timeout = (self.config.request_timeout_ms + self.config.fetch_max_wait_ms) / 1000.0
            client = SimpleConsumer(host, port, timeout=timeout, client_id=self.config.client_id,
                                    security=self.config.security)
            self._fetchers[broker_id] = client
        return client

    def _drop_fetcher(self, broker_id: int) -> None:
        client = self._fetchers.pop(broker_id, None)
        if client is not None:
            client.close()
        self._metadata_stale = True

    def _maybe_refresh_metadata(self) -> None:
        now = time.monotonic()
        if (self._metadata_stale and now - self._metadata_tried >= self._backoff) or \
                now - self._metadata_at >= self.config.metadata_max_age_ms / 1000.0:
            self._refresh_metadata()

    def _refresh_metadata(self) -> bool:
        """Brokers and partition leaders of the subscribed (or, for a pattern, all) topics;
        a changed pattern match or partition count asks for a rejoin."""
        self._metadata_tried = time.monotonic()
        wanted = None if self._pattern is not None else sorted(self._topics | self._group_topics)
        answer = None
        if self._metadata_client is not None:
            answer = self._metadata_from(self._metadata_client, wanted)
        for host, port in self._candidates() if answer is None else []:
            client = SimpleConsumer(host, port, timeout=self.config.request_timeout_ms / 1000.0,
                                    client_id=self.config.client_id, security=self.config.security)
            answer = self._metadata_from(client, wanted)
            if answer is not None:
                break
        if answer is None:
            return False
        self._brokers = {b["node_id"]: (b["host"], b["port"]) for b in answer["brokers"]}
        self._leaders = {t["name"]: {p["partition_index"]: p["leader_id"] for p in t["partitions"]}
                         for t in answer["topics"] if t["partitions"]}
        self._metadata_stale = False
        self._metadata_at = time.monotonic()
        self._check_subscription_changes()
        return True

    def _metadata_from(self, client: SimpleConsumer, wanted: list[str] | None) -> dict | None:
        """One Metadata request; on success ``client`` becomes the metadata connection."""
        try:
            answer = client.topic_metadata(wanted)
        except (BrokerConnectionError, OSError) as exc:
            log.debug("metadata from %s:%s failed: %s", client.host, client.port, exc)
            client.close()
            if client is self._metadata_client:
                self._metadata_client = None
            return None
        self._metadata_client = client
        return answer

    def _check_subscription_changes(self) -> None:
        if self._pattern is not None:
            matched = {t for t in self._leaders if self._pattern.fullmatch(t)
                       and not (self.config.exclude_internal_topics and t.startswith("__"))}
            if matched != self._topics:
                log.info("group %s: pattern now matches %s", self.config.group_id, sorted(matched))
                self._topics = matched
                self._membership.request_rejoin()
        watched = self._group_topics if self._membership.is_leader else self._topics
        for topic in watched:
            if topic in self._leaders and len(self._leaders[topic]) != self._joined_counts.get(topic, 0):
                log.info("group %s: topic %s now has %d partitions: rejoining", self.config.group_id, topic,
                         len(self._leaders[topic]))
                self._membership.request_rejoin()
                break
