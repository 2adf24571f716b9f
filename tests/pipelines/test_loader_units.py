"""Units without a cluster: the config's errors name their key, ranges split, decoders sort
good values from bad ones, the writer is deterministic and names files after the range."""

from __future__ import annotations

from pathlib import Path

import pytest

from broker.client.simple_consumer import MessageAndMetadata
from pipelines.config import ConfigError, TopicSpec, load_config, parse_config
from pipelines.dag_factory import airflow_schedule
from pipelines.decoders import Decoder
from pipelines.fs import LocalFS
from pipelines.manifest import OffsetStore, split_range
from pipelines.writer import RangeWriter, parse_file_name

ROOT = Path(__file__).resolve().parents[2]
BASE = {"cluster": {"bootstrap.servers": "127.0.0.1:9092"}, "warehouse": "file:///tmp/w", "topics": ["t"]}


def test_sample_config_parses():
    cfg = load_config(ROOT / "conf" / "loader.yaml")
    assert cfg.warehouse.startswith("file://") and cfg.topics


@pytest.mark.parametrize("change, key", [
    ({"warehouse": "s3://bucket/x"}, "warehouse"),
    ({"cluster": {}}, "cluster.bootstrap.servers"),
    ({"cluster": {"bootstrap.servers": "nohost"}}, "cluster.bootstrap.servers"),
    ({"topics": [{"name": "t", "format": "xml"}]}, "topics[0].format"),
    ({"topics": [{"name": "t", "format": "json"}]}, "topics[0].schema"),
    ({"topics": [{"name": "t", "format": "json", "schema": [{"name": "a", "type": "date"}]}]}, "topics[0].schema[0].type"),
    ({"topics": [{"name": "t", "format": "json", "schema": {"a": "long"}, "time_field": "b"}]}, "topics[0].time_field"),
    ({"topics": [{"pattern": "(", "format": "raw"}]}, "topics[0].pattern"),
    ({"topics": [{"name": "t", "late_data": {"policy": "ignore"}}]}, "topics[0].late_data.policy"),
    ({"topics": [{"name": "t", "late_data": {"allowed_lateness": "two hours"}}]}, "topics[0].late_data.allowed_lateness"),
    ({"topics": [{"name": "t", "late_data": {"lateness": "2h"}}]}, "topics[0].late_data.lateness"),
    ({"topics": [{"name": "t", "late_data": "drop"}]}, "topics[0].late_data"),
    ({"topics": [{"name": "t", "pattern": "x"}]}, "topics[0]"),
    ({"reset": "yesterday"}, "reset"),
    ({"out_of_range": "skip"}, "out_of_range"),
    ({"max_range_records": 0}, "max_range_records"),
    ({"max_error_ratio": 2}, "max_error_ratio"),
    ({"spark": {"mastr": "local"}}, "spark.mastr"),
    ({"compaction": {"older_than": "a week"}}, "compaction.older_than"),
    ({"airflow": {"retries": -1}}, "airflow.retries"),
    ({"airflow": {"retry_delay": "soon"}}, "airflow.retry_delay"),
    ({"colour": "blue"}, "colour"),
])
def test_bad_config_names_the_key(change, key):
    with pytest.raises(ConfigError) as info:
        parse_config({**BASE, **change})
    assert info.value.key == key
    assert str(info.value).startswith(f"{key}: ")


def test_reset_forms():
    assert parse_config({**BASE, "reset": "latest"}).reset.kind == "latest"
    assert parse_config({**BASE, "reset": 1700000000000}).reset.timestamp_ms == 1700000000000
    assert parse_config({**BASE, "reset": "2026-01-01T00:00:00Z"}).reset.timestamp_ms == 1767225600000


