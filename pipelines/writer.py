"""Parquet output of one range: staged, then renamed into place on task commit.

A range's rows go to one file per ``dt=/hour=`` directory they fall in, every one named
``<topic>+<partition>+<start>+<end>.parquet`` after the task's planned range, so a retried
or replayed task writes exactly the same names and replaces what an earlier attempt left.
Row groups hold exactly ``row_group_size`` rows (the last one fewer), whatever the fetch
sizes were, so the same rows give byte-identical files (same pyarrow version and options).
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import json
import os
import posixpath
import re
import shutil
import tempfile
import uuid

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from pipelines.decoders import ERROR_SCHEMA, error_batch
from pipelines.fs import LocalFS, WarehouseFS

_NAME = re.compile(r"^(?P<topic>[A-Za-z0-9._-]+)\+(?P<partition>\d+)\+(?P<start>\d+)\+(?P<end>\d+)\.parquet$")
HOUR_MS = 3_600_000


def file_name(topic: str, partition: int, start: int, end: int) -> str:
    return f"{topic}+{partition}+{start}+{end}.parquet"


def parse_file_name(name: str) -> tuple[str, int, int, int] | None:
    m = _NAME.match(posixpath.basename(name))
    if not m:
        return None
    return m["topic"], int(m["partition"]), int(m["start"]), int(m["end"])


def hour_dir(topic: str, hour_bucket: int) -> str:
    when = _dt.datetime.fromtimestamp(hour_bucket * 3600, _dt.UTC)
    return f"{topic}/dt={when:%Y-%m-%d}/hour={when:%H}"


def hour_of_path(path: str) -> int | None:
    """The epoch hour of a file under ``.../dt=YYYY-MM-DD/hour=HH/`` (``hour_dir``'s inverse), else None."""
    parts = path.split("/")
    if len(parts) < 3 or not parts[-3].startswith("dt=") or not parts[-2].startswith("hour="):
        return None
    try:
        when = _dt.datetime.strptime(f"{parts[-3][3:]}T{parts[-2][5:]}", "%Y-%m-%dT%H").replace(tzinfo=_dt.UTC)
    except ValueError:
        return None
    return int(when.timestamp()) // 3600


def late_dir(topic: str, arrival_hour: int) -> str:
    """Where ``late_data: separate`` puts the late rows of a run planned in ``arrival_hour``."""
    return hour_dir(topic, arrival_hour).replace(f"{topic}/", f"{topic}/_late/", 1)


def errors_path(topic: str, partition: int, start: int, end: int) -> str:
    return f"{topic}/_errors/{file_name(topic, partition, start, end)}"


def commit_record_path(topic: str, partition: int, start: int, end: int) -> str:
    """Where the Hadoop writer keeps a range's commit summary (Spark's Parquet writer cannot put
    it in the footers as ``logbus.commit``)."""
    return f"{topic}/_commits/{topic}+{partition}+{start}+{end}.json"


def hour_buckets(times_ms) -> np.ndarray:
    """Each row's hour (epoch ms // 1 h, floored) from its partitioning time: a list, a numpy
    array or an Arrow integer array."""
    if isinstance(times_ms, (pa.Array, pa.ChunkedArray)):
        times_ms = times_ms.to_numpy()
    return np.asarray(times_ms, dtype=np.int64) // HOUR_MS


def range_metadata(topic: str, partition: int, start: int, end: int) -> bytes:
    return json.dumps({"topic": topic, "partition": partition, "start": start, "end": end}, sort_keys=True).encode()


def commit_summary(files: int, rows: int, errors: int, gaps, extras: dict | None = None) -> str:
    """What a committed range records (footer ``logbus.commit``): its file count, rows, errors, gaps, and
    ``pipelines.task.summary_extras``: per event hour counts, late offsets, and with deduplication by
    origin its dropped copies and the origin index after it."""
    doc = {"files": files, "rows": rows, "errors": errors, "gaps": [list(g) for g in gaps]}
    if extras is not None:
        doc.update(extras)
    return json.dumps(doc, sort_keys=True)


def error_table(rows: list[tuple], range_meta: bytes, summary: str) -> pa.Table:
    """A range's undecodable values as the ``_errors/`` file holds them."""
    meta = {b"logbus.range": range_meta, b"logbus.commit": summary.encode()}
    return pa.Table.from_batches([error_batch(rows)], schema=ERROR_SCHEMA.with_metadata(meta))


class RangeWriter:
    """Collects a range's decoded batches per hour and writes them as deterministic Parquet."""

    def __init__(self, fs: WarehouseFS, topic: str, partition: int, start: int, end: int, schema: pa.Schema,
                 compression: str = "snappy", row_group_size: int = 128 * 1024) -> None:
        self.fs = fs
        self.topic, self.partition, self.start, self.end = topic, partition, start, end
        self.name = file_name(topic, partition, start, end)
        self.schema = schema.with_metadata({b"logbus.range": range_metadata(topic, partition, start, end)})
        self.compression = None if compression == "none" else compression
        self.row_group_size = row_group_size
        self.attempt = uuid.uuid4().hex[:12]
        if isinstance(fs, LocalFS):  # stage inside the warehouse: the rename is then atomic
            self.stage_dir = fs.local(f"{topic}/_staging")
            self._own_stage = False
        else:
            self.stage_dir = tempfile.mkdtemp(prefix="logbus-stage-")
            self._own_stage = True
        os.makedirs(self.stage_dir, exist_ok=True)
        self._buffers: dict[int, list[pa.Table]] = {}
        self._buffered: dict[int, int] = {}
        self._writers: dict[int, pq.ParquetWriter] = {}
        self._paths: dict[int, str] = {}
        self.rows: dict[int, int] = {}
        self._errors: list[tuple] = []
        self.error_count = 0
        self._late: list[pa.Table] = []
        self._late_hour: int | None = None
        self.late_files: list[dict] = []   # after commit: the _late/ file, if any

    def add(self, batch: pa.RecordBatch, times_ms) -> None:
        """Append rows (in offset order) with each row's partitioning time (epoch ms: a list,
        a numpy array or an Arrow integer array)."""
        n = batch.num_rows
        if n == 0:
            return
        buckets = hour_buckets(times_ms)
        first = int(buckets[0])
        if buckets[-1] == first and bool((buckets == first).all()):
            self._append(first, pa.Table.from_batches([batch]))
            return
        table = pa.Table.from_batches([batch])
        for bucket in np.unique(buckets):  # sorted
            self._append(int(bucket), table.filter(pa.array(buckets == bucket)))

    def add_late(self, table: pa.Table, arrival_hour: int) -> None:
        """Late rows (with their ``intended_hour`` column) for ``<topic>/_late/`` (``late_data: separate``)."""
        if table.num_rows:
            self._late.append(table)
            self._late_hour = arrival_hour

    def add_errors(self, rows: list[tuple]) -> None:
        self._errors.extend(rows)
        self.error_count += len(rows)

    def _append(self, bucket: int, table: pa.Table) -> None:
        self._buffers.setdefault(bucket, []).append(table)
        self._buffered[bucket] = self._buffered.get(bucket, 0) + table.num_rows
        self.rows[bucket] = self.rows.get(bucket, 0) + table.num_rows
        if self._buffered[bucket] >= self.row_group_size:
            self._flush(bucket, final=False)

    def _writer(self, bucket: int) -> pq.ParquetWriter:
        writer = self._writers.get(bucket)
        if writer is None:
            path = os.path.join(self.stage_dir, f"{self.name}.{bucket}.{self.attempt}.tmp")
            writer = pq.ParquetWriter(path, self.schema, compression=self.compression, use_dictionary=True,
                                      write_statistics=True)
            self._writers[bucket] = writer
            self._paths[bucket] = path
        return writer

    def _flush(self, bucket: int, final: bool) -> None:
        tables = self._buffers.get(bucket)
        if not tables:
            return
        # one contiguous chunk per column: how the rows arrived (fetch sizes, vectorised or
        # per-record decoding) must not show in the file (the Parquet writer's page breaks
        # follow the Arrow chunks it is given)
        table = (pa.concat_tables(tables) if len(tables) > 1 else tables[0]).combine_chunks()
        rgs = self.row_group_size
        full = (table.num_rows // rgs) * rgs
        upto = table.num_rows if final else full
        writer = self._writer(bucket)
        pos = 0
        while pos < upto:
            writer.write_table(table.slice(pos, min(rgs, upto - pos)), row_group_size=rgs)
            pos += rgs
        rest = table.slice(upto)
        self._buffers[bucket] = [rest] if rest.num_rows else []
        self._buffered[bucket] = rest.num_rows

    def commit(self, before_rename=None, after_first_rename=None, gaps=(), extras: dict | None = None) -> list[dict]:
        """Close the staged files and rename them into place; returns [{path, rows, bytes}].

        Every file's footer records how many files the range has, its rows and errors, and the
        gaps skipped, so a lost manifest can be rebuilt (and a half-committed range detected)
        from the committed files alone."""
        for bucket in sorted(self._buffers):
            self._flush(bucket, final=True)
        summary = commit_summary(len(self._writers), sum(self.rows.values()), self.error_count, gaps, extras)
        for bucket in sorted(self._writers):
            self._writers[bucket].add_key_value_metadata({"logbus.commit": summary})
            self._writers[bucket].close()
        staged: list[tuple[int | None, str]] = []  # (hour bucket, local path); None: the errors file
        for bucket in sorted(self._paths):
            staged.append((bucket, self._paths[bucket]))
        if self._errors:
            path = os.path.join(self.stage_dir, f"{self.name}.errors.{self.attempt}.tmp")
            pq.write_table(error_table(self._errors, self.schema.metadata[b"logbus.range"], summary), path,
                           compression=self.compression)
            staged.append((None, path))
        late_staged = self._stage_late(summary)
        if before_rename is not None:
            before_rename()
        files = []
        for i, (hour_bucket, local_path) in enumerate(staged):
            final = errors_path(self.topic, self.partition, self.start, self.end) if hour_bucket is None \
                else f"{hour_dir(self.topic, hour_bucket)}/{self.name}"
            placed = self._place(local_path, final, 0 if hour_bucket is None else self.rows[hour_bucket])
            if hour_bucket is not None:
                files.append(placed)
            if i == 0 and after_first_rename is not None:
                after_first_rename()
        if late_staged is not None:
            self.late_files = [self._place(late_staged, f"{late_dir(self.topic, self._late_hour or 0)}/{self.name}",
                                           sum(t.num_rows for t in self._late))]
        self._cleanup()
        return files

    def _stage_late(self, summary: str) -> str | None:
        if not self._late:
            return None
        table = pa.concat_tables(self._late).combine_chunks()
        table = table.replace_schema_metadata({**(table.schema.metadata or {}), b"logbus.commit": summary.encode()})
        path = os.path.join(self.stage_dir, f"{self.name}.late.{self.attempt}.tmp")
        pq.write_table(table, path, compression=self.compression, row_group_size=self.row_group_size)
        return path

    def _place(self, local_path: str, final: str, rows: int) -> dict:
        """Move one staged file to ``final``; returns {path, rows, bytes}."""
        size = os.path.getsize(local_path)
        if isinstance(self.fs, LocalFS):
            self.fs.rename(os.path.relpath(local_path, self.fs.root), final)
        else:
            with open(local_path, "rb") as f:
                data = f.read()
            stage = f"{self.topic}/_staging/{os.path.basename(local_path)}"
            self.fs.client.write(self.fs._p(stage), data=data, overwrite=True)  # type: ignore[attr-defined]
            self.fs.rename(stage, final)
            os.unlink(local_path)
        return {"path": final, "rows": rows, "bytes": size}

    def abort(self) -> None:
        for writer in self._writers.values():
            with contextlib.suppress(Exception):
                writer.close()
        for path in self._paths.values():
            with contextlib.suppress(OSError):
                os.unlink(path)
        self._cleanup()

    def _cleanup(self) -> None:
        if self._own_stage:
            shutil.rmtree(self.stage_dir, ignore_errors=True)
