"""End to end on a real broker and Spark local[2]: three topics of four partitions of known JSON
events are loaded into Parquet whose rows equal the produced records exactly; a second run
loads only what came after the first; manifests pin the ranges at the plan's high watermarks."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import yaml

from broker.client.simple_consumer import LATEST_TIME, SimpleConsumer
from pipelines.cli import main
from pipelines.config import parse_config
from pipelines.fs import LocalFS
from pipelines.loader import Loader
from pipelines.manifest import OffsetStore
from tests.pipelines.helpers import create_topics, data_files, json_topic, loader_config, new_topic, produce_events, read_rows
from tests.validation.offline import remote_resources, resources


def _high_watermarks(bootstrap: str, topics: list[str], partitions: int) -> dict:
    host, _, port = bootstrap.rpartition(":")
    with SimpleConsumer(host, int(port)) as c:
        return {(t, p): c.get_offsets_before(t, p, LATEST_TIME)[0] for t in topics for p in range(partitions)}


def _expected(produced: dict) -> dict:
    # one producer per partition, in order, idempotent: event i of a partition is at offset i
    return {(t, p, i): e for (t, p, i), e in produced.items()}


def _check_rows(rows: list[dict], expected: dict) -> None:
    by_key = {}
    for r in rows:
        k = (r["topic"], r["partition"], r["offset"])
        assert k not in by_key, f"duplicate row {k}"
        by_key[k] = r
    assert set(by_key) == set(expected), (len(by_key), len(expected))
    for k, e in expected.items():
        r = by_key[k]
        assert r["member_id"] == e["member_id"]
        assert r["page"] == e["page"]
        assert r["ts"] == dt.datetime.fromtimestamp(e["ts"] / 1000, dt.UTC)
        assert r["timestamp"] == r["ts"]  # produced with the event time as the record timestamp
        assert abs(r["score"] - e["score"]) < 1e-12
        assert json.loads(r["tags"]) == e["tags"]
        assert r["key"] == str(e["member_id"]).encode()
        assert [(h["key"], h["value"]) for h in r["headers"]] == [("source", b"test"), ("n", str(len(json.dumps(e))).encode())]


def test_end_to_end_and_incremental(broker, spark, tmp_path: Path):
    topics = [new_topic("views"), new_topic("clicks"), new_topic("orders")]
    create_topics(broker.bootstrap, topics, 4)
    produced = {}
    for t in topics:
        produced.update(produce_events(broker.bootstrap, t, 4, 300))
    warehouse = tmp_path / "wh"
    cfg = parse_config(loader_config(broker.bootstrap, warehouse, [json_topic(t, time_field="ts") for t in topics],
                                     max_range_records=200))
    hw = _high_watermarks(broker.bootstrap, topics, 4)
    assert set(hw.values()) == {300}

    with Loader(cfg, spark=spark) as loader:
        [first] = loader.run()
    assert first.records == 3 * 4 * 300 and first.errors == 0
    assert len(first.plan.tasks()) == 3 * 4 * 2  # ranges above max_range_records are split
    for t in topics:
        rows = read_rows(warehouse, t)
        _check_rows(rows, {k: v for k, v in _expected(produced).items() if k[0] == t})
        store = OffsetStore(LocalFS(f"file://{warehouse}"))
        [m] = store.manifests(t)
        assert m["status"] == "committed" and m["run_id"] == first.run_id
        assert {(t, p["partition"]): p["end"] for p in m["partitions"]} == {k: v for k, v in hw.items() if k[0] == t}
        assert all(p["count"] == 300 and p["start"] == 0 for p in m["partitions"])
        assert store.plan(t, first.run_id)["partitions"][0]["end"] == 300  # the plan was written too
        # files: named after their range, under dt=/hour= of the event time
        names = sorted(f.name for f in data_files(warehouse, t))
        assert f"{t}+0+0+200.parquet" in names and f"{t}+3+200+300.parquet" in names
        for f in data_files(warehouse, t):
            assert f.parent.name.startswith("hour=") and f.parent.parent.name.startswith("dt=")
    # Spark reads the warehouse as a partitioned dataset (dt, hour discovered from directories)
    df = spark.read.parquet(str(warehouse / topics[0]))
    assert df.count() == 4 * 300
    assert {"dt", "hour", "topic", "partition", "offset", "timestamp", "key", "headers", "member_id"} <= set(df.columns)

    # incremental: only what came after the first run, and all of it
    more = {}
    for t in topics:
        more.update(produce_events(broker.bootstrap, t, 4, 50, start=300))
    with Loader(cfg, spark=spark) as loader:
        pending, nxt = loader.preview()
        assert not pending and all(p["start"] == 300 and p["end"] == 350 for p in nxt.rows())
        [second] = loader.run()
        assert second.records == 3 * 4 * 50
        assert all(r.start >= 300 for r in second.results)
        [third] = loader.run()  # nothing new: an empty run commits empty ranges
        assert third.records == 0 and not third.plan.tasks()
        history = loader.history()
    assert [h["run_id"] for h in history if h["topic"] == topics[0]] == [first.run_id, second.run_id, third.run_id]
    everything = {**_expected(produced), **_expected(more)}
    for t in topics:
        _check_rows(read_rows(warehouse, t), {k: v for k, v in everything.items() if k[0] == t})


def test_load_run_validate_commits_what_passes_and_keeps_the_offsets_of_what_fails(broker, spark, tmp_path, capsys):
    """`logbus load run --validate`: the DAG's suites gate the commit; Data Docs open offline."""
    topic = new_topic("valid")
    create_topics(broker.bootstrap, [topic], 2)
    produce_events(broker.bootstrap, topic, 2, 40)
    warehouse = tmp_path / "wh"
    raw = loader_config(broker.bootstrap, warehouse, [json_topic(topic, time_field="ts")])
    conf = tmp_path / "loader.yaml"
    conf.write_text(yaml.safe_dump(raw))
    store = OffsetStore(LocalFS(f"file://{warehouse}"))

    assert main(["run", "--config", str(conf), "--validate", "--quiet"]) == 0
    [good] = store.manifests(topic)
    page_path = warehouse / topic / "_validation" / good["run_id"] / "docs" / "index.html"
    out = capsys.readouterr().out
    assert f"{topic}: validation passed (" in out and f"checks); Data Docs: file://{page_path}\n" in out
    page = page_path.read_text()
    assert "validation passed" in page and resources(page) == [] and remote_resources(page) == []
    assert page.count("<td><code>int64</code></td><td><code>int64</code></td>") == 2  # offset, member_id

    # partition 1's member ids (1,000,000 + i) break a new expectation: the run is not committed
    raw["topics"][0]["expectations"] = [{"expect_column_values_to_be_between": {"column": "member_id",
                                                                                 "max_value": 999_999}}]
    conf.write_text(yaml.safe_dump(raw))
    produce_events(broker.bootstrap, topic, 2, 10, start=40)
    assert main(["run", "--config", str(conf), "--validate", "--quiet"]) == 1
    err = capsys.readouterr().err
    [line] = err.splitlines()
    [pending] = store.pending(topic)
    assert line.startswith(f"logbus load: error: validation of run {pending} failed: 1 check(s) did not pass, "
                           f"first {topic}: expect_column_values_to_be_between: expectations[0] of topic {topic}")
    assert "the offsets did not move" in line and line.endswith(f"Data Docs: file://{warehouse}/{topic}/_validation/"
                                                                f"{pending}/docs/index.html")
    assert [m["run_id"] for m in store.manifests(topic)] == [good["run_id"]]  # the offsets did not move
    assert "validation FAILED" in (warehouse / topic / "_validation" / pending / "docs" / "index.html").read_text()

    # an expectation Great Expectations does not know: one line, nothing committed
    raw["topics"][0]["expectations"] = [{"expect_no_such_thing": {"column": "page"}}]
    conf.write_text(yaml.safe_dump(raw))
    assert main(["run", "--config", str(conf), "--validate", "--quiet"]) == 1
    assert capsys.readouterr().err == (
        f"logbus load: error: validation of run {pending} could not run: expectations[0] of topic {topic} in the "
        f"loader config: 'expect_no_such_thing' is not a Great Expectations 1.x expectation; nothing was committed\n")
    assert store.pending(topic) == [pending]

    # the expectation fixed: the pending run is validated again and committed, as the DAG would
    del raw["topics"][0]["expectations"]
    conf.write_text(yaml.safe_dump(raw))
    assert main(["run", "--config", str(conf), "--validate", "--quiet"]) == 0
    assert [m["run_id"] for m in store.manifests(topic)][:2] == [good["run_id"], pending]
    assert store.manifest(topic, pending)["totals"]["records"] == 20 and store.pending(topic) == []
