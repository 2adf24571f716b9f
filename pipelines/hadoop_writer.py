"""Loading through Spark's Hadoop client: how data reaches an ``hdfs://`` warehouse.

Python executors cannot write to HDFS themselves (pyarrow's HDFS needs libhdfs), so each task
fetches and decodes its range (``pipelines.task.RangeScan``) and hands the Arrow batches to
Spark (``mapInArrow``); Spark's Parquet writer writes them under a staging directory
partitioned by ``(_range, _hour)``, and its file commit protocol keeps only the output of the
attempt that succeeded. The driver then renames each committed part file, through Hadoop's
FileSystem API, to the name the Python writer gives it
(``<topic>/dt=.../hour=.../<topic>+<partition>+<start>+<end>.parquet``), writes the range's
undecodable values to ``_errors/`` and its commit summary to ``_commits/``, and drops the
staging directory. The tasks' stats reach the driver through an accumulator keyed by range.
"""

from __future__ import annotations

import io
import time
import uuid
from dataclasses import dataclass, replace

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.accumulators import AccumulatorParam

from pipelines.config import TopicSpec
from pipelines.decoders import Decoder
from pipelines.errors import LoadError, TopicDeletedError
from pipelines.fs import HadoopFS
from pipelines.job import spark_failure_reason
from pipelines.task import RangeScan, RangeTask, TaskContext, new_stats, summary_extras
from pipelines.task_stats import EMPTY, LOADED, TOPIC_DELETED, TaskStats
from pipelines.writer import (
    commit_record_path,
    commit_summary,
    error_table,
    errors_path,
    file_name,
    hour_buckets,
    hour_dir,
    range_metadata,
)

RANGE, HOUR = "_range", "_hour"  # staging partition columns: the task's index, the row's epoch hour
# Spark's codec names for parquet.compression (brotli is not built into Spark: refused by the config)
CODECS = {"none": "uncompressed", "snappy": "snappy", "gzip": "gzip", "zstd": "zstd", "lz4": "lz4_raw"}


class RangeStats(AccumulatorParam):
    """{range index: StagedRange}. A range's entry replaces, never adds to, an earlier one: whichever
    attempt of a task reports, the values are the same, so a re-applied update cannot double a count."""

    def zero(self, value: dict) -> dict:
        return {}

    def addInPlace(self, a: dict, b: dict) -> dict:
        a.update(b)
        return a


def staging_schema(schema: pa.Schema) -> pa.Schema:
    """The loader's columns as handed to Spark (timestamps in Spark's microseconds; Spark writes
    them back as milliseconds), then the two staging partition columns."""
    fields = [f.with_type(pa.timestamp("us", tz="UTC")) if pa.types.is_timestamp(f.type) else f for f in schema]
    return pa.schema(fields + [pa.field(RANGE, pa.int32(), nullable=False), pa.field(HOUR, pa.int64(), nullable=False)])


@dataclass(frozen=True)
class StagedRange:
    """What a task hands the driver: its stats, the rows it staged per epoch hour and its undecodable values."""

    stats: TaskStats
    hours: dict[int, int]
    error_rows: list[tuple]


def load_ranges(spark, tasks: list[RangeTask], ctx: TaskContext, description: str = "logbus load") -> list[TaskStats]:
    """Load ``tasks`` through Spark's Parquet writer (one Spark job per topic); returns their stats in
    task order, as ``pipelines.job.run_tasks`` does."""
    fs = HadoopFS(ctx.warehouse, spark)
    results: list[TaskStats] = []
    for topic in sorted({t.topic for t in tasks}):
        results += _load_topic(spark, fs, [t for t in tasks if t.topic == topic], ctx, f"{description} {topic}")
    return sorted(results, key=lambda r: r.index)


def _load_topic(spark, fs: HadoopFS, tasks: list[RangeTask], ctx: TaskContext, description: str) -> list[TaskStats]:
    from pyspark.sql.pandas.types import from_arrow_schema

    topic = tasks[0].topic
    schema = staging_schema(Decoder(TopicSpec.from_dict(topic, tasks[0].spec)).schema)
    stage = f"{topic}/_staging/spark-{tasks[0].run_id}-{uuid.uuid4().hex[:12]}"
    session = spark.newSession()  # its own SQL conf: the shared session's is left alone
    session.conf.set("spark.sql.parquet.outputTimestampType", "TIMESTAMP_MILLIS")  # timestamp[ms, UTC], like pyarrow
    sc = spark.sparkContext
    sc.setJobDescription(description)
    stats = sc.accumulator({}, RangeStats())
    batches = session.range(0, len(tasks), 1, len(tasks)).mapInArrow(
        _task_batches(tasks, ctx, schema, stats), from_arrow_schema(schema, prefer_timestamp_ntz=False))
    try:
        try:
            (batches.sortWithinPartitions(RANGE, HOUR, "offset").write.partitionBy(RANGE, HOUR)
             .option("compression", CODECS[ctx.compression])
             .option("parquet.block.row.count.limit", str(ctx.row_group_size))
             .option("maxRecordsPerFile", "0")  # one file per (range, hour): it becomes one final name
             .parquet(fs.uri(stage)))
        except Exception as exc:  # the Python traceback of the last attempt, inside a JVM exception
            raise LoadError(spark_failure_reason(exc)) from None
        done = stats.value
        missing = [t for t in tasks if t.index not in done]
        if missing:
            raise LoadError(f"{topic}-{missing[0].partition} [{missing[0].start}, {missing[0].end}): "
                            f"Spark's write finished without this range's stats")
        return [_commit_range(fs, stage, t, done[t.index], ctx) for t in tasks]
    finally:
        fs.delete(stage, recursive=True)


