"""Committed offsets in ZooKeeper, in the layout Kafka 0.8's ZooKeeper consumer uses; the one
writer and reader of them for the group coordinator, the ZooKeeper consumer and the mirror.

    /consumers/<group>/offsets/<topic>/<partition>            "42"  (plain decimal, as 0.8 wrote it)
    /consumers/<group>/offsets/<topic>/<partition>/metadata   the commit's metadata string, only
                                                              when it is not empty

The offset znode stays a bare decimal so ``ZookeeperConsumerConnector`` (and Burrow, zkCli,
kafka-manager) read it unchanged; the metadata child is invisible to them. Blocking calls (the
broker makes them from the reactor's thread pool). Writes are pipelined: every ``set`` is sent
before any answer is awaited, so a batch of N partitions costs about one ZooKeeper round trip and
one fsync (ZooKeeper groups the transactions it logs), not N.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from kazoo.exceptions import KazooException, NodeExistsError, NoNodeError

from broker.cluster.zkdata import (
    ConsumerGroupZNode,
    ConsumerIdsZNode,
    ConsumerOffsetMetadataZNode,
    ConsumerOffsetsZNode,
    ConsumerOffsetZNode,
    ConsumersZNode,
    TopicPartition,
)
from broker.protocol.errors import ErrorCode

NO_OFFSET = -1
#: keys per multi transaction: at most 2 operations each, well inside jute.maxbuffer (1 MB)
MULTI_KEYS = 200

Key = tuple[str, str, int]  # (group, topic, partition)


@dataclass(frozen=True)
class Committed:
    offset: int
    metadata: str = ""


class ZkOffsetStore:
    """Reads and writes committed offsets with a kazoo client (blocking)."""

    def __init__(self, kazoo: Any) -> None:
        self.zk = kazoo

    # -- the write every writer shares: set, else create (parents too), else set ----------------

    def _set_or_create(self, path: str, data: bytes, pending_set: Any, timeout: float | None = None) -> None:
        """Finish a pipelined ``set_async``: a missing node is created; one created meanwhile is set."""
        try:
            pending_set.get(timeout=timeout)
        except NoNodeError:
            self._create_or_set(path, data, timeout)

    def _create_or_set(self, path: str, data: bytes, timeout: float | None = None) -> None:
        try:
            self.zk.create_async(path, data, makepath=True).get(timeout=timeout)
        except NodeExistsError:
            self.zk.set_async(path, data).get(timeout=timeout)

    # -- writes ------------------------------------------------------------------------------

    def commit(self, group: str, offsets: Mapping[TopicPartition, int], timeout: float | None = None) -> None:
        """Write plain offsets (no metadata), as the ZooKeeper consumer and the mirror commit.

        Pipelined; raises the first failure (a kazoo error, or a timeout after ``timeout`` seconds
        per answer awaited)."""
        pending = []
        for (topic, partition), offset in offsets.items():
            path = ConsumerOffsetZNode.path(group, topic, partition)
            data = ConsumerOffsetZNode.encode(offset)
            pending.append((path, data, self.zk.set_async(path, data)))
        for path, data, answer in pending:
            self._set_or_create(path, data, answer, timeout)

    def write(self, batch: dict[Key, Committed], known: dict[Key, Committed] | None = None) -> dict[Key, int]:
        """Write every entry with its metadata (the group coordinator's commits); return {key: error code}.

        ``known`` holds what this broker last wrote for a key, so it knows which znodes exist:
        those keys go in ZooKeeper multi transactions of up to ``MULTI_KEYS`` keys (one
        request and one transaction-log entry each, tens of thousands of offsets a second);
        the others (first commit of a partition, or after a coordinator move) go one by one,
        pipelined, creating what is missing and clearing stale metadata.
        """
        known = known or {}
        errors: dict[Key, int] = {}
        fast = [k for k in batch if k in known]
        for i in range(0, len(fast), MULTI_KEYS):
            chunk = fast[i : i + MULTI_KEYS]
            if self._multi([(k, batch[k], known[k]) for k in chunk]):
                errors.update((k, ErrorCode.NONE) for k in chunk)
        slow = {k: c for k, c in batch.items() if k not in errors}
        errors.update(self._one_by_one(slow))
        return errors

    def _multi(self, items: list[tuple[Key, Committed, Committed]]) -> bool:
        t = self.zk.transaction()
        for key, c, before in items:
            t.set_data(ConsumerOffsetZNode.path(*key), ConsumerOffsetZNode.encode(c.offset))
            meta = ConsumerOffsetMetadataZNode.path(*key)
            if c.metadata and before.metadata:
                t.set_data(meta, ConsumerOffsetMetadataZNode.encode(c.metadata))
            elif c.metadata:
                t.create(meta, ConsumerOffsetMetadataZNode.encode(c.metadata))
            elif before.metadata:
                t.delete(meta)
        try:
            results = t.commit()
        except KazooException:
            return False
        return not any(isinstance(r, Exception) for r in results)

    def _one_by_one(self, batch: dict[Key, Committed]) -> dict[Key, int]:
        pending: list[tuple[Key, Any, Any]] = []
        for key, c in batch.items():
            main = self.zk.set_async(ConsumerOffsetZNode.path(*key), ConsumerOffsetZNode.encode(c.offset))
            meta_path = ConsumerOffsetMetadataZNode.path(*key)
            if c.metadata:
                meta = self.zk.set_async(meta_path, ConsumerOffsetMetadataZNode.encode(c.metadata))
            else:
                meta = self.zk.delete_async(meta_path)
            pending.append((key, main, meta))
        return {key: self._settle(key, batch[key], main, meta) for key, main, meta in pending}

    def _settle(self, key: Key, c: Committed, main: Any, meta: Any) -> int:
        try:
            self._set_or_create(ConsumerOffsetZNode.path(*key), ConsumerOffsetZNode.encode(c.offset), main)
            try:
                meta.get()
            except NoNodeError:
                if c.metadata:
                    self._create_or_set(ConsumerOffsetMetadataZNode.path(*key), ConsumerOffsetMetadataZNode.encode(c.metadata))
            return ErrorCode.NONE
        except KazooException:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE

    # -- reads -------------------------------------------------------------------------------

    def topics(self, group: str) -> dict[str, list[int]]:
        """Every topic and partition with a committed offset in ``group``."""
        try:
            names = self.zk.get_children(ConsumerOffsetsZNode.path(group))
        except NoNodeError:
            return {}
        found: dict[str, list[int]] = {}
        for topic in sorted(names):
            try:
                parts = self.zk.get_children(ConsumerOffsetsZNode.path(group, topic))
            except NoNodeError:
                continue
            found[topic] = sorted(int(p) for p in parts if p.isdigit())
        return found

    def read(
        self, group: str, partitions: Iterable[TopicPartition], with_metadata: bool = True
    ) -> dict[TopicPartition, Committed]:
        """The committed offsets of these partitions (missing or unreadable ones are left out), pipelined."""
        asks = []
        for topic, partition in partitions:
            main = self.zk.get_async(ConsumerOffsetZNode.path(group, topic, partition))
            meta = self.zk.get_async(ConsumerOffsetMetadataZNode.path(group, topic, partition)) if with_metadata else None
            asks.append(((topic, partition), main, meta))
        found: dict[TopicPartition, Committed] = {}
        for tp, main, meta in asks:
            try:
                offset = ConsumerOffsetZNode.decode(main.get()[0])
            except NoNodeError:
                offset = None
            metadata = ""
            if meta is not None:
                try:
                    metadata = ConsumerOffsetMetadataZNode.decode(meta.get()[0])
                except NoNodeError:
                    pass
            if offset is not None:
                found[tp] = Committed(offset, metadata)
        return found

    def has_offsets(self, group: str) -> bool:
        """Whether ``group`` has an offsets node (it has committed at some time)."""
        return self.zk.exists(ConsumerOffsetsZNode.path(group)) is not None

    def groups(self) -> list[str]:
        """Every group under /consumers (ZooKeeper consumers and coordinator groups alike)."""
        try:
            return sorted(self.zk.get_children(ConsumersZNode.path()))
        except NoNodeError:
            return []

    # -- deletes (DeleteGroups, OffsetDelete) ---------------------------------------------------

    def zk_members(self, group: str) -> list[str]:
        """The live ZooKeeper consumers registered in ``group`` (/consumers/<g>/ids)."""
        try:
            return sorted(self.zk.get_children(ConsumerIdsZNode.path(group)))
        except NoNodeError:
            return []

    def delete_group(self, group: str) -> bool:
        """Remove /consumers/<g> and everything under it; False when there was nothing to remove."""
        path = ConsumerGroupZNode.path(group)
        if self.zk.exists(path) is None:  # a recursive delete of a missing node succeeds silently
            return False
        try:
            self.zk.delete(path, recursive=True)
        except NoNodeError:
            return False
        return True

    def delete(self, group: str, partitions: Iterable[TopicPartition]) -> None:
        """Remove these partitions' committed offsets (and metadata); a topic left with none goes too."""
        topics = set()
        for topic, partition in partitions:
            topics.add(topic)
            try:
                self.zk.delete(ConsumerOffsetZNode.path(group, topic, partition), recursive=True)
            except NoNodeError:
                pass
        for topic in topics:
            try:
                self.zk.delete(ConsumerOffsetsZNode.path(group, topic))  # only when empty
            except (NoNodeError, KazooException):
                pass
