"""What the warehouse_load DAG's tasks do: plan -> load -> validate -> commit -> report.

Plain functions of (config path, topic group, params), so they run (and are tested) without
Airflow; ``pipelines.dag_factory`` wraps each in an Airflow task. Nothing heavy is imported
here at module level: Spark, pyarrow and Great Expectations load inside the steps.

- plan: ``reset`` moves the selected topics first; ``rerun_run_id`` replays a saved run instead
  of planning; otherwise the pending run (a load that failed or did not validate) or a new plan.
- load: inline (Spark in this process, ``spark.master``) or ``spark-submit`` (``airflow.load``).
- validate: the Great Expectations suites (pipelines.validation); a failure fails the DAG run
  and nothing is committed, so the next run loads the same ranges again.
- commit: the manifests are written: the offsets move.
- report: rows per topic and partition, offset ranges, validation, where the files are.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pipelines.airflow_connection import as_overrides, child_environment, connection_props
from pipelines.config import LoaderConfig, load_config

CONFIG_ENV = "LOGBUS_LOADER_CONFIG"
ROOT = Path(__file__).resolve().parent.parent
log = logging.getLogger("logbus.airflow")


def config_path() -> str:
    """``$LOGBUS_LOADER_CONFIG``, else the repository's ``conf/loader.yaml``."""
    return os.environ.get(CONFIG_ENV) or str(ROOT / "conf" / "loader.yaml")


def _topics(params: Mapping[str, Any] | None) -> list[str] | None:
    value = (params or {}).get("topics")
    if not value:
        return None
    if isinstance(value, str):
        value = [t.strip() for t in value.split(",") if t.strip()]
    return list(value) or None


def group_config(path: str, group: str, params: Mapping[str, Any] | None = None) -> LoaderConfig:
    """The group's config; with ``airflow.kafka_conn_id``, the cluster keys of that Airflow connection
    override the file's (pipelines/airflow_connection.py)."""
    return load_config(path, as_overrides(_connection(path))).for_group(group, _topics(params))


def _connection(path: str) -> dict[str, str]:
    """The cluster keys of the config's Airflow connection ({} without ``airflow.kafka_conn_id``)."""
    conn_id = load_config(path).airflow.get("kafka_conn_id")
    return connection_props(str(conn_id)) if conn_id else {}


def plan_step(path: str, group: str, params: Mapping[str, Any] | None = None) -> dict:
    from pipelines.loader import Loader

    params = params or {}
    cfg = group_config(path, group, params)
    rerun_id = params.get("rerun_run_id")
    if rerun_id:
        log.info("rerun of run %s from its saved offsets (nothing new is planned or committed)", rerun_id)
        return {"run_id": str(rerun_id), "mode": "rerun", "group": group, "topics": _topics(params)}
    with Loader(cfg) as loader:
        if params.get("reset"):
            for topic in sorted(loader.cluster.describe()):
                if cfg.spec_for(topic) is not None:
                    doc = loader.reset(topic, str(params["reset"]))
                    log.info("reset %s to %s: %s", topic, params["reset"],
                             ", ".join(f"{p['partition']}:{p['next']}" for p in doc["partitions"]))
        plan = loader.plan()
        for topic, why in plan.skipped.items():
            log.info("%s: skipped (%s)", topic, why)
        if plan.unavailable:
            from pipelines.plan import incomplete_line

            log.warning("%s", incomplete_line(plan.run_id, plan.unavailable))
        log.info("run %s%s: %d topic(s), %d task(s), %d offsets", plan.run_id,
                 " (pending from an earlier run: loading it again)" if plan.resumed else "",
                 len(plan.topics), len(plan.tasks()), plan.offsets)
        return {"run_id": plan.run_id, "mode": "load", "group": group, "topics": _topics(params),
                "resumed": plan.resumed, "offsets": plan.offsets, "unavailable": plan.unavailable,
                "ranges": {t: [[p["partition"], p["start"], p["end"]] for p in d["partitions"]]
                           for t, d in plan.topics.items()}}


def _spark_submit(cfg: LoaderConfig) -> str:
    configured = cfg.airflow.get("spark_submit")
    if configured:
        return str(configured)
    import pyspark

    return str(Path(pyspark.__file__).parent / "bin" / "spark-submit")


