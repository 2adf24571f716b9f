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
from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pa_json

from pipelines.config import RECORD_TIMESTAMP, TopicSpec
from pipelines.errors import DecodeError
from pipelines.record_columns import RecordChunk

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
# the types pyarrow's JSON reader parses each declared type as, on the vectorised path (a timestamp
# as epoch-ms integers, a float as a double: both are converted afterwards exactly as the
# per-record path converts them); binary and json fields have no vectorised form
_PARSE_TYPES = {
    "string": pa.string(), "int": pa.int32(), "long": pa.int64(), "float": pa.float64(), "double": pa.float64(),
    "boolean": pa.bool_(), "timestamp": pa.int64(),
}
_WRAP_SUFFIX = b"}\n"
_INT32 = (-(1 << 31), (1 << 31) - 1)
_INT64 = (-(1 << 63), (1 << 63) - 1)


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
            when = when.replace(tzinfo=_dt.UTC)
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
        # vectorised JSON: every declared type has an Arrow parse type (no binary/json fields)
        self.vectorised = spec.format == "json" and bool(spec.schema) and all(
            f.type in _PARSE_TYPES for f in spec.schema)
        self.chunks_vectorised = self.chunks_per_record = 0
        if self.vectorised:
            value_struct = pa.struct([pa.field(f.name, _PARSE_TYPES[f.type]) for f in spec.schema])
            self._parse_options = pa_json.ParseOptions(
                explicit_schema=pa.schema([("__i", pa.int64()), ("__v", value_struct)]),
                unexpected_field_behavior="ignore", newlines_in_values=True)
            self._not_null = [f.required or f.name == spec.time_field for f in spec.schema]
            self._prefixes = pa.array([], pa.binary())

    def decode(self, records: RecordChunk | Sequence) -> tuple[pa.RecordBatch | None, list[int], list[tuple]]:
        """(batch of good rows, their partition times in ms, error rows for ERROR_SCHEMA).

        ``records``: a RecordChunk, or MessageAndMetadata-like records of one partition."""
        if not isinstance(records, RecordChunk):
            if not len(records):
                return None, [], []
            records = RecordChunk.from_messages(records[0].topic, records[0].partition, records)
        if self.vectorised and len(records):
            out = self._decode_json_vectorised(records)
            if out is not None:
                self.chunks_vectorised += 1
                return out
        messages = records.messages()
        errors: list[tuple] = []
        good = messages
        fmt = self.spec.format
        if fmt == "json":
            self.chunks_per_record += 1
        value_columns: list[list]
        if fmt == "raw":
            value_columns = [[m.value for m in messages]]
        elif fmt == "utf8":
            texts: list[str | None] = []
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
        arrays = _base_arrays(good, ts)
        for column, fld in zip(value_columns, self.value_fields):
            arrays.append(pa.array(column, fld.type))
        batch = pa.RecordBatch.from_arrays(arrays, schema=self.schema)
        times: list[int]
        if self.time_index is None:
            times = [t if t is not None else 0 for t in ts]
        else:
            times = value_columns[self.time_index]
        return batch, times, errors

    def _prefixes_for(self, n: int) -> pa.Array:
        if len(self._prefixes) < n:
            cap = max(n, 2 * len(self._prefixes), 1024)
            self._prefixes = pa.array([b'{"__i":%d,"__v":' % i for i in range(cap)], pa.binary())
        return self._prefixes.slice(0, n)

    def _decode_json_vectorised(self, chunk: RecordChunk):
        """The whole chunk parsed by pyarrow's JSON reader, or None when any value in it would not
        decode (the caller then takes the per-record path, which sorts out the bad values).

        Value ``i`` is parsed as the line ``{"__i":i,"__v":<value>}``: a value that is not exactly
        one JSON object (empty, two objects, an unclosed one, an array, null) either fails the
        parse, or shows as a row count / row number that does not match, so a row can never be
        taken from the wrong record. The types are strict like the per-record path: a number in a
        string field, a float or an out-of-range number in an int field, a string timestamp, a
        duplicate key, invalid UTF-8 anywhere in the value, a missing required field: all None."""
        n = len(chunk)
        try:
            values = chunk.values
            if values.null_count:
                return None
            values.cast(pa.string())  # UTF-8 validation of every whole value (json.loads decodes it all)
            lines = pc.binary_join_element_wise(self._prefixes_for(n), values, _WRAP_SUFFIX, b"")
            offsets = lines.buffers()[1]  # a new array: no slicing offset, int32 value offsets
            size = int(np.frombuffer(offsets, dtype=np.int32, count=n + 1)[n])
            buf = lines.buffers()[2].slice(0, size)
            table = pa_json.read_json(pa.BufferReader(buf), parse_options=self._parse_options,
                                      read_options=pa_json.ReadOptions(use_threads=False,
                                                                       block_size=min(size + 1, (1 << 31) - 1)))
        except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError, ValueError):
            return None
        if table.num_rows != n:
            return None
        index = table.column(0).combine_chunks()
        if index.null_count or not np.array_equal(index.to_numpy(), np.arange(n)):
            return None
        struct = table.column(1).combine_chunks()
        if struct.null_count:
            return None
        parsed = struct.flatten()
        for column, not_null in zip(parsed, self._not_null):
            if not_null and column.null_count:
                return None
        value_columns = []
        for column, fld, spec_field in zip(parsed, self.value_fields, self.spec.schema):
            if column.type != fld.type:
                column = column.cast(fld.type, safe=spec_field.type != "float")  # float: double -> float32 rounding
            value_columns.append(column)
        arrays, raw_ts = _base_from_chunk(chunk)
        batch = pa.RecordBatch.from_arrays(arrays + value_columns, schema=self.schema)
        if self.time_index is None:
            times = raw_ts.fill_null(0)
        else:
            times = parsed[self.time_index].to_numpy()
        return batch, times, []

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
            row: list = []
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


