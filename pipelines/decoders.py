"""Value decoders: raw bytes, UTF-8 text, JSON with a declared schema.

A decoder turns a chunk of records into Arrow columns. A value it cannot decode is not a
row: it goes to the errors output with its offset and the reason, and is counted.

Columns of every row (the loader's own): ``topic, partition, offset, timestamp, key, headers``;
then the value columns (``value`` for raw and utf8; the schema's fields for json).
"""

from __future__ import annotations

import base64
import datetime as _dt
import json
from typing import Sequence

import pyarrow as pa

from pipelines.config import RECORD_TIMESTAMP, TopicSpec

HEADER_TYPE = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))
TS_TYPE = pa.timestamp("ms", tz="UTC")
BASE_FIELDS = [
    pa.field("topic", pa.string(), nullable=False),
    pa.field("partition", pa.int32(), nullable=False),
    pa.field("offset", pa.int64(), nullable=False),
    pa.field("timestamp", TS_TYPE),
    pa.field("key", pa.binary()),
    pa.field("headers", HEADER_TYPE),
]
ERROR_SCHEMA = pa.schema(BASE_FIELDS[:5] + [pa.field("value", pa.binary()), pa.field("error", pa.string(), nullable=False)])

_ARROW_TYPES = {
    "string": pa.string(), "int": pa.int32(), "long": pa.int64(), "float": pa.float32(), "double": pa.float64(),
    "boolean": pa.bool_(), "timestamp": TS_TYPE, "binary": pa.binary(), "json": pa.string(),
}
_INT32 = (-(1 << 31), (1 << 31) - 1)
_INT64 = (-(1 << 63), (1 << 63) - 1)


class DecodeError(ValueError):
    pass


def _to_ms(value, name: str) -> int:
    if isinstance(value, bool):
        raise DecodeError(f"field {name!r}: {value!r} is not a timestamp")
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return int(value)
    if isinstance(value, str):
        try:
            when = _dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            raise DecodeError(f"field {name!r}: {value!r} is not an ISO-8601 time or epoch milliseconds") from None
        if when.tzinfo is None:
            when = when.replace(tzinfo=_dt.timezone.utc)
        return int(when.timestamp() * 1000)
    raise DecodeError(f"field {name!r}: {value!r} is not a timestamp")


def _convert(ftype: str, value, name: str):
    if ftype == "string":
        if isinstance(value, str):
            return value
    elif ftype in ("long", "int"):
        if isinstance(value, int) and not isinstance(value, bool):
            lo, hi = _INT32 if ftype == "int" else _INT64
            if lo <= value <= hi:
                return value
            raise DecodeError(f"field {name!r}: {value} does not fit in {ftype}")
    elif ftype in ("double", "float"):
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
    elif ftype == "boolean":
        if isinstance(value, bool):
            return value
    elif ftype == "timestamp":
        return _to_ms(value, name)
    elif ftype == "binary":
        if isinstance(value, str):
            try:
                return base64.b64decode(value, validate=True)
            except ValueError:
                raise DecodeError(f"field {name!r}: not base64") from None
    elif ftype == "json":
        return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    raise DecodeError(f"field {name!r}: {value!r} is not a {ftype}")


class Decoder:
    """Decodes the values of one topic's records into Arrow columns."""

    def __init__(self, spec: TopicSpec) -> None:
        self.spec = spec
        if spec.format == "raw":
            self.value_fields = [pa.field("value", pa.binary())]
        elif spec.format == "utf8":
            self.value_fields = [pa.field("value", pa.string())]
        else:
            self.value_fields = [pa.field(f.name, _ARROW_TYPES[f.type], nullable=not f.required) for f in spec.schema]
        self.schema = pa.schema(BASE_FIELDS + self.value_fields)
        self.time_index = None
        if spec.time_field != RECORD_TIMESTAMP:
            self.time_index = [f.name for f in spec.schema].index(spec.time_field)

    def decode(self, messages: Sequence) -> tuple[pa.RecordBatch | None, list[int], list[tuple]]:
        """(batch of good rows, their partition times in ms, error rows for ERROR_SCHEMA)."""
        errors: list[tuple] = []
        good = messages
        fmt = self.spec.format
        if fmt == "raw":
            value_columns = [[m.value for m in messages]]
        elif fmt == "utf8":
            texts = []
            good = []
            for m in messages:
                v = m.value
                if v is None:
                    texts.append(None)
                    good.append(m)
                    continue
                try:
                    texts.append(v.decode("utf-8"))
                    good.append(m)
                except UnicodeDecodeError as exc:
                    errors.append(_error_row(m, f"not UTF-8: {exc.reason} at byte {exc.start}"))
            value_columns = [texts]
        else:
            good, value_columns = self._decode_json(messages, errors)
        if not good:
            return None, [], errors
        ts = [m.timestamp if m.timestamp >= 0 else None for m in good]
        arrays = [
            pa.array([m.topic for m in good], pa.string()),
            pa.array([m.partition for m in good], pa.int32()),
            pa.array([m.offset for m in good], pa.int64()),
            pa.array(ts, TS_TYPE),
            pa.array([m.key for m in good], pa.binary()),
            pa.array([[(k, v) for k, v in m.headers] if m.headers else [] for m in good], HEADER_TYPE),
        ]
        for column, fld in zip(value_columns, self.value_fields):
            arrays.append(pa.array(column, fld.type))
        batch = pa.RecordBatch.from_arrays(arrays, schema=self.schema)
        if self.time_index is None:
            times = [t if t is not None else 0 for t in ts]
        else:
            times = value_columns[self.time_index]
        return batch, times, errors

    def _decode_json(self, messages: Sequence, errors: list) -> tuple[list, list[list]]:
        fields = [(f.name, f.type, f.required) for f in self.spec.schema]
        columns: list[list] = [[] for _ in fields]
        good = []
        loads = json.loads
        time_name = self.spec.time_field if self.time_index is not None else None
        for m in messages:
            v = m.value
            if v is None:
                errors.append(_error_row(m, "null value"))
                continue
            try:
                obj = loads(v)
            except (ValueError, UnicodeDecodeError) as exc:
                errors.append(_error_row(m, f"not JSON: {exc}"))
                continue
            if not isinstance(obj, dict):
                errors.append(_error_row(m, f"not a JSON object: {type(obj).__name__}"))
                continue
            row = []
            try:
                for name, ftype, required in fields:
                    value = obj.get(name)
                    if value is None:
                        if required or name == time_name:
                            raise DecodeError(f"required field {name!r} is missing")
                        row.append(None)
                    else:
                        row.append(_convert(ftype, value, name))
            except DecodeError as exc:
                errors.append(_error_row(m, str(exc)))
                continue
            good.append(m)
            for column, value in zip(columns, row):
                column.append(value)
        return good, columns


def _error_row(m, reason: str) -> tuple:
    return (m.topic, m.partition, m.offset, m.timestamp if m.timestamp >= 0 else None, m.key, m.value, reason)


def error_batch(rows: list[tuple]) -> pa.RecordBatch:
    columns = list(zip(*rows)) if rows else [[] for _ in ERROR_SCHEMA]
    return pa.RecordBatch.from_arrays([pa.array(list(c), f.type) for c, f in zip(columns, ERROR_SCHEMA)], schema=ERROR_SCHEMA)
