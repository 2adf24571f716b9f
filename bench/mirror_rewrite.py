#!/usr/bin/env python3
"""CPU per record of the mirror's batch rewrite, the array path against the per-record loop.

    .venv/bin/python bench/mirror_rewrite.py [--batches 6] [--records 1300] [--size 100] [--repeat 50]

Builds --batches plain v2 batches of --records keyed records of --size bytes (as librdkafka
sends them), then times ``mirror.rewrite.rewrite_chunk`` on them (process CPU time): once as is
(plain batches take the array path) and once with the array path turned off (every batch takes
the per-record loop). Both must give the same copies (decoded from the target batches as the
producer builds them; the batch boundaries may differ).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import mirror.rewrite as rewrite  # noqa: E402
from bench.options import int_options  # noqa: E402
from broker.client.accumulator import ProducerBatch  # noqa: E402
from broker.protocol.records import Record, decode_batches, encode_batch  # noqa: E402

T0 = 1_700_000_000_000


def copies(batches: list) -> list[tuple]:
    """(timestamp, key, value, headers) of every copy, from the batches the producer would send."""
    out = []
    for tb in batches:
        batch = ProducerBatch.of_records("t", 0, tb.records, tb.records_count, tb.base_ts, tb.max_ts)
        batch.sequence = 0
        for decoded in decode_batches(batch.build(0, 7, 0)):
            out += [(r.timestamp, r.key, r.value, tuple(r.headers)) for r in decoded.records]
    return out


def main() -> int:
    args = int_options(batches=6, records=1300, size=100, repeat=50).parse_args()
    base = 5_000_000
    data = b"".join(
        encode_batch([Record(0, T0 + i, b"k%d" % (i % 1000), b"x" * args.size, []) for i in range(args.records)],
                     base_offset=base + j * args.records) for j in range(args.batches))
    n = args.batches * args.records
    prefix = b"SRC-CLUSTER-ID-XYZ:bench:1:"
    results = {}
    for name, threshold in (("array path", rewrite.PLAIN_MIN_RECORDS), ("per-record loop", 1 << 62)):
        rewrite.PLAIN_MIN_RECORDS = threshold
        t0 = time.process_time()
        for _ in range(args.repeat):
            out, _ = rewrite.rewrite_chunk(data, base, prefix, "AGG", 262_144 - 61)
        results[name] = (time.process_time() - t0) / args.repeat / n * 1e6
        print(f"{name:16s} {results[name]:.2f} us/record")
        results[name + " copies"] = copies(out)
    assert results["array path copies"] == results["per-record loop copies"], "the two paths differ"
    print(f"same copies; {n:,} records of {args.size} bytes in {args.batches} batches")
    return 0


if __name__ == "__main__":
    sys.exit(main())
