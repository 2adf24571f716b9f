"""Partitioners: which partition a record goes to.

The default maps a key to the partition Apache Kafka's Java client picks (murmur2 of the key
bytes, ``(murmur2(key) & 0x7fffffff) % partitions``), so keyed records written by logbus,
librdkafka (with ``partitioner=murmur2_random``), kafka-python and Java land together. Records
without a key stick to one partition until a batch for it is sent, then move on (Kafka's
sticky partitioner): big batches without giving up the spread.

A custom partitioner is named by ``partitioner.class`` as a dotted path (``pkg.mod.Class`` or
``pkg.mod:Class``). It is either a class (instantiated with no argument, then ``configure(config)``
if it has one) whose instances have ``partition(topic, key, partitions, available)``, or a
plain callable with kafka-python's signature ``fn(key, all_partitions, available_partitions)``.
``partitions`` and ``available`` are sorted partition ids; ``available`` holds those with a
live leader (it may be empty).
"""

from __future__ import annotations

import importlib
import itertools
import random
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any

_M = 0x5BD1E995
_SEED = 0x9747B28C
_MASK32 = 0xFFFFFFFF


def murmur2(data: bytes | bytearray | memoryview) -> int:
    """Kafka's ``Utils.murmur2``: 32-bit murmur2 with seed 0x9747b28c, as a signed Java int."""
    data = bytes(data)
    length = len(data)
    h = (_SEED ^ length) & _MASK32
    n4 = length & ~3
    for i in range(0, n4, 4):
        k = data[i] | (data[i + 1] << 8) | (data[i + 2] << 16) | (data[i + 3] << 24)
        k = (k * _M) & _MASK32
        k ^= k >> 24
        k = (k * _M) & _MASK32
        h = ((h * _M) & _MASK32) ^ k
    rest = length & 3
    if rest == 3:
        h ^= data[n4 + 2] << 16
    if rest >= 2:
        h ^= data[n4 + 1] << 8
    if rest >= 1:
        h ^= data[n4]
        h = (h * _M) & _MASK32
    h ^= h >> 13
    h = (h * _M) & _MASK32
    h ^= h >> 15
    return h - 0x100000000 if h & 0x80000000 else h


def to_positive(n: int) -> int:
    """Kafka's ``Utils.toPositive``: clear the sign bit."""
    return n & 0x7FFFFFFF


def murmur2_partition(key: bytes, num_partitions: int) -> int:
    """The partition the Java client's default partitioner gives ``key``."""
    return (murmur2(key) & 0x7FFFFFFF) % num_partitions


class Partitioner:
    """Base class of partitioners (subclassing it is optional)."""

    def configure(self, config: Mapping[str, Any]) -> None:
        """Called once with the producer's configuration."""

    def partition(self, topic: str, key: bytes | None, partitions: Sequence[int], available: Sequence[int]) -> int:
        raise NotImplementedError

    def on_new_batch(self, topic: str, partition: int) -> None:
        """A batch for ``partition`` filled up and a new one started (sticky partitioning)."""


class DefaultPartitioner(Partitioner):
    """murmur2 for keys (Java-compatible); sticky for records without a key."""

    def __init__(self) -> None:
        self._sticky: dict[str, int] = {}
        self._lock = threading.Lock()

    def partition(self, topic: str, key: bytes | None, partitions: Sequence[int], available: Sequence[int]) -> int:
        if key is not None:
            return partitions[(murmur2(key) & 0x7FFFFFFF) % len(partitions)]
        current = self._sticky.get(topic)
        if current is None or current not in partitions:
            current = self._pick(topic, None, partitions, available)
        return current

    def on_new_batch(self, topic: str, partition: int) -> None:
        if self._sticky.get(topic) == partition:
            self._sticky.pop(topic, None)  # the next keyless record picks a new partition

    def _pick(self, topic: str, previous: int | None, partitions: Sequence[int], available: Sequence[int]) -> int:
        with self._lock:
            choices = [p for p in (available or partitions) if p != previous] or list(available or partitions)
            chosen = random.choice(choices)
            self._sticky[topic] = chosen
            return chosen


