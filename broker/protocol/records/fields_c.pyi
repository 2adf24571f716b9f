"""Types of the compiled record walk (fields_c.pyx)."""

from typing import Any

ROWS: tuple[str, ...]

def read_fields(buf: Any, starts: Any, ends: Any, counts: Any, out: Any) -> bool: ...
def gather(buf: Any, at: Any, lengths: Any, offsets: Any, data: Any) -> bool: ...
