"""SIGTERM and SIGHUP end a benchmark as Ctrl-C does, so its ``with``/``finally`` blocks stop the
clusters and processes it started (by default those signals kill the Python process at once and
leave its brokers and ZooKeeper running)."""

from __future__ import annotations

import signal
from typing import Any


def _interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def stop_cleanly_on_signals() -> None:
    """Call first thing in a benchmark's ``main``."""
    signal.signal(signal.SIGTERM, _interrupt)
    signal.signal(signal.SIGHUP, _interrupt)
