"""Cluster-wide identifiers kept in ZooKeeper: the cluster id and blocks of producer ids.

Both live where Kafka keeps them (``/cluster/id``, ``/latest_producer_id_block``), so ids stay
unique across brokers and restarts.
"""

from __future__ import annotations

import base64
import json
import threading
import uuid

from kazoo.client import KazooClient
from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError

CLUSTER_ID_PATH = "/cluster/id"
PRODUCER_ID_BLOCK_PATH = "/latest_producer_id_block"
PRODUCER_ID_BLOCK_SIZE = 1000


def get_or_create_cluster_id(client: KazooClient) -> str:
    """The cluster's id, creating it (a url-safe base64 UUID, as Kafka does) on first start."""
    try:
        data, _ = client.get(CLUSTER_ID_PATH)
        return json.loads(data)["id"]
    except NoNodeError:
        pass
    new_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
    try:
        client.create(CLUSTER_ID_PATH, json.dumps({"version": "1", "id": new_id}).encode(), makepath=True)
        return new_id
    except NodeExistsError:
        data, _ = client.get(CLUSTER_ID_PATH)
        return json.loads(data)["id"]


class ProducerIdAllocator:
    """Hands out producer ids from blocks claimed in ZooKeeper with a conditional write."""

    def __init__(self, client: KazooClient, broker_id: int) -> None:
        self._client = client
        self._broker_id = broker_id
        self._lock = threading.Lock()
        self._next = 0
        self._end = -1

    def next_id(self) -> int:
        """A producer id no other broker has handed out; blocks briefly on ZooKeeper per 1000 ids."""
        with self._lock:
            if self._next > self._end:
                self._next, self._end = self._claim_block()
            producer_id = self._next
            self._next += 1
            return producer_id

    def _claim_block(self) -> tuple[int, int]:
        client = self._client
        while True:
            try:
                data, stat = client.get(PRODUCER_ID_BLOCK_PATH)
            except NoNodeError:
                block = self._block_json(0)
                try:
                    client.create(PRODUCER_ID_BLOCK_PATH, block, makepath=True)
                    return 0, PRODUCER_ID_BLOCK_SIZE - 1
                except NodeExistsError:
                    continue
            start = int(json.loads(data)["block_end"]) + 1
            try:
                client.set(PRODUCER_ID_BLOCK_PATH, self._block_json(start), version=stat.version)
                return start, start + PRODUCER_ID_BLOCK_SIZE - 1
            except BadVersionError:
                continue

    def _block_json(self, start: int) -> bytes:
        return json.dumps(
            {
                "version": 1,
                "broker": self._broker_id,
                "block_start": str(start),
                "block_end": str(start + PRODUCER_ID_BLOCK_SIZE - 1),
            }
        ).encode()
