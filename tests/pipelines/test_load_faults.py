"""Faults: a task failing after part of its output is committed (Spark retries it, no
duplicate), a driver killed between the data commit and the manifest commit, a lost
_offsets directory, reruns reproducing byte-identical files, retention removing a run's
start (fail by default; earliest records the gap), undecodable values, deleted topics and
added partitions."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from confluent_kafka import Producer

from broker.client.admin import AdminClient
from broker.cluster.net import free_port
from pipelines.config import parse_config
from pipelines.errors import LoadError, OutOfRangeError
from pipelines.faults import LoadFaults
from pipelines.fs import LocalFS
from pipelines.loader import Loader
from pipelines.manifest import OffsetStore
from tests.pipelines.helpers import (
    create_topics,
    data_files,
    json_topic,
    load_until_served,
    loader_config,
    new_topic,
    produce,
    read_rows,
)

ROOT = Path(__file__).resolve().parents[2]
HOUR = 3_600_000


@pytest.fixture
def broker(module_broker):
    """The module's one broker (tests/conftest.py): the tests taking it create topics of their own
    on it; the one that kills its broker, and the one that reconfigures it, start their own."""
    return module_broker


def _spread_events(bootstrap: str, topic: str, partitions: int, n: int, start: int = 0, **config) -> set:
    """n events per partition one minute apart (so a range spans several hour directories)."""
    base = 1_767_225_600_000  # an hour boundary
    records = []
    for p in range(partitions):
        for i in range(start, start + n):
            value = json.dumps({"member_id": i, "page": f"/p{p}/{i}", "ts": base + i * 60_000}).encode()
            records.append((topic, p, None, value, base + i * 60_000))
    produce(bootstrap, records, headers=False, **config)
    return {(topic, p, i) for p in range(partitions) for i in range(start, start + n)}


def _keys(rows: list[dict]) -> list:
    return [(r["topic"], r["partition"], r["offset"]) for r in rows]


def _assert_exactly(rows: list[dict], expected: set) -> None:
    keys = _keys(rows)
    assert len(keys) == len(set(keys)), "duplicate rows"
    assert set(keys) == expected


def test_task_failure_after_partial_output_is_retried_without_duplicates(broker, spark, tmp_path):
    topic = new_topic("retry")
    create_topics(broker.bootstrap, [topic], 2)
    expected = _spread_events(broker.bootstrap, topic, 2, 150)  # 150 minutes: 3-4 hour files per range
    warehouse = tmp_path / "wh"
    cfg = parse_config(loader_config(broker.bootstrap, warehouse, [json_topic(topic)]))
    markers = tmp_path / "markers"
    with Loader(cfg, spark=spark, faults=LoadFaults(fail_after_write=str(markers))) as loader:
        [result] = loader.run()
    assert len(list(markers.iterdir())) == 2, "each task failed once, after its first file was in place"
    assert all(r.attempt == 1 for r in result.results), "Spark ran every task a second time"
    rows = read_rows(warehouse, topic)
    _assert_exactly(rows, expected)
    assert result.records == 300
    files = data_files(warehouse, topic)
    assert len(files) == 2 * 3 and {f.name for f in files} == {f"{topic}+0+0+150.parquet", f"{topic}+1+0+150.parquet"}
    assert not any((warehouse / topic / "_staging").iterdir()), "failed attempts leave nothing staged"


def _write_config(path: Path, raw: dict) -> Path:
    path.write_text(yaml.safe_dump(raw))
    return path


def test_driver_killed_before_manifest_commit_then_next_run_loads_exactly_once(broker, spark, tmp_path):
    topic = new_topic("kill")
    create_topics(broker.bootstrap, [topic], 3)
    expected = _spread_events(broker.bootstrap, topic, 3, 100)
    warehouse = tmp_path / "wh"
    raw = loader_config(broker.bootstrap, warehouse, [json_topic(topic)], max_range_records=60)
    conf = _write_config(tmp_path / "loader.yaml", raw)
    env = {**os.environ, **LoadFaults(kill_before_manifest=True).environment(),
           "PYTHONPATH": str(ROOT), "SPARK_LOCAL_IP": "127.0.0.1"}
    proc = subprocess.run([sys.executable, "-m", "pipelines.cli", "run", "--config", str(conf), "--quiet"],
                          env=env, cwd=ROOT, capture_output=True, text=True, timeout=240)
    assert proc.returncode == -9, proc.stderr[-2000:]
    store = OffsetStore(LocalFS(f"file://{warehouse}"))
    [killed_run] = store.pending(topic)
    assert store.manifests(topic) == []
    _assert_exactly(read_rows(warehouse, topic), expected)  # the data was committed, the manifest was not

    # a half-written manifest counts as none
    (warehouse / topic / "_offsets" / f"{killed_run}.manifest.json").write_text('{"run_id": "' + killed_run)
    expected |= _spread_events(broker.bootstrap, topic, 3, 20, start=100)
    cfg = parse_config(raw)
    with Loader(cfg, spark=spark) as loader:
        recovered, new = loader.run()
    assert recovered.run_id == killed_run and recovered.resumed
    assert all(r.rebuilt for r in recovered.results), "complete ranges are taken from their files"
    assert recovered.records == 300 and new.records == 60
    assert all(r.start == 100 for r in new.results)
    _assert_exactly(read_rows(warehouse, topic), expected)
    history = Loader(cfg, spark=spark).history(topic)
    assert [h["status"] for h in history] == ["committed (recovered)", "committed"]

    # _offsets lost entirely: offsets are rebuilt from the committed file names
    shutil.rmtree(warehouse / topic / "_offsets")
    expected |= _spread_events(broker.bootstrap, topic, 3, 10, start=120)
    with Loader(cfg, spark=spark) as loader:
        [again] = loader.run()
    assert again.records == 30 and all(r.start == 120 for r in again.results)
    _assert_exactly(read_rows(warehouse, topic), expected)
    kinds = [m["kind"] for m in store.manifests(topic)]
    assert kinds == ["rebuilt", "load"]


def test_rerun_reproduces_the_same_files_byte_for_byte(broker, spark, tmp_path):
    topic = new_topic("rerun")
    create_topics(broker.bootstrap, [topic], 2)
    _spread_events(broker.bootstrap, topic, 2, 130)
    warehouse = tmp_path / "wh"
    cfg = parse_config(loader_config(broker.bootstrap, warehouse, [json_topic(topic)], max_range_records=100))
    with Loader(cfg, spark=spark) as loader:
        [first] = loader.run()
        before = {f.relative_to(warehouse): f.read_bytes() for f in data_files(warehouse, topic)}
        for f in data_files(warehouse, topic):
            f.unlink()  # lose the data...
        _spread_events(broker.bootstrap, topic, 2, 10, start=130)  # ...while the topic moves on
        result = loader.rerun(first.run_id)
    after = {f.relative_to(warehouse): f.read_bytes() for f in data_files(warehouse, topic)}
    assert result.records == first.records == 260
    assert set(after) == set(before)
    assert after == before, "Parquet output is deterministic: same rows, same bytes"
    assert OffsetStore(LocalFS(f"file://{warehouse}")).manifest(topic, first.run_id)["reruns"][0]["records"] == 260


def _produce_one_batch_each(bootstrap: str, topic: str, n: int) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "acks": "all"})
    for i in range(n):
        p.produce(topic, value=json.dumps({"member_id": i, "page": "x" * 150, "ts": 1_767_225_600_000}).encode(),
                  partition=0)
        p.flush(10)


def test_out_of_range_fails_by_default_and_earliest_records_the_gap(broker_factory, spark, tmp_path):
    broker = broker_factory(overrides={"log.retention.check.interval.ms": "200"})
    topic = new_topic("oor")
    with AdminClient(broker.bootstrap) as admin:
        admin.create_topic(topic, 1, 1, {"segment.bytes": "1000", "retention.bytes": "2000"})
    _produce_one_batch_each(broker.bootstrap, topic, 4)
    warehouse = tmp_path / "wh"
    raw = loader_config(broker.bootstrap, warehouse, [json_topic(topic)])
    with Loader(parse_config(raw), spark=spark) as loader:
        [first] = loader.run()
    loaded = first.plan.rows()[0]["end"]
    assert first.records == loaded > 0
    _produce_one_batch_each(broker.bootstrap, topic, 40)
    host, _, port = broker.bootstrap.rpartition(":")
    from broker.client.simple_consumer import SimpleConsumer

    deadline = time.monotonic() + 20
    with SimpleConsumer(host, int(port)) as c:
        # until retention has settled: a check that ran while the last batches were still
        # arriving moves the log start once more (the run then records two gaps)
        previous = None
        while time.monotonic() < deadline:
            earliest = c.earliest_offset(topic, 0)
            if earliest > loaded and earliest == previous:
                break
            previous = earliest
            time.sleep(0.6)  # three retention checks
        earliest, latest = c.earliest_offset(topic, 0), c.latest_offset(topic, 0)
    assert earliest > loaded, "retention removed the next run's start"

    with Loader(parse_config(raw), spark=spark) as loader:
        with pytest.raises(OutOfRangeError) as info:
            loader.run()
    message = str(info.value)
    assert f"{topic}-0" in message and f"offset {loaded}" in message and f"{earliest}..{latest}" in message

    with Loader(parse_config({**raw, "out_of_range": "earliest"}), spark=spark) as loader:
        [second] = loader.run()
    [m] = [m for m in OffsetStore(LocalFS(f"file://{warehouse}")).manifests(topic) if m["run_id"] == second.run_id]
    [p] = m["partitions"]
    assert p["gaps"] == [[loaded, earliest]]
    assert p["start"] == earliest and p["end"] == latest and p["count"] == latest - earliest
    rows = read_rows(warehouse, topic)
    assert sorted(r["offset"] for r in rows) == list(range(loaded)) + list(range(earliest, latest))


def test_undecodable_values_go_to_errors_and_the_ratio_decides(broker, spark, tmp_path):
    topic = new_topic("bad")
    create_topics(broker.bootstrap, [topic], 1)
    good = [json.dumps({"member_id": i, "page": "p", "ts": 1_767_225_600_000}).encode() for i in range(18)]
    bad = [b"{not json", json.dumps({"member_id": "x", "page": "p", "ts": 0}).encode()]
    produce(broker.bootstrap, [(topic, 0, None, v, None) for v in good[:9] + bad + good[9:]], headers=False)
    warehouse = tmp_path / "wh"
    raw = loader_config(broker.bootstrap, warehouse, [json_topic(topic)])
    with Loader(parse_config(raw), spark=spark) as loader:
        with pytest.raises(LoadError, match=r"2 of 20 records could not be decoded .*max_error_ratio"):
            loader.run()
    assert OffsetStore(LocalFS(f"file://{warehouse}")).manifests(topic) == []
    with Loader(parse_config({**raw, "max_error_ratio": 0.2}), spark=spark) as loader:
        [pending_done, result] = loader.run()  # the failed run is finished first, then a new (empty) one
    assert pending_done.records == 18 and pending_done.errors == 2 and result.records == 0
    import pyarrow.parquet as pq

    [errors_file] = (warehouse / topic / "_errors").glob("*.parquet")
    errs = pq.read_table(errors_file).to_pylist()
    assert [e["offset"] for e in errs] == [9, 10]
    assert "not JSON" in errs[0]["error"] and "member_id" in errs[1]["error"]
    assert errs[0]["value"] == b"{not json"
    assert sorted(r["offset"] for r in read_rows(warehouse, topic)) == list(range(9)) + list(range(11, 20))


def test_deleted_topic_and_added_partitions(broker, spark, tmp_path):
    keep, gone = new_topic("keep"), new_topic("gone")
    create_topics(broker.bootstrap, [keep, gone], 2)
    expected = _spread_events(broker.bootstrap, keep, 2, 10)
    _spread_events(broker.bootstrap, gone, 2, 10)
    warehouse = tmp_path / "wh"
    raw = loader_config(broker.bootstrap, warehouse, [{"pattern": "(keep|gone)-.*", "format": "json",
                                                       "schema": json_topic(keep)["schema"]}])
    with Loader(parse_config(raw), spark=spark) as loader:
        [first] = loader.run()
    assert first.records == 40 and set(first.plan.topics) == {keep, gone}
    with AdminClient(broker.bootstrap) as admin:
        admin.delete_topic(gone)
        can_add = hasattr(admin, "create_partitions")
        if can_add:
            admin.create_partitions(keep, 3)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        with AdminClient(broker.bootstrap) as admin:
            if gone not in admin.list_topics():
                break
        time.sleep(0.2)
    if can_add:
        time.sleep(0.5)
        expected |= _spread_events(broker.bootstrap, keep, 2, 5, start=10)
        produce(broker.bootstrap, [(keep, 2, None, json.dumps({"member_id": i, "page": "n", "ts": 0}).encode(), None)
                                   for i in range(4)], headers=False)
        expected |= {(keep, 2, i) for i in range(4)}
    with Loader(parse_config(raw), spark=spark) as loader:
        [second] = loader.run()
    assert gone in second.plan.skipped and "deleted" in second.plan.skipped[gone]
    _assert_exactly(read_rows(warehouse, keep), expected)
    if can_add:
        [new_partition] = [p for p in second.plan.rows() if p["partition"] == 2]
        assert new_partition["start"] == 0 and "new partition" in new_partition["reason"]
    assert len(read_rows(warehouse, gone)) == 20, "a deleted topic's loaded data stays"


def test_broker_killed_mid_task_then_back(broker_factory, spark, tmp_path):
    """kill -9 the broker while tasks are fetching; it comes back (same id, port and logs) and the
    tasks (re-finding the leader, or retried by Spark) finish with exactly the produced rows."""
    broker = broker_factory(overrides={"metrics.port": free_port()})
    topic = new_topic("dead")
    create_topics(broker.bootstrap, [topic], 2)
    expected = _spread_events(broker.bootstrap, topic, 2, 400, **{"batch.num.messages": 10})  # ~40 fetches each
    warehouse = tmp_path / "wh"
    cfg = parse_config(loader_config(broker.bootstrap, warehouse, [json_topic(topic)], fetch={"max.bytes": 1024}))

    def run() -> list:
        with Loader(cfg, spark=spark, faults=LoadFaults(fetch_delay_ms=150)) as loader:
            return loader.run()

    thread, outcome = load_until_served(run, broker, topic)
    broker.kill()
    time.sleep(1.0)
    deadline = time.monotonic() + 30
    while True:  # the dead broker's ZooKeeper session must expire before its id can register again
        try:
            broker.start()
            break
        except Exception:
            if time.monotonic() > deadline:
                raise
            time.sleep(1.0)
    thread.join(timeout=120)
    assert not thread.is_alive()
    assert "error" not in outcome, outcome.get("error")
    [result] = outcome["result"]
    assert result.records == 800
    assert any(r.leader_changes or r.attempt for r in result.results), "the broker died under a task"
    _assert_exactly(read_rows(warehouse, topic), expected)
