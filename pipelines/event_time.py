"""The event hour of each record: the hour whose ``dt=/hour=`` directory the loader writes it to.

One function for the loader (the hours of records that are no rows: dropped copies, undecodable
values) and the audit (every record at the cluster), so both count the same record in the same
hour. Event time is the topic's ``time_field``:

- the record timestamp (the default): taken from the columns the reader decoded, with numpy; no
  value is looked at. A record without one (-1) goes where the loader writes it: epoch 0.
- a field of a JSON value: only that field is parsed, by a ``Decoder`` of a one-field schema
  (vectorised by pyarrow's JSON reader, per record when a chunk holds a value it cannot parse),
  so it converts exactly as the loader's decoder does. A value whose field is missing or does not
  parse has no event hour: ``NO_HOUR``.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from pipelines.config import RECORD_TIMESTAMP, TopicSpec
from pipelines.decoders import Decoder
from pipelines.record_columns import RecordChunk
from pipelines.writer import HOUR_MS, hour_buckets

NO_HOUR = int(np.iinfo(np.int64).min)  # no event time (hour -1 is a real one: 1969-12-31T23)


def event_hours(decoder: Decoder, chunk: RecordChunk) -> np.ndarray:
    """Per record of ``chunk``, its event hour (epoch ms // 1 h, int64), or ``NO_HOUR``."""
    if decoder.spec.time_field == RECORD_TIMESTAMP:
        return record_time_hours(chunk.timestamps)
    out = np.full(len(chunk), NO_HOUR, np.int64)
    if not len(chunk):
        return out
    batch, times, _ = _time_decoder(decoder).decode(chunk)
    if batch is not None:
        rows = np.searchsorted(chunk.offsets, batch.column("offset").to_numpy())
        out[rows] = hour_buckets(times)
    return out


def record_time_hours(timestamps: np.ndarray) -> np.ndarray:
    """Hours of record timestamps (a negative one, "none", counts as epoch 0, as the writer puts it)."""
    return np.maximum(timestamps, 0) // HOUR_MS


def hour_counts(hours: np.ndarray) -> dict[int, int]:
    """{hour: records} of an array of hours."""
    values, counts = np.unique(hours, return_counts=True)
    return dict(zip(values.tolist(), counts.tolist()))


def _time_decoder(decoder: Decoder) -> Decoder:
    """A decoder of the time field alone (kept on ``decoder``: made once per topic decoder)."""
    found = getattr(decoder, "_event_time_decoder", None)
    if found is None:
        spec: TopicSpec = decoder.spec
        field = next(f for f in spec.schema if f.name == spec.time_field)
        found = Decoder(replace(spec, schema=(replace(field, required=True),)))
        decoder._event_time_decoder = found  # type: ignore[attr-defined]
    return found


__all__ = ["NO_HOUR", "event_hours", "hour_counts", "record_time_hours"]
