"""The vectorised JSON path (pyarrow's JSON reader over a whole chunk) gives exactly what the
per-record path gives: the same rows, the same partitioning times, the same error rows with
their offsets (a chunk with any bad value falls back to the per-record path), and the same
Parquet bytes."""

from __future__ import annotations

import pyarrow as pa
import pytest

from broker.client.simple_consumer import MessageAndMetadata
from pipelines.config import parse_config
from pipelines.decoders import Decoder
from pipelines.fs import LocalFS
from pipelines.writer import RangeWriter

BASE = {"cluster": {"bootstrap.servers": "127.0.0.1:9092"}, "warehouse": "file:///tmp/w"}
T0 = 1_767_225_600_000
SCHEMA = [
    {"name": "id", "type": "long", "required": True},
    {"name": "n", "type": "int"},
    {"name": "name", "type": "string"},
    {"name": "at", "type": "timestamp", "required": True},
    {"name": "score", "type": "double"},
    {"name": "ratio", "type": "float"},
    {"name": "ok", "type": "boolean"},
]


def _decoders(time_field="at", schema=SCHEMA):
    topic = {"name": "t", "format": "json", "schema": schema}
    if time_field:
        topic["time_field"] = time_field
    cfg = parse_config({**BASE, "topics": [topic]})
    fast, slow = Decoder(cfg.spec_for("t")), Decoder(cfg.spec_for("t"))
    slow.vectorised = False
    return fast, slow


def _good(i):
    return (b'{"id":%d,"n":%d,"name":"r\\u00e9cord \\"%d\\" \xc3\xa9","at":%d,"score":%d.5,"ratio":0.1,"ok":%s,'
            b'"extra":{"x":[1,null]}}' % (i, i - 50, i, T0 + i * 400_000, i, b"true" if i % 2 else b"false"))


def _msg(offset, value, ts=None, key=None, headers=()):
    return MessageAndMetadata("t", 3, offset, key, value, list(headers), T0 + offset if ts is None else ts)


def _rows(batch):  # NaN (json.loads accepts it, so does pyarrow) compares equal to itself here
    return [{k: "NaN" if isinstance(v, float) and v != v else v for k, v in row.items()} for row in batch.to_pylist()]


def _same(fast, slow, msgs):
    b1, t1, e1 = fast.decode(msgs)
    b2, t2, e2 = slow.decode(msgs)
    assert e1 == e2
    if b2 is None:
        assert b1 is None
        return e1
    assert b1.schema == b2.schema
    assert _rows(b1) == _rows(b2)
    assert [int(t) for t in (t1.to_pylist() if isinstance(t1, pa.Array) else t1)] == list(t2)
    return e1


def test_good_chunk_is_vectorised_and_identical():
    fast, slow = _decoders()
    msgs = [_msg(i, _good(i), key=b"k%d" % i if i % 3 else None) for i in range(500)]
    assert _same(fast, slow, msgs) == []
    assert fast.chunks_vectorised == 1 and fast.chunks_per_record == 0


def test_optional_fields_missing_or_null_and_pretty_printed_values():
    fast, slow = _decoders()
    msgs = [_msg(0, b'{"id":1,"at":%d}' % T0), _msg(1, b'{"id":2,"at":%d,"n":null,"name":null}' % T0),
            _msg(2, b' \n{\n  "id": 3,\r\n  "at": %d\n}\n\t' % T0), _msg(3, b'{"id":-0,"at":-5,"score":7}')]
    assert _same(fast, slow, msgs) == []
    assert fast.chunks_vectorised == 1


def test_record_timestamp_partitioning_headers_and_negative_timestamps():
    fast, slow = _decoders(time_field=None)
    msgs = [_msg(i, _good(i), ts=-1 if i % 7 == 0 else T0 + i * 900_000,
                 headers=[("h", b"v%d" % i)] if i % 5 == 0 else ()) for i in range(100)]
    assert _same(fast, slow, msgs) == []
    assert fast.chunks_vectorised == 1


BAD_VALUES = [
    None, b"", b"   ", b"[1]", b"1", b'"s"', b"null", b"{", b'{"id":1,"at":1}{"id":2,"at":2}', b'{"id":1,"at":1}}',
    b'{"id":1,"at":1} x', b'{"id":1,"at":', b'"at":1}', b'{"id":1,"at":1,"id":2}', b'{"at":1}', b'{"id":1}',
    b'{"id":null,"at":1}', b'{"id":1.0,"at":1}', b'{"id":1e3,"at":1}', b'{"id":"1","at":1}', b'{"id":true,"at":1}',
    b'{"id":9223372036854775808,"at":1}', b'{"id":1,"at":1,"n":2147483648}', b'{"id":1,"at":1,"n":-2147483649}',
    b'{"id":1,"at":1.5}', b'{"id":1,"at":"2026-01-01T01:00:00Z"}', b'{"id":1,"at":true}', b'{"id":1,"at":1,"name":5}',
    b'{"id":1,"at":1,"name":{"a":1}}', b'{"id":1,"at":1,"score":"1"}', b'{"id":1,"at":1,"score":true}',
    b'{"id":1,"at":1,"score":NaN}', b'{"id":1,"at":1,"score":-Infinity}', b'{"id":1,"at":1,"score":12345678901234567891}',
    b'{"id":1,"at":1,"ratio":1e39}', b'{"id":1,"at":1,"ratio":3.4028235677973366e38}', b'{"id":1,"at":1,"score":1e400}', b'{"id":1,"at":1,"ok":1}', b'{"id":1,"at":1,"name":"\xff"}',
    b'{"id":1,"at":1,"\xff":1}', b'\xef\xbb\xbf{"id":1,"at":1}', b"{'id':1,'at':1}", b'{"id":1,"at":1,}',
    b'{"i\\u0064":1,"at":1}', b'{"id":1,"i\\u0064":2,"at":1}', b'{"id":1,"at":1,"name":"a\\/b\\t"}',
    b'{"id":1,"at":1}\n{"id":2,"at":2}', b'{"__i":0,"__v":{"id":1,"at":1}}', b'{"id":1,"at":1}}\n{"__i":1,"__v":{"id":9,"at":9}',
]


