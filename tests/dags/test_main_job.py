"""`make run`'s main job end to end (smaller stream): three brokers, the DAG through
`airflow dags test`, the summary checked against what was produced, the rerun; exit 0 and
nothing left running."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration  # starts ZooKeeper, three brokers, Spark and Airflow itself

ROOT = Path(__file__).resolve().parents[2]


def test_main_job_exits_0_and_its_summary_matches(tmp_path):
    work = tmp_path / "run"
    proc = subprocess.run([sys.executable, "-m", "pipelines.main_job", "--page-views", "3000", "--searches", "1000",
                           "--workdir", str(work)], cwd=ROOT, capture_output=True, text=True, timeout=420)
    out = proc.stdout
    assert proc.returncode == 0, out[-4000:] + proc.stderr[-2000:]
    assert "OK: every produced record is in the warehouse once" in out
    assert "MISMATCH" not in out
    rows = re.findall(r"^\s+(page-views|searches)\s+(\d+)\s+\[(\d+), (\d+)\)\s+([\d,]+)\s+([\d,]+)\s+([\d,]+)$", out, re.M)
    assert {r[0] for r in rows} == {"page-views", "searches"} and len(rows) == 7
    assert sum(int(r[4].replace(",", "")) for r in rows if r[0] == "page-views") == 3000
    assert sum(int(r[4].replace(",", "")) for r in rows if r[0] == "searches") == 1000
    assert all(r[4] == r[5] == r[6] and int(r[3]) == int(r[4].replace(",", "")) for r in rows)
    assert "validation passed" in out and "byte-identical to the first load" in out
    docs = re.findall(r"data docs: file://(\S+)", out)
    assert len(docs) == 2 and all(Path(d).exists() for d in docs)
    # everything it started is stopped: the cluster state file is gone with its processes
    assert not (work / "cluster" / "cluster.json").exists()
