"""Controller election and failover; the pure leader-selection function."""

from __future__ import annotations

from confluent_kafka import Producer

from broker.cluster.controller import elect_leader
from tests.cluster_replication.conftest import bootstrap, by_id, consume_all, create_topic, state, wait_until
from tests.starting import QUICK_EXPIRY


def test_elect_leader_prefers_the_preferred_replica():
    assert elect_leader([1, 2, 3], [1, 2, 3], {1, 2, 3}) == (1, [1, 2, 3])
    assert elect_leader([1, 2, 3], [2, 3], {1, 2, 3}) == (2, [2, 3])


def test_elect_leader_only_from_the_live_isr():
    assert elect_leader([1, 2, 3], [1, 3], {2, 3}) == (3, [3])
    assert elect_leader([1, 2, 3], [1], {2, 3}) is None
    # unclean: any live replica, the ISR restarts with it
    assert elect_leader([1, 2, 3], [1], {2, 3}, unclean=True) == (2, [2])
    assert elect_leader([1, 2, 3], [1], set(), unclean=True) is None


def test_elect_leader_spreads_leadership_and_skips_shutting_down():
    # preferred (1) is dead: the candidate leading fewer partitions wins
    assert elect_leader([1, 2, 3], [1, 2, 3], {2, 3}, leader_counts={2: 5, 3: 1}) == (3, [2, 3])
    assert elect_leader([1, 2, 3], [1, 2, 3], {1, 2, 3}, exclude={1}) == (2, [2, 3])


def _controller(zk) -> int | None:
    """The broker holding /controller, or None while nobody does (the node can vanish between reads)."""
    held = zk.controller()
    return held[0] if held else None


def _epoch(zk) -> int:
    return zk.controller_epoch()[0]


def test_controller_failover_then_leader_failover(cluster, zk):
    brokers = cluster(3, **QUICK_EXPIRY)
    topic = create_topic(brokers, partitions=3, rf=3)
    first = _controller(zk)
    epoch = _epoch(zk)
    by_id(brokers, first).kill()
    second = wait_until(lambda: _controller(zk) not in (first, None) and _controller(zk), 20, what="new controller")
    # /controller and the epoch bump are one transaction: a visible new controller has bumped it
    assert _epoch(zk) > epoch
    # partitions the dead controller led have moved, and it left every ISR
    for p in range(3):
        wait_until(lambda p=p: state(zk, topic, p).leader not in (first, -1) and first not in state(zk, topic, p).isr, 20, what="leaders off the dead controller")
    # a leader failure after the takeover is still handled
    victim_partition = next((p for p in range(3) if state(zk, topic, p).leader != second), 0)
    victim = state(zk, topic, victim_partition).leader
    by_id(brokers, victim).kill()
    wait_until(lambda: state(zk, topic, victim_partition).leader not in (victim, -1), 20, what="leader after second failure")
    live = [b for b in brokers if b.alive]
    producer = Producer({"bootstrap.servers": bootstrap(live), "acks": "all"})
    for i in range(30):
        producer.produce(topic, value=f"after-{i}".encode(), partition=victim_partition)
    assert producer.flush(30) == 0
    values = [v for _, v in consume_all(bootstrap(live), topic, victim_partition)]
    assert values[-30:] == [f"after-{i}".encode() for i in range(30)]
    # the first controller returns as an ordinary broker
    by_id(brokers, first).start()
    wait_until(lambda: first in state(zk, topic, victim_partition).isr, 30, what="returning broker in the isr")
    assert _controller(zk) == second
