"""The compiled codecs (``codecs_c.pyx``, built where a C compiler exists): by message name,
which ``MessageSchema`` uses for those messages in place of the generated ones, and the request
header's reader, which ``header.decode_request_header`` tries first. Where they are not built,
the tables are empty, the reader None, and the Python codecs run."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

try:
    from broker.protocol import codecs_c
except ImportError:  # pragma: no cover - no C compiler at install time
    codecs_c = None  # type: ignore[assignment]

#: message name -> (version -> a reader/writer with the generated codec's signature)
READERS: dict[str, Callable[[int], Any]] = {}
WRITERS: dict[str, Callable[[int], Any]] = {}
#: (buffer, flexible (api_key, version) pairs, header type) -> the header, or None to read it the checked way
read_request_header: Callable[[Any, frozenset[tuple[int, int]], Any], Any] | None = None
if codecs_c is not None:
    READERS["ProduceRequest"] = codecs_c.ProduceRequestReader
    WRITERS["ProduceResponse"] = codecs_c.ProduceResponseWriter
    read_request_header = codecs_c.read_request_header
