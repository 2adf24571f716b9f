"""What the console asks the cluster, batched: blocking calls, made off the reactor.

One ``sample()`` costs one Metadata and one DescribeConfigs (all topics), one ListOffsets per
leader broker (every partition it leads), one ListGroups per broker (which also names each
group's coordinator), one DescribeGroups per coordinator (all its groups) and one OffsetFetch per
group (all its partitions): never a request per partition. Connections are made through the
tools' ``ClusterAccess`` (bootstrap, the security of ``--command-config``, timeout) and kept between
samples. Request bodies and answers are read with the helpers the tools use
(``broker.tools.access``, ``broker.tools.coordinator_groups``, ``broker.tools.log_dirs``).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

from broker.client.admin import AdminClient, ClusterDescription
from broker.client.connection import BrokerConnection
from broker.protocol.errors import ErrorCode
from broker.protocol.messages import ApiKey
from broker.tools.access import ClusterAccess, list_offsets_requests, offsets_of
from broker.tools.coordinator_groups import Member, committed_of, members_of
from broker.tools.log_dirs import DESCRIBE_LOG_DIRS_VERSION, sizes_of

TopicPartition = tuple[str, int]
EARLIEST, LATEST = -2, -1
CLIENT_ID = "logbus-console"


@dataclass
class GroupInfo:
    """A group as its coordinator describes it; ``protocol_type`` is empty for offset-only groups
    (ZooKeeper consumers, or standard clients now gone)."""

    group: str
    coordinator: int
    protocol_type: str = ""
    state: str = ""
    protocol: str = ""
    members: list[Member] = field(default_factory=list)


@dataclass
class ClusterSample:
    """One round of the collector: the cluster, every topic's configs and log end offsets, every
    group and its committed offsets; ``errors`` are the brokers or groups that did not answer."""

    cluster: ClusterDescription
    configs: dict[str, dict[str, str]]
    ends: dict[TopicPartition, int]
    groups: dict[str, GroupInfo]
    committed: dict[str, dict[TopicPartition, int]]
    errors: list[str] = field(default_factory=list)


class ClusterReader:
    """The console's requests to one cluster; thread-safe (one request at a time)."""

    def __init__(self, access: ClusterAccess) -> None:
        self.access = access
        self._lock = threading.Lock()
        self._admin: AdminClient | None = None
        self._conns: dict[str, BrokerConnection] = {}

    # -- connections ---------------------------------------------------------------------------

    def _admin_client(self) -> AdminClient:
        if self._admin is None:
            self._admin = AdminClient(self.access.bootstrap, timeout=self.access.timeout, security=self.access.security)
        return self._admin

    def _with_admin(self, call: Any) -> Any:
        """``call(admin)``; a failure drops the connection so the next call starts afresh."""
        try:
            return call(self._admin_client())
        except Exception:
            self._drop_admin()
            raise

    def _drop_admin(self) -> None:
        if self._admin is not None:
            self._admin.close()
            self._admin = None

    def _request(self, address: str, api: ApiKey, version: int, body: dict) -> dict:
        conn = self._conns.get(address)
        try:
            if conn is None:
                conn = self._conns[address] = self.access.connect(address, CLIENT_ID)
            answer = conn.request(api, version, body)
        except Exception:
            dropped = self._conns.pop(address, None)
            if dropped is not None:
                dropped.close()
            raise
        assert answer is not None
        return answer

    def close(self) -> None:
        with self._lock:
            self._drop_admin()
            for conn in self._conns.values():
                conn.close()
            self._conns.clear()

    # -- the collector's round -----------------------------------------------------------------

    def sample(self) -> ClusterSample:
        """Everything the pages and the lag history need, in the batched requests above."""
        with self._lock:
            cluster: ClusterDescription = self._with_admin(lambda a: a.describe_cluster())
            configs = self._with_admin(lambda a: a.topics_configs([t.name for t in cluster.topics], only_overrides=False))
            brokers = {b.node_id: b.address for b in cluster.brokers}
            errors: list[str] = []
            ends = self._offsets(brokers, _leaders(cluster), LATEST, errors)
            groups = self._groups(brokers, errors)
            committed: dict[str, dict[TopicPartition, int]] = {}
            for name, info in groups.items():
                try:
                    answer = self._request(brokers[info.coordinator], ApiKey.OFFSET_FETCH, 5,
                                           {"group_id": name, "topics": None})
                except (OSError, KeyError) as exc:
                    errors.append(f"OffsetFetch of group {name}: {exc}")
                    continue
                if answer["error_code"] == ErrorCode.NONE:
                    committed[name] = committed_of(answer)
            return ClusterSample(cluster, configs, ends, groups, committed, errors)

    def _offsets(self, brokers: dict[int, str], leaders: dict[TopicPartition, int], timestamp: int,
                 errors: list[str]) -> dict[TopicPartition, int]:
        """One ListOffsets per leader broker; a broker that does not answer leaves its partitions out."""
        found: dict[TopicPartition, int] = {}
        bodies, _ = list_offsets_requests(brokers, leaders, dict.fromkeys(leaders, timestamp))
        for leader, body in sorted(bodies.items()):
            try:
                answer = self._request(brokers[leader], ApiKey.LIST_OFFSETS, 2, body)
            except OSError as exc:
                errors.append(f"ListOffsets on broker {leader}: {exc}")
                continue
            found.update((tp, offset) for tp, (code, offset) in offsets_of(answer).items() if code == ErrorCode.NONE)
        return found

    def _groups(self, brokers: dict[int, str], errors: list[str]) -> dict[str, GroupInfo]:
        """ListGroups on every broker (each lists the groups it coordinates), then one DescribeGroups per coordinator."""
        groups: dict[str, GroupInfo] = {}
        for node, address in sorted(brokers.items()):
            try:
                listed = self._request(address, ApiKey.LIST_GROUPS, 2, {})
                for g in listed["groups"]:
                    groups[g["group_id"]] = GroupInfo(g["group_id"], node, g["protocol_type"])
                names = sorted(g["group_id"] for g in listed["groups"])
                if names:
                    described = self._request(address, ApiKey.DESCRIBE_GROUPS, 4,
                                              {"groups": names, "include_authorized_operations": False})
                    for d in described["groups"]:
                        if d["error_code"] == ErrorCode.NONE and d["group_id"] in groups:
                            info = groups[d["group_id"]]
                            info.state, info.protocol, info.members = d["group_state"], d["protocol_data"], members_of(d)
            except OSError as exc:
                errors.append(f"groups of broker {node}: {exc}")
        return groups

    # -- what one topic page adds --------------------------------------------------------------

    def log_starts(self, sample: ClusterSample, topic: str) -> dict[TopicPartition, int]:
        """The log start offsets of ``topic``'s partitions: one ListOffsets per leader broker."""
        brokers = {b.node_id: b.address for b in sample.cluster.brokers}
        leaders = {tp: leader for tp, leader in _leaders(sample.cluster).items() if tp[0] == topic}
        with self._lock:
            return self._offsets(brokers, leaders, EARLIEST, [])

    def partition_sizes(self, sample: ClusterSample, topic: str) -> dict[TopicPartition, int]:
        """Bytes of each partition of ``topic`` on its leader: one DescribeLogDirs per leader broker."""
        brokers = {b.node_id: b.address for b in sample.cluster.brokers}
        by_leader: dict[int, list[int]] = {}
        for (name, partition), leader in _leaders(sample.cluster).items():
            if name == topic and leader in brokers:
                by_leader.setdefault(leader, []).append(partition)
        sizes: dict[TopicPartition, int] = {}
        with self._lock:
            for leader, partitions in sorted(by_leader.items()):
                try:
                    answer = self._request(brokers[leader], ApiKey.DESCRIBE_LOG_DIRS, DESCRIBE_LOG_DIRS_VERSION,
                                           {"topics": [{"topic": topic, "partitions": sorted(partitions)}]})
                except OSError:
                    continue
                sizes.update((tp, size) for tp, size in sizes_of(answer).items() if tp[1] in partitions)
        return sizes

    def config_overrides(self, topic: str) -> dict[str, str]:
        """The topic's configs that are not at their default (DescribeConfigs)."""
        with self._lock:
            return dict(self._with_admin(lambda a: a.topics_configs([topic])).get(topic, {}))


def _leaders(cluster: ClusterDescription) -> dict[TopicPartition, int]:
    return {(t.name, p.partition): p.leader for t in cluster.topics for p in t.partitions}
