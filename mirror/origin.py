"""The origin header every mirrored record carries, and the loop check built on it.

The header (``logbus.origin`` = ``<cluster-id>:<topic>:<partition>:<offset>``), ``Origin`` and the
parser are ``broker.protocol.origin``'s, re-exported here. A mirrored record gets one more origin
header; headers it already had are kept, so a record mirrored twice (A -> B -> C) carries its whole
chain, oldest first.

The loop check: a mirror never copies a record into a cluster named anywhere in its chain. With
A -> B and B -> A running together, a record born in A reaches B with origin A; the B -> A mirror
sees that A is in the chain and skips it, so nothing circulates.
"""

from __future__ import annotations

from collections.abc import Iterable

# the header's format and parser live with the protocol (the loader reads them too)
from broker.protocol.origin import HEADER, Origin, birth, origins, parse_origin

__all__ = ["HEADER", "Origin", "parse_origin", "origins", "birth", "came_from", "with_origin", "OriginEncoder"]


def came_from(headers: Iterable | None, cluster_id: str) -> bool:
    """True when ``cluster_id`` is anywhere in the record's origin chain (so: do not copy it there)."""
    if not headers:
        return False
    return any(o.cluster_id == cluster_id for o in origins(headers))


def with_origin(headers: Iterable | None, origin: Origin) -> list[tuple[str, bytes | None]]:
    """The record's headers plus one naming ``origin`` (appended: the chain reads oldest first)."""
    out = [(h[0], h[1]) for h in (headers or ())]
    out.append((HEADER, origin.encode()))
    return out


class OriginEncoder:
    """The origin header of one source partition, pre-encoded for the mirror's bulk path.

    ``value_prefix + b"%d" % offset`` is the header value (``Origin.encode()``); for a record
    without headers its whole header block is ``block_head + varint(len(value)) + value``
    (count 1, then the key ``logbus.origin``), the bytes ``encode_headers`` would make."""

    __slots__ = ("value_prefix", "block_head")

    def __init__(self, cluster_id: str, topic: str, partition: int) -> None:
        from broker.client.accumulator import _sized, _varint

        self.value_prefix = f"{cluster_id}:{topic}:{partition}:".encode()
        self.block_head = _varint(1) + _sized(HEADER.encode())

    def header_block(self, offset: int) -> bytes:
        from broker.client.accumulator import _varint

        value = self.value_prefix + b"%d" % offset
        return self.block_head + _varint(len(value)) + value
