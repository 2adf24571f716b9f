"""The mirror's record-age histogram (record timestamp -> the aggregate's acknowledgement), its
summary in the status file and `--status`, and its Prometheus family; no clusters."""

from __future__ import annotations

import time

from broker.client.accumulator import RecordMetadata
from broker.metrics_text import Exposition
from mirror.stats import AGE_BUCKETS, RecordAges, format_status


def _ack(callback, age_s: float) -> None:
    callback(RecordMetadata("t", 0, 5, int((time.time() - age_s) * 1000)), None)


def test_ages_are_observed_per_source_and_the_send_callback_still_runs():
    seen: list = []
    ages = RecordAges()
    dc1 = ages.callback("dc1", lambda md, exc: seen.append((md and md.offset, exc)))
    dc2 = ages.callback("dc2", lambda md, exc: seen.append((md and md.offset, exc)))
    for _ in range(98):
        _ack(dc1, 0.3)
    _ack(dc1, 4.0)
    _ack(dc1, 200_000.0)  # a source that was away for days: past the last bucket
    _ack(dc2, 0.02)
    failure = RuntimeError("sent for good")
    dc2(None, failure)  # a failed send is not an age, but the mirror's callback hears of it
    assert len(seen) == 102 and seen[-1] == (None, failure)
    summary = ages.summary()
    assert summary["dc1"] == {"batches": 100, "p50_s": 0.5, "p99_s": 5.0}
    assert summary["dc2"] == {"batches": 1, "p50_s": 0.025, "p99_s": 0.025}
    _ack(dc1, 200_000.0)
    assert ages.summary()["dc1"]["p99_s"] == f"> {AGE_BUCKETS[-1]:g}"
    text = format_status({"time": time.time(), "sources": {}, "record_age": ages.summary()})
    assert "record age at the aggregate's ack, dc1: p50 <= 0.5 s, p99 > 86400 s (101 batches)" in text


def test_the_histogram_family_renders_cumulative_buckets():
    ages = RecordAges()
    cb = ages.callback("dc1", lambda md, exc: None)
    _ack(cb, 0.03)
    _ack(cb, 0.07)
    out = Exposition()
    out.histogram("logbus_mirror_record_age_seconds", "age", [([("source", s)], h) for s, h in ages.histograms.items()])
    text = out.text()
    assert '# TYPE logbus_mirror_record_age_seconds histogram' in text
    assert 'logbus_mirror_record_age_seconds_bucket{source="dc1",le="0.05"} 1' in text
    assert 'logbus_mirror_record_age_seconds_bucket{source="dc1",le="0.1"} 2' in text
    assert 'logbus_mirror_record_age_seconds_count{source="dc1"} 2' in text
