"""What the benchmarks print: progress lines on stderr, results as JSON on stdout and to a file."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any


def progress(msg: str) -> None:
    """A timestamped line on stderr."""
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def report(results: Any, json_path: str | None) -> None:
    """The results as JSON on stdout, and in ``json_path`` when given (``--json``)."""
    text = json.dumps(results, indent=2)
    print(text)
    if json_path:
        Path(json_path).write_text(text)