def submit_command(path: str, group: str, info: Mapping[str, Any], cfg: LoaderConfig) -> list[str]:
    """``spark-submit --master <spark.master> ... pipelines/submit.py <load|rerun> ...``."""
    cmd = [_spark_submit(cfg), "--master", cfg.spark_master, "--name", f"{cfg.spark_app_name}-{group}"]
    for k, v in {"spark.ui.enabled": "false", "spark.sql.session.timeZone": "UTC", **cfg.spark_conf}.items():
        cmd += ["--conf", f"{k}={v}"]
    cmd += [str(a) for a in cfg.airflow.get("spark_submit_args") or []]
    cmd += [str(ROOT / "pipelines" / "submit.py"), "rerun" if info["mode"] == "rerun" else "load",
            "--config", path, "--group", group, "--run-id", info["run_id"], "--master", cfg.spark_master]
    if info.get("topics"):
        cmd += ["--topics", ",".join(info["topics"])]
    return cmd


def load_step(path: str, group: str, info: Mapping[str, Any]) -> dict:
    cfg = group_config(path, group, info)
    mode = cfg.airflow.get("load", "inline")
    if mode == "spark-submit":
        cmd = submit_command(path, group, info, cfg)
        env = {**os.environ, **child_environment(_connection(path))}
        env.setdefault("PYSPARK_PYTHON", sys.executable)
        env.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
        env["PYTHONPATH"] = str(ROOT) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        if cfg.spark_master.startswith("local"):
            env.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        log.info("spark-submit: %s", " ".join(cmd))
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
        for line in (proc.stdout + proc.stderr).splitlines()[-40:]:
            log.info("  %s", line)
        if proc.returncode != 0:
            last = [ln for ln in proc.stderr.splitlines() if ln.strip()][-1:] or [f"exit status {proc.returncode}"]
            raise RuntimeError(f"spark-submit of run {info['run_id']} failed: {last[0]}")
        result = json.loads([ln for ln in proc.stdout.splitlines() if ln.startswith("{")][-1])
        return {**result, "via": "spark-submit"}
    from pipelines.faults import LoadFaults
    from pipelines.loader import load_run, rerun

    if info["mode"] == "rerun":
        r = rerun(cfg, info["run_id"])
        return {"run_id": r.run_id, "records": r.records, "errors": r.errors,
                "duplicates_dropped": r.duplicates_dropped, "via": "inline"}
    results = load_run(cfg, info["run_id"], faults=LoadFaults.from_environment())  # none unless a test breaks it
    return {"run_id": info["run_id"], "records": sum(r.count for r in results),
            "errors": sum(r.errors for r in results), "duplicates_dropped": sum(r.duplicates_dropped for r in results),
            "via": "inline"}


def validate_step(path: str, group: str, info: Mapping[str, Any]) -> dict:
    """Raises ``pipelines.validation.ValidationFailed`` naming the failed checks."""
    from pipelines.validation import validate_run

    cfg = group_config(path, group, info)
    run = validate_run(cfg, info["run_id"])
    for t in run.topics:
        log.info("%s: validation passed (%d checks); Data Docs: %s", t.topic, len(t.checks), t.docs_path)
    return run.to_dict()


def commit_step(path: str, group: str, info: Mapping[str, Any]) -> dict:
    if info["mode"] == "rerun":
        log.info("rerun of %s: its offsets were committed by the original run; nothing to commit", info["run_id"])
        return {"run_id": info["run_id"], "committed": []}
    from pipelines.loader import commit_run

    manifests = commit_run(group_config(path, group, info), info["run_id"])
    for m in manifests:
        log.info("%s: committed %s (%s)", m["topic"], m["run_id"],
                 ", ".join(f"{p['partition']}:{p['start']}->{p['next']}" for p in m["partitions"]))
    return {"run_id": info["run_id"], "committed": [m["topic"] for m in manifests]}


def audit_step(path: str, group: str, info: Mapping[str, Any]) -> dict:
    """Count the planned ranges' records per event hour at the cluster (``pipelines.audit``), beside the load."""
    from pipelines.audit import audit_run

    cfg = group_config(path, group, info)
    counts = audit_run(cfg, info["run_id"], info.get("topics"))
    log.info("audited %d range(s), %d record(s)", len(counts), sum(c.records for c in counts))
    return {"run_id": info["run_id"], "ranges": len(counts), "records": sum(c.records for c in counts)}


