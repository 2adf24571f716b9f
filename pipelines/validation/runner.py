"""Running the suites: read a run's files, validate with Great Expectations, store the results.

The frame a suite sees holds the rows of the data files named after the run's planned ranges
(``<topic>+<partition>+<start>+<end>.parquet`` under any ``dt=/hour=``) plus the offsets of the
undecodable values in ``_errors/`` (``_source`` = ``data`` or ``errors``), with pyarrow-backed
columns so nulls keep their type. Two derived columns: ``_source`` and ``_offset_step`` (offset
minus the previous offset of the partition, the planned start counting as ``start - 1`` and
recorded retention gaps and dropped duplicate copies as present), so "contiguous" is simply
"every step is 1".
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import tempfile
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pipelines.config import LoaderConfig, TopicSpec
from pipelines.errors import ValidationFailed
from pipelines.fs import read_parquet
from pipelines.validation.page import observed, render_page
from pipelines.validation.suite import ARROW_TYPES, build_suite, declared_columns, expectation_specs

if TYPE_CHECKING:
    from pipelines.fs import WarehouseFS

VALIDATION = "_validation"
DOCS_PAGE = "docs/index.html"   # the Data Docs of a topic's run, under <topic>/_validation/<run_id>/
log = logging.getLogger("logbus.validation")


@dataclass
class TopicValidation:
    topic: str
    run_id: str
    success: bool
    checks: list[dict] = field(default_factory=list)
    rows: int = 0
    partitions: list[dict] = field(default_factory=list)
    result_path: str = ""
    docs_path: str = ""

    @property
    def failures(self) -> list[dict]:
        return [c for c in self.checks if not c["success"]]

    def to_dict(self) -> dict:
        return {"topic": self.topic, "run_id": self.run_id, "success": self.success, "rows": self.rows,
                "evaluated": len(self.checks), "failed": len(self.failures), "partitions": self.partitions,
                "result": self.result_path, "docs": self.docs_path, "checks": self.checks}


@dataclass
class RunValidation:
    run_id: str
    topics: list[TopicValidation]

    @property
    def success(self) -> bool:
        return all(t.success for t in self.topics)

    @property
    def failures(self) -> list[tuple[str, dict]]:
        return [(t.topic, c) for t in self.topics for c in t.failures]

    def to_dict(self) -> dict:
        return {"run_id": self.run_id, "success": self.success,
                "topics": {t.topic: {k: v for k, v in t.to_dict().items() if k != "checks"} | {
                    "failed_checks": [f"{c['expectation']}: {c['check']}" for c in t.failures]} for t in self.topics}}


def stored_validation(fs: WarehouseFS, topic: str, run_id: str) -> dict | None:
    """The stored result of a topic's run (``validation.json``; its checks left out), None if never validated."""
    try:
        doc = json.loads(fs.read_bytes(f"{topic}/{VALIDATION}/{run_id}/validation.json"))
    except (FileNotFoundError, ValueError):
        return None
    return {k: v for k, v in doc.items() if k not in ("checks", "files")}


def stored_docs_page(fs: WarehouseFS, topic: str, run_id: str) -> bytes | None:
    """The Data Docs page of a topic's run, None if there is none."""
    try:
        return fs.read_bytes(f"{topic}/{VALIDATION}/{run_id}/{DOCS_PAGE}")
    except FileNotFoundError:
        return None


# --- reading a run's rows ----------------------------------------------------------------------------

def _ranges(manifest: dict) -> set[tuple[int, int, int]]:
    out = set()
    for p in manifest.get("partitions", []):
        for s, e in p.get("ranges") or [[p["start"], p["end"]]]:
            if int(e) > int(s):
                out.add((int(p["partition"]), int(s), int(e)))
    return out


def read_run_frame(fs, topic: str, spec: TopicSpec, manifest: dict):
    """(pandas frame of the run's rows + error offsets, the data files' Arrow schema, data file paths)."""
    import pandas as pd
    import pyarrow as pa

    from pipelines.decoders import Decoder
    from pipelines.writer import errors_path, parse_file_name

    wanted = _ranges(manifest)
    files = []
    for path in fs.walk_files(topic):
        parsed = parse_file_name(path) if path.endswith(".parquet") else None
        if parsed and parsed[0] == topic and (parsed[1], parsed[2], parsed[3]) in wanted:
            files.append(path)
    expected_schema = Decoder(spec).schema
    tables = [read_parquet(fs, f) for f in files]
    schema = tables[0].schema if tables else expected_schema
    if tables:
        data = pa.concat_tables(tables, promote_options="permissive")
    else:
        data = expected_schema.empty_table()
    data = data.drop_columns([c for c in ("key", "headers") if c in data.column_names])
    data = data.append_column("_source", pa.array(["data"] * data.num_rows, pa.string()))
    err_tables = []
    for partition, s, e in sorted(wanted):
        path = errors_path(topic, partition, s, e)
        if fs.exists(path):
            t = read_parquet(fs, path).select(["topic", "partition", "offset"])
            err_tables.append(t)
    if err_tables:
        errs = pa.concat_tables(err_tables)
        cols = {}
        for f in data.schema:
            if f.name in ("topic", "partition", "offset"):
                cols[f.name] = errs.column(f.name).cast(f.type)
            elif f.name == "_source":
                cols[f.name] = pa.array(["errors"] * errs.num_rows, pa.string())
            else:
                cols[f.name] = pa.nulls(errs.num_rows, f.type)
        data = pa.concat_tables([data, pa.table(cols, schema=data.schema)])
    frame = data.to_pandas(types_mapper=pd.ArrowDtype)
    frame = frame.sort_values(["partition", "offset"], kind="stable").reset_index(drop=True)
    frame["_offset_step"] = _offset_steps(frame, manifest)
    return frame, schema, files


