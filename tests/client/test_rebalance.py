"""The range assignment of the ZooKeeper consumer, against properties and Kafka's algorithm."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from broker.client.rebalance import Blacklist, Whitelist, assign, range_assign, subscribed_threads, thread_ids


def kafka_original(partitions, threads, me):
    """Kafka 0.8 ZookeeperConsumerConnector.rebalance, transcribed for one consumer thread."""
    cur_partitions = sorted(partitions)
    cur_consumers = sorted(threads)
    n_parts_per_consumer = len(cur_partitions) // len(cur_consumers)
    n_consumers_with_extra_part = len(cur_partitions) % len(cur_consumers)
    my_index = cur_consumers.index(me)
    start_part = n_parts_per_consumer * my_index + min(my_index, n_consumers_with_extra_part)
    n_parts = n_parts_per_consumer + (0 if my_index + 1 > n_consumers_with_extra_part else 1)
    return [cur_partitions[pid] for pid in range(start_part, start_part + n_parts)]


partitions_st = st.sets(st.integers(0, 200), max_size=64)
threads_st = st.sets(st.text("abc-_0123456789", min_size=1, max_size=8), min_size=1, max_size=20)


@given(partitions_st, threads_st)
def test_every_partition_owned_exactly_once_and_balanced(partitions, threads):
    result = range_assign(partitions, threads)
    owned = [p for parts in result.values() for p in parts]
    assert sorted(owned) == sorted(partitions)
    counts = [len(parts) for parts in result.values()]
    assert max(counts) - min(counts) <= 1
    assert set(result) == set(threads)


@given(partitions_st, threads_st)
def test_matches_kafkas_algorithm(partitions, threads):
    result = range_assign(partitions, threads)
    for thread in threads:
        assert result[thread] == kafka_original(partitions, threads, thread)


@given(st.dictionaries(st.sampled_from(["a", "b", "c"]), partitions_st, min_size=1), threads_st)
def test_group_assignment_per_topic(topic_partitions, threads):
    owners = assign(topic_partitions, {t: threads for t in topic_partitions})
    assert set(owners) == {(t, p) for t, ps in topic_partitions.items() for p in ps}
    assert set(owners.values()) <= set(threads)


def test_known_example():
    # 6 partitions, 3 consumers with one stream each; 7 partitions, 2 consumers x 2 streams
    assert range_assign(range(6), ["c1-0", "c2-0", "c3-0"]) == {"c1-0": [0, 1], "c2-0": [2, 3], "c3-0": [4, 5]}
    got = range_assign(range(7), thread_ids("a", 2) + thread_ids("b", 2))
    assert got == {"a-0": [0, 1], "a-1": [2, 3], "b-0": [4, 5], "b-1": [6]}
    # thread ids sort as strings, as in Kafka
    assert list(range_assign(range(3), ["c-10", "c-2", "c-1"]).items()) == [("c-1", [0]), ("c-10", [1]), ("c-2", [2])]


def test_filters_and_registrations():
    assert Whitelist("events\\..*").is_topic_allowed("events.clicks")
    assert not Whitelist("events\\..*").is_topic_allowed("xevents.clicks")
    assert Whitelist("a,b").is_topic_allowed("b")
    assert Blacklist("a.*").is_topic_allowed("b") and not Blacklist("a.*").is_topic_allowed("ab")
    regs = {
        "c1": {"version": 1, "subscription": {"t1": 2}, "pattern": "static"},
        "c2": {"version": 1, "subscription": {"t.*": 1}, "pattern": "white_list"},
    }
    assert subscribed_threads(regs, ["t1", "t2", "x"]) == {"t1": ["c1-0", "c1-1", "c2-0"], "t2": ["c2-0"]}
