"""The main job (`make run`): the whole system on one machine, end to end.

1. start an embedded ZooKeeper and three brokers (broker.cluster.local_cluster.LocalCluster);
2. produce a sample activity stream — page views and searches keyed by member id — with
   librdkafka (acks=all) into topics replicated on the three brokers;
3. initialise Airflow (a private AIRFLOW_HOME, sqlite) and run the warehouse_load DAG of the
   `activity` group with `airflow dags test`: plan -> load (Spark local[2]) -> validate (Great
   Expectations) -> commit offsets -> report;
4. print a summary: rows per topic and partition, offset ranges, validation, where the Parquet
   files and the Data Docs are — checked against what was produced — and the completeness of
   each event hour (the events span the last two hours: the closed ones are audited at the
   cluster and declared complete by the DAG, the current one is still open);
5. rerun that load from its saved offsets (`-c '{"rerun_run_id": ...}'`) and check the files
   are byte-identical;
6. stop everything it started (also on failure or Ctrl-C).

Exit status 0 only if every check holds. The warehouse and the Airflow logs stay in the work
directory (printed at the end; `--clean` removes them).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING

import yaml

if TYPE_CHECKING:
    from pipelines.manifest import OffsetStore

ROOT = Path(__file__).resolve().parent.parent
GROUP = "activity"
DAG_ID = f"logbus_load_{GROUP}"
TOPICS = {"page-views": 4, "searches": 3}
PAGES = ["/feed", "/jobs", "/in/profile", "/messaging", "/notifications", "/search/results", "/groups", "/learning"]
QUERIES = ["kafka", "data engineer", "spark", "hadoop", "zookeeper", "airflow", "site reliability", "python"]

SPAN_MS = 2 * 3_600_000
T0 = time.monotonic()


def say(line: str = "") -> None:
    print(f"[{time.monotonic() - T0:6.1f}s] {line}" if line else "", flush=True)


def activity(members: int, views: int, searches: int, seed: int = 7):
    """(topic, key, value, timestamp ms): page views and searches of ``members`` members, in time order."""
    rng = random.Random(seed)
    now = int(time.time() * 1000)
    events = []
    for _ in range(views):
        m = rng.randrange(1, members + 1)
        events.append(("page-views", m, {"member_id": m, "page": rng.choice(PAGES),
                                         "referrer": rng.choice([None, "/feed", "https://www.google.com/"])}))
    for _ in range(searches):
        m = rng.randrange(1, members + 1)
        events.append(("searches", m, {"member_id": m, "query": rng.choice(QUERIES), "results": rng.randrange(0, 500)}))
    rng.shuffle(events)
    out = []
    step = SPAN_MS // max(1, len(events))  # event times spread over the last SPAN_MS: closed hours and the open one
    for i, (topic, m, e) in enumerate(events):
        ts = now - (len(events) - i) * step
        e["ts"] = ts
        out.append((topic, str(m).encode(), json.dumps(e).encode(), ts))
    return out


def produce(bootstrap: str, events) -> dict[tuple[str, int], list[int]]:
    """librdkafka, acks=all, keyed (the default partitioner puts a member on one partition)."""
    from confluent_kafka import Producer

    acked: dict[tuple[str, int], list[int]] = {}
    failures: list = []

    def on_delivery(err, msg):
        if err is not None:
            failures.append(err)
        else:
            acked.setdefault((msg.topic(), msg.partition()), []).append(msg.offset())

    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 10, "compression.type": "lz4",
                  "enable.idempotence": True})
    for topic, key, value, ts in events:
        while True:
            try:
                p.produce(topic, key=key, value=value, timestamp=ts, on_delivery=on_delivery)
                break
            except BufferError:
                p.poll(0.1)
        p.poll(0)
    left = p.flush(60)
    if failures or left:
        raise RuntimeError(f"{len(failures)} sends failed ({failures[:1]}), {left} unsent")
    return acked


def write_config(workdir: Path, bootstrap: str) -> Path:
    """conf/loader.yaml pointed at this cluster, a warehouse in the work dir and Spark local[2]."""
    raw = yaml.safe_load((ROOT / "conf" / "loader.yaml").read_text())
    raw["cluster"] = {"bootstrap.servers": bootstrap, "request.timeout.ms": 30000}
    raw["warehouse"] = f"file://{workdir / 'warehouse'}"
    raw.setdefault("spark", {})["master"] = "local[2]"
    raw["spark"].setdefault("conf", {})["spark.driver.memory"] = "1g"
    raw.setdefault("parquet", {})["row_group_size"] = 5000
    raw.setdefault("airflow", {})["retries"] = 0  # `dags test` would wait out each retry delay: fail at once
    path = workdir / "loader.yaml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    return path


def airflow_env(workdir: Path, config: Path) -> dict:
    env = dict(os.environ)
    env.update({
        "AIRFLOW_HOME": str(workdir / "airflow"),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__CORE__DAGS_FOLDER": str(ROOT / "dags"),
        "LOGBUS_LOADER_CONFIG": str(config),
        "SPARK_LOCAL_IP": "127.0.0.1",
        "PYTHONPATH": str(ROOT) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else ""),
        "NO_COLOR": "1",
    })
    return env


def airflow(args: list[str], env: dict, log: Path, what: str) -> subprocess.CompletedProcess:
    exe = Path(sys.executable).with_name("airflow")
    with open(log, "a") as out:
        out.write(f"\n$ airflow {' '.join(args)}\n")
        out.flush()
        proc = subprocess.run([str(exe), *args], env=env, stdout=out, stderr=subprocess.STDOUT, cwd=ROOT,
                              start_new_session=True)
    if proc.returncode != 0:
        tail = log.read_text().splitlines()[-30:]
        raise RuntimeError(f"{what} failed (exit {proc.returncode}); the end of {log}:\n" + "\n".join(tail))
    return proc


def file_digests(warehouse: Path, run_files: list[str]) -> dict[str, str]:
    return {f: hashlib.sha256((warehouse / f).read_bytes()).hexdigest() for f in run_files}


def parquet_rows(warehouse: Path, files: list[str]) -> Counter:
    import pyarrow.parquet as pq

    rows: Counter = Counter()
    for f in files:
        t = pq.read_table(warehouse / f, columns=["topic", "partition", "offset"])
        for topic, part in zip(t.column("topic").to_pylist(), t.column("partition").to_pylist()):
            rows[(topic, part)] += 1
    return rows


def run_manifest(store: OffsetStore, topic: str, run_id: str) -> dict:
    """The manifest of ``topic``'s run; a missing one is an error (main reports it and fails, as for any error)."""
    m = store.manifest(topic, run_id)
    if m is None:
        raise LookupError(f"{topic}: run {run_id} has no manifest")
    return m


