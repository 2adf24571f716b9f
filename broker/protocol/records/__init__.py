"""The record format's one home: v2 record batches and legacy v0/v1 message sets.

- ``layout``: the 61-byte v2 batch header (positions, struct formats, attribute bits); read,
  check, build and restamp headers.
- ``walker``: the one batch walker, ``iter_batches(buf, Tail...)``, whose rule for a partial
  or damaged tail is explicit, and ``records_of`` (a batch's record bytes, decompressed).
- ``codec``: the reference record codec (plain Python): ``encode_record``, ``read_records``.
- ``unrolled``: ``read_records_unrolled``, the same reader with the common varints inlined
  (the SimpleConsumer's hot loop), and ``read_record_head``, a record's framing up to its key
  (shared with the mirror's per-record rewrite).
- ``arrays``: ``read_record_columns``, the same reader for many records at once with numpy
  (the loader's columns, the mirror's rewrite). Needs numpy, so it is not imported here.
- ``legacy``: v0/v1 message sets; ``batches``: whole batches, ``encode_batch`` and
  ``decode_batches``.

The zigzag varint itself lives in ``broker.protocol.types``.
"""

from broker.protocol.records.batches import DecodedBatch, decode_batches, decode_records, encode_batch
from broker.protocol.records.codec import Headers, Record, read_records
from broker.protocol.records.layout import BatchHeader
from broker.protocol.records.legacy import LegacyHeader, encode_message_set
from broker.protocol.records.walker import Tail, iter_batches, records_of

__all__ = [
    "BatchHeader",
    "DecodedBatch",
    "Headers",
    "LegacyHeader",
    "Record",
    "Tail",
    "decode_batches",
    "decode_records",
    "encode_batch",
    "encode_message_set",
    "iter_batches",
    "read_records",
    "records_of",
]
