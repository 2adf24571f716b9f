"""A command's failure is its own one line: kazoo's retry warnings ("Connection dropped: ...")
do not reach the terminal of a command that configured no log."""

from __future__ import annotations

import subprocess
import sys

SNIPPET = ("import logging, sys\n"
           "from broker.tools import quiet_library_logs\n"
           "if sys.argv[1] == 'quiet': quiet_library_logs()\n"
           "logging.getLogger('kazoo.client').warning('Connection dropped: socket connection error')\n")


def _stderr(mode: str) -> str:
    return subprocess.run([sys.executable, "-c", SNIPPET, mode], capture_output=True, text=True, timeout=30).stderr


def test_kazoo_retries_stay_off_the_terminal():
    assert "Connection dropped" in _stderr("loud"), "without it Python prints library warnings to stderr"
    assert _stderr("quiet") == ""
