"""Starting several broker processes of one cluster together: each spends its start-up importing
and registering in ZooKeeper, so N brokers spawned at once are listening in about the time of
one or two instead of N (as `logbus cluster up` starts them)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TypeVar

from broker.client.connection import BrokerConnection
from broker.cluster.local import BrokerProcess
from broker.protocol.messages import ApiKey
from tests.waiting import wait_until

B = TypeVar("B", bound=Sequence[BrokerProcess])


def start_together(brokers: B) -> B:
    """Spawn every broker, wait until each listens (BrokerProcess.wait_ready: a broker that exits
    or does not listen in time raises), then until each one's metadata has all of them and a
    controller it knows: a broker learns of the others a moment after they registered, and a
    client asking it in between (librdkafka's admin client looking for the controller) would
    wait for its next metadata refresh. Returns ``brokers``."""
    spawn(brokers)
    for b in brokers:
        b.wait_ready()
    ids = {int(b.broker_id) for b in brokers}
    wait_until(lambda: all(_knows(b, ids) for b in brokers), 30, 0.05, what=f"brokers {sorted(ids)} to know each other")
    return brokers


def spawn(brokers: Iterable[BrokerProcess]) -> None:
    for b in brokers:
        b.start(wait=False)


def _knows(broker: BrokerProcess, ids: set[int]) -> bool:
    """True when ``broker``'s metadata lists every broker of ``ids`` and a controller among those it lists."""
    try:
        with BrokerConnection(broker.host, broker.port, timeout=5) as conn:
            metadata = conn.request(ApiKey.METADATA, 1, {"topics": []})
    except Exception:
        return False
    known = {b["node_id"] for b in metadata["brokers"]}
    return ids <= known and metadata["controller_id"] in known


#: For tests that kill -9 a broker and then wait for ZooKeeper to notice (the dead broker's
#: session to expire: a new leader, a new controller, a new coordinator, or the restarted broker
#: finding its own old registration gone): sessions of 3 s instead of the 6 s of
#: tests/conftest.py's brokers halve that wait. Not for tests in which a broker must stay
#: registered while it stalls (SIGSTOP, lag) for longer than that.
QUICK_EXPIRY = {"zookeeper.session.timeout.ms": "3000"}
