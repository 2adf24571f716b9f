"""The load DAG under a real Airflow scheduler (LocalExecutor, separate scheduler, dag-processor
and api-server on a fresh AIRFLOW_HOME), triggered with ``airflow dags trigger``: the load task
SIGKILLed mid-run is retried by Airflow and the warehouse holds each record once; a rerun
triggered with the rerun params rewrites the same bytes."""

from __future__ import annotations

import hashlib
import os
import signal

import pytest
import yaml

from pipelines.faults import LoadFaults
from pipelines.fs import LocalFS
from pipelines.manifest import OffsetStore
from tests.dags.airflow_deployment import AirflowDeployment
from tests.pipelines.helpers import create_topics, data_files, json_topic, loader_config, new_topic, produce_events, read_rows
from tests.waiting import wait_until

pytestmark = pytest.mark.integration
DAG = "logbus_load_g"


@pytest.fixture
def broker(module_broker):
    return module_broker


def test_killed_load_task_is_retried_by_the_scheduler_and_a_triggered_rerun_matches(broker, tmp_path):
    t = new_topic("sched")
    create_topics(broker.bootstrap, [t], 2)
    produced = produce_events(broker.bootstrap, t, 2, 600)
    wh = tmp_path / "wh"
    raw = loader_config(broker.bootstrap, wh, [json_topic(t, time_field="ts")], max_range_records=200,
                        groups={"g": {"topics": [t]}}, schedule="none", compaction={"schedule": "none"},
                        airflow={"retries": 2, "retry_delay": "1s"})
    raw["spark"]["master"] = "local[2]"
    config = tmp_path / "loader.yaml"
    config.write_text(yaml.safe_dump(raw))
    slow = LoadFaults(fetch_delay_ms=150).environment()  # the load takes seconds: time to kill it mid-way

    with AirflowDeployment(tmp_path / "airflow", str(config), slow) as af:
        af.start([DAG])
        af.cli("dags", "unpause", DAG)
        af.trigger(DAG, "first")

        def load_running_with_a_file() -> dict | None:
            ti = af.task(DAG, "first", "load")
            return ti if ti.get("state") == "running" and ti.get("pid") and data_files(wh, t) else None

        ti = wait_until(load_running_with_a_file, 120, 0.05, "the load task's first committed file")
        assert isinstance(ti, dict) and ti["try_number"] == 1
        os.kill(ti["pid"], signal.SIGKILL)

        assert af.wait_run(DAG, "first") == "success", af.log_tail("scheduler")
        states = {task: af.task(DAG, "first", task) for task in ("plan", "load", "validate", "commit", "complete")}
        assert {k: v["state"] for k, v in states.items()} == dict.fromkeys(states, "success")
        assert states["load"]["try_number"] == 2  # the killed attempt, then Airflow's retry
        rows = read_rows(wh, t)
        assert sorted((r["partition"], r["offset"]) for r in rows) == sorted((p, i) for (_, p, i) in produced)
        [m] = OffsetStore(LocalFS(f"file://{wh}")).manifests(t)
        assert [(p["partition"], p["start"], p["end"], p["count"]) for p in m["partitions"]] == [(0, 0, 600, 600),
                                                                                                 (1, 0, 600, 600)]

        # the same run again from its saved offsets, with the rerun params of `airflow dags trigger -c`
        files = data_files(wh, t)
        before = {f: hashlib.sha256(f.read_bytes()).hexdigest() for f in files}
        for f in files:
            f.unlink()
        af.trigger(DAG, "rerun", {"rerun_run_id": m["run_id"]})
        assert af.wait_run(DAG, "rerun") == "success", af.log_tail("scheduler")
        assert {f: hashlib.sha256(f.read_bytes()).hexdigest() for f in before} == before
        assert [x["run_id"] for x in OffsetStore(LocalFS(f"file://{wh}")).manifests(t)] == [m["run_id"]]
