"""The Great Expectations suites on hand-made warehouses (real GE, no broker, no Spark): a good
run passes and stores JSON + Data Docs; each kind of damage fails the check that names it."""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import replace
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pipelines.config import parse_config
from pipelines.decoders import ERROR_SCHEMA, Decoder
from pipelines.fs import LocalFS
from pipelines.manifest import OffsetStore, build_manifest
from pipelines.task_stats import TaskStats
from pipelines.validation import ValidationFailed, validate_run
from pipelines.validation.suite import ARROW_TYPES, expectation_specs
from tests.validation.offline import open_in_chromium, remote_resources, resources

TOPIC = "page-views"
SCHEMA = [{"name": "member_id", "type": "long", "required": True}, {"name": "page", "type": "string", "required": True},
          {"name": "ts", "type": "timestamp", "required": True}, {"name": "score", "type": "double"}]
RUN = "20260101T000000000Z"
# what Great Expectations' own Data Docs load (the helper must see it: the page must not)
GE_CDN_URLS = ["https://code.jquery.com/jquery-3.7.1.min.js", "//unpkg.com/bootstrap-table.css",
               "https://example.org/f.woff2"]
GE_CDN_SAMPLE = (f'<script src="{GE_CDN_URLS[0]}"></script><link rel="stylesheet" href="{GE_CDN_URLS[1]}">'
                 f'<style>@font-face {{src: url("{GE_CDN_URLS[2]}")}}</style><a href="https://greatexpectations.io">x</a>')


def config(wh: Path, expectations=None, schema=SCHEMA):
    topic = {"name": TOPIC, "format": "json", "schema": schema, "time_field": "ts"}
    if expectations:
        topic["expectations"] = expectations
    return parse_config({"cluster": {"bootstrap.servers": "127.0.0.1:1"}, "warehouse": f"file://{wh}", "topics": [topic]})


def rows(partition: int, offsets, **over):
    base = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    out = []
    for o in offsets:
        r = {"topic": TOPIC, "partition": partition, "offset": o, "timestamp": base, "key": b"k", "headers": [],
             "member_id": 1 + o, "page": f"/p/{o}", "ts": base, "score": o / 2}
        r.update(over)
        out.append(r)
    return out


def write(wh: Path, cfg, partition: int, start: int, end: int, data: list[dict], hour: str = "00") -> dict:
    schema = Decoder(cfg.spec_for(TOPIC)).schema
    schema = pa.schema([f.with_nullable(True) for f in schema])  # let a test write the nulls a decoder would refuse
    d = wh / TOPIC / "dt=2026-01-01" / f"hour={hour}"
    d.mkdir(parents=True, exist_ok=True)
    path = d / f"{TOPIC}+{partition}+{start}+{end}.parquet"
    pq.write_table(pa.Table.from_pylist(data, schema=schema), path)
    return {"path": str(path.relative_to(wh)), "rows": len(data), "bytes": path.stat().st_size}


def seed(wh: Path, cfg, counts=None, plan_end=10, data=None, file_cfg=None):
    """A planned + loaded run of 2 partitions x [0, plan_end); ``counts`` overrides the load's counts."""
    store = OffsetStore(LocalFS(f"file://{wh}"))
    spec = cfg.spec_for(TOPIC)
    plan = {"run_id": RUN, "topic": TOPIC, "planned_ms": 0, "spec": spec.to_dict(), "max_range_records": 100,
            "partitions": [{"partition": p, "start": 0, "end": plan_end, "ranges": [[0, plan_end]], "gap": None,
                            "reason": "earliest"} for p in (0, 1)]}
    store.write_plan(plan)
    results = []
    for p in (0, 1):
        d = (data or {}).get(p, rows(p, range(plan_end)))
        f = write(wh, file_cfg or cfg, p, 0, plan_end, d)
        results.append(TaskStats(index=p, topic=TOPIC, partition=p, start=0, end=plan_end,
                                 count=(counts or {}).get(p, len(d)), bytes=f["bytes"], files=(f,), min_ts=0, max_ts=0))
    store.write_loaded(TOPIC, RUN, results)
    return store, plan, results


def failed_checks(exc: ValidationFailed) -> list[str]:
    return [c["check"] for _, c in exc.run.failures]


