"""Target topics in the aggregate cluster: created like their source, and the partition choice.

A source topic's first record creates its target (``<prefix><topic>``) with the source's
partition count and its per-topic configs (``/config/topics/<topic>`` of a ZooKeeper source, the
DescribeConfigs overrides of a ``bootstrap.servers`` source), and the replication factor of
``target.replication.factor`` (-1: the aggregate cluster's default). A target that exists
already is used as it is.

Kept in step (``TargetTopics.sync``, every ``sync.topic.configs.interval.ms`` and
``refresh.topics.interval.ms``): a source topic's config overrides changed later are applied to
its target (set, and removed when the source dropped them), and partitions added at the source
are added at the target. Only the topics this mirror has copied are followed.

Partition choice: when source and target have the same partition count a record goes to the
partition it came from (so per-partition order, and per-key placement, are kept); otherwise the
producer's partitioner places it by key (murmur2, as Kafka's), keeping per-key order.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

from broker.client.admin import AdminClient
from broker.client.connection import BrokerConnectionError
from broker.client.security import PLAINTEXT, ClientSecurity
from broker.protocol.errors import InvalidPartitionsError, KafkaError, TopicAlreadyExistsError
from broker.protocol.messages import ApiKey

log = logging.getLogger(__name__)

#: Source topic configs that describe the source's own layout and are not copied.
NOT_COPIED = {"leader.replication.throttled.replicas", "follower.replication.throttled.replicas"}


class TargetAdmin:
    """An AdminClient on the aggregate cluster that reconnects to any bootstrap broker on error."""

    def __init__(self, bootstrap: str, timeout: float = 30.0, security: ClientSecurity = PLAINTEXT) -> None:
        self.bootstrap = bootstrap
        self.timeout = timeout
        self.security = security
        self._admin: AdminClient | None = None
        self._lock = threading.Lock()

    def call(self, fn, attempts: int = 10):
        last: Exception | None = None
        for attempt in range(attempts):
            with self._lock:
                try:
                    if self._admin is None:
                        self._admin = AdminClient(self.bootstrap, timeout=self.timeout, security=self.security)
                    return fn(self._admin)
                except (BrokerConnectionError, OSError) as exc:
                    last = exc
                    if self._admin is not None:
                        try:
                            self._admin.close()
                        except Exception:
                            pass
                    self._admin = None
            time.sleep(min(0.2 * (attempt + 1), 2.0))
        raise last  # type: ignore[misc]

    def cluster_id(self, attempts: int = 10) -> str:
        def ask(admin: AdminClient) -> str:
            response = admin._conn.request(ApiKey.METADATA, 8, {"topics": [], "allow_auto_topic_creation": False})
            return response.get("cluster_id") or ""

        return self.call(ask, attempts)

    def close(self) -> None:
        with self._lock:
            if self._admin is not None:
                self._admin.close()
                self._admin = None


class TargetTopics:
    """Creates target topics on first use and remembers their partition counts."""

    def __init__(self, admin: TargetAdmin, producer, replication_factor: int = -1) -> None:
        self.admin = admin
        self.producer = producer
        self.replication_factor = replication_factor
        self._counts: dict[str, int] = {}
        self._lock = threading.Lock()
        self.created: list[str] = []
        self._followed: dict[str, tuple[Any, str]] = {}  # target -> (source, source topic), for sync
        self._kept: set[str] = set()  # followed targets with their source's partition count
        self._grow_lock = threading.Lock()
        self.configs_synced = 0  # target topics whose configs were changed to follow their source
        self.partitions_added = 0

    def partition_count(self, target: str, source, source_topic: str) -> int:
        """The target topic's partition count, creating the topic like its source when missing.

        ``source`` answers ``source_partition_count(topic, 0)`` and ``topic_configs(topic)``."""
        count = self._counts.get(target)
        if count is not None:
            return count
        with self._lock:
            count = self._counts.get(target)
            if count is None:
                count = self._ensure(target, source, source_topic)
                self._counts[target] = count
                self._followed[target] = (source, source_topic)
                if source.source_partition_count(source_topic, 0) == count:
                    self._kept.add(target)
            return count

    def sync_configs(self) -> None:
        """Make each followed target's config overrides those of its source (minus NOT_COPIED)."""
        for target, (source, source_topic) in list(self._followed.items()):
            try:
                wanted = {k: v for k, v in (source.topic_configs(source_topic) or {}).items() if k not in NOT_COPIED}
                have = self.admin.call(lambda a, t=target: a.topic_configs(t))
            except Exception as exc:  # noqa: BLE001 - the next round tries again
                log.debug("config sync of %s: %s", target, exc)
                continue
            to_set = {k: v for k, v in wanted.items() if have.get(k) != v}
            to_delete = [k for k in have if k not in wanted and k not in NOT_COPIED]
            if to_set or to_delete:
                self.admin.call(lambda a, t=target, s=to_set, d=to_delete: a.alter_topic_configs(t, s, d))
                self.configs_synced += 1
                log.info("%s follows its source's configs: set %s, removed %s", target, to_set or "{}",
                         to_delete or "[]")

    def follows(self, target: str) -> bool:
        """True for a target made or found with its source's partition count (grown with it)."""
        return target in self._kept

    def sync_partitions(self) -> None:
        """Grow each followed target that kept its source's partitions to the source's count."""
        for target, (source, source_topic) in list(self._followed.items()):
            if target not in self._kept:
                continue
            try:
                # asking for partition ``have`` makes the source look its count up again
                wanted = source.source_partition_count(source_topic, self._counts.get(target, 0)) or 0
                self.grow(target, wanted)
            except Exception as exc:  # noqa: BLE001 - the next round tries again
                log.warning("partition sync of %s: %s", target, exc)

    def grow(self, target: str, wanted: int) -> int:
        """Grow ``target`` to ``wanted`` partitions (CreatePartitions), waiting until the producer
        sees them; returns the count. Called by the sync loop and by a copying thread that met a
        source partition past the target's count, so copies never fall back to key placement."""
        with self._grow_lock:
            have = self._counts.get(target, 0)
            if wanted <= have:
                return have
            try:
                self.admin.call(lambda a: a.create_partitions(target, wanted))
            except InvalidPartitionsError:
                pass  # another mirror process grew it first
            count = self._wait_for_partitions(target, wanted)
            with self._lock:
                self._counts[target] = count
            self.partitions_added += count - have
            log.info("%s grown from %d to %d partitions like its source", target, have, count)
            return count

    def _ensure(self, target: str, source, source_topic: str) -> int:
        existing = self.admin.call(lambda a: [t for t in a.describe_topics(None) if t.name == target])
        if existing and existing[0].partitions:
            return len(existing[0].partitions)
        partitions = source.source_partition_count(source_topic, 0) or 1
        try:
            configs = {k: v for k, v in (source.topic_configs(source_topic) or {}).items() if k not in NOT_COPIED}
        except Exception:  # noqa: BLE001 - configs are best effort; the data is not
            configs = {}
        try:
            self.admin.call(lambda a: a.create_topic(target, partitions, self.replication_factor, configs))
            self.created.append(target)
            log.info("created %s in the aggregate cluster: %d partitions, configs %s", target, partitions, configs or "{}")
        except TopicAlreadyExistsError:
            pass  # another mirror made it first
        except KafkaError as exc:
            if "exist" not in str(exc).lower():
                raise
        return self._wait_for_partitions(target, partitions)

    def _wait_for_partitions(self, target: str, partitions: int) -> int:
        """Wait until the producer sees ``partitions`` partitions of ``target`` with a leader."""
        deadline = time.monotonic() + 60
        while True:
            try:
                parts = self.producer.partitions_for(target)
                if len(parts) >= partitions:
                    return len(parts)
            except Exception as exc:  # noqa: BLE001 - metadata not there yet
                log.debug("waiting for %s's metadata: %s", target, exc)
            if time.monotonic() > deadline:
                raise TimeoutError(f"target topic {target} has no metadata 60 s after creating it")
            self.producer.metadata.request_update()
            time.sleep(0.05)


def choose_partition(source_partition: int, source_count: int | None, target_count: int) -> int | None:
    """The source partition when the counts match, else None (the producer partitions by key)."""
    if source_count == target_count and source_partition < target_count:
        return source_partition
    return None
