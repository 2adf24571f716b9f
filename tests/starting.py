"""Starting several broker processes of one cluster together: each spends its start-up importing
and registering in ZooKeeper, so N brokers spawned at once are listening in about the time of
one or two instead of N (as `logbus cluster up` starts them)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TypeVar

from broker.cluster.local import BrokerProcess

B = TypeVar("B", bound=Sequence[BrokerProcess])


def start_together(brokers: B) -> B:
    """Spawn every broker, then wait until each listens (BrokerProcess.wait_ready: a broker that
    exits or does not listen in time raises). Returns ``brokers``."""
    spawn(brokers)
    for b in brokers:
        b.wait_ready()
    return brokers


def spawn(brokers: Iterable[BrokerProcess]) -> None:
    for b in brokers:
        b.start(wait=False)