def complete_step(path: str, group: str, info: Mapping[str, Any]) -> list[dict]:
    """Validate and declare the hours that became complete (``pipelines.completeness``); one dict per
    hour declared, for the Asset events."""
    from pipelines.completeness import declare_complete
    from pipelines.manifest import OffsetStore

    cfg = group_config(path, group, info)
    topics = [t for t in OffsetStore(cfg.warehouse_fs()).topics() if cfg.spec_for(t) is not None]
    declared = declare_complete(cfg, topics)
    for d in declared:
        log.info("%s %s: complete%s (%d rows, %d late) -> %s", d["topic"], d["name"], " again" if d["reopened"] else "",
                 d["rows"], d["late"], d["uri"])
    return declared


def compact_step(path: str) -> list[dict]:
    """The maintenance DAG's step: every loaded topic's closed hours older than ``compaction.older_than``."""
    from pipelines.compaction import compact_topic
    from pipelines.manifest import OffsetStore

    cfg = load_config(path)
    done = []
    for topic in OffsetStore(cfg.warehouse_fs()).topics():
        if cfg.spec_for(topic) is None or not OffsetStore(cfg.warehouse_fs()).has_history(topic):
            continue
        for r in compact_topic(cfg, topic, older_than_ms=cfg.compaction_older_than_ms):
            if r.merges:
                log.info("%s hour %d: %d -> %d files (%d rows) in %.1f s", topic, r.hour, r.files_before, r.files_after,
                         r.rows, r.seconds)
                done.append({"topic": topic, "hour": r.hour, "files_before": r.files_before,
                             "files_after": r.files_after, "rows": r.rows})
    return done


def summary(cfg: LoaderConfig, run_id: str) -> dict:
    """Rows per topic and partition, offset ranges, validation and locations of a committed run."""
    from pipelines.manifest import OffsetStore

    fs = cfg.warehouse_fs()
    store = OffsetStore(fs)
    out: dict[str, Any] = {"run_id": run_id, "warehouse": cfg.warehouse, "topics": {}}
    for topic in store.topics():
        if cfg.spec_for(topic) is None:
            continue
        m = store.manifest(topic, run_id)
        if m is None:
            continue
        try:
            v = json.loads(fs.read_bytes(f"{topic}/_validation/{run_id}/validation.json"))
        except (FileNotFoundError, ValueError):
            v = None
        out["topics"][topic] = {
            "partitions": [{"partition": p["partition"], "start": p["start"], "end": p["end"], "rows": p["count"],
                            "errors": p["errors"], "duplicates_dropped": p.get("duplicates_dropped", 0),
                            "files": len(p["files"])} for p in m["partitions"]],
            "rows": m["totals"]["records"], "status": m["status"], "reruns": len(m.get("reruns", [])),
            "validation": None if v is None else ("passed" if v["success"] else "FAILED"),
            "checks": None if v is None else v["evaluated"],
            "parquet": fs.uri(topic), "data_docs": None if v is None else v["docs"],
        }
    return out


def format_summary(s: Mapping[str, Any]) -> list[str]:
    lines = [f"run {s['run_id']} in {s['warehouse']}"]
    for topic, t in sorted(s["topics"].items()):
        lines.append(f"  {topic}: {t['rows']:,} rows, validation {t['validation']} ({t['checks']} checks)")
        for p in t["partitions"]:
            dropped = p.get("duplicates_dropped") or 0
            lines.append(f"    partition {p['partition']}: offsets [{p['start']}, {p['end']})  {p['rows']:,} rows"
                         f"{f'  {dropped:,} duplicate copies dropped' if dropped else ''}  {p['files']} file(s)")
        lines.append(f"    parquet:   {t['parquet']}")
        lines.append(f"    data docs: {t['data_docs']}")
    return lines


def report_step(path: str, group: str, info: Mapping[str, Any]) -> dict:
    s = summary(group_config(path, group, info), info["run_id"])
    s["mode"] = info["mode"]
    for line in format_summary(s):
        log.info("%s", line)
    if info.get("unavailable"):
        from pipelines.errors import IncompleteRunError
        from pipelines.plan import incomplete_line

        # what could be loaded is committed; the DAG run must not look complete
        raise IncompleteRunError(incomplete_line(info["run_id"], info["unavailable"]))
    return s
