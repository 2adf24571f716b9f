"""Groups as the brokers' group coordinators see them (``consumer-groups --bootstrap-server``).

ListGroups is asked of every broker (each lists the groups it coordinates); a group is
described by its coordinator (FindCoordinator, DescribeGroups, OffsetFetch of every committed
partition) and the log end offsets come from each partition's leader (ListOffsets).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from broker.protocol.errors import ErrorCode
from broker.protocol.messages import ApiKey
from broker.tools.access import ClusterAccess, cluster_access

LATEST = -1
CLIENT_ID = "logbus-consumer-groups"


@dataclass
class Member:
    member_id: str
    client_id: str
    host: str
    partitions: list[tuple[str, int]]


@dataclass
class GroupView:
    group: str
    state: str
    members: list[Member]
    rows: list[tuple]  # Kafka's table rows
    protocol: str = ""  # the assignment strategy chosen


def decode_assignment(data: bytes) -> list[tuple[str, int]]:
    """The consumer protocol's assignment: int16 version, [topic string, [int32]], user data."""
    if not data or len(data) < 6:
        return []
    pos = 2
    (n_topics,) = struct.unpack_from(">i", data, pos)
    pos += 4
    out = []
    for _ in range(max(n_topics, 0)):
        (length,) = struct.unpack_from(">h", data, pos)
        topic = data[pos + 2 : pos + 2 + length].decode()
        pos += 2 + length
        (n_parts,) = struct.unpack_from(">i", data, pos)
        pos += 4
        parts = struct.unpack_from(f">{max(n_parts, 0)}i", data, pos)
        pos += 4 * max(n_parts, 0)
        out += [(topic, p) for p in parts]
    return out


def list_groups(cluster: ClusterAccess | str) -> list[str]:
    """Every group any broker coordinates, sorted."""
    access = cluster_access(cluster)
    brokers, _ = access.metadata()
    groups: set[str] = set()
    for address in brokers.values():
        with access.connect(address, CLIENT_ID) as conn:
            groups.update(g["group_id"] for g in conn.request(ApiKey.LIST_GROUPS, 2, {})["groups"])
    return sorted(groups)


def log_ends(access: ClusterAccess, brokers: dict[int, str], leaders: dict[tuple[str, int], int],
             partitions: set[tuple[str, int]]) -> dict[tuple[str, int], int]:
    """Each partition's log end offset (those whose leader answered)."""
    found = access.list_offsets(brokers, leaders, dict.fromkeys(partitions, LATEST))
    return {tp: offset for tp, (code, offset) in found.items() if code == ErrorCode.NONE}


def committed_of(answer: dict) -> dict[tuple[str, int], int]:
    """The committed offsets an OffsetFetch answer gives (partitions without one left out)."""
    return {(t["name"], p["partition_index"]): p["committed_offset"]
            for t in answer["topics"] for p in t["partitions"] if p["committed_offset"] >= 0}


def members_of(described: dict) -> list[Member]:
    """The members of one group of a DescribeGroups answer, with their assigned partitions."""
    return [Member(m["member_id"], m["client_id"], m["client_host"], decode_assignment(bytes(m["member_assignment"])))
            for m in described["members"]]


def describe_group(cluster: ClusterAccess | str, group: str) -> GroupView:
    """The group as its coordinator describes it, with its committed offsets and their lag."""
    access = cluster_access(cluster)
    brokers, leaders = access.metadata()
    with access.connect(access.coordinator(group, brokers)[1], CLIENT_ID) as conn:
        described = conn.request(ApiKey.DESCRIBE_GROUPS, 4, {"groups": [group], "include_authorized_operations": False})
        committed = conn.request(ApiKey.OFFSET_FETCH, 5, {"group_id": group, "topics": None})
    g = described["groups"][0]
    if g["error_code"] != ErrorCode.NONE:
        raise ConnectionError(f"describing group '{group}': {ErrorCode(g['error_code']).name}")
    members = members_of(g)
    offsets = committed_of(committed)
    owner = {tp: m for m in members for tp in m.partitions}
    partitions = set(offsets) | set(owner)
    ends = log_ends(access, brokers, leaders, partitions)
    rows = []
    for tp in sorted(partitions):
        current, end, m = offsets.get(tp), ends.get(tp), owner.get(tp)
        lag = end - current if current is not None and end is not None else None
        rows.append((group, tp[0], tp[1], _dash(current), _dash(end), _dash(lag),
                     m.member_id if m else "-", (m.host or "-") if m else "-", m.client_id if m else "-"))
    return GroupView(group, g["group_state"], members, rows, g.get("protocol_data", ""))


def _dash(value: object) -> object:
    return "-" if value is None else value
