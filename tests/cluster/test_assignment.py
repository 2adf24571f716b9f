"""Replica assignment: distinct replicas, even leaders and replicas, Kafka's error cases."""

from __future__ import annotations

import random
from collections import Counter

import pytest
from hypothesis import given
from hypothesis import strategies as st

from broker.cluster.assignment import assign_replicas
from broker.protocol.errors import InvalidPartitionsError, InvalidReplicationFactorError


@st.composite
def cluster_and_topic(draw: st.DrawFn) -> tuple[list[int], int, int, int | None]:
    brokers = draw(st.lists(st.integers(0, 1000), min_size=1, max_size=12, unique=True))
    partitions = draw(st.integers(1, 60))
    rf = draw(st.integers(1, len(brokers)))
    start = draw(st.none() | st.integers(0, 3 * len(brokers)))
    return brokers, partitions, rf, start


@given(cluster_and_topic(), st.randoms(use_true_random=False))
def test_every_partition_has_rf_distinct_live_brokers(case, rng) -> None:
    brokers, partitions, rf, start = case
    result = assign_replicas(brokers, partitions, rf, start_index=start, rng=rng)
    assert sorted(result) == list(range(partitions))
    for replicas in result.values():
        assert len(replicas) == rf
        assert len(set(replicas)) == rf
        assert set(replicas) <= set(brokers)


@given(cluster_and_topic(), st.randoms(use_true_random=False))
def test_leaders_spread_evenly(case, rng) -> None:
    brokers, partitions, rf, start = case
    result = assign_replicas(brokers, partitions, rf, start_index=start, rng=rng)
    leaders = Counter(replicas[0] for replicas in result.values())
    counts = [leaders.get(b, 0) for b in brokers]
    assert max(counts) - min(counts) <= 1


@given(cluster_and_topic(), st.integers(1, 5), st.randoms(use_true_random=False))
def test_whole_rounds_give_every_broker_the_same_load(case, rounds, rng) -> None:
    brokers, _, rf, start = case
    partitions = rounds * len(brokers)
    result = assign_replicas(brokers, partitions, rf, start_index=start, rng=rng)
    load = Counter(b for replicas in result.values() for b in replicas)
    assert {load[b] for b in brokers} == {rounds * rf}


def test_fixed_start_is_kafkas_round_robin() -> None:
    # start 0: leaders 0,1,2,...; followers right after the leader in the first round,
    # then shifted one further in the next round.
    result = assign_replicas([2, 0, 1], 6, 2, start_index=0)
    assert result == {0: [0, 1], 1: [1, 2], 2: [2, 0], 3: [0, 2], 4: [1, 0], 5: [2, 1]}


def test_same_seed_same_assignment_and_random_start_varies() -> None:
    a = assign_replicas(range(5), 10, 3, rng=random.Random(7))
    b = assign_replicas(range(5), 10, 3, rng=random.Random(7))
    assert a == b
    firsts = {assign_replicas(range(5), 1, 1, rng=random.Random(seed))[0][0] for seed in range(50)}
    assert len(firsts) > 1


def test_start_partition_numbers_new_partitions() -> None:
    result = assign_replicas([1, 2, 3], 2, 1, start_index=0, start_partition=3)
    assert list(result) == [3, 4]


def test_single_broker() -> None:
    assert assign_replicas([7], 3, 1) == {0: [7], 1: [7], 2: [7]}


@pytest.mark.parametrize(
    "brokers,partitions,rf,error",
    [
        ([1, 2], 0, 1, InvalidPartitionsError),
        ([1, 2], -1, 1, InvalidPartitionsError),
        ([1, 2], 1, 0, InvalidReplicationFactorError),
        ([1, 2], 1, 3, InvalidReplicationFactorError),
        ([], 1, 1, InvalidReplicationFactorError),
    ],
)
def test_bad_input(brokers: list[int], partitions: int, rf: int, error: type[Exception]) -> None:
    with pytest.raises(error):
        assign_replicas(brokers, partitions, rf)


def test_a_fourth_broker_gets_2_to_4_of_12_replicas_whatever_the_draw() -> None:
    """What tests/admin/test_grow.py relies on: 6 partitions at RF 2 over brokers 1-4."""
    counts = set()
    for first in range(4):
        for shift in range(4):
            assignment = assign_replicas([1, 2, 3, 4], 6, 2, rng=_Draws([first, shift]))
            counts.add(sum(1 for replicas in assignment.values() if 4 in replicas))
    assert counts == {2, 3, 4}


class _Draws:
    """``randrange`` answering the given numbers in turn."""

    def __init__(self, values: list[int]) -> None:
        self._values = iter(values)

    def randrange(self, *_args: int) -> int:
        return next(self._values)