def _offset_steps(frame, manifest: dict):
    import pandas as pd

    starts = {int(p["partition"]): int(p["start"]) for p in manifest.get("partitions", [])}
    # retention gaps, dropped duplicate copies (pipelines.origin_index) and late records kept out of their
    # hour (late_data separate/drop) are offsets read but not rows
    gaps = {int(p["partition"]): sorted((int(a), int(b)) for a, b in (p.get("gaps") or []) + (p.get("duplicate_offsets") or [])
                                        + (p.get("late_offsets") or []))
            for p in manifest.get("partitions", [])}
    steps = []
    prev_part = None
    prev = 0
    for part, off in zip(frame["partition"].tolist(), frame["offset"].tolist()):
        if part != prev_part:
            prev_part, prev = part, starts.get(part, off) - 1
        for a, b in gaps.get(part, ()):
            if prev + 1 == a and off >= b:  # a gap recorded right after the previous offset counts as read
                prev = b - 1
        steps.append(off - prev)
        prev = off
    return pd.array(steps, dtype="int64[pyarrow]")


def _schema_checks(spec: TopicSpec, schema) -> list[dict]:
    """Exact Arrow types of the declared columns (GE sees only Python value types)."""
    checks = []
    for col, ftype, _ in declared_columns(spec):
        want = ARROW_TYPES[ftype]
        idx = schema.get_field_index(col)
        got = str(schema.field(idx).type) if idx >= 0 else None
        checks.append({"expectation": "arrow_schema", "check": f"column {col} is stored as {want} ({ftype})",
                       "kwargs": {"column": col, "type": want}, "success": got == want, "observed": got})
    return checks


# --- Great Expectations -----------------------------------------------------------------------------

def _context():
    """An ephemeral GE context that builds no Data Docs site of its own (pipelines.validation.page renders ours)."""
    import great_expectations as gx
    from great_expectations.data_context.types.base import ProgressBarsConfig

    logging.getLogger("great_expectations").setLevel(logging.WARNING)
    ctx = gx.get_context(mode="ephemeral")
    ctx.variables.progress_bars = ProgressBarsConfig(globally=False)
    for name, site in dict(ctx.variables.data_docs_sites or {}).items():  # GE's default site: a stray temp dir
        base = (site.get("store_backend") or {}).get("base_directory")
        ctx.delete_data_docs_site(name)
        if base and os.path.dirname(os.path.abspath(base)) == tempfile.gettempdir():
            shutil.rmtree(base, ignore_errors=True)
    return ctx


def _jsonable(value: Any) -> Any:
    return json.loads(json.dumps(value, default=str))


def run_checks(suite_name: str, asset_name: str, run_name: str, specs: list[dict], frame) -> tuple[Any, list[dict]]:
    """Validate ``frame`` with the suite of ``specs`` (``pipelines.validation.suite``) in an ephemeral
    context; returns (Great Expectations' validation result, one dict per check)."""
    import great_expectations as gx
    from great_expectations.core.run_identifier import RunIdentifier

    ctx = _context()
    suite = ctx.suites.add(build_suite(suite_name, specs))
    asset = ctx.data_sources.add_pandas("warehouse").add_dataframe_asset(asset_name)
    batch_def = asset.add_batch_definition_whole_dataframe("run")
    definition = ctx.validation_definitions.add(gx.ValidationDefinition(name=f"{asset_name}.{run_name}", data=batch_def,
                                                                        suite=suite))
    checkpoint = ctx.checkpoints.add(gx.Checkpoint(name=suite_name, validation_definitions=[definition],
                                                   result_format="SUMMARY", actions=[]))
    outcome = checkpoint.run(batch_parameters={"dataframe": frame}, run_id=RunIdentifier(run_name=run_name))
    [result] = list(outcome.run_results.values())
    checks = []
    for r in result.results:
        cfg = r.expectation_config
        kwargs = {k: v for k, v in cfg.kwargs.items() if k not in ("batch_id",)}
        exc = r.exception_info or {}
        check = {"expectation": cfg.type, "check": (cfg.meta or {}).get("check", cfg.type),
                 "kwargs": _jsonable(kwargs), "success": bool(r.success),
                 "observed": _jsonable(observed(r.result or {}))}
        if exc.get("raised_exception"):
            check["error"] = str(exc.get("exception_message"))
        checks.append(check)
    return result, checks


