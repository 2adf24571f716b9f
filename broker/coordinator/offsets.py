"""Committed offsets in ZooKeeper, in the layout the ZooKeeper consumer (Kafka 0.8) uses.

    /consumers/<group>/offsets/<topic>/<partition>            "42"  (plain decimal, as 0.8 wrote it)
    /consumers/<group>/offsets/<topic>/<partition>/metadata   the commit's metadata string, only
                                                              when it is not empty

The offset znode stays a bare decimal so ``ZookeeperConsumerConnector`` (and Burrow, zkCli,
kafka-manager) read it unchanged; the metadata child is invisible to them. Blocking calls,
made from the reactor's thread pool. A batch of writes is pipelined: every ``set`` is sent
before any answer is awaited, so a batch of N partitions costs about one ZooKeeper round trip
and one fsync (ZooKeeper groups the transactions it logs), not N.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from kazoo.exceptions import KazooException, NodeExistsError, NoNodeError

from broker.protocol.errors import ErrorCode

METADATA_NODE = "metadata"
NO_OFFSET = -1
#: keys per multi transaction: at most 2 operations each, well inside jute.maxbuffer (1 MB)
MULTI_KEYS = 200

TopicPartition = tuple[str, int]
Key = tuple[str, str, int]  # (group, topic, partition)


@dataclass(frozen=True)
class Committed:
    offset: int
    metadata: str = ""


def offsets_path(group: str) -> str:
    return f"/consumers/{group}/offsets"


def offset_path(group: str, topic: str, partition: int) -> str:
    return f"/consumers/{group}/offsets/{topic}/{partition}"


def parse_offset(raw: bytes | None) -> int | None:
    """The ZooKeeper consumer's format: a decimal string (whitespace tolerated)."""
    if raw is None:
        return None
    try:
        return int(raw.decode().strip())
    except (UnicodeDecodeError, ValueError):
        return None


class ZkOffsetStore:
    """Reads and writes committed offsets with a kazoo client (blocking)."""

    def __init__(self, kazoo: Any) -> None:
        self.zk = kazoo

    # -- writes ------------------------------------------------------------------------------

    def write(self, batch: dict[Key, Committed], known: dict[Key, Committed] | None = None) -> dict[Key, int]:
        """Write every entry; return {key: error code}.

        ``known`` holds what this broker last wrote for a key, so it knows which znodes exist:
        those keys go in ZooKeeper multi transactions of up to ``MULTI_OPS`` operations (one
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
            path = offset_path(*key)
            t.set_data(path, str(c.offset).encode())
            meta = f"{path}/{METADATA_NODE}"
            if c.metadata and before.metadata:
                t.set_data(meta, c.metadata.encode())
            elif c.metadata:
                t.create(meta, c.metadata.encode())
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
            path = offset_path(*key)
            main = self.zk.set_async(path, str(c.offset).encode())
            if c.metadata:
                meta = self.zk.set_async(f"{path}/{METADATA_NODE}", c.metadata.encode())
            else:
                meta = self.zk.delete_async(f"{path}/{METADATA_NODE}")
            pending.append((key, main, meta))
        return {key: self._settle(key, batch[key], main, meta) for key, main, meta in pending}

    def _settle(self, key: Key, c: Committed, main: Any, meta: Any) -> int:
        path = offset_path(*key)
        try:
            try:
                main.get()
            except NoNodeError:
                self._create(path, str(c.offset).encode())
            if meta is not None:
                try:
                    meta.get()
                except NoNodeError:
                    if c.metadata:
                        self._create(f"{path}/{METADATA_NODE}", c.metadata.encode())
            return ErrorCode.NONE
        except KazooException:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE

    def _create(self, path: str, data: bytes) -> None:
        try:
            self.zk.create(path, data, makepath=True)
        except NodeExistsError:
            self.zk.set(path, data)

    # -- reads -------------------------------------------------------------------------------

    def topics(self, group: str) -> dict[str, list[int]]:
        """Every topic and partition with a committed offset in ``group``."""
        try:
            names = self.zk.get_children(offsets_path(group))
        except NoNodeError:
            return {}
        found: dict[str, list[int]] = {}
        for topic in sorted(names):
            try:
                parts = self.zk.get_children(f"{offsets_path(group)}/{topic}")
            except NoNodeError:
                continue
            found[topic] = sorted(int(p) for p in parts if p.isdigit())
        return found

    def read(self, group: str, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, Committed]:
        """The committed offsets of these partitions (missing ones are left out), pipelined."""
        asks = []
        for topic, partition in partitions:
            path = offset_path(group, topic, partition)
            asks.append(((topic, partition), self.zk.get_async(path), self.zk.get_async(f"{path}/{METADATA_NODE}")))
        found: dict[TopicPartition, Committed] = {}
        for tp, main, meta in asks:
            try:
                offset = parse_offset(main.get()[0])
            except NoNodeError:
                offset = None
            try:
                metadata = (meta.get()[0] or b"").decode("utf-8", "replace")
            except NoNodeError:
                metadata = ""
            if offset is not None:
                found[tp] = Committed(offset, metadata)
        return found

    def groups(self) -> list[str]:
        """Every group under /consumers (ZooKeeper consumers and coordinator groups alike)."""
        try:
            return sorted(self.zk.get_children("/consumers"))
        except NoNodeError:
            return []
