"""A broker restarted right after kill -9 finds its old registration until ZooKeeper expires the
old session, which may be later than the new broker's own session timeout: it waits (bounded, one
log line) for its own earlier registration, while a live broker with other endpoints is refused."""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import time

import pytest

from broker.cluster.net import free_port
from broker.cluster.zk import BrokerIdInUseError, ZkClient
from broker.cluster.zkdata import BrokerIdZNode
from broker.config import Listener

HOLDER = """
import sys, time
from kazoo.client import KazooClient
zk = KazooClient(hosts=sys.argv[1], timeout=float(sys.argv[2]))
zk.start(timeout=10)
zk.create(sys.argv[3], sys.argv[4].encode(), ephemeral=True, makepath=True)
print("held", flush=True)
time.sleep(600)
"""
OLD_SESSION_S = 4.0  # the killed broker's session: longer than the restarted one's wait before it was fixed


def test_restart_waits_for_its_own_old_session_and_a_live_duplicate_is_refused(zk_chroot: str, caplog) -> None:
    mine = [Listener("PLAINTEXT", "127.0.0.1", free_port())]
    path = BrokerIdZNode.path(7)
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, zk_chroot, str(OLD_SESSION_S), path, BrokerIdZNode.encode(mine).decode()],
        stdout=subprocess.PIPE, text=True, start_new_session=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        other = ZkClient(zk_chroot, session_timeout_ms=2000)
        other.start(timeout=10)
        try:
            started = time.monotonic()
            with pytest.raises(BrokerIdInUseError, match="already registered"):
                other.register_broker(7, [Listener("PLAINTEXT", "127.0.0.1", free_port())], stale_wait_s=1.0)
            assert time.monotonic() - started < 3
        finally:
            other.stop()
        os.kill(holder.pid, signal.SIGKILL)  # the old broker dies; its session lingers for OLD_SESSION_S
        holder.wait(10)
        restarted = ZkClient(zk_chroot, session_timeout_ms=2000)
        restarted.start(timeout=10)
        try:
            caplog.clear()
            started = time.monotonic()
            with caplog.at_level(logging.WARNING, logger="broker.cluster.zk"):
                restarted.register_broker(7, mine, stale_wait_s=1.0)
            waited = time.monotonic() - started
            assert restarted.kazoo.get(path)[1].ephemeralOwner == restarted.session_id
        finally:
            restarted.stop()
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait(10)
    assert waited > 1.0, "it waited past its own stale wait for the old session to expire"
    lines = [r.getMessage() for r in caplog.records if "still registered" in r.getMessage()]
    assert len(lines) == 1 and "an earlier run of this broker" in lines[0]
