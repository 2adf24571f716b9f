"""The compiled codecs (``produce_c.pyx``, built where a C compiler exists), by message name:
``MessageSchema`` uses them for those messages in place of the generated ones. Where they are
not built, the tables are empty and the generated codecs run."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

try:
    from broker.protocol import produce_c
except ImportError:  # pragma: no cover - no C compiler at install time
    produce_c = None  # type: ignore[assignment]

#: message name -> (version -> a reader/writer with the generated codec's signature)
READERS: dict[str, Callable[[int], Any]] = {}
WRITERS: dict[str, Callable[[int], Any]] = {}
if produce_c is not None:
    READERS["ProduceRequest"] = produce_c.ProduceRequestReader
    WRITERS["ProduceResponse"] = produce_c.ProduceResponseWriter
