"""A leader's unreplicated tail is truncated when it returns as a follower (leader epochs)."""

from __future__ import annotations

from confluent_kafka import Producer

from tests.cluster_replication.conftest import bootstrap, by_id, consume_all, create_topic, isolate_leader, state, wait_until
from tests.starting import QUICK_EXPIRY, start_together


def _produce(bootstrap_servers: str, topic: str, values: list[bytes], acks: str) -> None:
    producer = Producer({"bootstrap.servers": bootstrap_servers, "acks": acks, "linger.ms": 0, "enable.idempotence": False})
    errors: list = []
    for v in values:
        producer.produce(topic, value=v, on_delivery=lambda err, msg: err and errors.append(err))
        producer.poll(0)
    assert producer.flush(30) == 0
    assert errors == []


def test_returning_leader_truncates_its_unreplicated_tail(cluster, zk):
    brokers = cluster(3, **QUICK_EXPIRY)
    topic = create_topic(brokers, rf=3, config={"unclean.leader.election.enable": "true"})
    committed = [f"committed-{i}".encode() for i in range(100)]
    _produce(bootstrap(brokers), topic, committed, "all")
    old_leader, followers = isolate_leader(brokers, zk, topic)
    # the tail exists on the old leader only
    _produce(old_leader.bootstrap, topic, [f"tail-{i}".encode() for i in range(50)], "1")
    old_leader.kill()
    start_together(followers)
    # unclean election: a follower without the tail leads
    new_leader_id = wait_until(lambda: state(zk, topic).leader in [b.broker_id for b in followers] and state(zk, topic).leader, 30, what="unclean election")
    newer = [f"new-{i}".encode() for i in range(30)]
    _produce(by_id(brokers, new_leader_id).bootstrap, topic, newer, "1")
    old_leader.start()
    wait_until(lambda: sorted(state(zk, topic).isr) == [1, 2, 3], 30, what="old leader back in the isr")
    values = [v for _, v in consume_all(bootstrap(brokers), topic)]
    assert values == committed + newer
    segment = f"{topic}-0/00000000000000000000.log"
    leader_bytes = (by_id(brokers, new_leader_id).log_dir / "data" / segment).read_bytes()
    wait_until(lambda: (old_leader.log_dir / "data" / segment).read_bytes() == leader_bytes, 10, what="byte-identical replica")
    assert "truncating from" in old_leader.out_path.read_text(), "the old leader must have cut its tail"
    checkpoint = (old_leader.log_dir / "data" / f"{topic}-0" / "leader-epoch-checkpoint").read_text().split("\n")
    assert checkpoint[0] == "0" and int(checkpoint[1]) >= 2
