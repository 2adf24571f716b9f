"""The mirror-maker against real ZooKeeper and real brokers: two-way mirroring without loops,
whitelist pick-up and blacklist, a source that goes away and comes back, and an aggregate leader
killed mid-stream. SIGKILLs and takeovers (exact resume): test_exact_resume.py."""

from __future__ import annotations

import json
import time
import uuid

from tests.mirror.conftest import KeyedLoad, by_origin, cluster_id, wait_until

COMMIT_MS = "1000"


def _uid() -> str:
    return uuid.uuid4().hex[:6]


def _committed(cluster, topic: str, partition: int, group: str = "mirror") -> int:
    from kazoo.client import KazooClient

    zk = KazooClient(hosts=cluster.zk)
    zk.start(timeout=10)
    try:
        if zk.exists(f"/consumers/{group}/offsets/{topic}/{partition}") is None:
            return 0
        return int(zk.get(f"/consumers/{group}/offsets/{topic}/{partition}")[0])
    finally:
        zk.stop()
        zk.close()


def _check_complete(aggregate, target_topic: str, loads: list[KeyedLoad], ids: dict[str, str], timeout: float = 90):
    """Wait until every acknowledged source record is in the aggregate; return (records, grouped)."""
    want = {(ids[load.cluster.name], load.topic, p, o) for load in loads for (p, o) in load.acked}

    def complete():
        try:
            recs = aggregate.read_all(target_topic)
        except Exception:  # noqa: BLE001 - leadership moving: look again
            return None
        got = by_origin(recs)
        return (recs, got) if want <= set(got) else None

    try:
        return wait_until(complete, timeout, 1.0, what="every source record in the aggregate cluster")
    except AssertionError:
        got = by_origin(aggregate.read_all(target_topic))
        missing = sorted(want - set(got))
        raise AssertionError(f"{len(missing)} of {len(want)} source records missing, e.g. {missing[:5]}") from None


def _check_order_and_values(recs: list, grouped: dict, loads: list[KeyedLoad], ids: dict[str, str]) -> int:
    """Values match their origin; per (origin cluster, key) first occurrences keep source order.
    Returns the number of duplicate copies."""
    values = {(ids[load.cluster.name], load.topic, p, o): v for load in loads for (p, o), v in load.acked.items()}
    for origin, copies in grouped.items():
        if origin in values:
            assert all(c.value == values[origin] for c in copies), origin
    seen: set = set()
    last: dict = {}
    for m in sorted(recs, key=lambda m: (m.partition, m.offset)):
        from mirror.origin import origins

        o = origins(m.headers)[0]
        origin = (o.cluster_id, o.topic, o.partition, o.offset)
        if origin in seen:
            continue
        seen.add(origin)
        k = (o.cluster_id, m.key)
        assert last.get(k, (-1, -1)) < (o.partition, o.offset), f"order broken for key {k}"
        last[k] = (o.partition, o.offset)
    return sum(len(c) - 1 for c in grouped.values())


def test_two_way_mirroring_does_not_loop(clusters, mirrors):
    a, b = clusters("a"), clusters("b")
    topic = f"shared.{_uid()}"
    a.create_topic(topic, 2)
    b.create_topic(topic, 2)
    ida, idb = cluster_id(a), cluster_id(b)
    args = ("--whitelist", r"shared\..*", "--offset.commit.interval.ms", "500")
    ab = mirrors([a.consumer_props(**{"group.id": "a-to-b"})], {"bootstrap.servers": b.bootstrap}, *args)
    ba = mirrors([b.consumer_props(**{"group.id": "b-to-a"})], {"bootstrap.servers": a.bootstrap}, *args)
    from broker.client.producer import Producer

    for cluster, tag in ((a, b"A"), (b, b"B")):
        with Producer({"bootstrap.servers": cluster.bootstrap}) as p:
            for i in range(200):
                p.send(topic, tag + b"%d" % i, b"k%d" % (i % 7))
            p.flush()
    wait_until(lambda: len(a.read_all(topic)) >= 400 and len(b.read_all(topic)) >= 400, 60, 0.5, what="both copies")
    time.sleep(4)  # long enough for any loop to show
    ra, rb = a.read_all(topic), b.read_all(topic)
    assert len(ra) == 400 and len(rb) == 400, (len(ra), len(rb))
    from mirror.origin import origins

    for recs, _home, other in ((ra, ida, idb), (rb, idb, ida)):
        copies = [m for m in recs if origins(m.headers)]
        assert len(copies) == 200
        assert all([o.cluster_id for o in origins(m.headers)] == [other] for m in copies)
    assert ab.stop() == 0 and ba.stop() == 0
    for m in (ab, ba):  # the raw path copied the 200 native records and dropped the 200 copies
        status = json.loads(m.status_file.read_text())
        assert status["raw_records"] == 200 and status["records_skipped_loop"] == 200, status