def test_a_good_run_passes_and_stores_json_and_data_docs(tmp_path):
    cfg = config(tmp_path)
    seed(tmp_path, cfg)
    run = validate_run(cfg, RUN)
    assert run.success
    [tv] = run.topics
    assert tv.rows == 20 and [p["rows"] for p in tv.partitions] == [10, 10]
    base = tmp_path / TOPIC / "_validation" / RUN
    doc = json.loads((base / "validation.json").read_text())
    assert doc["success"] and doc["failed"] == 0 and doc["evaluated"] >= 20
    checks = {c["check"] for c in doc["checks"]}
    assert "partition 0: row count equals the manifest's count (10)" in checks
    assert "(topic, partition, offset) is unique" in checks
    assert "column member_id is required: never null" in checks
    assert "column member_id is stored as int64 (long)" in checks
    assert json.loads((base / "ge_result.json").read_text())["success"] is True
    page = (base / "docs" / "index.html").read_text()
    assert "logbus.page-views" in page and "validation passed" in page
    assert [p.name for p in (base / "docs").iterdir()] == ["index.html"]  # one file: nothing else to fetch
    assert resources(page) == [] and remote_resources(GE_CDN_SAMPLE) == GE_CDN_URLS
    assert "Content-Security-Policy" in page and "<script" not in page
    arrow = [c for c in doc["checks"] if c["expectation"] == "arrow_schema"]
    assert len(arrow) == 8 and all(c["success"] for c in arrow)
    for c in arrow:  # each Arrow-type check is a row of the page: column, expected type, stored type
        col, want = c["kwargs"]["column"], c["kwargs"]["type"]
        assert f"<td><code>{col}</code></td><td><code>{want}</code></td><td><code>{want}</code></td>" in page


def test_the_page_shows_the_arrow_type_check_of_every_declared_type(tmp_path):
    base = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    values = {"string": "s", "json": "{}", "int": 1, "long": 2, "float": 0.5, "double": 0.25, "boolean": True,
              "timestamp": base, "binary": b"b"}
    name = {t: "ts" if t == "timestamp" else f"f_{t}" for t in values}
    cfg = config(tmp_path, schema=[{"name": name[t], "type": t} for t in values])
    data = {p: [{"topic": TOPIC, "partition": p, "offset": o, "timestamp": base, "key": None, "headers": [],
                 **{name[t]: v for t, v in values.items()}} for o in range(10)] for p in (0, 1)}
    seed(tmp_path, cfg, data=data)
    assert validate_run(cfg, RUN).success
    page = (tmp_path / TOPIC / "_validation" / RUN / "docs" / "index.html").read_text()
    assert len(set(ARROW_TYPES.values())) == 8
    for ftype, want in ARROW_TYPES.items():  # declared type -> its Arrow type, checked on the stored schema
        assert f"<td><code>{name[ftype]}</code></td><td><code>{want}</code></td><td><code>{want}</code></td>" in page


@pytest.mark.integration  # Debian's chromium: installed by make setup
def test_headless_chromium_shows_the_page_and_requests_nothing(tmp_path):
    cfg = config(tmp_path)
    seed(tmp_path, cfg)
    validate_run(cfg, RUN)
    shot, requested = open_in_chromium((tmp_path / TOPIC / "_validation" / RUN / "docs" / "index.html").as_uri(),
                                       tmp_path / "chromium")
    # the control: a blank page that loads GE's CDN assets; its requests are seen, its screenshot is tiny
    (tmp_path / "cdn.html").write_text(GE_CDN_SAMPLE.replace("x</a>", "</a>"))
    blank, cdn_requests = open_in_chromium((tmp_path / "cdn.html").as_uri(), tmp_path / "control")
    assert requested == [] and GE_CDN_URLS[0] in cdn_requests
    assert len(shot) > 10 * len(blank)  # tables and text compress far worse than a white screen


def test_a_bad_manifest_count_fails_naming_the_partition(tmp_path):
    cfg = config(tmp_path)
    seed(tmp_path, cfg, counts={1: 11})
    with pytest.raises(ValidationFailed) as info:
        validate_run(cfg, RUN)
    assert failed_checks(info.value) == ["partition 1: row count equals the manifest's count (11)"]
    assert "expect_table_row_count_to_equal: partition 1: row count equals the manifest's count (11) (observed 10)" in str(info.value)
    doc = json.loads((tmp_path / TOPIC / "_validation" / RUN / "validation.json").read_text())
    assert doc["success"] is False and doc["failed"] == 1


