"""Exact resume end to end: two source clusters (one reached through ZooKeeper, one through
bootstrap.servers) copied into an aggregate cluster under continuous keyed load by two mirror
processes; one is SIGKILLed and the other takes its partitions over, then the mirror is
SIGKILLed at random moments four more times and restarted. Nothing lost, nothing copied twice,
per-key order kept, compared by origin."""

from __future__ import annotations

import json
import random
import time

from tests.mirror.conftest import KeyedLoad, by_origin, cluster_id, wait_until
from tests.mirror.test_mirror_maker import _check_complete, _check_order_and_values, _committed, _uid

#: Short sessions so a killed process's claims end quickly (ZooKeeper and the group coordinator).
ZK_SOURCE = {"zookeeper.session.timeout.ms": "2000", "rebalance.backoff.ms": "200"}
GROUP_SOURCE = {"session.timeout.ms": "2000", "heartbeat.interval.ms": "500", "metadata.max.age.ms": "1000"}
ARGS = ("--whitelist", r"events\..*", "--num.streams", "2", "--offset.commit.interval.ms", "1000",
        "--stats.interval.ms", "1000")


def test_sigkilled_five_times_with_a_takeover_nothing_lost_nothing_copied_twice(clusters, mirrors, capsys):
    dc1 = clusters("dc1")
    dc2 = clusters("dc2", group_initial_rebalance_delay_ms="100", group_min_session_timeout_ms="1000")
    agg = clusters("agg")
    topic = f"events.{_uid()}"
    for c in (dc1, dc2):
        c.create_topic(topic, 3)
    ids = {c.name: cluster_id(c) for c in (dc1, dc2)}
    sources = [dc1.consumer_props(**ZK_SOURCE),
               {"bootstrap.servers": dc2.bootstrap, "group.id": "mirror", "mirror.source.name": "dc2", **GROUP_SOURCE}]
    target = {"bootstrap.servers": agg.bootstrap}
    loads = [KeyedLoad(dc1, topic, rate=1200), KeyedLoad(dc2, topic, rate=1200)]
    for load in loads:
        load.start()

    def copied() -> int:
        try:
            return len(agg.read_all(topic))
        except Exception:  # noqa: BLE001 - the topic is being made
            return 0

    def copying_again(since: int) -> None:
        wait_until(lambda: copied() > since + 600, 40, 0.3, what="the restarted mirror copying")

    first, second = mirrors(sources, target, *ARGS), mirrors(sources, target, *ARGS)
    copying_again(0)
    first.kill()  # the second process takes the first one's partitions over once its sessions end
    deadline = time.monotonic() + 15
    while "resumes at" not in second.output() and time.monotonic() < deadline:
        time.sleep(0.3)  # (no line when the kill came right after a commit: nothing to skip then)
    current = second
    rng = random.Random(7)
    kills = 1
    for _ in range(4):
        copying_again(copied())
        time.sleep(rng.uniform(0.0, 1.5))
        current.kill()
        kills += 1
        current = mirrors(sources, target, *ARGS)
    copying_again(copied())
    for load in loads:
        load.stop()
        assert not load.errors
    recs, grouped = _check_complete(agg, topic, loads, ids)
    assert current.stop() == 0, current.output()[-3000:]
    dups = _check_order_and_values(recs, grouped, loads, ids)
    sent = sum(len(load.acked) for load in loads)
    with capsys.disabled():
        print(f"\n[exact resume] {sent} source records, {kills} SIGKILLs (one taken over), {len(recs)} copies, "
              f"{dups} duplicates")
    assert dups == 0
    assert len(recs) == sent
    status = json.loads(current.status_file.read_text())
    assert status["state"] == "stopped" and set(status["sources"]) == {"dc1", "dc2"}


def test_key_placed_copies_sigkilled_mid_stream_are_not_copied_again(clusters, mirrors, capsys):
    """A target with fewer partitions than its source: copies are placed by key, so the resume
    skips exactly the origin offsets found in every target partition's tail."""
    src, agg = clusters("ksrc"), clusters("kagg")
    topic = f"events.{_uid()}"
    src.create_topic(topic, 3)
    agg.create_topic(topic, 2)
    ids = {src.name: cluster_id(src)}
    load = KeyedLoad(src, topic, rate=2000)
    load.start()
    sources, target = [src.consumer_props(**ZK_SOURCE)], {"bootstrap.servers": agg.bootstrap}
    first = mirrors(sources, target, *ARGS)
    wait_until(lambda: len(agg.read_all(topic)) > 3000, 40, 0.3, what="copying")
    first.kill()
    at_kill = agg.read_all(topic)
    committed = {p: _committed(src, topic, p) for p in range(3)}
    # copies the killed process made after its last commit: the restart must skip them
    window = sum(1 for o in by_origin(at_kill) if o[3] >= committed[o[2]])
    second = mirrors(sources, target, *ARGS)
    wait_until(lambda: len(agg.read_all(topic)) > len(at_kill) + 500, 40, 0.3, what="the restart copying")
    load.stop()
    assert not load.errors
    recs, grouped = _check_complete(agg, topic, [load], ids)
    assert second.stop() == 0, second.output()[-3000:]
    dups = _check_order_and_values(recs, grouped, [load], ids)
    with capsys.disabled():
        print(f"\n[exact resume, placed by key] {len(load.acked)} source records, {len(recs)} copies, {dups} duplicates, "
              f"{window} copies after the last commit at the kill")
    assert dups == 0 and len(recs) == len(load.acked)
    assert window == 0 or "are in the aggregate cluster already" in second.output(), second.output()[-3000:]
