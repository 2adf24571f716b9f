#!/usr/bin/env python3
"""Warehouse loader benchmark: the load's rate next to its two halves, measured in one run.

    .venv/bin/python bench/loader_bench.py [--records 10000000] [--partitions 8] [--master local[2]]
                                           [--data-dir DIR] [--json out.json] [--standalone]

1. an embedded ZooKeeper and one broker (log dir under --data-dir, default a temp dir);
   a topic of --partitions partitions; --records JSON events of about 200 bytes produced
   with librdkafka (acks=1, lz4 off, linger 20 ms), evenly over the partitions;
   Before the phases, each slot's Python worker is started and makes the task's imports
   (``warm_up``, timed apart as ``worker_warmup_s``): the first job of a session pays them,
   and it would otherwise be the load's alone;
2. the load: ``Loader.run()`` (plan -> one Spark task per partition range -> fetch with the
   SimpleConsumer -> JSON decode (vectorised: pyarrow's JSON reader per fetched chunk) ->
   Parquet (snappy) -> manifest), wall time, records/s;
3. fetch-only: the same ranges, the same Spark tasks, reading exactly as the load reads
   (PartitionReader: SimpleConsumer.fetch_raw + pipelines.record_columns) and dropping the
   chunks;
4. write-only: the same ranges, the same Spark tasks, the same records built in memory in
   each task as the chunks the reader yields (not timed: each task reports its build time,
   subtracted per task), then decoded and written as Parquet exactly as the load does
   (Decoder + RangeWriter);
5. the ratio load / min(fetch-only, write-only) and the split of task time (fetch, decode,
   write) reported by the load's own tasks;
6. with --standalone: a Spark standalone master and one worker of 2 cores from pyspark's jars;
   the same run replayed there (``Loader.rerun``: the same ranges and files) as new applications
   whose executors get their Python three ways (``STANDALONE_MODES``: an environment already on
   the node, the packed environment of ``pipelines.pack_env`` unpacked once on the node, or sent
   with ``spark.archives``), each timed from session start to the end of the load; records/s
   next to the load's, and the seconds shipping and the probe add to a run.

Everything it starts is stopped on exit. Results to stdout and --json.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.feeding import produce_waiting  # noqa: E402
from bench.reporting import progress  # noqa: E402

BASE_MS = 1_767_225_600_000


def event_value(p: int, i: int) -> bytes:
    # ~200 bytes of JSON
    return (b'{"member_id":%d,"page":"/jobs/view/%08d","referrer":"https://www.linkedin.com/feed/?trk=%06d",'
            b'"ts":%d,"score":%d.25,"country":"us","agent":"Mozilla/5.0 (X11; Linux x86_64)"}'
            % (p * 100_000_000 + i, i, i % 999_999, BASE_MS + i * 10, i % 1000))


SCHEMA = [
    {"name": "member_id", "type": "long", "required": True},
    {"name": "page", "type": "string", "required": True},
    {"name": "referrer", "type": "string"},
    {"name": "ts", "type": "timestamp", "required": True},
    {"name": "score", "type": "double"},
    {"name": "country", "type": "string"},
    {"name": "agent", "type": "string"},
]


def produce(bootstrap: str, topic: str, partitions: int, per_partition: int) -> float:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "acks": 1, "batch.size": 1 << 20,
                  "queue.buffering.max.messages": 2_000_000, "queue.buffering.max.kbytes": 2_000_000})
    t0 = time.monotonic()
    for i in range(per_partition):
        for part in range(partitions):
            produce_waiting(p, topic, event_value(part, i), 0.05, partition=part, timestamp=BASE_MS + i * 10)
        if i % 10_000 == 0:
            p.poll(0)
    assert p.flush(300) == 0
    return time.monotonic() - t0


def warm_up(spark) -> float:
    """Start every slot's Python worker and make the imports a load task makes (pyarrow's first
    array imports pandas: 0.65 s per worker by ``python -X importtime``), so that no phase pays
    them and the phases compare; returns the seconds it took."""
    def run(_i, items):
        import pyarrow as pa

        import pipelines.task  # noqa: F401
        import pipelines.writer  # noqa: F401

        pa.array([0])
        time.sleep(0.5)  # each slot's task still running when the next starts: one per worker
        yield len(list(items))

    slots = spark.sparkContext.defaultParallelism
    t0 = time.monotonic()
    spark.sparkContext.parallelize(range(slots), slots).mapPartitionsWithIndex(run).collect()
    return time.monotonic() - t0


def fetch_only(spark, tasks, ctx) -> tuple[float, int]:
    def run(_i, items):
        from pipelines.task import PartitionReader

        for t in items:
            reader = PartitionReader(ctx, t.topic, t.partition)
            n = 0
            for chunk in reader.read(t.start, t.end):
                n += len(chunk)
            reader.close()
            yield n

    t0 = time.monotonic()
    n = sum(spark.sparkContext.parallelize(tasks, len(tasks)).mapPartitionsWithIndex(run).collect())
    return time.monotonic() - t0, n


def write_only(spark, tasks, ctx, out_url: str) -> tuple[float, int, float]:
    def run(_i, items):
        from broker.client.simple_consumer import MessageAndMetadata
        from pipelines.config import TopicSpec
        from pipelines.decoders import Decoder
        from pipelines.fs import open_fs
        from pipelines.record_columns import RecordChunk
        from pipelines.writer import RangeWriter

        for t in items:
            b0 = time.monotonic()
            chunks = []
            chunk = []
            for off in range(t.start, t.end):
                chunk.append(MessageAndMetadata(t.topic, t.partition, off, None, event_value(t.partition, off), [],
                                                BASE_MS + off * 10))
                if len(chunk) == 5000:
                    chunks.append(RecordChunk.from_messages(t.topic, t.partition, chunk))
                    chunk = []
            if chunk:
                chunks.append(RecordChunk.from_messages(t.topic, t.partition, chunk))
            build = time.monotonic() - b0
            w0 = time.monotonic()
            decoder = Decoder(TopicSpec.from_dict(t.topic, t.spec))
            writer = RangeWriter(open_fs(out_url), t.topic, t.partition, t.start, t.end, decoder.schema,
                                 ctx.compression, ctx.row_group_size)
            n = 0
            for c in chunks:
                batch, times, _ = decoder.decode(c)
                writer.add(batch, times)
                n += batch.num_rows
            writer.commit()
            yield (n, build, time.monotonic() - w0)

    t0 = time.monotonic()
    out = spark.sparkContext.parallelize(tasks, len(tasks)).mapPartitionsWithIndex(run).collect()
    wall = time.monotonic() - t0
    n = sum(o[0] for o in out)
    # the build time is not part of writing: remove it, spread over the 2 slots like the tasks were
    slots = spark.sparkContext.defaultParallelism
    build = sum(o[1] for o in out) / max(1, min(slots, len(out)))
    return wall - build, n, build


#: How the executors of the standalone cluster get their Python, each mode a new application:
#: installed: an environment already on the node with logbus on its path (no shipping, no probe: the reference);
#: unpacked: the packed environment unpacked once on the node (spark.python_env only), code shipped, probe;
#: archives: the packed environment sent with spark.archives (Spark unpacks it per application), code shipped, probe.
STANDALONE_MODES = ("installed", "unpacked", "archives")


def standalone(cfg, run_id: str, data_dir: Path, rounds: int = 2) -> dict:
    """The same run replayed on a standalone master and one 2-core worker in each of ``STANDALONE_MODES``,
    ``rounds`` times interleaved; each replay is a new application timed from session start to the end of the
    load. What shipping and the probe add = a mode's median minus the ``installed`` median."""
    import statistics
    import tarfile
    from dataclasses import replace

    from pipelines import probe
    from pipelines.code_zip import cache_dir
    from pipelines.job import make_spark
    from pipelines.loader import Loader
    from pipelines.pack_env import cached_env
    from tests.pipelines.spark_standalone import StandaloneCluster

    env = cached_env(cache_dir() / "test-envs")
    node_env = data_dir / "node-env"
    t0 = time.monotonic()
    shutil.rmtree(node_env, ignore_errors=True)
    with tarfile.open(env) as tar:
        tar.extractall(node_env, filter="tar")
    unpack_s = time.monotonic() - t0
    progress(f"standalone: the packed environment ({env.stat().st_size / 2**20:.0f} MiB) unpacked once on the "
             f"node in {unpack_s:.1f} s")
    memory = {**cfg.spark_conf, "spark.executor.memory": "2g"}
    modes = {
        "installed": replace(cfg, spark_python_env=str(node_env / "bin" / "python"), spark_ship_code=False,
                             spark_conf={**memory, "spark.executorEnv.PYTHONPATH": str(REPO)}),
        "unpacked": replace(cfg, spark_python_env=str(node_env / "bin" / "python"), spark_conf=memory),
        "archives": replace(cfg, spark_archives=(f"{env}#environment",), spark_python_env="./environment/bin/python",
                            spark_conf=memory),
    }
    runs: dict[str, list[dict]] = {m: [] for m in STANDALONE_MODES}
    cluster = StandaloneCluster(data_dir / "spark-standalone")
    try:
        progress("standalone: master + 1 worker (2 cores)")
        cluster.start(workers=1, cores=2, memory="3g")
        for r in range(rounds):
            for mode in STANDALONE_MODES:
                on_cluster = replace(modes[mode], spark_master=cluster.url)
                t0 = time.monotonic()
                session = make_spark(on_cluster)
                try:
                    session_s = time.monotonic() - t0
                    t1 = time.monotonic()
                    if mode == "installed":
                        probe._PROBED.add(session.sparkContext)  # the reference runs no probe
                    else:
                        probe.probe_executors(session, on_cluster.spark_probe_timeout_ms, on_cluster.parquet_writer)
                    probe_s = time.monotonic() - t1
                    with Loader(on_cluster, spark=session) as loader:
                        t2 = time.monotonic()
                        result = loader.rerun(run_id)
                        load_s = time.monotonic() - t2
                finally:
                    session.stop()
                total = time.monotonic() - t0
                runs[mode].append({"total_s": round(total, 2), "session_s": round(session_s, 2),
                                   "probe_s": round(probe_s, 2), "load_s": round(load_s, 2),
                                   "records_per_s": round(result.records / load_s),
                                   "task_total_s": round(sum(x.seconds or 0.0 for x in result.results), 1)})
                progress(f"standalone round {r + 1} {mode}: {total:.1f} s (session {session_s:.1f}, probe {probe_s:.1f}, "
                         f"load {load_s:.1f} s = {result.records / load_s:,.0f} records/s)")
    finally:
        cluster.stop()
    median = {m: statistics.median(x["total_s"] for x in runs[m]) for m in STANDALONE_MODES}
    out = {"records": result.records, "unpack_once_s": round(unpack_s, 2), "runs": runs,
           "median_total_s": median,
           "records_per_s": round(statistics.median(x["records_per_s"] for x in runs["unpacked"])),
           "added_s": {m: round(median[m] - median["installed"], 2) for m in ("unpacked", "archives")}}
    progress(f"standalone: shipping + probe add {out['added_s']['unpacked']:.1f} s with the environment unpacked on "
             f"the node, {out['added_s']['archives']:.1f} s with spark.archives (medians of {rounds})")
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description="loader benchmark")
    ap.add_argument("--records", type=int, default=10_000_000)
    ap.add_argument("--partitions", type=int, default=8)
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--data-dir")
    ap.add_argument("--json")
    ap.add_argument("--standalone", action="store_true", help="also replay the run on a standalone master + worker")
    args = ap.parse_args(argv)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")

    from broker.client.admin import AdminClient
    from broker.cluster.embedded_zk import EmbeddedZooKeeper
    from broker.cluster.local import BrokerProcess
    from broker.cluster.net import free_port
    from pipelines.config import parse_config
    from pipelines.job import make_spark
    from pipelines.loader import Loader

    data_dir = Path(args.data_dir or tempfile.mkdtemp(prefix="logbus-loader-bench-"))
    data_dir.mkdir(parents=True, exist_ok=True)
    zk = EmbeddedZooKeeper(data_dir / "zk")
    broker = spark = None
    results: dict = {"records": args.records, "partitions": args.partitions, "master": args.master,
                     "cpus": os.cpu_count()}
    try:
        zk.start()
        props = {"broker.id": "0", "listeners": f"PLAINTEXT://127.0.0.1:{free_port()}",
                 "log.dirs": str(data_dir / "kafka-logs"), "zookeeper.connect": f"{zk.connect_string}/logbus",
                 "log.segment.bytes": str(512 << 20)}
        broker = BrokerProcess(props, data_dir / "broker", {})
        broker.start()
        topic = "bench-events"
        with AdminClient(broker.bootstrap) as admin:
            admin.create_topic(topic, args.partitions, 1)
        per = args.records // args.partitions
        progress(f"producing {per * args.partitions:,} records of ~{len(event_value(0, 5_000_000))} bytes")
        secs = produce(broker.bootstrap, topic, args.partitions, per)
        results["produce_records_per_s"] = round(per * args.partitions / secs)
        progress(f"produced in {secs:.1f} s")

        warehouse = data_dir / "warehouse"
        cfg = parse_config({
            "cluster": {"bootstrap.servers": broker.bootstrap}, "warehouse": f"file://{warehouse}",
            "topics": [{"name": topic, "format": "json", "schema": SCHEMA, "time_field": "ts"}],
            "max_range_records": per, "spark": {"master": args.master, "conf": {"spark.driver.memory": "2g"}},
        })
        spark = make_spark(cfg)
        results["worker_warmup_s"] = round(warm_up(spark), 2)
        progress(f"Python workers started and their imports made in {results['worker_warmup_s']:.1f} s (in no phase)")
        with Loader(cfg, spark=spark) as loader:
            progress("load (plan -> fetch -> decode -> Parquet -> manifest)")
            t0 = time.monotonic()
            [run] = loader.run()
            load_s = time.monotonic() - t0
            tasks = run.plan.tasks()
            ctx = loader._context(None)
        results["load"] = {"seconds": round(load_s, 2), "records": run.records,
                           "records_per_s": round(run.records / load_s),
                           "mb_per_s": round(sum(len(event_value(0, 5_000_000)) for _ in range(1)) * run.records / load_s / 1e6, 1),
                           "parquet_bytes": run.bytes,
                           "task_fetch_s": round(sum(r.fetch_s for r in run.results), 1),
                           "task_decode_s": round(sum(r.decode_s for r in run.results), 1),
                           "task_write_s": round(sum(r.write_s for r in run.results), 1),
                           "task_total_s": round(sum(r.seconds or 0.0 for r in run.results), 1),
                           # JSON chunks decoded by pyarrow's reader vs. per record (a chunk with a bad value)
                           "chunks_vectorised": sum(r.chunks_vectorised for r in run.results),
                           "chunks_per_record": sum(r.chunks_per_record for r in run.results)}
        progress(f"load: {run.records:,} records in {load_s:.1f} s = {run.records / load_s:,.0f} records/s")

        progress("fetch-only (SimpleConsumer over the same ranges, same Spark tasks)")
        f_s, f_n = fetch_only(spark, tasks, ctx)
        results["fetch_only"] = {"seconds": round(f_s, 2), "records": f_n, "records_per_s": round(f_n / f_s)}
        progress(f"fetch-only: {f_n:,} in {f_s:.1f} s = {f_n / f_s:,.0f} records/s")

        progress("write-only (same rows from memory -> decode -> Parquet, same Spark tasks)")
        w_s, w_n, build = write_only(spark, tasks, ctx, f"file://{data_dir / 'write-only'}")
        results["write_only"] = {"seconds": round(w_s, 2), "records": w_n, "records_per_s": round(w_n / w_s),
                                 "build_seconds_removed": round(build, 2)}
        progress(f"write-only: {w_n:,} in {w_s:.1f} s = {w_n / w_s:,.0f} records/s")
        slower = min(results["fetch_only"]["records_per_s"], results["write_only"]["records_per_s"])
        results["load_vs_slower_half"] = round(results["load"]["records_per_s"] / slower, 3)
        if args.standalone:
            spark.stop()
            spark = None
            results["standalone"] = standalone(cfg, run.run_id, data_dir)
            results["standalone"]["vs_local"] = round(results["standalone"]["records_per_s"]
                                                      / results["load"]["records_per_s"], 3)
        print(json.dumps(results, indent=2))
        if args.json:
            Path(args.json).write_text(json.dumps(results, indent=2))
        return 0
    finally:
        if spark is not None:
            spark.stop()
        if broker is not None:
            broker.stop()
        zk.stop()
        if not args.data_dir:
            shutil.rmtree(data_dir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
