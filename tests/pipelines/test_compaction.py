"""Small-file compaction on a real broker and Spark local: five small loads of one closed hour are
merged; the rows read through the manifests stay the same, exactly once, whatever moment a
SIGKILL stops a compaction; a second compaction is a no-op; a rerun of a compacted run removes
its byte-identical files; the hour stays complete against its audit."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import yaml

from pipelines.audit import audit_committed
from pipelines.cli import main
from pipelines.compaction import compact_topic
from pipelines.completeness import COMPLETE, Completeness, declare_complete, hour_name
from pipelines.config import parse_config
from pipelines.faults import COMPACT_KILL_ENV
from pipelines.fs import LocalFS
from pipelines.loader import Loader
from pipelines.manifest import OffsetStore
from pipelines.writer import HOUR_MS
from tests.pipelines.helpers import create_topics, json_topic, loader_config, new_topic, produce

ROOT = Path(__file__).resolve().parents[2]
RUNS, PER_RUN = 5, 12


def _rows(warehouse: Path, topic: str) -> list[tuple]:
    """(partition, offset, member_id) of every live row, in the order the files hold them."""
    store = OffsetStore(LocalFS(f"file://{warehouse}"))
    out = []
    for path in store.live_files(topic):
        t = pq.read_table(warehouse / path, columns=["partition", "offset", "member_id"])
        out += list(zip(*(t.column(c).to_pylist() for c in ("partition", "offset", "member_id"))))
    return out


def _config_file(tmp_path: Path, name: str, bootstrap: str, warehouse: Path, topic: str) -> str:
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(loader_config(bootstrap, warehouse, [json_topic(topic, time_field="ts")])))
    return str(path)


@pytest.fixture(scope="module")
def loaded(module_broker, spark, tmp_path_factory):
    """A warehouse of RUNS small loads of one closed hour (2 partitions: 2 * RUNS files)."""
    tmp = tmp_path_factory.mktemp("compaction")
    topic = new_topic("small")
    create_topics(module_broker.bootstrap, [topic], 2)
    hour = int(time.time() * 1000) // HOUR_MS - 5
    warehouse = tmp / "wh"
    cfg = parse_config(loader_config(module_broker.bootstrap, warehouse, [json_topic(topic, time_field="ts")]))
    runs = []
    for r in range(RUNS):
        records = []
        for i in range(r * PER_RUN, (r + 1) * PER_RUN):
            ts = hour * HOUR_MS + i * 1000
            records.append((topic, i % 2, None, json.dumps({"member_id": i + 1, "page": "/p", "ts": ts}).encode(), ts))
        produce(module_broker.bootstrap, records, headers=False)
        with Loader(cfg, spark=spark) as loader:
            runs += [r.run_id for r in loader.run()]
    audit_committed(cfg)
    return {"bootstrap": module_broker.bootstrap, "topic": topic, "hour": hour, "warehouse": warehouse, "tmp": tmp,
            "runs": runs, "cfg": cfg}


def _copy(loaded: dict, name: str) -> tuple[Path, object]:
    warehouse = loaded["tmp"] / name
    shutil.copytree(loaded["warehouse"], warehouse)
    cfg = parse_config(loader_config(loaded["bootstrap"], warehouse, [json_topic(loaded["topic"], time_field="ts")]))
    return warehouse, cfg


def test_compaction_merges_an_hour_and_a_second_one_changes_nothing(loaded, spark, capsys):
    warehouse, cfg = _copy(loaded, "merge")
    topic, hour = loaded["topic"], loaded["hour"]
    before = _rows(warehouse, topic)
    assert len(before) == RUNS * PER_RUN and len(OffsetStore(LocalFS(cfg.warehouse)).live_files(topic)) == 2 * RUNS

    [dry] = compact_topic(cfg, topic, hour=hour, dry_run=True)
    assert (dry.files_before, dry.files_after) == (2 * RUNS, 2) and _rows(warehouse, topic) == before

    [done] = compact_topic(cfg, topic, hour=hour)
    live = OffsetStore(LocalFS(cfg.warehouse)).live_files(topic)
    assert (done.files_before, done.files_after, done.rows) == (2 * RUNS, 2, RUNS * PER_RUN)
    assert [Path(p).name for p in live] == [f"{topic}+0+0+{RUNS * PER_RUN // 2}.parquet",
                                            f"{topic}+1+0+{RUNS * PER_RUN // 2}.parquet"]
    after = _rows(warehouse, topic)
    assert sorted(after) == sorted(before) and after == sorted(after)  # the same rows, in (partition, offset) order
    assert sorted(p.name for p in (warehouse / topic).rglob("*.parquet") if "_" not in p.parent.name[:1]) == sorted(
        Path(p).name for p in live)  # the replaced files are gone
    files = {p: (warehouse / p).read_bytes() for p in live}
    [again] = compact_topic(cfg, topic, hour=hour)
    assert again.merges == [] and {p: (warehouse / p).read_bytes() for p in live} == files

    # the hour stays complete against its audit, and its check reads the compacted files
    assert declare_complete(cfg) and [s.status for s in Completeness(LocalFS(cfg.warehouse), topic, cfg.spec_for(topic)).statuses()] == [COMPLETE]

    # a rerun of a compacted run writes byte-identical files: they are removed, the rows stay once
    with Loader(cfg, spark=spark) as loader:
        loader.rerun(loaded["runs"][1])
    assert sorted(_rows(warehouse, topic)) == sorted(before)
    assert not [p for p in (warehouse / topic).rglob(f"{topic}+*+{PER_RUN // 2}+{PER_RUN}.parquet")]

    # one line for what cannot be done
    config = _config_file(loaded["tmp"], "merge", loaded["bootstrap"], warehouse, topic)
    assert main(["compact", "--config", config, "--topic", topic, "--hour", hour_name(hour + 6)]) != 0
    assert main(["compact", "--config", config, "--topic", topic, "--older-than", "1d", "--target-size", "big"]) != 0
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 2 and "is not closed yet" in err[0] and "--target-size: 'big' is not a size" in err[1], err


@pytest.mark.parametrize("point", ["after_rename", "after_manifest", "after_first_delete"])
def test_a_compaction_killed_at_any_step_leaves_the_rows_once(loaded, point):
    warehouse, cfg = _copy(loaded, f"kill-{point}")
    topic, hour = loaded["topic"], loaded["hour"]
    before = sorted(_rows(warehouse, topic))
    config = _config_file(loaded["tmp"], point, loaded["bootstrap"], warehouse, topic)
    proc = subprocess.run([sys.executable, "-m", "pipelines.cli", "compact", "--config", config, "--topic", topic,
                           "--hour", hour_name(hour)], env={**os.environ, COMPACT_KILL_ENV: point}, cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == -9, proc.stderr[-2000:]
    assert sorted(_rows(warehouse, topic)) == before  # either set is live, never both, never neither
    [done] = compact_topic(cfg, topic, hour=hour)  # recovers first, then finishes (or finds it finished)
    assert sorted(_rows(warehouse, topic)) == before
    assert len(OffsetStore(LocalFS(cfg.warehouse)).live_files(topic)) == 2
    assert not list((warehouse / topic / "_offsets").glob("*.compacting.json"))
    data = sorted(p.name for p in (warehouse / topic).rglob("*.parquet") if p.parent.name.startswith("hour="))
    assert len(data) == 2, data  # no leftover of the killed compaction
