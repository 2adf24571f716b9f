"""A killed test session's processes are reaped by the next one; live sessions' are not."""

from __future__ import annotations

import os
import subprocess
import sys
import time

from tests.reaper import SESSION_ENV, reap_orphans


def _sleeper(owner: int) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"],
                            env={**os.environ, SESSION_ENV: str(owner)}, start_new_session=True)


def test_processes_of_a_dead_session_are_reaped_and_others_kept():
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()  # a session that no longer exists
    orphan = _sleeper(gone.pid)
    alive = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])  # a live "session"
    neighbour = _sleeper(alive.pid)
    try:
        time.sleep(0.2)  # let the children exec (their environment is readable from then on)
        reaped = reap_orphans()
        assert orphan.pid in reaped and orphan.wait(10) is not None
        assert neighbour.pid not in reaped and neighbour.poll() is None
    finally:
        for p in (orphan, neighbour, alive):
            p.kill()
            p.wait()