def _task_batches(tasks: list[RangeTask], ctx: TaskContext, schema: pa.Schema, stats):
    """The ``mapInArrow`` function: each input row is the position of a task in ``tasks``."""

    def run(inputs):
        for ids in inputs:
            for position in ids.column(0).to_pylist():
                yield from _range_batches(tasks[position], ctx, schema, stats)

    return run


def _range_batches(task: RangeTask, ctx: TaskContext, schema: pa.Schema, stats):
    """One range's rows for Spark's writer (runs in the executor); its stats go to ``stats``."""
    from pyspark import TaskContext as SparkTaskContext

    t0 = time.monotonic()
    spark_task = SparkTaskContext.get()
    result = new_stats(task, spark_task.attemptNumber() if spark_task is not None else 0)
    hours: dict[int, int] = {}
    errors: list[tuple] = []
    if task.end <= task.start:
        result = replace(result, status=EMPTY)
    else:
        scan = RangeScan(task, ctx)
        try:
            for batch, times, bad in scan:
                errors += bad
                if batch is None:
                    continue
                buckets = hour_buckets(times)
                for hour, rows in zip(*np.unique(buckets, return_counts=True)):
                    hours[int(hour)] = hours.get(int(hour), 0) + int(rows)
                yield _staging_batch(batch, task.index, buckets, schema)
            if scan.late_tables:
                raise LoadError(f"{task.topic}: late_data policy separate needs parquet.writer python "
                                "(Spark's writer cannot write the _late/ files yet)")
            ctx.faults.after_first_file(task)  # after handing Spark all of the range's rows
        except TopicDeletedError:
            result = replace(result, status=TOPIC_DELETED)  # what it staged is dropped with the staging directory
        finally:
            scan.close()
        result = scan.stats(result)
    result = replace(result, seconds=round(time.monotonic() - t0, 3))
    stats.add({task.index: StagedRange(result, hours, errors)})


def _staging_batch(batch: pa.RecordBatch, index: int, buckets: np.ndarray, schema: pa.Schema) -> pa.RecordBatch:
    columns = [c if c.type == f.type else c.cast(f.type) for c, f in zip(batch.columns, schema)]
    columns += [pa.array(np.full(batch.num_rows, index, np.int32)), pa.array(buckets, pa.int64())]
    return pa.RecordBatch.from_arrays(columns, schema=schema)


def _commit_range(fs: HadoopFS, stage: str, task: RangeTask, staged_range: StagedRange, ctx: TaskContext) -> TaskStats:
    """Rename the range's committed part files to their final names (errors file first, commit
    record last, so a range with a record is whole); returns the range's stats."""
    stats, hours, errors = staged_range.stats, staged_range.hours, staged_range.error_rows
    if stats.status != LOADED:
        return stats
    w0 = time.monotonic()
    staged = _staged_files(fs, f"{stage}/{RANGE}={task.index}")
    if set(staged) != set(hours):
        raise LoadError(f"{task.topic}-{task.partition} [{task.start}, {task.end}): Spark committed hours "
                        f"{sorted(staged)}, the task wrote {sorted(hours)}")
    meta = range_metadata(task.topic, task.partition, task.start, task.end)
    summary = commit_summary(len(hours), stats.count, len(errors), stats.gaps, summary_extras(stats))
    if errors:
        out = io.BytesIO()
        pq.write_table(error_table(errors, meta, summary), out, compression=None if ctx.compression == "none"
                       else ctx.compression)
        fs.write_bytes(errors_path(task.topic, task.partition, task.start, task.end), out.getvalue())
    name = file_name(task.topic, task.partition, task.start, task.end)
    files: list[dict] = []
    for hour in sorted(hours):
        final = f"{hour_dir(task.topic, hour)}/{name}"
        size = fs.size(staged[hour])
        fs.rename(staged[hour], final)
        files.append({"path": final, "rows": hours[hour], "bytes": size})
    fs.write_bytes(commit_record_path(task.topic, task.partition, task.start, task.end), summary.encode())
    return replace(stats, files=tuple(files), bytes=sum(f["bytes"] for f in files),
                   write_s=round(time.monotonic() - w0, 3))


def _staged_files(fs: HadoopFS, range_dir: str) -> dict[int, str]:
    """{hour: the one part file Spark committed for it} under ``<stage>/_range=<i>/``."""
    out: dict[int, str] = {}
    for hour_name in fs.list(range_dir):
        if not hour_name.startswith(f"{HOUR}="):
            continue
        directory = f"{range_dir}/{hour_name}"
        parts = [n for n in fs.list(directory) if n.endswith(".parquet") and not n.startswith((".", "_"))]
        if len(parts) != 1:
            raise LoadError(f"{directory}: Spark committed {len(parts)} part files, expected one")
        out[int(hour_name.split("=", 1)[1])] = f"{directory}/{parts[0]}"
    return out