class RoundRobinPartitioner(Partitioner):
    """Every record (keyed or not) to the next available partition in turn, as Kafka's."""

    def __init__(self) -> None:
        self._counters: dict[str, itertools.count] = {}

    def partition(self, topic: str, key: bytes | None, partitions: Sequence[int], available: Sequence[int]) -> int:
        counter = self._counters.get(topic)
        if counter is None:
            counter = self._counters.setdefault(topic, itertools.count(random.randrange(1 << 16)))
        choices = available or partitions
        return choices[next(counter) % len(choices)]


class KeyRoundRobinPartitioner(DefaultPartitioner):
    """murmur2 for keys, strict round-robin (not sticky) for records without a key."""

    def __init__(self) -> None:
        super().__init__()
        self._rr = RoundRobinPartitioner()

    def partition(self, topic: str, key: bytes | None, partitions: Sequence[int], available: Sequence[int]) -> int:
        if key is None:
            return self._rr.partition(topic, None, partitions, available)
        return partitions[(murmur2(key) & 0x7FFFFFFF) % len(partitions)]

    def on_new_batch(self, topic: str, partition: int) -> None:
        pass


class _CallablePartitioner(Partitioner):
    """Adapts kafka-python's ``fn(key, all_partitions, available_partitions)``."""

    def __init__(self, fn: Callable[[bytes | None, list[int], list[int]], int]) -> None:
        self._fn = fn

    def partition(self, topic: str, key: bytes | None, partitions: Sequence[int], available: Sequence[int]) -> int:
        return self._fn(key, list(partitions), list(available))


#: Names accepted besides dotted paths (Kafka's class names and librdkafka's names).
ALIASES: dict[str, type[Partitioner]] = {
    "default": DefaultPartitioner,
    "sticky": DefaultPartitioner,
    "murmur2": DefaultPartitioner,
    "murmur2_random": DefaultPartitioner,
    "round_robin": RoundRobinPartitioner,
    "roundrobin": RoundRobinPartitioner,
    "org.apache.kafka.clients.producer.internals.DefaultPartitioner": DefaultPartitioner,
    "org.apache.kafka.clients.producer.RoundRobinPartitioner": RoundRobinPartitioner,
    "kafka.producer.DefaultPartitioner": KeyRoundRobinPartitioner,
}


def load_partitioner(spec: str | Any | None, config: Mapping[str, Any] | None = None) -> Partitioner:
    """The partitioner named by ``spec`` (dotted path, alias, class, instance or callable).

    Raises ValueError with a one-line reason when it cannot be loaded."""
    if spec is None or spec == "":
        obj: Any = DefaultPartitioner
    elif isinstance(spec, str):
        obj = ALIASES.get(spec.strip()) or _import(spec.strip())
    else:
        obj = spec
    if isinstance(obj, type):
        try:
            obj = obj()
        except TypeError as exc:
            raise ValueError(f"partitioner.class {spec!r} cannot be created without arguments: {exc}") from None
    if hasattr(obj, "partition") and callable(obj.partition):
        if hasattr(obj, "configure") and config is not None:
            obj.configure(config)
        if not hasattr(obj, "on_new_batch"):
            obj.on_new_batch = lambda topic, partition: None
        return obj
    if callable(obj):
        return _CallablePartitioner(obj)
    raise ValueError(f"partitioner.class {spec!r} is neither a partitioner class nor a callable")


def _import(path: str) -> Any:
    module_name, sep, attr = path.partition(":")
    if not sep:
        module_name, _, attr = path.rpartition(".")
    if not module_name or not attr:
        raise ValueError(f"partitioner.class must be a dotted path like 'package.module.Class', not {path!r}")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ValueError(f"partitioner.class {path!r}: cannot import {module_name}: {exc}") from None
    try:
        obj = module
        for part in attr.split("."):
            obj = getattr(obj, part)
    except AttributeError:
        raise ValueError(f"partitioner.class {path!r}: {module_name} has no {attr}") from None
    return obj