def test_duplicates_holes_out_of_range_and_nulls_are_caught(tmp_path):
    cfg = config(tmp_path)
    bad0 = rows(0, [0, 1, 2, 2, 3, 4, 5, 6, 7, 8])            # offset 2 twice, 9 missing
    bad1 = rows(1, [0, 1, 2, 3, 5, 6, 7, 8, 9, 12])           # 4 missing, 12 outside [0, 10)
    bad1[0]["page"] = None                                    # a required column null
    seed(tmp_path, cfg, data={0: bad0, 1: bad1})
    with pytest.raises(ValidationFailed) as info:
        validate_run(cfg, RUN)
    failed = failed_checks(info.value)
    assert "(topic, partition, offset) is unique" in failed
    assert "offsets are contiguous (each follows the previous one of its partition, from the planned start)" in failed
    assert "partition 1: offsets inside the planned range [0, 10)" in failed
    assert "column page is required: never null" in failed
    assert "partition 0: row count equals the manifest's count (10)" not in failed   # the load's own count matches


def test_extra_expectations_from_the_config(tmp_path):
    cfg = config(tmp_path, expectations=[{"expect_column_values_to_be_between": {"column": "member_id", "min_value": 5}}])
    seed(tmp_path, cfg)
    with pytest.raises(ValidationFailed) as info:
        validate_run(cfg, RUN)
    assert failed_checks(info.value) == [f"expectations[0] of topic {TOPIC} in the loader config"]
    assert "expect_column_values_to_be_between" in str(info.value)


def test_undecodable_values_count_toward_contiguity(tmp_path):
    cfg = config(tmp_path)
    store, plan, results = seed(tmp_path, cfg, data={0: rows(0, [0, 1, 2, 4, 5, 6, 7, 8, 9])})
    err_dir = tmp_path / TOPIC / "_errors"
    err_dir.mkdir()
    err = pa.Table.from_pylist([{"topic": TOPIC, "partition": 0, "offset": 3, "timestamp": None, "key": None,
                                 "value": b"{", "error": "bad json"}], schema=ERROR_SCHEMA)
    pq.write_table(err, err_dir / f"{TOPIC}+0+0+10.parquet")
    results[0] = replace(results[0], errors=1)
    store.write_loaded(TOPIC, RUN, results)
    assert validate_run(cfg, RUN).success


def test_suite_covers_every_planned_partition_and_a_wrong_type_fails(tmp_path):
    cfg = config(tmp_path)
    manifest = build_manifest(*seed(tmp_path, cfg)[1:])
    specs = expectation_specs(TOPIC, cfg.spec_for(TOPIC), manifest)
    assert sum(1 for s in specs if s["type"] == "expect_table_row_count_to_equal") == 4
    # files whose member_id is a string: the Arrow schema check and GE's type check both fail
    wrong = parse_config({"cluster": {"bootstrap.servers": "127.0.0.1:1"}, "warehouse": f"file://{tmp_path}/w2",
                          "topics": [{"name": TOPIC, "format": "json", "time_field": "ts",
                                      "schema": [dict(SCHEMA[0], type="string")] + SCHEMA[1:]}]})
    seed(tmp_path / "w2", config(tmp_path / "w2"), data={p: rows(p, range(10), member_id="m") for p in (0, 1)},
         file_cfg=wrong)
    with pytest.raises(ValidationFailed) as info:
        validate_run(config(tmp_path / "w2"), RUN)
    assert set(failed_checks(info.value)) == {"column member_id is stored as int64 (long)", "column member_id holds long values"}
    page = (tmp_path / "w2" / TOPIC / "_validation" / RUN / "docs" / "index.html").read_text()
    assert "validation FAILED" in page and "38 of 40 checks passed" in page  # 32 GE + 8 Arrow-type checks
    assert ('<tr class="failed"><td>FAILED</td><td><code>member_id</code></td><td><code>int64</code></td>'
            '<td><code>string</code></td></tr>') in page