def test_compaction_and_airflow_sections():
    cfg = parse_config({**BASE, "compaction": {"older_than": "6h", "target_size": "64MB", "schedule": "none"},
                        "airflow": {"retries": 0, "retry_delay": "30s"}, "schedule": "none"})
    assert (cfg.compaction_older_than_ms, cfg.compaction_target_bytes) == (6 * 3_600_000, 64 * 1000**2)
    assert (cfg.airflow_retries, cfg.airflow_retry_delay_ms) == (0, 30_000)
    assert (airflow_schedule(cfg.schedule), airflow_schedule(cfg.compaction_schedule)) == (None, None)
    assert airflow_schedule(parse_config(BASE).schedule) == "@hourly"
    assert (parse_config(BASE).airflow_retries, parse_config(BASE).airflow_retry_delay_ms) == (2, 300_000)


def test_late_data_forms():
    spec = parse_config({**BASE, "topics": [{"name": "t", "late_data": {"allowed_lateness": "90m", "policy": "separate"}}]}).topics[0]
    assert (spec.late_data.allowed_lateness_ms, spec.late_data.policy) == (90 * 60_000, "separate")
    assert parse_config({**BASE, "topics": ["t"]}).topics[0].late_data.policy == "reopen"  # the default
    assert TopicSpec.from_dict("t", spec.to_dict()).late_data == spec.late_data  # through plans and manifests


def test_split_range():
    assert split_range(0, 10, 4) == [(0, 4), (4, 8), (8, 10)]
    assert split_range(5, 5, 4) == [(5, 5)]


def _msg(offset, value, ts=1_767_225_600_000):
    return MessageAndMetadata("t", 0, offset, None, value, [], ts)


def test_json_decoder_sorts_good_from_bad():
    cfg = parse_config({**BASE, "topics": [{"name": "t", "format": "json", "schema": [
        {"name": "id", "type": "long", "required": True}, {"name": "at", "type": "timestamp"},
        {"name": "n", "type": "int"}]}]})
    d = Decoder(cfg.spec_for("t"))
    msgs = [_msg(0, b'{"id": 1, "at": "2026-01-01T01:00:00Z"}'), _msg(1, b"[1]"), _msg(2, b'{"at": 5}'),
            _msg(3, b'{"id": 2, "n": 99999999999}'), _msg(4, None), _msg(5, b'{"id": true}'), _msg(6, b'{"id": 3}')]
    batch, times, errors = d.decode(msgs)
    assert batch.column("offset").to_pylist() == [0, 6]
    assert [e[2] for e in errors] == [1, 2, 3, 4, 5]
    assert "not a JSON object" in errors[0][6] and "required field 'id'" in errors[1][6]
    assert "does not fit in int" in errors[2][6] and errors[3][6] == "null value"


def test_utf8_decoder_and_writer_determinism(tmp_path):
    cfg = parse_config({**BASE, "topics": [{"name": "t", "format": "utf8"}]})
    d = Decoder(cfg.spec_for("t"))
    msgs = [_msg(i, f"line {i}".encode(), 1_767_225_600_000 + i * 600_000) for i in range(20)] + [_msg(20, b"\xff")]
    outputs = []
    for n in range(2):
        fs = LocalFS(f"file://{tmp_path}/w{n}")
        w = RangeWriter(fs, "t", 0, 0, 21, d.schema, row_group_size=4)
        for chunk in (msgs[:7], msgs[7:]) if n == 0 else (msgs[:3], msgs[3:15], msgs[15:]):
            batch, times, errors = d.decode(chunk)
            w.add(batch, times)
            w.add_errors(errors)
        files = w.commit()
        outputs.append({f["path"]: (tmp_path / f"w{n}" / f["path"]).read_bytes() for f in files})
        assert [f["rows"] for f in files] == [6, 6, 6, 2]  # 10-minute spacing: four hours
        assert all(parse_file_name(f["path"]) == ("t", 0, 0, 21) for f in files)
        scanned = OffsetStore(fs).scan_files("t")
        assert scanned[(0, 0, 21)]["complete"] and scanned[(0, 0, 21)]["rows"] == 20
        assert scanned[(0, 0, 21)]["errors"] == 1
    assert outputs[0] == outputs[1], "different fetch chunking, same bytes"
