"""The loader on a real Spark standalone cluster whose executors do not have logbus.

A master and one worker start from pyspark's jars; the executors run the environment packed by
``pipelines.pack_env`` (unpacked by Spark from ``spark.archives``), which holds the tasks'
dependencies but not logbus: the driver ships logbus' code itself (``pipelines.code_zip``).
``logbus load run --master spark://...`` then loads every record once, the worker SIGKILLed
mid-load and a second one taking over, into files byte-identical to a ``local[2]`` load of the
same ranges; the DAG's spark-submit load step works the same way; without the environment and the code the probe task
stops the run in seconds with one line.
"""

from __future__ import annotations

import filecmp
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from pipelines.code_zip import cache_dir
from pipelines.config import parse_config
from pipelines.executor_env import THIRD_PARTY
from pipelines.faults import LoadFaults
from pipelines.loader import Loader
from pipelines.pack_env import cached_env
from tests.jvm import spark_jvm_options
from tests.pipelines.helpers import create_topics, data_files, json_topic, loader_config, new_topic, produce_events, read_rows
from tests.pipelines.spark_standalone import StandaloneCluster, clean_env

pytestmark = pytest.mark.integration

EXECUTOR_CONF = {"spark.executor.memory": "512m", "spark.cores.max": "2", "spark.task.maxFailures": "4",
                 "spark.driver.memory": "512m", "spark.executor.extraJavaOptions": spark_jvm_options()}


@pytest.fixture(scope="session")
def packed_env() -> Path:
    """The executors' environment (no logbus in it), packed once and kept across sessions."""
    return cached_env(cache_dir() / "test-envs")


@pytest.fixture(scope="module")
def standalone(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StandaloneCluster]:
    cluster = StandaloneCluster(tmp_path_factory.mktemp("spark-standalone"))
    try:
        yield cluster.start(workers=1, cores=2, memory="1g")
    finally:
        cluster.stop()


def _load_cli(config: dict, path: Path, master: str, timeout: float = 240) -> subprocess.CompletedProcess:
    """``logbus load run --master ...`` as a user runs it (no PYTHONPATH: the driver's own install)."""
    path.write_text(yaml.safe_dump(config))
    return subprocess.run([sys.executable, "-m", "pipelines.cli", "run", "--config", str(path), "--master", master,
                           "--quiet"], env=clean_env(), capture_output=True, text=True, timeout=timeout)


def _missing_from(python: str) -> list[str]:
    """The tasks' third-party modules ``python`` cannot find (what the probe must name)."""
    code = ("import importlib.util, sys\n"
            "for m in sys.argv[1:]:\n"
            "    if importlib.util.find_spec(m.split('.')[0]) is None: print(m.split('.')[0])")
    modules = [n.module for n in THIRD_PARTY if n.writer in (None, "python")]  # the probe of parquet.writer: python
    out = subprocess.run([python, "-c", code, *modules], capture_output=True, text=True, check=True)
    return out.stdout.split()