@pytest.mark.parametrize("bad", BAD_VALUES, ids=[repr(b)[:40] for b in BAD_VALUES])
def test_a_bad_value_anywhere_gives_the_per_record_result(bad):
    fast, slow = _decoders()
    for pos in (0, 5, 9):
        msgs = [_msg(i, _good(i)) for i in range(10)]
        msgs[pos] = _msg(pos, bad)
        errors = _same(fast, slow, msgs)
        rows = 10 - len(errors)
        assert rows >= 9 and [e[2] for e in errors] in ([], [pos])


def test_chunk_of_only_bad_values():
    fast, slow = _decoders()
    msgs = [_msg(i, b) for i, b in enumerate([b"[1]", None, b"{"])]
    assert [e[2] for e in _same(fast, slow, msgs)] == [0, 1, 2]


def test_schema_with_binary_or_json_fields_stays_per_record():
    fast, _ = _decoders(time_field=None, schema=[{"name": "b", "type": "binary"}, {"name": "j", "type": "json"}])
    assert not fast.vectorised
    batch, _, errors = fast.decode([_msg(0, b'{"b":"aGk=","j":{"z":1,"a":[2]}}')])
    assert batch.column("b").to_pylist() == [b"hi"] and batch.column("j").to_pylist() == ['{"a":[2],"z":1}']


def test_same_parquet_bytes_from_both_paths(tmp_path):
    fast, slow = _decoders()
    msgs = [_msg(i, _good(i)) for i in range(300)]
    msgs[123] = _msg(123, b"not json")
    outputs = []
    for name, d, chunks in (("fast", fast, (msgs[:100], msgs[100:200], msgs[200:])), ("slow", slow, (msgs[:37], msgs[37:]))):
        w = RangeWriter(LocalFS(f"file://{tmp_path}/{name}"), "t", 3, 0, 300, d.schema, row_group_size=64)
        for chunk in chunks:
            batch, times, errors = d.decode(chunk)
            w.add(batch, times)
            w.add_errors(errors)
        files = w.commit()
        outputs.append({f["path"]: (tmp_path / name / f["path"]).read_bytes() for f in files})
        outputs.append((tmp_path / name / "t/_errors/t+3+0+300.parquet").read_bytes())
    assert fast.chunks_vectorised == 2 and fast.chunks_per_record == 1
    assert len(outputs[0]) > 1  # 400 s spacing: several hours
    assert outputs[0] == outputs[2] and outputs[1] == outputs[3]


def test_fetch_chunking_does_not_show_in_the_bytes(tmp_path):
    """Enough distinct values to outgrow the 1 MB dictionary page: the Parquet writer's fallback to
    plain encoding and its page breaks must depend on the rows only, not on the Arrow chunks."""
    cfg = parse_config({**BASE, "topics": [{"name": "t", "format": "utf8"}]})
    d = Decoder(cfg.spec_for("t"))
    msgs = [_msg(i, b"%040d" % (i * 7919), ts=T0) for i in range(60_000)]
    outputs = []
    for n, size in enumerate((60_000, 4_999, 1_000)):
        w = RangeWriter(LocalFS(f"file://{tmp_path}/w{n}"), "t", 3, 0, 60_000, d.schema)
        for start in range(0, len(msgs), size):
            batch, times, _ = d.decode(msgs[start:start + size])
            w.add(batch, times)
        [f] = w.commit()
        outputs.append((tmp_path / f"w{n}" / f["path"]).read_bytes())
    assert outputs[0] == outputs[1] == outputs[2]


@pytest.mark.parametrize("depth", [0, 1, 2])
def test_prefetcher_keeps_order_and_raises_the_readers_error_in_place(depth):
    from pipelines.errors import LoadError
    from pipelines.task import _Prefetcher

    def chunks():
        yield [1]
        yield [2, 3]
        raise LoadError("t-0: the leader went away")

    p = _Prefetcher(chunks(), depth)
    assert p.next() == [1] and p.next() == [2, 3]
    with pytest.raises(LoadError, match="leader went away"):
        p.next()
    p.close()

    closed = []

    def endless():
        try:
            i = 0
            while True:
                yield [i]
                i += 1
        finally:
            closed.append(True)

    p = _Prefetcher(endless(), depth)
    assert [p.next() for _ in range(3)] == [[0], [1], [2]]
    p.close()  # a task failing in decode/write: the reader thread stops and the generator is closed
    assert closed == [True] and (p.thread is None or not p.thread.is_alive())
    p = _Prefetcher(iter([[7]]), depth)  # any iterator
    assert p.next() == [7] and p.next() is None
    p.close()
