"""The warehouse_load DAGs with real Airflow (dag.test()), real brokers, real Spark and real
Great Expectations: import, a run end to end, a run that fails validation and is loaded
again once the cause is gone, a rerun from saved offsets, and the spark-submit load mode."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from pipelines.completeness import hour_name
from pipelines.fs import LocalFS
from pipelines.manifest import OffsetStore
from pipelines.writer import HOUR_MS
from tests.pipelines.helpers import EVENT_SCHEMA, create_topics, data_files, new_topic, produce, produce_events, read_rows

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def broker(module_broker):
    """The module's one broker (tests/conftest.py): every test here creates topics of its own on it,
    and none stops or reconfigures it."""
    return module_broker


def write_config(tmp_path: Path, bootstrap: str, topics: list[str], expectations=None, **airflow) -> str:
    raw = {
        "cluster": {"bootstrap.servers": bootstrap},
        "warehouse": f"file://{tmp_path / 'wh'}",
        "topics": [{"name": t, "format": "json", "schema": EVENT_SCHEMA, "time_field": "ts",
                    **({"expectations": expectations} if expectations else {})} for t in topics],
        "groups": {"g": {"topics": topics}},
        "spark": {"master": "local[2,4]"},
        "parquet": {"row_group_size": 1000},
        "airflow": {"catchup": False, **airflow},
    }
    path = tmp_path / "loader.yaml"
    path.write_text(yaml.safe_dump(raw))
    return str(path)


def run_dag(path: str, **conf):
    """Parse dags/ with the config (as `airflow dags test` does: the DagBag synced to the DB), then dag.test()."""
    from airflow.utils.cli import get_bagged_dag

    os.environ["LOGBUS_LOADER_CONFIG"] = path
    try:
        dag = get_bagged_dag(None, "logbus_load_g")
    finally:
        del os.environ["LOGBUS_LOADER_CONFIG"]
    dr = dag.test(run_conf=conf or None)
    states = {ti.task_id: ti.state for ti in dr.get_task_instances()}
    return dr, states


def asset_events(dag_id: str) -> list[tuple]:
    """(topic, hour, reopened) of the Asset events the DAG's complete task emitted."""
    from airflow.models.asset import AssetEvent
    from airflow.utils.session import create_session

    with create_session() as session:
        events = session.query(AssetEvent).filter(AssetEvent.source_dag_id == dag_id).all()
        return sorted((e.extra["topic"], e.extra["name"], e.extra["reopened"]) for e in events
                      if e.uri.startswith("logbus://"))


def store(tmp_path: Path) -> OffsetStore:
    return OffsetStore(LocalFS(f"file://{tmp_path / 'wh'}"))


def test_dagbag_imports_one_dag_per_group(airflow_db, tmp_path):
    path = tmp_path / "loader.yaml"
    raw = yaml.safe_load((ROOT / "conf" / "loader.yaml").read_text())
    raw["groups"]["more"] = {"topics": ["searches"], "schedule": "*/15 * * * *"}
    path.write_text(yaml.safe_dump(raw))
    code = f"""
import json, sys
from airflow.dag_processing.dagbag import DagBag
bag = DagBag(dag_folder={str(ROOT / 'dags')!r})
d = bag.get_dag("logbus_load_activity")
print(json.dumps({{"errors": {{k: str(v) for k, v in bag.import_errors.items()}}, "ids": sorted(bag.dag_ids),
                  "tasks": [t.task_id for t in d.tasks], "max_active_runs": d.max_active_runs, "catchup": d.catchup,
                  "schedules": {{i: bag.get_dag(i).timetable.expression for i in bag.dag_ids}},
                  "heavy": [m for m in ("pyspark", "great_expectations", "pyarrow") if m in sys.modules]}}))
"""
    env = dict(os.environ, LOGBUS_LOADER_CONFIG=str(path))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["errors"] == {}
    assert got["ids"] == ["logbus_compact", "logbus_load_activity", "logbus_load_logs", "logbus_load_more"]
    assert got["tasks"] == ["plan", "load", "audit", "validate", "commit", "complete", "report"]
    assert got["max_active_runs"] == 1 and got["catchup"] is False
    assert got["schedules"] == {"logbus_load_activity": "0 * * * *", "logbus_load_logs": "0 0 * * *",
                                "logbus_load_more": "*/15 * * * *", "logbus_compact": "0 0 * * *"}
    assert got["heavy"] == []  # no Spark, pyarrow or Great Expectations at import time