def print_completeness(cfg, check) -> None:
    """Per topic and event hour: complete (audited, declared by the DAG's `complete` task) or open."""
    from pipelines.completeness import COMPLETE, Completeness

    print("      completeness (`logbus load completeness --topic T`):")
    print(f"      {'topic':<12} {'hour':<14} {'status':<11} {'rows':>7} {'audited':>8} {'declared':>9}  why")
    for topic in TOPICS:
        statuses = Completeness(cfg.warehouse_fs(), topic, cfg.spec_for(topic)).statuses()
        check(bool(statuses), f"{topic}: no hours in the warehouse")
        for st in statuses:
            audited = "-" if st.audited is None else f"{st.audited:,}"
            print(f"      {topic:<12} {st.name:<14} {st.status:<11} {st.rows:>7,} {audited:>8} "
                  f"{st.declared:>8}x  {'; '.join(st.why)}")
            if st.status == COMPLETE:
                check(st.declared == 1 and st.audited == st.rows, f"{topic} {st.name}: complete but not declared or audited")
        check(any(st.status == COMPLETE for st in statuses), f"{topic}: no closed hour is complete")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m pipelines.main_job", description=__doc__.splitlines()[0])
    parser.add_argument("--members", type=int, default=2000)
    parser.add_argument("--page-views", type=int, default=40000)
    parser.add_argument("--searches", type=int, default=10000)
    parser.add_argument("--workdir", help="default: a new directory under /tmp")
    parser.add_argument("--clean", action="store_true", help="remove the warehouse and logs at the end")
    args = parser.parse_args(argv)

    from broker.client.admin import AdminClient
    from broker.cluster.local_cluster import LocalCluster
    from pipelines import airflow_tasks
    from pipelines.config import load_config
    from pipelines.fs import LocalFS
    from pipelines.manifest import OffsetStore

    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="logbus-run-")).absolute()
    workdir.mkdir(parents=True, exist_ok=True)
    log = workdir / "airflow.log"
    cluster = LocalCluster(workdir / "cluster", progress=lambda line: say("  " + line))
    ok = True
    problems: list[str] = []

    def check(cond: bool, what: str) -> None:
        nonlocal ok
        if not cond:
            ok = False
            problems.append(what)

    def on_term(signum, frame):
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, on_term)
    try:
        say(f"[1/6] starting an embedded ZooKeeper and three brokers under {workdir / 'cluster'}")
        cluster.up(3)
        bootstrap = cluster.bootstrap_servers
        say(f"      brokers: {bootstrap}   zookeeper: {cluster.zookeeper_connect}")
        with AdminClient(bootstrap.split(",")[0]) as admin:
            for topic, parts in TOPICS.items():
                admin.create_topic(topic, parts, 3)
                say(f"      created {topic}: {parts} partitions, replication factor 3")

        events = activity(args.members, args.page_views, args.searches)
        say(f"[2/6] producing {len(events):,} events ({args.page_views:,} page views, {args.searches:,} searches) "
            f"keyed by member id, acks=all")
        t = time.monotonic()
        acked = produce(bootstrap, events)
        say(f"      {sum(map(len, acked.values())):,} acknowledged in {time.monotonic() - t:.1f}s")
        produced = {k: len(v) for k, v in acked.items()}
        for (topic, part), offs in sorted(acked.items()):
            check(sorted(offs) == list(range(len(offs))), f"{topic}-{part}: acknowledged offsets are not 0..n-1")

        config = write_config(workdir, bootstrap)
        env = airflow_env(workdir, config)
        say(f"[3/6] initialising Airflow in {workdir / 'airflow'} (sqlite) and running `airflow dags test {DAG_ID}`")
        say(f"      loader config: {config}; Airflow output: {log}")
        airflow(["db", "migrate"], env, log, "airflow db migrate")
        t = time.monotonic()
        airflow(["dags", "test", DAG_ID], env, log, f"airflow dags test {DAG_ID}")
        say(f"      the DAG run succeeded in {time.monotonic() - t:.1f}s: "
            "plan -> load + audit -> validate -> commit -> complete -> report")

        cfg = load_config(config).for_group(GROUP)
        warehouse = workdir / "warehouse"
        store = OffsetStore(LocalFS(cfg.warehouse))
        run_ids = {m["run_id"] for topic in TOPICS for m in store.manifests(topic)}
        check(len(run_ids) == 1, f"expected one committed run, found {sorted(run_ids)}")
        run_id = max(run_ids)
        s = airflow_tasks.summary(cfg, run_id)

        say("[4/6] summary")
        run_files = []
        for topic in TOPICS:
            m = run_manifest(store, topic, run_id)
            run_files += [f if isinstance(f, str) else f["path"] for p in m["partitions"] for f in p["files"]]
        in_files = parquet_rows(warehouse, run_files)
        print(f"      run {run_id}")
        print(f"      {'topic':<12} {'partition':>9} {'offsets':>15} {'rows':>8} {'produced':>9} {'in parquet':>10}")
        for topic in TOPICS:
            t_sum = s["topics"].get(topic)
            check(t_sum is not None, f"{topic}: no committed manifest")
            if t_sum is None:
                continue
            for p in t_sum["partitions"]:
                want = produced.get((topic, p["partition"]), 0)
                got = in_files[(topic, p["partition"])]
                mark = "" if p["rows"] == want == got and p["start"] == 0 and p["end"] == want else "   MISMATCH"
                check(not mark, f"{topic}-{p['partition']}: manifest {p['rows']}, produced {want}, parquet {got}")
                print(f"      {topic:<12} {p['partition']:>9} {'[' + str(p['start']) + ', ' + str(p['end']) + ')':>15} "
                      f"{p['rows']:>8,} {want:>9,} {got:>10,}{mark}")
            check(t_sum["validation"] == "passed", f"{topic}: validation {t_sum['validation']}")
            print(f"      {topic}: {t_sum['rows']:,} rows; validation {t_sum['validation']} ({t_sum['checks']} checks)")
            print(f"        parquet:   {t_sum['parquet']}/dt=*/hour=*/")
            print(f"        data docs: {t_sum['data_docs']}")
        total = sum(t["rows"] for t in s["topics"].values())
        check(total == len(events), f"{total} rows loaded, {len(events)} produced")
        print_completeness(cfg, check)

        say(f"[5/6] rerunning run {run_id} from its saved offsets (`airflow dags test {DAG_ID} -c "
            f"'{{\"rerun_run_id\": \"{run_id}\"}}'`)")
        before = file_digests(warehouse, run_files)
        for f in run_files:  # remove them, so the rerun has to write every file again
            (warehouse / f).unlink()
        t = time.monotonic()
        airflow(["dags", "test", DAG_ID, "-c", json.dumps({"rerun_run_id": run_id})], env, log, "the rerun")
        after = file_digests(warehouse, run_files) if all((warehouse / f).exists() for f in run_files) else {}
        same = after == before
        check(same, "the rerun did not reproduce the same files")
        reruns = [len(run_manifest(store, topic, run_id).get("reruns", [])) for topic in TOPICS]
        check(reruns == [1] * len(TOPICS), f"reruns recorded per topic: {reruns}")
        still_one = {m["run_id"] for topic in TOPICS for m in store.manifests(topic)} == {run_id}
        check(still_one, "the rerun committed something new")
        say(f"      rerun done in {time.monotonic() - t:.1f}s: {len(run_files)} Parquet files "
            f"{'byte-identical to the first load' if same else 'DIFFERENT'}; offsets unchanged")
    except KeyboardInterrupt:
        ok = False
        problems.append("interrupted")
    except Exception as exc:  # one clear line (the Airflow log has the rest)
        ok = False
        problems.append(f"{type(exc).__name__}: {exc}")
    finally:
        say("[6/6] stopping the brokers and ZooKeeper")
        try:
            cluster.down()
        except Exception as exc:
            problems.append(f"stopping the cluster: {exc}")
            ok = False
    if args.clean:
        shutil.rmtree(workdir, ignore_errors=True)
    else:
        say(f"      kept: the warehouse {workdir / 'warehouse'}, the Airflow log {log} (`--clean` removes them)")
    if ok:
        say("OK: every produced record is in the warehouse once, the loads validated, the rerun reproduced the files")
        return 0
    say("FAILED: " + "; ".join(problems))
    return 1


if __name__ == "__main__":
    sys.exit(main())
