"""consumer-perf-test --show-detailed-stats without a cluster: one line per --reporting-interval
with Kafka's columns (totals, the interval's rates, the rebalance time of the first interval)."""

from __future__ import annotations

import argparse

import pytest

from broker.tools import CommandError, consumer_perf_test
from broker.tools.consumer_perf_test import DETAILED_HEADER, Progress

MB = 1024 * 1024


def test_a_line_per_interval_with_the_intervals_rates() -> None:
    lines: list[str] = []
    progress = Progress(1000, start=100.0, rebalance_ms=500, emit=lines.append)
    progress.update(100.5, MB, 10)
    assert lines == [], "not before the interval has passed"
    progress.update(101.0, 2 * MB, 20)
    progress.update(102.0, 3 * MB, 30)
    assert len(DETAILED_HEADER.split(", ")) == len(lines[0].split(", ")) == 9
    assert lines[0].split(", ")[1:] == ["2.0000", "2.0000", "20", "20.0000", "500", "500", "4.0000", "40.0000"]
    assert lines[1].split(", ")[1:] == ["3.0000", "1.0000", "30", "10.0000", "0", "1000", "1.0000", "10.0000"]


def test_bad_flags_are_one_line(tmp_path) -> None:
    parser = argparse.ArgumentParser()
    consumer_perf_test.add_arguments(parser)
    base = ["--bootstrap-server", "127.0.0.1:1", "--topic", "t", "--messages", "1"]
    with pytest.raises(CommandError, match="--reporting-interval"):
        consumer_perf_test.run(parser.parse_args([*base, "--reporting-interval", "0"]))
    with pytest.raises(CommandError, match="missing.properties"):
        consumer_perf_test.run(parser.parse_args([*base, "--consumer.config", str(tmp_path / "missing.properties")]))
