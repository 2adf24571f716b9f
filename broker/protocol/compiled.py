"""The compiled codecs (``codecs_c.pyx``, built where a C compiler exists): per message and
version, what ``MessageSchema`` uses in place of the generated codec (``reader``, ``writer``), and
the request header's reader, which ``header.decode_request_header`` tries first. Where they are
not built, there are none, and the Python codecs run."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

try:
    from broker.protocol import codecs_c
except ImportError:  # pragma: no cover - no C compiler at install time
    codecs_c = None  # type: ignore[assignment]

#: message name -> (its compiled codec for a version, the versions compiled)
_READERS: dict[str, tuple[Callable[[int], Any], range]] = {}
_WRITERS: dict[str, tuple[Callable[[int], Any], range]] = {}
#: (buffer, flexible (api_key, version) pairs, header type) -> the header, or None to read it the checked way
read_request_header: Callable[[Any, frozenset[tuple[int, int]], Any], Any] | None = None
if codecs_c is not None:
    _READERS["ProduceRequest"] = (codecs_c.ProduceRequestReader, codecs_c.PRODUCE_VERSIONS)
    _WRITERS["ProduceResponse"] = (codecs_c.ProduceResponseWriter, codecs_c.PRODUCE_VERSIONS)
    read_request_header = codecs_c.read_request_header


def reader(name: str, version: int) -> Any | None:
    """The compiled reader of message ``name`` at ``version``, with the generated reader's
    signature; None where there is none."""
    return _built(_READERS, name, version)


def writer(name: str, version: int) -> Any | None:
    """The compiled writer of message ``name`` at ``version`` (the generated writer's signature,
    and ``frame``); None where there is none."""
    return _built(_WRITERS, name, version)


def _built(table: dict[str, tuple[Callable[[int], Any], range]], name: str, version: int) -> Any | None:
    found = table.get(name)
    return found[0](version) if found is not None and version in found[1] else None