def test_whitelist_pickup_and_blacklist(clusters, mirrors):
    src, agg = clusters("src"), clusters("agg")
    u = _uid()
    first, later, secret = f"logs.{u}.one", f"logs.{u}.two", f"logs.{u}.secret"
    src.create_topic(first, 2)
    src.create_topic(secret, 1)
    from broker.client.producer import Producer

    def put(topic: str, n: int) -> None:
        with Producer({"bootstrap.servers": src.bootstrap}) as p:
            for i in range(n):
                p.send(topic, b"v%d" % i, b"k%d" % i)
            p.flush()

    put(first, 50)
    put(secret, 50)
    m = mirrors([src.consumer_props()], {"bootstrap.servers": agg.bootstrap}, "--blacklist", r".*\.secret",
                "--offset.commit.interval.ms", "500", prefixes=["dc1."])
    wait_until(lambda: f"dc1.{first}" in agg.topics() and len(agg.read_all(f"dc1.{first}")) == 50, 60, 0.5,
               what="first topic copied")
    src.create_topic(later, 4, configs={"retention.ms": "3600000"})  # created while the mirror runs
    put(later, 80)
    wait_until(lambda: f"dc1.{later}" in agg.topics() and len(agg.read_all(f"dc1.{later}")) == 80, 60, 0.5,
               what="a new topic picked up without restart")
    from broker.client.admin import AdminClient

    with AdminClient(agg.bootstrap) as admin:
        assert len(admin.describe_topics([f"dc1.{later}"])[0].partitions) == 4
        assert admin.topic_configs(f"dc1.{later}").get("retention.ms") == "3600000"
    assert not any("secret" in t for t in agg.topics())
    assert m.stop() == 0


def test_source_goes_away_and_comes_back(clusters, mirrors):
    src, agg = clusters("src"), clusters("agg")
    topic = f"away.{_uid()}"
    src.create_topic(topic, 2)
    from broker.client.producer import Producer

    def put(start: int, n: int) -> None:
        with Producer({"bootstrap.servers": src.bootstrap}) as p:
            for i in range(start, start + n):
                p.send(topic, b"v%d" % i, b"k%d" % (i % 5))
            p.flush()

    put(0, 100)
    m = mirrors([src.consumer_props()], {"bootstrap.servers": agg.bootstrap}, "--whitelist", r"away\..*",
                "--offset.commit.interval.ms", "500")
    wait_until(lambda: topic in agg.topics() and len(agg.read_all(topic)) == 100, 60, 0.5, what="first copy")
    time.sleep(1.0)
    src.stop()  # the whole source cluster goes away
    time.sleep(5)
    assert m.alive, m.output()[-2000:]
    src.start()
    put(100, 100)
    wait_until(lambda: len({r.value for r in agg.read_all(topic)}) == 200, 90, 0.5, what="resumed copying")
    time.sleep(1.0)
    recs = agg.read_all(topic)
    assert len(recs) == 200, f"{len(recs)} records: resumed from an old offset"  # committed before: no re-copy
    assert m.stop() == 0


def test_aggregate_leader_killed_mid_stream(clusters, mirrors):
    src, agg = clusters("src"), clusters("agg", 3, min_insync_replicas="2")
    topic = f"ha.{_uid()}"
    src.create_topic(topic, 2)
    load = KeyedLoad(src, topic, rate=1500)
    load.start()
    m = mirrors([src.consumer_props()], {"bootstrap.servers": agg.bootstrap}, "--whitelist", r"ha\..*",
                "--target.replication.factor", "3", "--offset.commit.interval.ms", COMMIT_MS)
    wait_until(lambda: topic in agg.topics() and len(agg.read_all(topic)) > 1000, 60, 0.5, what="mirroring")
    from broker.client.admin import AdminClient

    with AdminClient(agg.bootstrap) as admin:
        d = admin.describe_topics([topic])[0]
    assert all(len(p.replicas) == 3 for p in d.partitions)
    leader = d.partitions[0].leader
    victim = next(b for b in agg.brokers if b.broker_id == leader)
    victim.kill()
    time.sleep(4)
    load.stop()
    assert not load.errors
    ids = {src.name: cluster_id(src)}
    recs, grouped = _check_complete(agg, topic, [load], ids, timeout=120)
    assert m.alive, m.output()[-3000:]
    assert m.stop() == 0
    _check_order_and_values(recs, grouped, [load], ids)
