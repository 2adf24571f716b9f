"""`logbus dump-log` on real segment files: Kafka's --files list, --deep-iteration (records
without data), --print-data-log (with it), and --index-sanity-check (the broker's load check)."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from broker.tools import CommandError, dump_log
from tests.storage.batches import build_batch
from tests.storage.helpers import open_log


def _dump(capsys: pytest.CaptureFixture[str], *argv: str) -> list[str]:
    parser = argparse.ArgumentParser()
    dump_log.add_arguments(parser)
    assert dump_log.run(parser.parse_args(list(argv))) == 0
    return capsys.readouterr().out.splitlines()


@pytest.fixture
def segment(tmp_path: Path) -> Path:
    log = open_log(tmp_path / "t-0", index_interval_bytes=1)
    log.append(build_batch([b"v0", b"v1"], keys=[b"k0", None], base_timestamp=5000))
    log.append(build_batch([b"v2"], producer_id=7, producer_epoch=0, base_sequence=3))
    log.flush()
    log.close()
    return tmp_path / "t-0" / ("0" * 20 + ".log")


def test_files_and_deep_iteration(segment: Path, capsys: pytest.CaptureFixture[str]) -> None:
    shallow = _dump(capsys, "--files", str(segment))
    assert shallow[0] == f"Dumping {segment}" and len([x for x in shallow if x.startswith("baseOffset:")]) == 2
    assert not any(x.startswith("|") for x in shallow)

    deep = [x for x in _dump(capsys, "--files", str(segment), "--deep-iteration") if x.startswith("|")]
    assert deep == [
        "| offset: 0 CreateTime: 5000 keySize: 2 valueSize: 2 sequence: -1 headerKeys: []",
        "| offset: 1 CreateTime: 5001 keySize: -1 valueSize: 2 sequence: -1 headerKeys: []",
        deep[2],
    ]
    assert deep[2].startswith("| offset: 2 ") and " sequence: 3 " in deep[2]
    data = [x for x in _dump(capsys, str(segment), "--print-data-log") if x.startswith("|")]
    assert data[0].endswith("headerKeys: [] key: k0 payload: v0") and data[1].endswith("key: null payload: v1")


def test_index_sanity_check(segment: Path, capsys: pytest.CaptureFixture[str]) -> None:
    index, timeindex = segment.with_suffix(".index"), segment.with_suffix(".timeindex")
    out = _dump(capsys, "--files", f"{index},{timeindex}", "--index-sanity-check")
    assert out == [f"Dumping {index}", f"{index} passed sanity check.", f"Dumping {timeindex}", f"{timeindex} passed sanity check."]
    assert any(x.startswith("offset: ") for x in _dump(capsys, "--files", str(index)))

    index.write_bytes(index.read_bytes() + b"\x00\x01\x02")  # not whole entries
    with pytest.raises(CommandError, match=f"{index} failed sanity check"):
        _dump(capsys, "--files", str(index), "--index-sanity-check")


def test_no_files_is_one_line() -> None:
    with pytest.raises(CommandError, match="Missing required argument"):
        parser = argparse.ArgumentParser()
        dump_log.add_arguments(parser)
        dump_log.run(parser.parse_args([]))
