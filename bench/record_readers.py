#!/usr/bin/env python3
"""CPU per record of the v2 record readers of broker.protocol.records, on one fetched buffer.

    .venv/bin/python bench/record_readers.py [--records 200000] [--per-batch 1000] [--size 100]

Times (process CPU, best of --repeat) the reference reader (``codec.read_records``), the
unrolled one (``unrolled.read_records_unrolled``, through ``SimpleConsumer``'s
``decode_message_set``) and the numpy columns (``pipelines.record_columns.decode_chunk``) on
--records keyed records of --size bytes in batches of --per-batch, and checks they agree.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.options import int_options  # noqa: E402
from broker.client.simple_consumer import decode_message_set  # noqa: E402
from broker.protocol.records import Record, Tail, encode_batch, iter_batches, read_records, records_of  # noqa: E402
from pipelines.record_columns import decode_chunk  # noqa: E402

T0 = 1_700_000_000_000


def reference(data: bytes) -> list[Record]:
    out: list[Record] = []
    for pos, header in iter_batches(data, Tail.STOP):
        buf, start, end = records_of(data, pos, header)
        out += read_records(buf, start, end, header)
    return out


def best(fn: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.process_time()
        fn()
        times.append(time.process_time() - t0)
    return min(times)


def main() -> int:
    args = int_options(records=200_000, per_batch=1000, size=100, repeat=5).parse_args()
    n, per = args.records, args.per_batch
    data = b"".join(encode_batch([Record(0, T0 + i, b"k%d" % (i % 1000), b"x" * args.size, [])
                                  for i in range(j, min(j + per, n))], base_offset=j) for j in range(0, n, per))
    readers = {
        "reference": lambda: reference(data),
        "unrolled (SimpleConsumer)": lambda: decode_message_set("t", 0, data, 0),
        "numpy columns (loader)": lambda: decode_chunk("t", 0, data, 0),
    }
    for name, fn in readers.items():
        print(f"{name:26s} {best(fn, args.repeat) / n * 1e9:6.0f} ns/record")
    expected = [(r.offset, r.timestamp, r.key, r.value) for r in reference(data)]
    assert [(m.offset, m.timestamp, m.key, m.value) for m in decode_message_set("t", 0, data, 0)[0]] == expected
    chunk = decode_chunk("t", 0, data, 0)
    assert list(zip(chunk.offsets.tolist(), chunk.timestamps.tolist(), chunk.keys.to_pylist(),
                    chunk.values.to_pylist())) == expected
    print(f"same records; {n:,} records of {args.size} bytes in batches of {per}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
