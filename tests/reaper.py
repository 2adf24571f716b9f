"""Reap what a killed test session left running.

Every process a test starts, the test stops, but a session killed mid-test (SIGKILL, a CI
timeout) cannot: its brokers, ZooKeeper and Spark JVMs live on, in sessions of their own. The
session marks its environment with its pid (inherited by everything it starts); the next session
kills processes whose mark names a session that is gone. Concurrent sessions are left alone.
"""

from __future__ import annotations

import os

import psutil

SESSION_ENV = "LOGBUS_TEST_SESSION"


def reap_orphans() -> list[int]:
    """Kill the processes of dead test sessions; returns their pids."""
    me = os.getpid()
    reaped = []
    for proc in psutil.process_iter():
        try:
            owner = proc.environ().get(SESSION_ENV, "")
            if owner.isdigit() and int(owner) != me and not psutil.pid_exists(int(owner)):
                proc.kill()
                reaped.append(proc.pid)
        except (psutil.Error, OSError):
            continue  # gone meanwhile, or not ours to read
    return reaped


def mark_session() -> None:
    """Mark this process's environment, so whatever it starts can be traced back to it."""
    os.environ[SESSION_ENV] = str(os.getpid())
