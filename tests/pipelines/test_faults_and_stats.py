"""The loader's fault seam and its typed task stats, without a cluster: no faults by default,
each fault where it is asked for, and stats that survive pickling (Spark) and JSON (Airflow)."""

from __future__ import annotations

import json
import os
import pickle

import pytest

from pipelines.faults import FAULTS_ENV, NO_FAULTS, LoadFaults
from pipelines.task import RangeTask, TaskContext, new_stats
from pipelines.task_stats import TaskStats

TASK = RangeTask(index=3, run_id="r", topic="t", partition=1, start=10, end=20, spec={})


def test_no_faults_by_default(tmp_path, monkeypatch):
    monkeypatch.delenv(FAULTS_ENV, raising=False)
    ctx = TaskContext(brokers=("127.0.0.1:1",), warehouse=f"file://{tmp_path}")
    assert ctx.faults is NO_FAULTS and LoadFaults.from_environment() is NO_FAULTS
    NO_FAULTS.before_fetch()
    NO_FAULTS.after_first_file(TASK)
    NO_FAULTS.before_manifest()  # the test process is still alive
    assert list(tmp_path.iterdir()) == []


def test_fail_after_write_fails_each_range_once(tmp_path):
    faults = LoadFaults(fail_after_write=str(tmp_path / "markers"))
    with pytest.raises(RuntimeError, match=r"t-1 \[10, 20\)"):
        faults.after_first_file(TASK)
    faults.after_first_file(TASK)  # the retry goes through
    assert [p.name for p in (tmp_path / "markers").iterdir()] == ["t+1+10+20"]


def test_faults_cross_to_a_process_and_to_an_executor(monkeypatch):
    faults = LoadFaults(kill_before_manifest=True, fetch_delay_ms=5)
    monkeypatch.setitem(os.environ, FAULTS_ENV, faults.environment()[FAULTS_ENV])
    assert LoadFaults.from_environment() == faults
    ctx = TaskContext(brokers=("127.0.0.1:1",), warehouse="file:///tmp", faults=faults)
    assert pickle.loads(pickle.dumps(ctx)).faults == faults


def test_task_stats_survive_pickle_and_json():
    stats = new_stats(TASK, attempt=1)
    assert (stats.index, stats.topic, stats.partition, stats.start, stats.end, stats.attempt) == (3, "t", 1, 10, 20, 1)
    full = TaskStats(index=3, topic="t", partition=1, start=10, end=20, count=9, errors=1, bytes=100,
                     files=({"path": "t/x.parquet", "rows": 9, "bytes": 100},), min_ts=1, max_ts=2, gaps=((10, 11),),
                     seconds=0.5)
    assert pickle.loads(pickle.dumps(full)) == full
    assert TaskStats.from_json(json.loads(json.dumps(full.to_json()))) == full
    with pytest.raises(AttributeError):
        full.count = 0  # type: ignore[misc]
