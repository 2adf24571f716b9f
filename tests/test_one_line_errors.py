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


def _console(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "broker.cli", "console", *args], capture_output=True, text=True, timeout=60)


def test_console_on_an_unreachable_cluster_a_bad_port_or_no_cluster_is_one_line():
    from broker.cluster.net import free_port

    unreachable = _console("--bootstrap-server", f"127.0.0.1:{free_port()}", "--port", "0")
    assert unreachable.returncode == 1 and unreachable.stdout == ""
    assert unreachable.stderr.count("\n") == 1 and "logbus console: error: cannot read the cluster at" in unreachable.stderr
    bad = _console("--bootstrap-server", "127.0.0.1:1", "--port", "70000")
    assert bad.returncode == 1 and bad.stderr == "logbus console: error: --port must be between 0 and 65535, not 70000\n"
    missing = _console("--port", "0")
    assert missing.returncode == 1 and missing.stderr.count("\n") == 1 and "--bootstrap-server" in missing.stderr
