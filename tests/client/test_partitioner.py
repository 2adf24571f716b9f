"""The default partitioner maps keys like Apache Kafka's Java client (murmur2); null keys
spread; custom partitioners load from a dotted path."""

from __future__ import annotations

import random

import pytest
from hypothesis import given
from hypothesis import strategies as st
from kafka.partitioner.default import murmur2 as kafka_python_murmur2

from broker.client.partitioner import (
    DefaultPartitioner,
    KeyRoundRobinPartitioner,
    RoundRobinPartitioner,
    load_partitioner,
    murmur2,
    murmur2_partition,
)

# Apache Kafka's UtilsTest.testMurmur2: Utils.murmur2(key.getBytes()) as Java ints.
KAFKA_VECTORS = {
    "21": -973932308,
    "foobar": -790332482,
    "a-little-bit-long-string": -985981536,
    "a-little-bit-longer-string": -1486304829,
    "lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
    "abc": 479470107,
}


@pytest.mark.parametrize("key, expected", sorted(KAFKA_VECTORS.items()))
def test_murmur2_matches_kafka_utils_test(key, expected):
    assert murmur2(key.encode()) == expected


@pytest.mark.parametrize("key, expected", sorted(KAFKA_VECTORS.items()))
def test_key_to_partition_as_the_java_client(key, expected):
    for partitions in (1, 2, 3, 7, 12, 100):
        java = (expected & 0x7FFFFFFF) % partitions  # Utils.toPositive(murmur2(key)) % n
        assert murmur2_partition(key.encode(), partitions) == java
        assert DefaultPartitioner().partition("t", key.encode(), list(range(partitions)), []) == java


@given(st.binary(max_size=64))
def test_murmur2_matches_kafka_python(key):
    assert murmur2(key) & 0x7FFFFFFF == kafka_python_murmur2(key) & 0x7FFFFFFF


def test_random_keys_match_kafka_python_partitions():
    rng = random.Random(7)
    for _ in range(2000):
        key = rng.randbytes(rng.randrange(0, 40))
        n = rng.randrange(1, 50)
        assert murmur2_partition(key, n) == (kafka_python_murmur2(key) & 0x7FFFFFFF) % n


def test_null_keys_stick_until_a_new_batch_then_move():
    part = DefaultPartitioner()
    partitions = list(range(6))
    first = part.partition("t", None, partitions, partitions)
    assert all(part.partition("t", None, partitions, partitions) == first for _ in range(50))
    part.on_new_batch("t", first)
    seen = {first}
    for _ in range(30):
        p = part.partition("t", None, partitions, partitions)
        seen.add(p)
        part.on_new_batch("t", p)
    assert len(seen) > 2


def test_null_keys_prefer_partitions_with_a_leader():
    part = DefaultPartitioner()
    for _ in range(20):
        p = part.partition("t", None, [0, 1, 2, 3], [2])
        assert p == 2
        part.on_new_batch("t", p)


def test_round_robin_cycles_over_available_partitions():
    part = RoundRobinPartitioner()
    got = [part.partition("t", b"same-key", [0, 1, 2], [0, 1, 2]) for _ in range(9)]
    assert sorted(got) == [0, 0, 0, 1, 1, 1, 2, 2, 2]
    assert got[:3] == got[3:6]


def test_key_round_robin_keeps_keys_and_rotates_nulls():
    part = KeyRoundRobinPartitioner()
    assert part.partition("t", b"21", [0, 1, 2], [0, 1, 2]) == murmur2_partition(b"21", 3)
    assert len({part.partition("t", None, [0, 1, 2], [0, 1, 2]) for _ in range(3)}) == 3


class LastPartition:
    def partition(self, topic, key, partitions, available):
        return partitions[-1]


def first_partition(key, all_partitions, available):  # kafka-python's signature
    return all_partitions[0]


def test_load_partitioner_by_dotted_path():
    assert isinstance(load_partitioner(None), DefaultPartitioner)
    assert isinstance(load_partitioner("org.apache.kafka.clients.producer.RoundRobinPartitioner"), RoundRobinPartitioner)
    custom = load_partitioner(f"{__name__}.LastPartition")
    assert custom.partition("t", b"k", [0, 1, 2], [0, 1, 2]) == 2
    custom.on_new_batch("t", 2)  # added when missing
    func = load_partitioner(f"{__name__}:first_partition")
    assert func.partition("t", b"k", [4, 5], [5]) == 4


@pytest.mark.parametrize("spec", ["nodots", "no.such.module.Thing", f"{__name__}.Missing", f"{__name__}.KAFKA_VECTORS"])
def test_bad_partitioner_class_is_a_clear_error(spec):
    with pytest.raises(ValueError, match="partitioner.class|partitioner"):
        load_partitioner(spec)
