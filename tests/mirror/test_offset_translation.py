"""Consumer offset translation with real brokers: the search against a real target partition where
two source clusters' copies interleave (and a key-placed topic), and `logbus consumer-groups
--translate-from`: a standard (confluent-kafka) group commits part of a dc1 topic, fails over
to the aggregate cluster and reads exactly the rest there, compared by origin; a
key-placed topic through the command; bad input; the mirror's --sync.group.offsets."""

from __future__ import annotations

import subprocess
import sys
import time
import uuid

import pytest
from confluent_kafka import Consumer, TopicPartition

from broker.client.producer import Producer
from broker.cluster.local import write_properties
from broker.cluster.net import free_port
from mirror.origin import Origin, origins
from mirror.resume import TailScanner
from mirror.translate import EXACT, MIRROR_BEHIND, search, translate_topic
from tests.mirror.conftest import cluster_id, wait_until
from tests.mirror.test_tail_scan import _copy, _topic, _write

pytestmark = pytest.mark.integration

GROUP_SOURCE = {"session.timeout.ms": "2000", "heartbeat.interval.ms": "500", "metadata.max.age.ms": "1000"}
FAST_GROUPS = {"group_initial_rebalance_delay_ms": "100", "group_min_session_timeout_ms": "1000"}


@pytest.fixture
def broker(module_broker):
    """The module's one broker (tests/conftest.py): every test here creates topics and groups of
    its own on it, and none stops or reconfigures it."""
    return module_broker


def logbus(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "broker.cli", *args], capture_output=True, text=True, timeout=60)


def _read(broker, topic: str, partition: int) -> list:
    from broker.client.simple_consumer import SimpleConsumer

    host, _, port = broker.bootstrap.rpartition(":")
    out = []
    with SimpleConsumer(host, int(port), timeout=10) as c:
        offset, end = c.earliest_offset(topic, partition), c.latest_offset(topic, partition)
        while offset < end:
            ms = c.fetch(topic, partition, offset, 4 << 20)
            out.extend(m for m in ms if m.offset >= offset)
            offset = ms[-1].offset + 1
    return out


def _rest(records: list, offset: int, cluster: str, partition: int) -> list[int]:
    """Origin offsets of ``cluster``'s copies of source partition ``partition`` read from ``offset`` on."""
    out = []
    for m in records:
        chain = origins(m.headers)
        if m.offset >= offset and chain and (chain[-1].cluster_id, chain[-1].partition) == (cluster, partition):
            out.append(chain[-1].offset)
    return out


