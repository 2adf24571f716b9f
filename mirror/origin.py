"""The origin header every mirrored record carries, and the loop check built on it.

A mirrored record gets one more header ``logbus.origin`` = ``<cluster-id>:<topic>:<partition>:<offset>``
naming the cluster it was read from and its position there. Headers it already had are kept, so a
record mirrored twice (A -> B -> C) carries its whole chain, oldest first.

The loop check: a mirror never copies a record into a cluster named anywhere in its chain. With
A -> B and B -> A running together, a record born in A reaches B with origin A; the B -> A mirror
sees that A is in the chain and skips it, so nothing circulates.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import NamedTuple

HEADER = "logbus.origin"


class Origin(NamedTuple):
    cluster_id: str
    topic: str
    partition: int
    offset: int

    def encode(self) -> bytes:
        return f"{self.cluster_id}:{self.topic}:{self.partition}:{self.offset}".encode()


def parse_origin(value: bytes | str | None) -> Origin | None:
    """An Origin from a header value; None when it does not parse.

    Topic names cannot hold ':', cluster ids (url-safe base64) neither, so split on the first
    and the last two colons."""
    if value is None:
        return None
    text = value.decode("utf-8", "replace") if isinstance(value, (bytes, bytearray, memoryview)) else str(value)
    cluster, sep, rest = text.partition(":")
    if not sep:
        return None
    parts = rest.rsplit(":", 2)
    if len(parts) != 3:
        return None
    try:
        return Origin(cluster, parts[0], int(parts[1]), int(parts[2]))
    except ValueError:
        return None


def origins(headers: Iterable | None) -> list[Origin]:
    """Every origin in a record's headers, oldest first."""
    found = []
    for item in headers or ():
        try:
            key, value = item[0], item[1]
        except (TypeError, IndexError):
            continue
        if key == HEADER:
            origin = parse_origin(value)
            if origin is not None:
                found.append(origin)
    return found


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