def test_cluster_load_equals_local_load(broker, spark, standalone, packed_env, tmp_path: Path):
    """Every record once, the worker SIGKILLed mid-load and a second one taking over, and the
    files byte-identical to a local[2] load of the same ranges."""
    topic = new_topic("cluster")
    create_topics(broker.bootstrap, [topic], 4)
    produced = produce_events(broker.bootstrap, topic, 4, 500)
    spec = [json_topic(topic, time_field="ts")]
    on_cluster = loader_config(broker.bootstrap, tmp_path / "cluster", spec, max_range_records=250,
                               fetch={"max.bytes": 4096}, spark={
        "archives": [f"{packed_env}#environment"], "python_env": "./environment/bin/python", "conf": EXECUTOR_CONF})
    path = tmp_path / "cluster.yaml"
    path.write_text(yaml.safe_dump(on_cluster))
    slow = LoadFaults(fetch_delay_ms=150).environment()  # ~2 s per range: the kill lands mid-load
    out, err = tmp_path / "cluster.out", tmp_path / "cluster.err"
    with open(out, "w") as stdout, open(err, "w") as stderr, subprocess.Popen(
            [sys.executable, "-m", "pipelines.cli", "run", "--config", str(path), "--master", standalone.url, "--quiet"],
            env=clean_env(**slow), stdout=stdout, stderr=stderr) as proc:
        try:
            deadline = time.monotonic() + 120
            while not data_files(tmp_path / "cluster", topic):  # a first range committed
                assert proc.poll() is None and time.monotonic() < deadline, err.read_text()[-3000:]
                time.sleep(0.2)
            standalone.daemons[1].kill()  # the worker, its executor and their Python workers
            assert proc.poll() is None, "the load ended before the worker was killed"
            standalone.add_worker("takeover")
            proc.wait(180)
        finally:
            if proc.poll() is None:
                proc.kill()
    assert proc.returncode == 0, err.read_text()[-3000:]
    assert "2,000 records" in out.read_text()
    assert list(standalone.home.glob("takeover/app-*")), "no executor ran on the second worker"

    rows = read_rows(tmp_path / "cluster", topic)
    keys = [(r["partition"], r["offset"]) for r in rows]
    assert len(keys) == len(set(keys)) == len(produced)  # every record, once
    assert {(r["partition"], r["member_id"]) for r in rows} == {(p, e["member_id"]) for (_, p, _), e in produced.items()}

    with Loader(parse_config(loader_config(broker.bootstrap, tmp_path / "local", spec, max_range_records=250))) as loader:
        assert sum(r.records for r in loader.run()) == len(produced)  # the module's local[2,4] session
    cluster_files = [p.relative_to(tmp_path / "cluster") for p in data_files(tmp_path / "cluster", topic)]
    local_files = [p.relative_to(tmp_path / "local") for p in data_files(tmp_path / "local", topic)]
    assert cluster_files == local_files and len(cluster_files) >= 8  # 4 partitions, 2 ranges each, in 1 hour
    for rel in cluster_files:
        assert filecmp.cmp(tmp_path / "cluster" / rel, tmp_path / "local" / rel, shallow=False), rel


def test_probe_fails_fast_in_one_line(broker, standalone, tmp_path: Path):
    topic = new_topic("noenv")
    create_topics(broker.bootstrap, [topic], 1)
    produce_events(broker.bootstrap, topic, 1, 10)
    # the bare interpreter: no numpy, no pyarrow, no codecs, and no logbus code shipped
    config = loader_config(broker.bootstrap, tmp_path / "wh", [json_topic(topic)], spark={
        "python_env": sys._base_executable, "ship_code": False, "conf": EXECUTOR_CONF})
    started = time.monotonic()
    proc = _load_cli(config, tmp_path / "noenv.yaml", standalone.url, timeout=120)
    seconds = time.monotonic() - started
    assert proc.returncode == 1, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr and "failed 4 times" not in proc.stderr, proc.stderr[-3000:]
    errors = [ln for ln in proc.stderr.splitlines() if ln.startswith("logbus load: error:")]
    assert len(errors) == 1, proc.stderr[-3000:]
    line = errors[0]
    assert f"executors of {standalone.url}" in line
    for name in [*_missing_from(sys._base_executable), "pipelines"]:
        assert f" {name}" in line, (name, line)
    assert "logbus load pack-env" in line and "spark.ship_code: true" in line
    assert seconds < 60, seconds


def test_spark_submit_mode_ships_code_and_env(broker, standalone, packed_env, tmp_path: Path):
    """The DAG's ``airflow.load: spark-submit`` step on the cluster: the driver under spark-submit
    ships the same code zip and points the executors at the same packed environment."""
    from pipelines.airflow_tasks import commit_step, load_step, plan_step

    topic = new_topic("submit")
    create_topics(broker.bootstrap, [topic], 2)
    produced = produce_events(broker.bootstrap, topic, 2, 150)
    config = loader_config(broker.bootstrap, tmp_path / "wh", [json_topic(topic)], airflow={"load": "spark-submit"},
                           spark={"master": standalone.url, "archives": [f"{packed_env}#environment"],
                                  "python_env": "./environment/bin/python", "conf": EXECUTOR_CONF})
    path = tmp_path / "submit.yaml"
    path.write_text(yaml.safe_dump(config))
    info = plan_step(str(path), "all")
    loaded = load_step(str(path), "all", info)
    assert loaded["via"] == "spark-submit" and loaded["records"] == len(produced) and loaded["master"] == standalone.url
    commit_step(str(path), "all", info)
    rows = read_rows(tmp_path / "wh", topic)
    assert sorted((r["partition"], r["offset"]) for r in rows) == [(p, i) for p in range(2) for i in range(150)]