def _base_arrays(good: Sequence, ts: list) -> list[pa.Array]:
    return [
        pa.array([m.topic for m in good], pa.string()),
        pa.array([m.partition for m in good], pa.int32()),
        pa.array([m.offset for m in good], pa.int64()),
        pa.array(ts, TS_TYPE),
        pa.array([m.key for m in good], pa.binary()),
        _headers_array([m.headers for m in good]),
    ]


def _base_from_chunk(chunk: RecordChunk) -> tuple[list[pa.Array], pa.Array]:
    """The loader's own columns of a chunk, and the record timestamps as int64 with a negative
    (none) as null: the same arrays _base_arrays builds from records."""
    n = len(chunk)
    stamps = chunk.timestamps
    raw_ts = pa.array(stamps, pa.int64(), mask=stamps < 0) if (stamps < 0).any() else pa.array(stamps, pa.int64())
    return [pa.array([chunk.topic], pa.string()).take(np.zeros(n, np.int32)),
            pa.array(np.full(n, chunk.partition, np.int32)), pa.array(chunk.offsets, pa.int64()),
            raw_ts.cast(TS_TYPE), chunk.keys, _headers_array(chunk.headers, n)], raw_ts


_NO_HEADERS = pa.array([], HEADER_TYPE.value_type)


def _headers_array(headers: Sequence | None, n: int = 0) -> pa.Array:
    """The headers column; ``headers`` None means ``n`` records without headers."""
    if headers is not None and any(headers):
        return pa.array([[(k, v) for k, v in h] if h else [] for h in headers], HEADER_TYPE)
    # the common case, no record has headers: n empty (not null) lists without a Python list each
    n = len(headers) if headers is not None else n
    return pa.ListArray.from_arrays(pa.array(np.zeros(n + 1, dtype=np.int32)), _NO_HEADERS, type=HEADER_TYPE)


def _error_row(m, reason: str) -> tuple:
    return (m.topic, m.partition, m.offset, m.timestamp if m.timestamp >= 0 else None, m.key, m.value, reason)


def error_batch(rows: list[tuple]) -> pa.RecordBatch:
    columns: list[Sequence] = list(zip(*rows)) if rows else [[] for _ in ERROR_SCHEMA]
    return pa.RecordBatch.from_arrays([pa.array(list(c), f.type) for c, f in zip(columns, ERROR_SCHEMA)], schema=ERROR_SCHEMA)