def test_search_on_a_real_partition_with_two_sources_interleaved_never_ahead(broker) -> None:
    target = _topic(broker, 1)
    records = []
    next_dc1 = 5  # dc1's copies start at source offset 5 (the earlier ones deleted); runs of 7 alternate
    for i in range(400):  # with dc2's copies and, now and then, a record of nobody
        if (i // 7) % 2 == 0:
            records.append((0, _copy("dc1", "events", 0, next_dc1)))
            next_dc1 += 1
        else:
            records.append((0, _copy("dc2", "events", 0, i)))
        if i % 50 == 0:
            records.append((0, [("trace", b"x")]))
    _write(broker, target, records)
    log = _read(broker, target, 0)
    dc1 = sorted({o for o in _rest(log, 0, "dc1", 0)})
    scanner = TailScanner(broker.bootstrap)
    try:
        start, end = scanner.bounds(target, 0)
        for committed in list(range(0, dc1[-1] + 3)):
            t = search(lambda lo, hi: scanner.first_copy(target, 0, ("dc1", "events", 0), lo, hi), start, end, committed)
            rest = _rest(log, t.offset, "dc1", 0)
            assert set(o for o in dc1 if o >= committed) <= set(rest), (committed, t)  # never ahead
            assert all(o >= committed for o in rest), (committed, t)  # nothing consumed is read again
            assert t.how == (EXACT if committed <= dc1[-1] else MIRROR_BEHIND)
        probes_read = scanner.records_read
    finally:
        scanner.close()
    assert probes_read < 60 * (dc1[-1] + 3), probes_read  # a few probes per search, not a scan of 400+


def test_key_placed_target_partitions_never_ahead_on_a_real_broker(broker) -> None:
    target = _topic(broker, 2)
    # three source partitions of dc1 spread by key over two target partitions, dc2's copies between
    records = []
    for o in range(60):
        for sp in range(3):
            records.append(((o * 7 + sp) % 2, _copy("dc1", "clicks", sp, o)))
        records.append((o % 2, _copy("dc2", "clicks", 0, o)))
    _write(broker, target, records)
    logs = {tp: _read(broker, target, tp) for tp in range(2)}
    committed = {0: 10, 1: 33, 2: 59}
    scanner = TailScanner(broker.bootstrap)
    try:
        bounds = {tp: scanner.bounds(target, tp) for tp in range(2)}
        result = translate_topic(lambda tp, sp: lambda lo, hi: scanner.first_copy(target, tp, ("dc1", "clicks", sp), lo, hi),
                                 bounds, "clicks", 3, committed)
    finally:
        scanner.close()
    for tp, t in result.items():
        for sp, c in committed.items():
            placed = [o for o in _rest(logs[tp], 0, "dc1", sp) if o >= c]
            assert set(placed) <= set(_rest(logs[tp], t.offset, "dc1", sp)), (tp, sp, t)
        # the minimum is exact for the source partition it came from
        assert all(o >= t.committed for o in _rest(logs[tp], t.offset, "dc1", t.source_partition))


def _consume(consumer: Consumer, want: int, timeout: float) -> list:
    got: list = []
    deadline = time.monotonic() + timeout
    while len(got) < want and time.monotonic() < deadline:
        for m in consumer.consume(min(500, want - len(got)), 0.5):
            if m.error() is None:
                got.append(m)
    return got


def _commit(bootstrap: str, group: str, topic: str, committed: dict[int, int]) -> set[tuple[int, int]]:
    """Commits ``committed`` for ``group`` as a standard client does; returns the (partition,
    offset) pairs the group has thereby consumed."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        consumer.commit(offsets=[TopicPartition(topic, p, o) for p, o in committed.items()], asynchronous=False)
    finally:
        consumer.close()
    return {(p, o) for p, end in committed.items() for o in range(end)}


def test_a_group_fails_over_from_dc1_to_the_aggregate_and_reads_exactly_the_other_half(
        clusters, mirrors, tmp_path, capsys) -> None:
    dc1, dc2, agg = clusters("dc1", **FAST_GROUPS), clusters("dc2"), clusters("agg", **FAST_GROUPS)
    topic = f"page-views.{uuid.uuid4().hex[:6]}"
    n = 1500
    for c in (dc1, dc2):
        c.create_topic(topic, 3)
    dc1_id = cluster_id(dc1)
    # both sources copied into one target topic (no prefix); produced while the mirror runs, in
    # turns, so dc1's and dc2's copies interleave in every target partition
    dc1_source = {"bootstrap.servers": dc1.bootstrap, "group.id": "mirror", "mirror.source.name": "dc1", **GROUP_SOURCE}
    mirror = mirrors([dc1_source, dc2.consumer_props()], {"bootstrap.servers": agg.bootstrap},
                     "--whitelist", r"page-views\..*", "--offset.commit.interval.ms", "1000")
    producers = {c.name: Producer({"bootstrap.servers": c.bootstrap, "acks": "all", "linger.ms": "5",
                                   "batch.size": "2048"}) for c in (dc1, dc2)}
    try:
        for turn in range(15):
            for name, producer in producers.items():
                for i in range(turn * n // 15, (turn + 1) * n // 15):
                    producer.send(topic, f"{name}-{i}".encode(), f"k{i % 13}".encode())
                producer.flush(30)
            time.sleep(0.15)
    finally:
        for producer in producers.values():
            producer.close()
    wait_until(lambda: agg.partitions_ready(topic, 3) and len(agg.read_all(topic)) >= 2 * n, 40, 0.3,
               what="both sources copied")

    group = f"views-{uuid.uuid4().hex[:6]}"
    sizes = {p: sum(1 for m in dc1.read_all(topic) if m.partition == p) for p in range(3)}
    # half of partition 0 read, all of partition 1, a third of partition 2: both kinds of answer
    committed = {0: sizes[0] // 2, 1: sizes[1], 2: sizes[2] // 3}
    consumed = _commit(dc1.bootstrap, group, topic, committed)

    files = {"bootstrap": write_properties(tmp_path / "dc1.properties", {"bootstrap.servers": dc1.bootstrap}),
             "zookeeper": write_properties(tmp_path / "dc1-zk.properties", {"zookeeper.connect": dc1.zk})}
    started = time.monotonic()
    dry = {kind: logbus("consumer-groups", "--bootstrap-server", agg.bootstrap, "--group", group,
                        "--translate-from", str(path)) for kind, path in files.items()}
    took = (time.monotonic() - started) / 2
    for out in dry.values():
        assert out.returncode == 0, out.stderr
        assert "No action will be performed" in out.stderr
    assert dry["bootstrap"].stdout == dry["zookeeper"].stdout  # the same offsets, read either way
    lines = dry["bootstrap"].stdout.splitlines()
    assert lines[0].split() == ["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET", "SOURCE-TOPIC", "SOURCE-PARTITION",
                                "SOURCE-OFFSET", "FOUND"]
    records = {p: [m for m in agg.read_all(topic) if m.partition == p] for p in range(3)}
    rows = [line.split() for line in lines[1:]]
    assert sorted(int(r[2]) for r in rows) == sorted(committed)
    for r in rows:
        p, new = int(r[2]), int(r[3])
        assert r[0] == group and r[1] == topic and r[4] == topic and int(r[5]) == p and int(r[6]) == committed[p]
        at = {m.offset: origins(m.headers)[-1] for m in records[p]}
        if committed[p] < sizes[p]:  # the first copy not consumed
            assert (at[new], r[7]) == (Origin(dc1_id, topic, p, committed[p]), "exact")
        else:  # the whole partition consumed: just after the last copy
            assert (at[new - 1], r[7]) == (Origin(dc1_id, topic, p, committed[p] - 1), "mirror-behind")

    assert any(int(r[3]) != int(r[6]) for r in rows)  # dc2's copies lie between dc1's

    execute = logbus("consumer-groups", "--bootstrap-server", agg.bootstrap, "--group", group,
                     "--translate-from", str(files["bootstrap"]), "--execute")
    assert execute.returncode == 0, execute.stderr
    assert execute.stdout == dry["bootstrap"].stdout

    failed_over = Consumer({"bootstrap.servers": agg.bootstrap, "group.id": group, "enable.auto.commit": False,
                            "auto.offset.reset": "earliest", "session.timeout.ms": 6000})
    failed_over.subscribe([topic])
    try:
        new = {int(r[2]): int(r[3]) for r in rows}
        rest = _consume(failed_over, sum(1 for p in new for m in records[p] if m.offset >= new[p]), 30)
        # an active member: --execute is refused in one line
        refused = logbus("consumer-groups", "--bootstrap-server", agg.bootstrap, "--group", group,
                         "--translate-from", str(files["bootstrap"]), "--execute")
    finally:
        failed_over.close()
    assert refused.returncode == 1 and len(refused.stderr.strip().splitlines()) == 1, refused.stderr
    assert "inactive" in refused.stderr
    dc1_read = [o for o in (origins(m.headers())[0] for m in rest) if o.cluster_id == dc1_id]
    read = {(o.partition, o.offset) for o in dc1_read}
    dc1_all = {(origins(m.headers)[0].partition, origins(m.headers)[0].offset)
               for p in range(3) for m in records[p] if origins(m.headers)[0].cluster_id == dc1_id}
    assert len(dc1_read) == len(read), "a record read twice"
    assert read == dc1_all - consumed, (len(read), len(dc1_all - consumed), len(read & consumed))
    assert not read & consumed
    mirror.stop()
    with capsys.disabled():
        print(f"\n[offset translation] {len(consumed)} of {len(dc1_all)} dc1 records consumed in dc1, "
              f"{len(read)} read in the aggregate after --execute (0 skipped, 0 again); "
              f"a dry run took {took:.2f} s")
        print("\n".join(lines))


def test_bad_input_is_one_line_and_a_non_zero_exit(tmp_path) -> None:
    missing = logbus("consumer-groups", "--bootstrap-server", "127.0.0.1:1", "--group", "g",
                     "--translate-from", str(tmp_path / "nope.properties"))
    empty = write_properties(tmp_path / "empty.properties", {"group.id": "x"})
    no_cluster = logbus("consumer-groups", "--bootstrap-server", "127.0.0.1:1", "--group", "g",
                        "--translate-from", str(empty))
    down = write_properties(tmp_path / "down.properties", {"bootstrap.servers": f"127.0.0.1:{free_port()}"})
    unreachable = logbus("consumer-groups", "--bootstrap-server", "127.0.0.1:1", "--group", "g",
                         "--translate-from", str(down))
    no_group = logbus("consumer-groups", "--bootstrap-server", "127.0.0.1:1", "--translate-from", str(down))
    for out, words in ((missing, "does not exist"), (no_cluster, "zookeeper.connect or bootstrap.servers"),
                       (unreachable, "source cluster"), (no_group, "--group")):
        assert out.returncode != 0, out
        assert len(out.stderr.strip().splitlines()) == 1 and words in out.stderr, out.stderr
        assert "Traceback" not in out.stderr


def test_unknown_group_and_topic_are_one_line(broker, tmp_path) -> None:
    target = _topic(broker, 1)
    _write(broker, target, [(0, _copy("dc1", target, 0, 0))])
    source = write_properties(tmp_path / "src.properties", {"bootstrap.servers": broker.bootstrap})
    unknown_group = logbus("consumer-groups", "--bootstrap-server", broker.bootstrap, "--group",
                           f"nobody-{uuid.uuid4().hex[:6]}", "--translate-from", str(source))
    assert unknown_group.returncode == 1 and "has no committed offsets" in unknown_group.stderr, unknown_group
    assert len(unknown_group.stderr.strip().splitlines()) == 1
    # a group with offsets for the topic, asked for another topic
    group = f"g-{uuid.uuid4().hex[:6]}"
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group, "enable.auto.commit": False})
    c.commit(offsets=[TopicPartition(target, 0, 1)], asynchronous=False)
    c.close()
    unknown_topic = logbus("consumer-groups", "--bootstrap-server", broker.bootstrap, "--group", group,
                           "--translate-from", str(source), "--topic", "nosuchtopic")
    assert unknown_topic.returncode == 1 and "nosuchtopic" in unknown_topic.stderr, unknown_topic
    assert len(unknown_topic.stderr.strip().splitlines()) == 1


def test_the_mirror_syncs_group_offsets_forwards_only_with_sync_group_offsets(clusters, mirrors, tmp_path) -> None:
    from broker.tools.translate_offsets import target_group

    dc1, agg = clusters("dc1", **FAST_GROUPS), clusters("agg", **FAST_GROUPS)
    topic = f"page-views.{uuid.uuid4().hex[:6]}"
    dc1.create_topic(topic, 2)
    producer = Producer({"bootstrap.servers": dc1.bootstrap, "acks": "all", "linger.ms": "5", "batch.size": "2048"})
    for i in range(600):
        producer.send(topic, f"dc1-{i}".encode(), f"k{i % 13}".encode())
    producer.flush(30)
    producer.close()
    source = {"bootstrap.servers": dc1.bootstrap, "group.id": "mirror", "topic.prefix": "dc1.", **GROUP_SOURCE}
    mirror = mirrors([source], {"bootstrap.servers": agg.bootstrap}, "--whitelist", r"page-views\..*",
                     "--sync.group.offsets", "--sync.group.offsets.interval.ms", "300")
    target = "dc1." + topic
    wait_until(lambda: agg.partitions_ready(target, 2) and len(agg.read_all(target)) >= 600, 40, 0.3, what="copied")

    group = f"views-{uuid.uuid4().hex[:6]}"
    sizes = {p: sum(1 for m in dc1.read_all(topic) if m.partition == p) for p in range(2)}
    committed = {0: sizes[0] // 2, 1: sizes[1] // 3}
    consumed = _commit(dc1.bootstrap, group, topic, committed)
    at = {(m.partition, m.offset): origins(m.headers)[-1].offset for m in agg.read_all(target)}
    # with a prefix the target partition holds only dc1's copies: target offset = source offset
    expected = {(target, p): next(o for (q, o), origin in sorted(at.items()) if q == p and origin == c)
                for p, c in committed.items()}
    wait_until(lambda: target_group(agg.bootstrap, group)[1] == expected, 20, 0.3, what="the group's offsets synced")
    assert target_group(agg.bootstrap, "mirror")[1] == {}  # the mirror's own group is not synced

    failed_over = Consumer({"bootstrap.servers": agg.bootstrap, "group.id": group, "enable.auto.commit": False,
                            "auto.offset.reset": "earliest"})
    failed_over.subscribe([target])
    rest = _consume(failed_over, 600 - len(consumed), 30)
    failed_over.commit(asynchronous=False)
    failed_over.close()
    read = {(origins(m.headers())[-1].partition, origins(m.headers())[-1].offset) for m in rest}
    assert len(read) == len(rest) == 600 - len(consumed) and not read & consumed
    moved_on = target_group(agg.bootstrap, group)[1]
    time.sleep(1.5)  # five sync intervals: the group's dc1 offsets are behind, so nothing is moved back
    assert target_group(agg.bootstrap, group)[1] == moved_on
    assert mirror.stop() == 0
    assert "offsets synced into the aggregate cluster" in mirror.output()


def test_key_placed_translation_through_the_command(broker, tmp_path) -> None:
    """One broker plays both clusters: a source topic of 3 partitions, its copies placed by key in
    a target topic of 2 (``topic.prefix``), the group's offsets committed on the source topic."""
    source_topic = _topic(broker, 3)
    _write(broker, source_topic, [(p, []) for p in range(3) for _ in range(20)])
    target = "agg." + source_topic
    from broker.client.admin import AdminClient

    with AdminClient(broker.bootstrap) as admin:
        admin.create_topic(target, 2, 1, {})
    wait_until(lambda: _ready(broker, target, 2), 20, what="target ready")
    cid = cluster_id(broker)
    copies = [((o * 7 + sp) % 2, _copy(cid, source_topic, sp, o)) for o in range(20) for sp in range(3)]
    _write(broker, target, copies)
    group = f"g-{uuid.uuid4().hex[:6]}"
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group, "enable.auto.commit": False})
    committed = {0: 10, 1: 5, 2: 20}
    c.commit(offsets=[TopicPartition(source_topic, p, o) for p, o in committed.items()], asynchronous=False)
    c.close()
    source = write_properties(tmp_path / "src.properties", {"bootstrap.servers": broker.bootstrap, "topic.prefix": "agg."})
    out = logbus("consumer-groups", "--bootstrap-server", broker.bootstrap, "--group", group,
                 "--translate-from", str(source), "--dry-run")
    assert out.returncode == 0 and out.stderr == "", out.stderr
    rows = {int(r[2]): r for r in (line.split() for line in out.stdout.splitlines()[1:])}
    assert set(rows) == {0, 1}
    for tp in range(2):
        log = _read(broker, target, tp)
        first_unread = [next((m.offset for m in log if (o := origins(m.headers)[-1]).partition == sp
                              and o.offset >= c), None) for sp, c in committed.items()]
        assert int(rows[tp][3]) == min(x for x in first_unread if x is not None)
        for sp, c in committed.items():  # nothing of any source partition skipped
            placed = [o for o in _rest(log, 0, cid, sp) if o >= c]
            assert set(placed) <= set(_rest(log, int(rows[tp][3]), cid, sp))
        assert rows[tp][7] == "exact"


def _ready(broker, topic: str, partitions: int) -> bool:
    from broker.client.admin import AdminClient

    with AdminClient(broker.bootstrap) as admin:
        d = admin.describe_topics([topic])[0]
    return len(d.partitions) == partitions and all(p.leader >= 0 for p in d.partitions)