def test_end_to_end_then_incremental_then_rerun(airflow_db, spark, broker, tmp_path):
    topics = [new_topic("views"), new_topic("searches")]
    create_topics(broker.bootstrap, topics, 2)
    produced = {}
    for t in topics:
        produced.update(produce_events(broker.bootstrap, t, 2, 150))
    path = write_config(tmp_path, broker.bootstrap, topics)

    dr, states = run_dag(path)
    assert dr.state == "success", states
    assert set(states.values()) == {"success"}
    s = store(tmp_path)
    [first] = {m["run_id"] for t in topics for m in s.manifests(t)}
    for t in topics:
        [m] = s.manifests(t)
        assert [(p["partition"], p["start"], p["end"], p["count"]) for p in m["partitions"]] == [(0, 0, 150, 150), (1, 0, 150, 150)]
        v = json.loads((tmp_path / "wh" / t / "_validation" / first / "validation.json").read_text())
        assert v["success"] and v["failed"] == 0
        assert (tmp_path / "wh" / t / "_validation" / first / "docs" / "index.html").exists()
        rows = read_rows(tmp_path / "wh", t)
        assert sorted((r["partition"], r["offset"]) for r in rows) == sorted((p, i) for (tt, p, i) in produced if tt == t)

    # the events' hour closed with this load; audited beside it and declared: one Asset event per topic-hour
    hour = hour_name(1_768_000_000_000 // HOUR_MS)  # every event of tests.pipelines.helpers.event is in this hour
    assert asset_events(dr.dag_id) == sorted((t, hour, False) for t in topics)

    # the next run loads only what came after
    produce_events(broker.bootstrap, topics[0], 2, 50, start=150)
    dr, states = run_dag(path)
    assert dr.state == "success", states
    # ... of the same event hour, closed already: late, written into it (reopen), and the hour declared again
    assert asset_events(dr.dag_id) == sorted([(t, hour, False) for t in topics] + [(topics[0], hour, True)])
    second = max(m["run_id"] for m in s.manifests(topics[0]))
    assert second > first
    m2 = s.manifest(topics[0], second)
    assert [(p["start"], p["end"], p["count"]) for p in m2["partitions"]] == [(150, 200, 50), (150, 200, 50)]
    assert all(p["count"] == 0 for p in s.manifest(topics[1], second)["partitions"])

    # a rerun of the first run from its saved offsets reproduces its files byte for byte
    before = {f: f.read_bytes() for t in topics for f in data_files(tmp_path / "wh", t) if "+0+150." in f.name}
    assert len(before) == 4
    for f in before:
        f.unlink()
    dr, states = run_dag(path, rerun_run_id=first)
    assert dr.state == "success", states
    assert {f: f.read_bytes() for f in before} == before
    for t in topics:
        m = s.manifest(t, first)
        assert len(m["reruns"]) == 1 and m["reruns"][0]["records"] == 300
    assert {m["run_id"] for m in s.manifests(topics[0])} == {first, second}  # nothing new was committed


def test_failed_validation_leaves_offsets_uncommitted_and_the_next_run_reloads(airflow_db, spark, broker, tmp_path):
    from pipelines import airflow_tasks
    from pipelines.validation import ValidationFailed

    [t] = topics = [new_topic("views")]
    create_topics(broker.bootstrap, topics, 2)
    produce_events(broker.bootstrap, t, 2, 100)
    # a bad record: decodes fine, but breaks the topic's own expectation
    bad = {"member_id": -5, "page": "/bad", "ts": 1_768_000_500_000}
    produce(broker.bootstrap, [(t, 1, b"-5", json.dumps(bad).encode(), bad["ts"])])
    expectation = [{"expect_column_values_to_be_between": {"column": "member_id", "min_value": 0}}]
    path = write_config(tmp_path, broker.bootstrap, topics, expectations=expectation)

    dr, states = run_dag(path)
    assert dr.state == "failed"
    assert states["plan"] == "success" and states["load"] == "success" and states["validate"] == "failed"
    assert states["commit"] != "success" and states["report"] != "success"
    s = store(tmp_path)
    assert s.manifests(t) == []                       # offsets not committed
    [pending] = s.pending(t)
    v = json.loads((tmp_path / "wh" / t / "_validation" / pending / "validation.json").read_text())
    assert v["success"] is False
    assert [c["check"] for c in v["checks"] if not c["success"]] == [f"expectations[0] of topic {t} in the loader config"]
    # the failure names the expectation that failed
    try:
        airflow_tasks.validate_step(path, "g", {"run_id": pending, "mode": "load"})
        raise AssertionError("validation passed")
    except ValidationFailed as exc:
        assert "expect_column_values_to_be_between" in str(exc) and "1 unexpected" in str(exc)

    # the same cause, the same result: the range is loaded again and fails again
    dr, states = run_dag(path)
    assert dr.state == "failed" and states["validate"] == "failed"
    assert s.manifests(t) == [] and s.pending(t) == [pending]

    # the cause gone (the expectation widened to accept it): the next run loads that range and commits
    path = write_config(tmp_path, broker.bootstrap, topics,
                        expectations=[{"expect_column_values_to_be_between": {"column": "member_id", "min_value": -10}}])
    dr, states = run_dag(path)
    assert dr.state == "success", states
    [m] = s.manifests(t)
    assert m["run_id"] == pending
    assert [(p["partition"], p["start"], p["end"], p["count"]) for p in m["partitions"]] == [(0, 0, 100, 100), (1, 0, 101, 101)]
    assert len(read_rows(tmp_path / "wh", t)) == 201


def test_load_through_spark_submit(airflow_db, broker, tmp_path):
    [t] = topics = [new_topic("subm")]
    create_topics(broker.bootstrap, topics, 2)
    produce_events(broker.bootstrap, t, 2, 80)
    path = write_config(tmp_path, broker.bootstrap, topics, load="spark-submit")
    raw = yaml.safe_load(Path(path).read_text())
    raw["spark"]["master"] = "local[2]"
    Path(path).write_text(yaml.safe_dump(raw))
    dr, states = run_dag(path)
    assert dr.state == "success", states
    [m] = store(tmp_path).manifests(t)
    assert [p["count"] for p in m["partitions"]] == [80, 80]
    xcom = dr.get_task_instance("load").xcom_pull(task_ids="load")
    assert xcom["via"] == "spark-submit" and xcom["records"] == 160
