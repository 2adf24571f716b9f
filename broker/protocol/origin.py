"""The ``logbus.origin`` record header: its format and its parser.

Every record the mirror copies gets one more header ``logbus.origin`` =
``<cluster-id>:<topic>:<partition>:<offset>`` naming the cluster it was read from and its
position there. Headers it already had are kept, so a record mirrored twice (A -> B -> C)
carries its whole chain, oldest first: the first origin names where the record was born
(``birth``), the last one the most recent hop.

Written by the mirror (``mirror.origin``: the loop check, the bulk encoder); read by the
mirror and by the loader's deduplication (``pipelines.origin_index``).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import NamedTuple

HEADER = "logbus.origin"


class Origin(NamedTuple):
    cluster_id: str
    topic: str
    partition: int
    offset: int

    def encode(self) -> bytes:
        return f"{self.cluster_id}:{self.topic}:{self.partition}:{self.offset}".encode()


def parse_origin(value: bytes | bytearray | str | None) -> Origin | None:
    """An Origin from a header value; None when it does not parse.

    Topic names cannot hold ':', cluster ids (url-safe base64) neither, so split on the first
    and the last two colons."""
    if value is None:
        return None
    text = value.decode("utf-8", "replace") if isinstance(value, (bytes, bytearray)) else str(value)
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


def iter_origins(headers: Iterable | None) -> Iterator[Origin]:
    """The origins in a record's headers that parse, oldest first (lazily: ``birth`` stops at one)."""
    for item in headers or ():
        try:
            key, value = item[0], item[1]
        except (TypeError, IndexError):
            continue
        if key == HEADER:
            origin = parse_origin(value)
            if origin is not None:
                yield origin


def origins(headers: Iterable | None) -> list[Origin]:
    """Every origin in a record's headers, oldest first."""
    return list(iter_origins(headers))


def birth(headers: Iterable | None) -> Origin | None:
    """Where the record was born: the first (oldest) origin that parses, or None. A copy of a
    copy names the same birth as the copy, so this is the record's identity across mirrors."""
    return next(iter_origins(headers), None)


__all__ = ["HEADER", "Origin", "parse_origin", "iter_origins", "origins", "birth"]
