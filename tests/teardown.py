"""Teardown helpers shared by the fixtures that start things: whatever a test started is
stopped, and whatever it wrote to ZooKeeper is removed, even when the test fails."""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import TypeVar

from kazoo.client import KazooClient

T = TypeVar("T")


@contextmanager
def stopping(stop: Callable[[T], object]) -> Iterator[Callable[[T], T]]:
    """Yield ``keep(thing) -> thing``; on exit every kept thing is stopped with ``stop``, last first."""
    kept: list[T] = []

    def keep(thing: T) -> T:
        kept.append(thing)
        return thing

    try:
        yield keep
    finally:
        for thing in reversed(kept):
            stop(thing)


def delete_znodes(connect_string: str, paths: Iterable[str]) -> None:
    """Remove ``paths`` (with their children) from ZooKeeper; best effort: a path never created, or
    a server already gone, leaves nothing to clean."""
    cleaner = KazooClient(hosts=connect_string)
    try:
        cleaner.start(timeout=10)
        for path in paths:
            try:
                cleaner.delete(path, recursive=True)
            except Exception:
                pass
    except Exception:
        pass
    finally:
        cleaner.stop()
        cleaner.close()


def terminate(proc: subprocess.Popen, timeout: float = 15.0) -> None:
    """SIGTERM a child process, SIGKILL it if it is still there after ``timeout`` seconds, reap it."""
    proc.terminate()
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(5)
