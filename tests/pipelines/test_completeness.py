"""Provably complete hours on a real broker and Spark local: events over three hours, some of the
first hour produced after it was loaded; with each late_data policy the late rows land where the
policy says, the loads' counts match the audit taken at the cluster, and hours go complete ->
reopened -> complete, also when the run bringing the late rows was killed before its commit and
finished by the next one. Undecodable event times go to _errors and count as unknown hours."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pyarrow.parquet as pq

from broker.cli import main as cli
from pipelines.audit import audit_run
from pipelines.cli import main
from pipelines.completeness import COMPLETE, INCOMPLETE, REOPENED, Completeness, declare_complete
from pipelines.config import parse_config
from pipelines.fs import LocalFS
from pipelines.loader import Loader
from pipelines.manifest import OffsetStore
from pipelines.writer import HOUR_MS
from tests.pipelines.helpers import create_topics, json_topic, loader_config, new_topic, produce, read_rows

PER_HOUR = 40
LATENESS_H = 2


def _events(topic: str, hour: int, first: int, n: int) -> list[tuple]:
    out = []
    for i in range(first, first + n):
        ts = hour * HOUR_MS + i * 1000
        value = json.dumps({"member_id": i + 1, "page": f"/{hour}/{i}", "ts": ts}).encode()
        out.append((topic, i % 2, None, value, ts))
    return out


def _hour_rows(warehouse: Path, topic: str, hour: int) -> int:
    return sum(1 for r in read_rows(warehouse, topic) if int(r["ts"].timestamp() * 1000) // HOUR_MS == hour)


def test_late_data_policies_audit_and_completeness(broker, spark, tmp_path, capsys):
    # hours 1 and 2 close with the first load (they ended more than allowed_lateness before it); hour 3
    # (three hours later) stays open: it ends less than allowed_lateness before any plan of this test, even
    # one made after the clock passed the next hour
    H1 = int(time.time() * 1000) // HOUR_MS - 4
    topics = {policy: new_topic(f"late-{policy}") for policy in ("reopen", "separate", "drop")}
    create_topics(broker.bootstrap, list(topics.values()), 2)
    warehouse = tmp_path / "wh"
    specs = [json_topic(t, time_field="ts", late_data={"allowed_lateness": f"{LATENESS_H}h", "policy": policy})
             for policy, t in topics.items()]
    cfg = parse_config(loader_config(broker.bootstrap, warehouse, specs, max_error_ratio=0.5))
    fs = LocalFS(f"file://{warehouse}")

    # run 1: hours 1 and 2, and two records whose event time cannot be read
    for t in topics.values():
        produce(broker.bootstrap, _events(t, H1, 0, PER_HOUR) + _events(t, H1 + 1, 0, PER_HOUR)
                + [(t, 0, None, b'{"member_id": 1, "page": "/x"}', None), (t, 1, None, b'{"member_id": 2, "ts": "soon"}', None)],
                headers=False)
    with Loader(cfg, spark=spark) as loader:
        [first] = loader.run()
    assert first.errors == 3 * 2
    for t in topics.values():
        comp = Completeness(fs, t, cfg.spec_for(t))
        before = {st.hour: st.status for st in comp.statuses()}
        assert before == {H1: INCOMPLETE, H1 + 1: INCOMPLETE}  # closed, but not audited yet
        assert all("not audited" in w for st in comp.statuses() for w in st.why)
    config = _write(tmp_path, cfg, specs)
    assert cli(["audit", "--config", config]) == 0  # logbus audit: the committed ranges not audited yet
    audit_dir = warehouse / "_audit" / topics["reopen"]
    first_bytes = {p.name: p.read_bytes() for p in audit_dir.iterdir()}
    assert len(first_bytes) == 2  # one count per range
    for p in audit_dir.iterdir():
        p.unlink()
    assert cli(["audit", "--config", config, "--run-id", first.run_id, "--topic", topics["reopen"]]) == 0
    assert {p.name: p.read_bytes() for p in audit_dir.iterdir()} == first_bytes  # reproducible, byte for byte
    assert cli(["audit", "--config", config, "--run-id", "20200101T000000000Z"]) == 1
    assert cli(["audit", "--config", config, "--topic", "nope"]) == 1
    err = capsys.readouterr().err.splitlines()
    assert err[-2:] == ["logbus audit: error: no run '20200101T000000000Z' in file://" + str(warehouse)
                        + " (see `logbus load history`)",
                        "logbus audit: error: topic 'nope' is not in the loader config's topics"], err[-2:]
    declared = declare_complete(cfg)
    assert sorted((d["topic"], d["hour"], d["reopened"]) for d in declared) == sorted(
        (t, h, False) for t in topics.values() for h in (H1, H1 + 1))
    for t in topics.values():
        [m] = OffsetStore(fs).manifests(t)
        unknown = sum(p["hours"].get("none", {}).get("errors", 0) for p in m["partitions"])
        assert unknown == 2  # the missing and the unparsable event time: in _errors, counted as unknown hours
        assert {st.hour: (st.status, st.rows, st.audited) for st in Completeness(fs, t, cfg.spec_for(t)).statuses()} == {
            H1: (COMPLETE, PER_HOUR, PER_HOUR), H1 + 1: (COMPLETE, PER_HOUR, PER_HOUR)}

    # run 2: hour 3 (not late: still open), and 10 more records of hour 1, which closed with run 1: late
    for t in topics.values():
        produce(broker.bootstrap, _events(t, H1 + 3, 0, PER_HOUR) + _events(t, H1, PER_HOUR, 10), headers=False)
    with Loader(cfg, spark=spark) as loader:
        pending = loader.plan()  # loaded, never committed: what a run killed before its manifest leaves
        loader.load(pending)
    audit_run(cfg, pending.run_id)  # as Airflow's audit task does, beside the load: the planned ranges
    with Loader(cfg, spark=spark) as loader:
        second, _ = loader.run()  # finishes the pending run from its committed files (their footers' counts)
    assert second.run_id == pending.run_id and second.resumed
    for policy, t in topics.items():
        st = {s.hour: s for s in Completeness(fs, t, cfg.spec_for(t)).statuses()}
        assert st[H1].status == REOPENED and st[H1].late == 10 and st[H1].audited == PER_HOUR + 10, st[H1]
        assert st[H1 + 3].status == INCOMPLETE and st[H1 + 3].late == 0 and "open in partition(s) 0, 1" in st[H1 + 3].why[0]
        in_hour = _hour_rows(warehouse, t, H1)
        assert in_hour == (PER_HOUR + 10 if policy == "reopen" else PER_HOUR)
        late_files = sorted((warehouse / t / "_late").rglob("*.parquet")) if (warehouse / t / "_late").exists() else []
        if policy == "separate":
            late = pq.read_table(late_files).to_pylist()
            assert len(late) == 10 and {int(r["intended_hour"].timestamp() * 1000) // HOUR_MS for r in late} == {H1}
            assert late_files[0].parent.name == f"hour={second.plan.planned_ms // HOUR_MS % 24:02d}"
        else:
            assert late_files == []
        m = OffsetStore(fs).manifest(t, second.run_id)
        assert m["totals"]["late"] == 10 and (sum(len(p["late_offsets"]) for p in m["partitions"]) > 0) == (policy != "reopen")

    code = main(["completeness", "--config", config, "--topic", topics["drop"]])
    out = capsys.readouterr().out
    assert code == 0 and "reopened" in out and "late record(s) since it was declared complete" in out, out

    declared = declare_complete(cfg)
    assert sorted((d["topic"], d["hour"], d["reopened"]) for d in declared) == sorted((t, H1, True) for t in topics.values())
    for t in topics.values():
        statuses = Completeness(fs, t, cfg.spec_for(t)).statuses()
        assert [(s.status, s.declared) for s in statuses] == [(COMPLETE, 2), (COMPLETE, 1), (INCOMPLETE, 0)]
    assert declare_complete(cfg) == []  # nothing changed: nothing to declare


def _write(tmp_path: Path, cfg, specs) -> str:
    import yaml

    path = tmp_path / "loader.yaml"
    path.write_text(yaml.safe_dump(loader_config(cfg.bootstrap_servers, Path(cfg.warehouse[len("file://"):]), specs)))
    return str(path)
