"""The event hour of a record (pipelines.event_time) is the hour the loader writes its row to:
the same for every row the decoder accepts, whatever the value, and NO_HOUR when the event time
is missing or does not parse."""

from __future__ import annotations

import json

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from broker.client.simple_consumer import MessageAndMetadata
from pipelines.config import parse_config
from pipelines.decoders import Decoder
from pipelines.event_time import NO_HOUR, event_hours, hour_counts, record_time_hours
from pipelines.record_columns import RecordChunk
from pipelines.writer import HOUR_MS, hour_buckets

BASE = {"cluster": {"bootstrap.servers": "127.0.0.1:9092"}, "warehouse": "file:///tmp/x"}
HOUR = 1_768_000_000_000


def _decoder(time_type: str = "timestamp", **topic) -> Decoder:
    schema = [{"name": "id", "type": "long", "required": True}, {"name": "ts", "type": time_type}]
    cfg = parse_config({**BASE, "topics": [{"name": "t", "format": "json", "schema": schema, "time_field": "ts", **topic}]})
    return Decoder(cfg.spec_for("t"))


def _chunk(values: list[bytes | None], timestamps: list[int] | None = None) -> RecordChunk:
    stamps = timestamps or [HOUR] * len(values)
    return RecordChunk.from_messages("t", 0, [MessageAndMetadata("t", 0, 100 + i, None, v, [], t)
                                              for i, (v, t) in enumerate(zip(values, stamps))])


def test_record_timestamps_are_hours_of_the_column():
    cfg = parse_config({**BASE, "topics": [{"name": "t", "format": "utf8"}]})
    chunk = _chunk([b"a", b"\xff", b"c"], [HOUR, HOUR + HOUR_MS, -1])
    assert event_hours(Decoder(cfg.spec_for("t")), chunk).tolist() == [HOUR // HOUR_MS, HOUR // HOUR_MS + 1, 0]
    assert hour_counts(record_time_hours(np.array([0, 1, HOUR_MS]))) == {0: 2, 1: 1}


def test_value_time_field_missing_or_unparsable_has_no_hour():
    chunk = _chunk([json.dumps({"id": 1, "ts": HOUR}).encode(), b'{"id": 2}', b'{"id": 3, "ts": "soon"}', b"not json",
                    json.dumps({"id": "x", "ts": "2026-01-10T00:30:00Z"}).encode(), None])
    hours = event_hours(_decoder(), chunk).tolist()
    assert hours == [HOUR // HOUR_MS, NO_HOUR, NO_HOUR, NO_HOUR, 1_768_005_000_000 // HOUR_MS, NO_HOUR]


values = st.one_of(
    st.integers(-(1 << 40), 1 << 42), st.floats(allow_nan=False, allow_infinity=False, min_value=-1e12, max_value=1e13),
    st.just("2026-01-10T00:30:00Z"), st.just("2026-01-10 05:00:00"), st.just("garbage"), st.booleans(), st.none(),
    st.text(max_size=5))


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.one_of(st.integers(0, 10), st.text(max_size=2)), values, st.booleans()), min_size=1,
                max_size=12), st.sampled_from(["timestamp", "long"]))
def test_every_accepted_row_has_the_hour_it_is_written_to(rows, time_type):
    raw = []
    for ident, ts, has_ts in rows:
        doc = {"id": ident, **({"ts": ts} if has_ts else {})}
        raw.append(json.dumps(doc).encode())
    decoder = _decoder(time_type)
    chunk = _chunk(raw)
    batch, times, bad = decoder.decode(chunk)
    hours = event_hours(decoder, chunk)
    assert len(hours) == len(chunk)
    if batch is not None:
        rows_at = np.searchsorted(chunk.offsets, batch.column("offset").to_numpy())
        assert hours[rows_at].tolist() == hour_buckets(times).tolist()
    for r in bad:  # an undecodable value: its hour if its time parses, else NO_HOUR; never a crash
        assert hours[int(r[2]) - 100] == NO_HOUR or hours[int(r[2]) - 100] > NO_HOUR
