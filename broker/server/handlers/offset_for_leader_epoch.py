"""OffsetForLeaderEpoch: the end offset of a leader epoch, from the leader-epoch cache.

A broker that becomes a follower asks the new leader where its latest epoch ends and
truncates there, so it keeps no record the leader never had.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from broker.protocol.errors import ClusterAuthorizationFailedError, ErrorCode
from broker.protocol.header import RequestHeader
from broker.protocol.messages import ApiKey
from broker.security.api_acls import INTER_BROKER, REQUIRED
from broker.server.authz import requester
from broker.server.dispatch import Handler
from broker.server.handlers.per_partition import LeaderLookup, answer_partitions
from broker.server.partition import Partition

if TYPE_CHECKING:
    from broker.server.broker import Broker


def handle(broker: Broker, header: RequestHeader, request: dict) -> dict:
    who = requester(broker)
    leader: LeaderLookup
    if request.get("replica_id", -1) >= 0:  # a follower (v3+): ClusterAction on the cluster, as Kafka
        leader = broker.replicas.leader_partition if who.may(INTER_BROKER) else _cluster_refused
    else:
        leader = who.guard(REQUIRED[ApiKey.OFFSET_FOR_LEADER_EPOCH], broker.replicas.leader_partition)
    return answer_partitions(request["topics"], "topic", "partition", leader, _blank, _lookup)


def _cluster_refused(topic: str, partition: int) -> Partition:
    raise ClusterAuthorizationFailedError("a follower's OffsetForLeaderEpoch needs ClusterAction on the cluster")


def _blank(part: dict) -> dict[str, Any]:
    return {"error_code": ErrorCode.NONE, "partition": part["partition"], "leader_epoch": -1, "end_offset": -1}


def _lookup(leader: Partition, part: dict) -> dict[str, Any]:
    leader.check_leader_epoch(part.get("current_leader_epoch", -1))
    epoch, end_offset = leader.epochs.end_offset_for(part["leader_epoch"], leader.log.log_end_offset)
    return {"leader_epoch": epoch, "end_offset": end_offset}


HANDLER = Handler(ApiKey.OFFSET_FOR_LEADER_EPOCH, 0, 3, handle)