def validate_topic(fs, topic: str, spec: TopicSpec, manifest: dict, run_id: str) -> TopicValidation:
    """Validate one topic's run and store its results and Data Docs under ``<topic>/_validation/<run_id>/``."""
    frame, schema, files = read_run_frame(fs, topic, spec, manifest)
    suite_name = f"logbus.{topic}"
    result, checks = run_checks(suite_name, topic, run_id, expectation_specs(topic, spec, manifest), frame)
    arrow_checks = _schema_checks(spec, schema)
    checks += arrow_checks
    counts = frame[frame["_source"] == "data"].groupby("partition").size().to_dict() if len(frame) else {}
    partitions = [{"partition": int(p["partition"]), "start": int(p["start"]), "end": int(p["end"]),
                   "manifest_count": int(p["count"]), "rows": int(counts.get(int(p["partition"]), 0))}
                  for p in sorted(manifest.get("partitions", []), key=lambda p: int(p["partition"]))]
    out = TopicValidation(topic, run_id, all(c["success"] for c in checks), checks, int((frame["_source"] == "data").sum()),
                          partitions)
    base = f"{topic}/{VALIDATION}/{run_id}"
    out.result_path = fs.uri(f"{base}/validation.json")
    out.docs_path = fs.uri(f"{base}/{DOCS_PAGE}")
    doc = out.to_dict() | {"files": files, "suite": suite_name}
    ge_result = _jsonable(result.to_json_dict())
    fs.write_bytes(f"{base}/validation.json", json.dumps(doc, indent=1, sort_keys=True).encode())
    fs.write_bytes(f"{base}/ge_result.json", json.dumps(ge_result, indent=1).encode())
    if fs.exists(f"{base}/docs"):  # Great Expectations' own site, from a validation before this page
        fs.delete(f"{base}/docs", recursive=True)
    page = render_page(topic, run_id, ge_result, arrow_checks, partitions, out.rows, files)
    fs.write_bytes(f"{base}/{DOCS_PAGE}", page.encode())
    return out


# --- a run -----------------------------------------------------------------------------------------

def run_manifests(config: LoaderConfig, run_id: str, store=None) -> dict[str, dict]:
    """{topic: manifest} of a run: the committed manifest, or for a loaded but uncommitted run the
    manifest ``commit`` would write (its plan plus ``<run_id>.loaded.json``)."""
    from pipelines.manifest import OffsetStore, build_manifest

    if store is None:
        store = OffsetStore(config.warehouse_fs())
    out = {}
    for topic in store.topics():
        if not any(s.matches(topic) for s in config.topics):
            continue
        manifest = store.manifest(topic, run_id)
        if manifest is None:
            plan = store.plan(topic, run_id)
            if plan is None:
                continue
            loaded = store.loaded(topic, run_id)
            if loaded is None:
                raise ValueError(f"run {run_id} of {topic} has no load results: load it before validating")
            manifest = build_manifest(plan, loaded)
        out[topic] = manifest
    return out


def validate_run(config: LoaderConfig, run_id: str, raise_on_failure: bool = True,
                 fs: WarehouseFS | None = None) -> RunValidation:
    """Validate every topic of a run (on ``fs`` if the caller has it open); raises ``ValidationFailed`` naming the failures."""
    from pipelines.manifest import OffsetStore

    fs = config.warehouse_fs() if fs is None else fs
    manifests = run_manifests(config, run_id, OffsetStore(fs))
    if not manifests:
        raise ValueError(f"no run {run_id!r} of these topics in {config.warehouse}")
    topics = []
    for topic in sorted(manifests):
        manifest = manifests[topic]
        spec = config.spec_for(topic)
        if manifest.get("spec"):  # decode as the run did; extra expectations from today's config
            saved = TopicSpec.from_dict(topic, manifest["spec"])
            spec = saved if spec is None else TopicSpec(name=topic, format=saved.format, schema=saved.schema,
                                                        time_field=saved.time_field, expectations=spec.expectations)
        if spec is None:
            continue
        tv = validate_topic(fs, topic, spec, manifest, run_id)
        log.info("validation of %s run %s: %s (%d checks, %d failed)", topic, run_id,
                 "passed" if tv.success else "FAILED", len(tv.checks), len(tv.failures))
        topics.append(tv)
    run = RunValidation(run_id, topics)
    if raise_on_failure and not run.success:
        raise ValidationFailed(run)
    return run
