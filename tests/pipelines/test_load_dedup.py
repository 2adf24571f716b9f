"""Deduplication by origin on a real broker and Spark: a topic fed with injected duplicate copies
(the same ``logbus.origin`` birth twice: in one range, in two ranges of one run, across two runs) is loaded with each
birth written once; the manifests count the dropped copies; a rerun from the saved offsets writes
the same bytes and drops the same copies; records without an origin are all written."""

from __future__ import annotations

from pathlib import Path

from confluent_kafka import Producer

from broker.protocol.origin import HEADER, Origin, birth
from pipelines.config import parse_config
from pipelines.fs import LocalFS
from pipelines.loader import Loader
from pipelines.manifest import OffsetStore
from tests.pipelines.helpers import create_topics, data_files, loader_config, new_topic, read_rows


def _produce(bootstrap: str, topic: str, records: list[tuple[int, list]]) -> None:
    """records: (partition, headers) in order; the value names the record's position in the list."""
    errors: list = []
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "acks": "all", "enable.idempotence": True})
    for n, (partition, headers) in enumerate(records):
        p.produce(topic, value=b"r%d" % n, partition=partition, headers=headers, timestamp=1_768_000_000_000 + n,
                  on_delivery=lambda err, msg: err and errors.append(err))
        p.poll(0)
    assert p.flush(60) == 0 and errors == []


def _copy(cluster: str, partition: int, offset: int, *hops: Origin) -> list:
    """A mirrored record's headers: its birth first, then later hops."""
    return [("app", b"x"), (HEADER, Origin(cluster, "src", partition, offset).encode())] + \
           [(HEADER, h.encode()) for h in hops]


def test_each_origin_written_once_across_runs(broker, spark, tmp_path: Path):
    topic = new_topic("agg")
    create_topics(broker.bootstrap, [topic], 2)
    # run 1: partition 0 gets births A:0:0..99, then a mirror "restart" copies A:0:20..39 again, a
    # copy of a copy of A:0:5 (via B), and 5 records of a producer that writes no origin (twice the
    # same bytes: without an origin they are different records); partition 1 interleaves two sources
    first = [(0, _copy("A", 0, o)) for o in range(100)]
    first += [(0, _copy("A", 0, o)) for o in range(20, 40)]
    first += [(0, _copy("A", 0, 5, Origin("B", "src", 3, 777)))]
    first += [(0, [("app", b"plain")]) for _ in range(5)]
    first += [(1, _copy(c, 1, o)) for o in range(50) for c in ("A", "B")]
    first += [(1, _copy("B", 1, 10))]
    _produce(broker.bootstrap, topic, first)

    warehouse = tmp_path / "wh"
    # ranges split at 40 records: a copy in one task of a birth another task of the same run writes
    # (run 1: offsets 100..119 copy births at offsets 20..39) is found through the task's lookback
    cfg = parse_config(loader_config(broker.bootstrap, warehouse, [{"name": topic, "format": "raw"}],
                                     max_range_records=40))
    with Loader(cfg, spark=spark) as loader:
        [run1] = loader.run()
    assert len(run1.plan.tasks()) == 4 + 3
    store = OffsetStore(LocalFS(f"file://{warehouse}"))
    m1 = store.manifest(topic, run1.run_id)
    parts = {p["partition"]: p for p in m1["partitions"]}
    assert parts[0]["duplicates_dropped"] == 21 and parts[1]["duplicates_dropped"] == 1
    assert m1["totals"]["duplicates_dropped"] == 22 and run1.duplicates_dropped == 22
    assert parts[0]["duplicate_offsets"] == [[100, 121]] and parts[1]["duplicate_offsets"] == [[100, 101]]
    assert parts[0]["count"] == 105 and parts[1]["count"] == 100
    assert m1["totals"]["records"] == 205

    # run 2: new births A:0:100..149 with copies of A:0:50..59 (written by run 1) among them, and
    # copies of A:0:120..124 (written earlier in this same range)
    second = [(0, _copy("A", 0, o)) for o in range(100, 130)]
    second += [(0, _copy("A", 0, o)) for o in range(50, 60)]
    second += [(0, _copy("A", 0, o)) for o in range(130, 150)]
    second += [(0, _copy("A", 0, o)) for o in range(120, 125)]
    second += [(1, _copy("B", 1, 49)), (1, _copy("B", 1, 50))]
    _produce(broker.bootstrap, topic, second)
    # the driver "dies" after the data and before the manifest: the next run finishes it from the
    # files, whose commit summaries carry each range's drops and origin index
    with Loader(cfg, spark=spark) as loader:
        plan = loader.plan()
        loader.load(plan)
    with Loader(cfg, spark=spark) as loader:
        run2, empty = loader.run()
    assert run2.resumed and run2.run_id == plan.run_id and not empty.plan.tasks()
    m2 = store.manifest(topic, run2.run_id)
    parts = {p["partition"]: p for p in m2["partitions"]}
    assert parts[0]["duplicates_dropped"] == 15 and parts[1]["duplicates_dropped"] == 1
    assert parts[0]["duplicate_offsets"] == [[156, 166], [186, 191]]
    assert m2["totals"]["duplicates_dropped"] == 16
    hist = {h["run_id"]: h["duplicates"] for h in Loader(cfg, spark=spark).history(topic)}
    assert hist == {run1.run_id: 22, run2.run_id: 16, empty.run_id: 0}
    # the next plan starts from the merged index: births A:0:0..149 as one run
    [p0] = [p for p in store.plan(topic, empty.run_id)["partitions"] if p["partition"] == 0]
    assert [(s["cluster"], s["hi"], s["runs"]) for s in p0["origins"]["sources"]] == [("A", 149, [[0, 150]])]

    rows = read_rows(warehouse, topic)
    births = [birth([(h["key"], h["value"]) for h in r["headers"]]) for r in rows]
    mirrored = [b for b in births if b is not None]
    assert len(mirrored) == len(set(mirrored)), "an origin was written twice"
    assert set(mirrored) == {Origin("A", "src", 0, o) for o in range(150)} | \
        {Origin(c, "src", 1, o) for c in "AB" for o in range(50)} | {Origin("B", "src", 1, 50)}
    assert births.count(None) == 5  # records without an origin are never dropped
    assert len(rows) == m1["totals"]["records"] + m2["totals"]["records"]

    # an exact rerun of run 2 from its saved offsets: the same copies dropped, the same bytes
    before = {f: f.read_bytes() for f in data_files(warehouse, topic)}
    with Loader(cfg, spark=spark) as loader:
        again = loader.rerun(run2.run_id)
    assert again.duplicates_dropped == 16
    assert {f: f.read_bytes() for f in data_files(warehouse, topic)} == before
