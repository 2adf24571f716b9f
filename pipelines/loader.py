"""The loader's Python API (what `logbus load` and the Airflow DAGs call).

    from pipelines.loader import Loader, load_config
    with Loader(load_config("conf/loader.yaml")) as loader:
        for result in loader.run():            # finish any pending run, then plan -> load -> commit
            print(result.run_id, result.records)

Split into steps (Airflow: plan -> load -> validate -> commit; offsets move only at commit):

    run_id = plan_run("conf/loader.yaml")       # writes the plan (or returns the pending one)
    load_run("conf/loader.yaml", run_id)        # Spark: fetch + write files; stats saved as .loaded.json
    ...validate...
    commit_run("conf/loader.yaml", run_id)      # writes the manifests: the offsets move

Also ``rerun(run_id)``, ``history()``, ``reset(topic, to)`` and ``preview()``.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, TextIO

from pipelines.compaction import reconcile_rerun
from pipelines.config import ConfigError, LoaderConfig, ResetPolicy, load_config, parse_reset
from pipelines.errors import LoadError, OutOfRangeError
from pipelines.faults import NO_FAULTS, LoadFaults
from pipelines.manifest import OffsetStore, build_manifest, new_run_id, now_ms, result_from_scan, totals
from pipelines.metrics_push import push_run
from pipelines.origin_index import OriginIndex
from pipelines.plan import Cluster, Plan, incomplete_line, make_plan, plan_from_docs
from pipelines.task import RangeTask, TaskContext
from pipelines.task_stats import EMPTY, LOADED, TaskStats

if TYPE_CHECKING:
    from pipelines.fs import WarehouseFS
    from pipelines.validation import RunValidation

__all__ = [
    "Loader", "RunResult", "LoadError", "OutOfRangeError", "ConfigError", "load_config",
    "run", "plan_run", "load_run", "commit_run", "rerun", "history", "reset", "preview",
]

@dataclass
class RunResult:
    run_id: str
    plan: Plan
    results: list[TaskStats] = field(default_factory=list)
    manifests: list[dict] = field(default_factory=list)
    seconds: float = 0.0
    resumed: bool = False
    kind: str = "load"
    validation: RunValidation | None = None  # with ``run(validate=True)``: what the suites found

    @property
    def records(self) -> int:
        return sum(r.count for r in self.results)

    @property
    def errors(self) -> int:
        return sum(r.errors for r in self.results)

    @property
    def bytes(self) -> int:
        return sum(r.bytes for r in self.results)

    @property
    def duplicates_dropped(self) -> int:
        return sum(r.duplicates_dropped for r in self.results)

    def partition_rows(self) -> list[dict]:
        """One summary row per topic-partition (what the CLI's table shows)."""
        rows: dict[tuple[str, int], dict] = {}
        for p in self.plan.rows():
            rows[(p["topic"], p["partition"])] = {
                "topic": p["topic"], "partition": p["partition"], "start": p["start"], "end": p["end"],
                "tasks": sum(1 for s, e in p["ranges"] if e > s), "records": 0, "errors": 0, "duplicates": 0, "bytes": 0,
                "files": 0, "min_ts": None, "max_ts": None, "seconds": 0.0,
                "gap": f"{p['gap'][0]}..{p['gap'][1]}" if p.get("gap") else None,
                "status": EMPTY if p["end"] <= p["start"] else LOADED}
        for r in self.results:
            row = rows.get((r.topic, r.partition))
            if row is None:
                continue
            row["records"] += r.count
            row["errors"] += r.errors
            row["duplicates"] += r.duplicates_dropped
            row["bytes"] += r.bytes
            row["files"] += len(r.files)
            row["seconds"] = max(row["seconds"], r.seconds or 0.0)
            for k, value, fn in (("min_ts", r.min_ts, min), ("max_ts", r.max_ts, max)):
                if value is not None:
                    row[k] = value if row[k] is None else fn(row[k], value)
            if r.gaps:
                row["gap"] = ", ".join(f"{a}..{b}" for a, b in r.gaps)
            if r.status != LOADED:
                row["status"] = r.status
        return [rows[k] for k in sorted(rows)]


class Loader:
    """Plans, loads and commits runs of one loader configuration."""

    def __init__(self, config: LoaderConfig, spark=None, progress: TextIO | None = None,
                 faults: LoadFaults = NO_FAULTS) -> None:
        self.config, self.progress, self.faults = config, progress, faults
        self._spark, self._own_spark = spark, False
        self._fs: WarehouseFS | None = None
        self._store: OffsetStore | None = None
        self._cluster: Cluster | None = None

    # --- resources -----------------------------------------------------------------------------
    @property
    def spark(self):
        if self._spark is None:
            from pyspark.sql import SparkSession

            active = SparkSession.getActiveSession() or SparkSession._instantiatedSession
            if active is not None:  # inside a job or a test that owns the session: use it, never stop it
                self._spark = active
            else:
                from pipelines.job import make_spark

                self._spark = make_spark(self.config)
                self._own_spark = True
        return self._spark

    @property
    def fs(self) -> WarehouseFS:
        if self._fs is None:
            # hdfs:// plans and manifests: WebHDFS when its address is configured, else Spark's client
            needs_spark = self.config.warehouse.startswith("hdfs://") and not self.config.webhdfs_address
            self._fs = self.config.warehouse_fs(spark=self.spark if needs_spark else None)
        return self._fs

    @property
    def store(self) -> OffsetStore:
        if self._store is None:
            self._store = OffsetStore(self.fs)
        return self._store

    @property
    def cluster(self) -> Cluster:
        if self._cluster is None:
            self._cluster = Cluster(self.config)
        return self._cluster

    def close(self) -> None:
        if self._cluster is not None:
            self._cluster.close()
            self._cluster = None
        if self._own_spark and self._spark is not None:
            self._spark.stop()
            self._spark = None

    def __enter__(self) -> Loader:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _say(self, line: str) -> None:
        if self.progress is not None:
            print(line, file=self.progress, flush=True)

    # --- planning ------------------------------------------------------------------------------
    def _known_topics(self) -> list[str]:
        return [t for t in self.store.topics() if any(s.matches(t) for s in self.config.topics)]

    def pending_runs(self) -> list[Plan]:
        """Planned runs with no committed manifest, oldest first (grouped over topics)."""
        by_run: dict[str, dict[str, dict]] = {}
        for topic in self._known_topics():
            last_reset = max((m["run_id"] for m in self.store.manifests(topic) if m.get("kind") == "reset"), default="")
            for run_id in self.store.pending(topic):
                if run_id < last_reset:
                    continue  # a reset since then: that plan is abandoned
                doc = self.store.plan(topic, run_id)
                if doc is not None:
                    by_run.setdefault(run_id, {})[topic] = doc
        return [plan_from_docs(run_id, docs, resumed=True) for run_id, docs in sorted(by_run.items())]

    def _rebuild_lost(self) -> None:
        """Topics whose ``_offsets`` lost every manifest (and plan) but have data: rebuild from the files."""
        for topic in self._known_topics():
            if not self.store.all_run_ids(topic):
                doc = self.store.rebuild_manifest(topic)
                if doc is not None:
                    self._say(f"{topic}: no manifest found; offsets rebuilt from {doc['totals']['files']} committed files")

    def preview(self) -> tuple[list[Plan], Plan]:
        """(pending runs that the next run finishes first, the plan of the new run) — nothing written."""
        return self.pending_runs(), make_plan(self.config, self.cluster, self.store)

    def plan(self) -> Plan:
        """The pending run (if any), else a new plan, written to every topic's ``_offsets`` first."""
        self._rebuild_lost()
        pending = self.pending_runs()
        if pending:
            return pending[0]
        plan = make_plan(self.config, self.cluster, self.store)
        for doc in plan.topics.values():
            self.store.write_plan(doc)
        return plan

    # --- loading -------------------------------------------------------------------------------
    def _context(self, progress_addr=None) -> TaskContext:
        return TaskContext(
            brokers=self.cluster.brokers, warehouse=self.config.warehouse, webhdfs_user=self.config.webhdfs_user,
            fetch_max_bytes=self.config.fetch_max_bytes, request_timeout_ms=self.config.request_timeout_ms,
            out_of_range=self.config.out_of_range, compression=self.config.parquet_compression,
            row_group_size=self.config.row_group_size, progress_addr=progress_addr,
            faults=self.faults, security=self.config.security,
        )

    def load(self, plan: Plan, tasks: list[RangeTask] | None = None) -> list[TaskStats]:
        """Run the plan's ranges as Spark tasks (only ``tasks`` if given); returns their stats."""
        tasks = plan.tasks() if tasks is None else tasks
        if not tasks:
            return []
        from pipelines.progress import ProgressServer

        if self.config.parquet_writer == "spark":  # hdfs://, or asked for: Spark's Hadoop client writes the data
            from pipelines.hadoop_writer import load_ranges as run_tasks
        else:
            from pipelines.job import run_tasks
        spark = self.spark
        from pipelines.probe import probe_executors

        probe_executors(spark, self.config.spark_probe_timeout_ms, self.config.parquet_writer)  # fail in seconds
        if self.progress is not None:
            host = spark.sparkContext.getConf().get("spark.driver.host", "127.0.0.1")
            with ProgressServer(tasks, out=self.progress, host=host) as server:
                return run_tasks(spark, tasks, self._context(server.address), f"logbus load {plan.run_id}")
        return run_tasks(spark, tasks, self._context(None), f"logbus load {plan.run_id}")

    def load_pending(self, plan: Plan) -> list[TaskStats]:
        """Finish a pending run: ranges whose files are all committed are taken from their footers,
        the others are loaded again (same names, so nothing is duplicated)."""
        results: list[TaskStats] = []
        todo: list[RangeTask] = []
        for topic in plan.topics:
            loaded = self.store.loaded(topic, plan.run_id)
            if loaded is not None:
                results += loaded
                continue
            scanned = self.store.scan_files(topic)
            for t in plan.tasks():
                if t.topic != topic:
                    continue
                entry = scanned.get((t.partition, t.start, t.end))
                if entry is not None and entry["complete"]:
                    results.append(result_from_scan(topic, t.partition, t.start, t.end, entry))
                else:
                    todo.append(t)
        if todo:
            todo = [replace(t, index=i) for i, t in enumerate(todo)]
            results += self.load(plan, todo)
        return results

    def commit(self, plan: Plan, results: list[TaskStats], kind: str = "load", extra: dict | None = None) -> list[dict]:
        """Check the error ratio, then write every topic's manifest (the offsets move here)."""
        records = sum(r.count for r in results)
        errors = sum(r.errors for r in results)
        if errors and errors > self.config.max_error_ratio * (records + errors):
            worst = max(results, key=lambda r: r.errors)
            raise LoadError(
                f"{errors:,} of {records + errors:,} records could not be decoded "
                f"({errors / (records + errors):.2%}, above max_error_ratio {self.config.max_error_ratio:.2%}); "
                f"most in {worst.topic}-{worst.partition}; see {self.config.warehouse}/{worst.topic}/_errors/. "
                f"Nothing was committed")
        self.faults.before_manifest()
        manifests = []
        for topic in sorted(plan.topics):
            doc = build_manifest(plan.topics[topic], [r for r in results if r.topic == topic], kind=kind,
                                 extra=extra)
            self.store.write_manifest(doc)
            manifests.append(doc)
        push_run(self.config, manifests)  # metrics.pushgateway; a failed push only logs a warning
        return manifests

    def validate(self, plan: Plan, results: list[TaskStats]) -> RunValidation | None:
        """The DAG's validate step on a loaded run, its stats saved first so a failed run stays pending as in Airflow."""
        if not plan.topics:
            return None
        from pipelines.validation import validate_run

        for topic in plan.topics:
            self.store.write_loaded(topic, plan.run_id, [r for r in results if r.topic == topic])
        self._say(f"run {plan.run_id}: validating {len(plan.topics)} topic(s) with Great Expectations")
        try:
            return validate_run(self.config, plan.run_id, fs=self.fs)
        except ValueError as exc:  # a suite that cannot be built, e.g. a bad expectation in the config
            raise LoadError(f"validation of run {plan.run_id} could not run: {exc}; nothing was committed") from None

    def _execute(self, plan: Plan, validate: bool = False) -> RunResult:
        t0 = time.monotonic()
        if plan.resumed:
            self._say(f"run {plan.run_id}: finishing a run whose manifest was never committed")
            results = self.load_pending(plan)
        else:
            results = self.load(plan)
        validation = self.validate(plan, results) if validate else None  # a failure raises: nothing committed
        manifests = self.commit(plan, results, extra={"recovered": True} if plan.resumed else None)
        return RunResult(plan.run_id, plan, results, manifests, time.monotonic() - t0, plan.resumed,
                         validation=validation)

    def run(self, validate: bool = False) -> list[RunResult]:
        """Finish pending runs, then plan -> load -> [validate ->] commit a new one; returns every run done."""
        self._rebuild_lost()
        done = []
        for plan in self.pending_runs():
            done.append(self._execute(plan, validate))
        plan = make_plan(self.config, self.cluster, self.store)
        for topic, why in plan.skipped.items():
            self._say(f"{topic}: skipped ({why})")
        for doc in plan.topics.values():
            self.store.write_plan(doc)
        self._say(f"run {plan.run_id}: {len(plan.topics)} topic(s), {len(plan.tasks())} task(s), "
                  f"{plan.offsets:,} offsets")
        if plan.unavailable:
            self._say("WARN: " + incomplete_line(plan.run_id, plan.unavailable))
        done.append(self._execute(plan, validate))
        return done

    # --- reruns, history, resets ---------------------------------------------------------------
    def _run_docs(self, run_id: str) -> dict[str, dict]:
        docs = {}
        for topic in self.store.topics():
            doc = self.store.manifest(topic, run_id) or self.store.plan(topic, run_id)
            if doc is not None:
                docs[topic] = doc
        return docs

    def rerun(self, run_id: str) -> RunResult:
        """Replay a past run's ranges from its saved offsets: the same rows in the same files."""
        docs = self._run_docs(run_id)
        if not docs:
            raise LoadError(f"no run {run_id!r} in {self.config.warehouse} (see `logbus load history`)")
        plan_docs = {}
        for topic, doc in docs.items():
            if doc.get("kind") in ("reset", "rebuilt") or doc.get("spec") is None:
                raise LoadError(f"run {run_id} of {topic} is a {doc.get('kind')} record, not a load: nothing to replay")
            starts = self._origins_before(topic, run_id, doc)
            plan_docs[topic] = {
                "run_id": run_id, "topic": topic, "planned_ms": doc.get("planned_ms"), "spec": doc["spec"],
                "partitions": [{"partition": p["partition"], "start": p["start"], "end": p["end"],
                                "ranges": p["ranges"], "gap": None,
                                "reason": p.get("reason", ""), "earliest": p.get("earliest"),
                                "latest": p.get("latest"), "origins": starts.get(int(p["partition"])),
                                "closed_below": p.get("closed_below")}
                               for p in doc["partitions"]],
            }
        plan = plan_from_docs(run_id, plan_docs)
        t0 = time.monotonic()
        results = self.load(plan)
        for topic in sorted(docs):  # files a compaction merged since: identical ones go (their rows are live)
            rewritten = [f["path"] for r in results if r.topic == topic for f in r.files]
            removed = reconcile_rerun(self.store, topic, rewritten)
            if removed:
                self._say(f"{topic}: {removed} rewritten file(s) byte-identical to the files compaction merged; "
                          "removed (their rows are in the compacted files)")
        result = RunResult(run_id, plan, results, [], time.monotonic() - t0, kind="rerun")
        for topic in sorted(docs):
            manifest = self.store.manifest(topic, run_id)
            if manifest is not None:  # note the replay in the run's manifest
                mine = [r for r in results if r.topic == topic]
                manifest.setdefault("reruns", []).append({"at_ms": now_ms(), **totals(
                    [{"count": r.count, "errors": r.errors, "bytes": r.bytes, "end": r.end,
                      "start": r.start, "files": r.files, "duplicates_dropped": r.duplicates_dropped} for r in mine])})
                self.store.write_manifest(manifest)
                result.manifests.append(manifest)
        return result

    def _origins_before(self, topic: str, run_id: str, doc: dict) -> dict[int, dict]:
        """{partition: the origin index run ``run_id`` started from}: its plan's, else rebuilt from the
        manifests committed before it (partitions loaded without deduplication have none)."""
        plan = self.store.plan(topic, run_id)
        if plan is not None:
            return {int(p["partition"]): p["origins"] for p in plan["partitions"] if p.get("origins") is not None}
        before = self.store.committed_origins(topic, before=run_id)
        return {int(p["partition"]): OriginIndex.from_json(before.get(int(p["partition"])),
                                                           p["origins"]["window"]).to_json()
                for p in doc["partitions"] if p.get("origins") is not None}

    def history(self, topic: str | None = None) -> list[dict]:
        """Every committed or pending run, newest last: one row per (run, topic)."""
        rows = []
        topics = [topic] if topic else self.store.topics()
        for t in topics:
            committed = {}
            for m in self.store.manifests(t):
                committed[m["run_id"]] = m
                parts = m.get("partitions", [])
                rows.append({
                    "run_id": m["run_id"], "topic": t, "kind": m.get("kind", "load"),
                    "status": "committed" + (" (recovered)" if m.get("recovered") else ""),
                    "partitions": len(parts),
                    "ranges": " ".join(f"{p['partition']}:{p['start']}-{p['end']}" for p in parts),
                    "records": m.get("totals", {}).get("records", 0), "errors": m.get("totals", {}).get("errors", 0),
                    "duplicates": m.get("totals", {}).get("duplicates_dropped", 0),
                    "late": m.get("totals", {}).get("late", 0),
                    "bytes": m.get("totals", {}).get("bytes", 0), "gaps": sum(len(p.get("gaps", [])) for p in parts),
                    "reruns": len(m.get("reruns", [])),
                })
            for run_id in self.store.pending(t):
                doc = self.store.plan(t, run_id)
                if doc is None:
                    continue
                parts = doc["partitions"]
                rows.append({
                    "run_id": run_id, "topic": t, "kind": "load", "status": "pending", "partitions": len(parts),
                    "ranges": " ".join(f"{p['partition']}:{p['start']}-{p['end']}" for p in parts),
                    "records": None, "errors": None, "duplicates": None, "late": None, "bytes": None, "gaps": 0, "reruns": 0,
                })
        rows.sort(key=lambda r: (r["run_id"], r["topic"]))
        return rows

    def reset(self, topic: str, to: str | int | ResetPolicy) -> dict:
        """Move ``topic``'s saved offsets to earliest, latest or a time; recorded as a manifest."""
        policy = to if isinstance(to, ResetPolicy) else parse_reset(to, "--to")
        layout = self.cluster.describe()
        if topic not in layout:
            raise LoadError(f"topic {topic!r} does not exist in the cluster")
        partitions = []
        for partition in sorted(layout[topic]):
            earliest, latest = self.cluster.bounds(topic, partition)
            offset = self.cluster.resolve(topic, partition, policy, earliest, latest)
            partitions.append({"partition": partition, "start": offset, "end": offset, "next": offset,
                               "reason": f"reset to {policy}", "ranges": [], "count": 0, "errors": 0, "bytes": 0,
                               "min_ts": None, "max_ts": None, "files": [], "gaps": [], "status": "reset",
                               "earliest": earliest, "latest": latest})
        run_id = new_run_id(self.store.all_run_ids(topic))
        doc = {"version": 1, "kind": "reset", "run_id": run_id, "topic": topic, "status": "committed",
               "planned_ms": None, "committed_ms": now_ms(), "spec": None, "to": str(policy),
               "partitions": partitions}
        doc["totals"] = totals(partitions)
        self.store.write_manifest(doc)
        return doc


# --- module-level helpers for DAGs and scripts -----------------------------------------------------

def _loader(config: str | LoaderConfig, overrides: Mapping[str, Any] | None = None, **kw) -> Loader:
    cfg = config if isinstance(config, LoaderConfig) else load_config(config, overrides)
    return Loader(cfg, **kw)


def run(config: str | LoaderConfig, overrides: Mapping[str, Any] | None = None, spark=None) -> list[RunResult]:
    with _loader(config, overrides, spark=spark) as loader:
        return loader.run()


def preview(config: str | LoaderConfig, overrides: Mapping[str, Any] | None = None) -> tuple[list[Plan], Plan]:
    with _loader(config, overrides) as loader:
        return loader.preview()


def plan_run(config: str | LoaderConfig, overrides: Mapping[str, Any] | None = None) -> str:
    """Write the next run's plan (or find the pending one); returns its run id."""
    with _loader(config, overrides) as loader:
        return loader.plan().run_id


def _pending_plan(loader: Loader, run_id: str) -> Plan:
    for plan in loader.pending_runs():
        if plan.run_id == run_id:
            return plan
    raise LoadError(f"run {run_id} is not pending (already committed, or never planned)")


def load_run(config: str | LoaderConfig, run_id: str, overrides: Mapping[str, Any] | None = None,
             spark=None, faults: LoadFaults = NO_FAULTS) -> list[TaskStats]:
    """Load a planned run's data; the task stats are saved next to the plan for ``commit_run``."""
    with _loader(config, overrides, spark=spark, faults=faults) as loader:
        plan = _pending_plan(loader, run_id)
        results = loader.load(plan)
        for topic in plan.topics:
            loader.store.write_loaded(topic, run_id, [r for r in results if r.topic == topic])
        return results


def commit_run(config: str | LoaderConfig, run_id: str, overrides: Mapping[str, Any] | None = None) -> list[dict]:
    """Commit a loaded run (after validation): its manifests are written and its offsets move. A run
    committed already (a retried commit whose first attempt died after the manifests) returns them."""
    with _loader(config, overrides) as loader:
        if not any(p.run_id == run_id for p in loader.pending_runs()):
            done = [m for t in loader._known_topics() if (m := loader.store.manifest(t, run_id)) is not None]
            if done:
                return done
        plan = _pending_plan(loader, run_id)
        results = []
        for topic in plan.topics:
            loaded = loader.store.loaded(topic, run_id)
            if loaded is None:
                raise LoadError(f"run {run_id} of {topic} has no load results: run load_run first")
            results += loaded
        return loader.commit(plan, results)


def rerun(config: str | LoaderConfig, run_id: str, overrides: Mapping[str, Any] | None = None, spark=None) -> RunResult:
    with _loader(config, overrides, spark=spark) as loader:
        return loader.rerun(run_id)


def history(config: str | LoaderConfig, topic: str | None = None, overrides: Mapping[str, Any] | None = None) -> list[dict]:
    with _loader(config, overrides) as loader:
        return loader.history(topic)


def reset(config: str | LoaderConfig, topic: str, to: str, overrides: Mapping[str, Any] | None = None) -> dict:
    with _loader(config, overrides) as loader:
        return loader.reset(topic, to)


if __name__ == "__main__":  # pragma: no cover
    sys.exit("use `logbus load` (pipelines.cli)")
