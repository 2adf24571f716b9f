"""The Hadoop writer (``parquet.writer: spark``, what an hdfs:// warehouse uses) on file://
warehouses, with a real broker and Spark local[2,4]: the same rows, file names and Parquet
schema as the Python writer; a task failing after handing Spark its rows is retried with no
duplicate and right stats; reruns; undecodable values; offsets rebuilt from the files."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from pipelines.config import ConfigError, parse_config
from pipelines.errors import LoadError
from pipelines.faults import LoadFaults
from pipelines.fs import LocalFS
from pipelines.loader import Loader
from pipelines.manifest import OffsetStore
from tests.pipelines.helpers import create_topics, data_files, json_topic, loader_config, new_topic, produce, read_rows

BASE_MS = 1_767_225_600_000  # an hour boundary


@pytest.fixture
def broker(module_broker):
    """The module's one broker (tests/conftest.py): every test here creates topics of its own on it,
    and none stops or reconfigures it."""
    return module_broker


def _produce_spread(bootstrap: str, topic: str, partitions: int, n: int, start: int = 0) -> set:
    """n keyed JSON events with headers per partition, one minute apart (several hour files per range)."""
    records = []
    for p in range(partitions):
        for i in range(start, start + n):
            ts = BASE_MS + i * 60_000
            value = {"member_id": i, "page": f"/p{p}/{i}", "ts": ts, "score": i / 3, "tags": {"i": i}}
            records.append((topic, p, f"k{i}".encode(), json.dumps(value).encode(), ts))
    produce(bootstrap, records)
    return {(topic, p, i) for p in range(partitions) for i in range(start, start + n)}


def _spark_writer(raw: dict) -> dict:
    return {**raw, "parquet": {**raw["parquet"], "writer": "spark"}}


def _by_key(rows: list[dict]) -> dict:
    out = {}
    for r in rows:
        key = (r["topic"], r["partition"], r["offset"])
        assert key not in out, f"duplicate row {key}"
        out[key] = r
    return out


def _relative(warehouse: Path, topic: str) -> list[str]:
    return sorted(str(f.relative_to(warehouse)) for f in data_files(warehouse, topic))


def test_same_rows_files_and_schema_as_the_python_writer_and_offsets_rebuilt(broker, spark, tmp_path):
    topic = new_topic("hw")
    create_topics(broker.bootstrap, [topic], 2)
    expected = _produce_spread(broker.bootstrap, topic, 2, 150)
    raw_py = loader_config(broker.bootstrap, tmp_path / "py", [json_topic(topic)], max_range_records=100)
    raw_hw = _spark_writer(loader_config(broker.bootstrap, tmp_path / "hw", [json_topic(topic)], max_range_records=100))
    with Loader(parse_config(raw_py), spark=spark) as loader:
        [py] = loader.run()
    with Loader(parse_config(raw_hw), spark=spark) as loader:
        [hw] = loader.run()

    rows = _by_key(read_rows(tmp_path / "hw", topic))
    assert set(rows) == expected
    assert rows == _by_key(read_rows(tmp_path / "py", topic)), "every column of every row equals the Python writer's"
    assert [(h["key"], h["value"]) for h in rows[(topic, 1, 7)]["headers"]] == [("source", b"test"), ("n", b"101")]
    assert _relative(tmp_path / "hw", topic) == _relative(tmp_path / "py", topic)
    assert len(_relative(tmp_path / "hw", topic)) == 2 * (2 + 2)  # ranges 0-100 and 100-150, two hours each
    assert sorted(f.name for f in (tmp_path / "hw" / topic / "_staging").iterdir()) == []
    assert not list((tmp_path / "hw").rglob("*.crc")), "no Hadoop checksum sidecars in the warehouse"

    # one schema downstream: the same columns, Arrow types and nullability from both writers
    py_schema = pq.read_schema(data_files(tmp_path / "py", topic)[0]).remove_metadata()
    hw_schema = pq.read_schema(data_files(tmp_path / "hw", topic)[0]).remove_metadata()
    assert [(f.name, f.nullable) for f in hw_schema] == [(f.name, f.nullable) for f in py_schema]
    assert hw_schema.equals(py_schema), f"{hw_schema}\n!=\n{py_schema}"
    assert str(hw_schema.field("timestamp").type) == "timestamp[ms, tz=UTC]"

    # the manifests agree on everything but the bytes (two Parquet writers)
    def partitions(wh: Path) -> list[dict]:
        [m] = OffsetStore(LocalFS(f"file://{wh}")).manifests(topic)
        return [{k: p[k] for k in ("partition", "start", "end", "count", "errors", "min_ts", "max_ts", "files", "gaps")}
                for p in m["partitions"]]

    assert partitions(tmp_path / "hw") == partitions(tmp_path / "py")
    assert hw.records == py.records == 300
    assert hw.bytes == sum(f.stat().st_size for f in data_files(tmp_path / "hw", topic))
    assert all(r.attempt == 0 for r in hw.results)
    df = spark.read.parquet(str(tmp_path / "hw" / topic))
    assert df.count() == 300 and {"dt", "hour"} <= set(df.columns)

    # _offsets lost: the offsets are rebuilt from the committed names and the ranges' commit records
    shutil.rmtree(tmp_path / "hw" / topic / "_offsets")
    expected |= _produce_spread(broker.bootstrap, topic, 2, 10, start=150)
    with Loader(parse_config(raw_hw), spark=spark) as loader:
        [again] = loader.run()
    assert again.records == 20 and all(r.start == 150 for r in again.results)
    assert set(_by_key(read_rows(tmp_path / "hw", topic))) == expected
    store = OffsetStore(LocalFS(f"file://{tmp_path / 'hw'}"))
    rebuilt = store.manifests(topic)[0]
    assert [m["kind"] for m in store.manifests(topic)] == ["rebuilt", "load"]
    assert [(p["partition"], p["end"], p["count"]) for p in rebuilt["partitions"]] == [(0, 150, 150), (1, 150, 150)]


def test_task_failure_after_partial_output_is_retried_without_duplicates(broker, spark, tmp_path):
    topic = new_topic("hwretry")
    create_topics(broker.bootstrap, [topic], 2)
    expected = _produce_spread(broker.bootstrap, topic, 2, 150)
    warehouse = tmp_path / "wh"
    raw = loader_config(broker.bootstrap, warehouse, [json_topic(topic)], parquet={"row_group_size": 25})
    cfg = parse_config(_spark_writer(raw))
    markers = tmp_path / "markers"
    with Loader(cfg, spark=spark, faults=LoadFaults(fail_after_write=str(markers))) as loader:
        [result] = loader.run()
    assert len(list(markers.iterdir())) == 2, "each task failed once, after handing Spark all its rows"
    assert all(r.attempt == 1 for r in result.results), "Spark ran every task a second time"
    assert set(_by_key(read_rows(warehouse, topic))) == expected
    [m] = OffsetStore(LocalFS(f"file://{warehouse}")).manifests(topic)
    assert [(p["count"], p["errors"], len(p["files"])) for p in m["partitions"]] == [(150, 0, 3), (150, 0, 3)]
    assert sum(f["rows"] for r in result.results for f in r.files) == 300
    assert {f.name for f in data_files(warehouse, topic)} == {f"{topic}+0+0+150.parquet", f"{topic}+1+0+150.parquet"}
    for f in data_files(warehouse, topic):  # parquet.row_group_size holds for Spark's writer too
        meta = pq.read_metadata(f)
        sizes = [meta.row_group(i).num_rows for i in range(meta.num_row_groups)]
        assert sizes[:-1] == [25] * (len(sizes) - 1) and 0 < sizes[-1] <= 25, sizes


def test_rerun_reproduces_the_same_files_and_rows(broker, spark, tmp_path):
    topic = new_topic("hwrerun")
    create_topics(broker.bootstrap, [topic], 2)
    _produce_spread(broker.bootstrap, topic, 2, 130)
    warehouse = tmp_path / "wh"
    cfg = parse_config(_spark_writer(loader_config(broker.bootstrap, warehouse, [json_topic(topic)],
                                                   max_range_records=100)))
    with Loader(cfg, spark=spark) as loader:
        [first] = loader.run()
        before = {f.relative_to(warehouse): f.read_bytes() for f in data_files(warehouse, topic)}
        rows_before = _by_key(read_rows(warehouse, topic))
        for f in data_files(warehouse, topic)[::2]:
            f.unlink()  # lose some of the data (the others are replaced in place)...
        _produce_spread(broker.bootstrap, topic, 2, 10, start=130)  # ...while the topic moves on
        result = loader.rerun(first.run_id)
    after = {f.relative_to(warehouse): f.read_bytes() for f in data_files(warehouse, topic)}
    assert result.records == first.records == 260
    assert set(after) == set(before)
    assert _by_key(read_rows(warehouse, topic)) == rows_before
    assert after == before, "Spark's Parquet writer is deterministic too: same rows, same bytes"
    assert OffsetStore(LocalFS(f"file://{warehouse}")).manifest(topic, first.run_id)["reruns"][0]["records"] == 260


def test_undecodable_values_go_to_errors_and_the_pending_run_is_finished_from_the_files(broker, spark, tmp_path):
    topic = new_topic("hwbad")
    create_topics(broker.bootstrap, [topic], 1)
    good = [json.dumps({"member_id": i, "page": "p", "ts": BASE_MS}).encode() for i in range(18)]
    bad = [b"{not json", json.dumps({"member_id": "x", "page": "p", "ts": 0}).encode()]
    produce(broker.bootstrap, [(topic, 0, None, v, None) for v in good[:9] + bad + good[9:]], headers=False)
    warehouse = tmp_path / "wh"
    raw = _spark_writer(loader_config(broker.bootstrap, warehouse, [json_topic(topic)]))
    with Loader(parse_config(raw), spark=spark) as loader:
        with pytest.raises(LoadError, match=r"2 of 20 records could not be decoded .*max_error_ratio"):
            loader.run()
    assert OffsetStore(LocalFS(f"file://{warehouse}")).manifests(topic) == []
    errs = pq.read_table(warehouse / topic / "_errors" / f"{topic}+0+0+20.parquet").to_pylist()
    assert [e["offset"] for e in errs] == [9, 10] and errs[0]["value"] == b"{not json"
    assert "not JSON" in errs[0]["error"] and "member_id" in errs[1]["error"]
    with Loader(parse_config({**raw, "max_error_ratio": 0.2}), spark=spark) as loader:
        [pending_done, result] = loader.run()
    assert all(r.rebuilt for r in pending_done.results), "the range was complete: taken from its files"
    assert pending_done.records == 18 and pending_done.errors == 2 and result.records == 0
    assert sorted(r["offset"] for r in read_rows(warehouse, topic)) == list(range(9)) + list(range(11, 20))
    from pipelines.validation import validate_run

    validation = validate_run(parse_config({**raw, "max_error_ratio": 0.2}), pending_done.run_id)
    assert validation.success and len(validation.topics[0].checks) > 5


def test_parquet_writer_config():
    base = {"cluster": {"bootstrap.servers": "127.0.0.1:9092"}, "topics": ["t"]}
    assert parse_config({**base, "warehouse": "hdfs://nn:8020/wh"}).parquet_writer == "spark"
    assert parse_config({**base, "warehouse": "file:///wh"}).parquet_writer == "python"
    assert parse_config({**base, "warehouse": "file:///wh", "parquet": {"writer": "spark"}}).parquet_writer == "spark"
    with pytest.raises(ConfigError, match=r"^parquet\.writer: 'java' is not one of python, spark$"):
        parse_config({**base, "warehouse": "file:///wh", "parquet": {"writer": "java"}})
    with pytest.raises(ConfigError, match=r"^parquet\.writer: python cannot write an hdfs:// warehouse"):
        parse_config({**base, "warehouse": "hdfs://nn:8020/wh", "parquet": {"writer": "python"}})
    with pytest.raises(ConfigError, match=r"^parquet\.compression: brotli is not built into Spark"):
        parse_config({**base, "warehouse": "hdfs://nn:8020/wh", "parquet": {"compression": "brotli"}})
