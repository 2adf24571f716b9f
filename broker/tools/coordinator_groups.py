"""Groups as the brokers' group coordinators see them (``consumer-groups --bootstrap-server``).

ListGroups is asked of every broker (each lists the groups it coordinates); a group is
described by its coordinator (FindCoordinator, DescribeGroups, OffsetFetch of every committed
partition) and the log end offsets come from each partition's leader (ListOffsets).
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from dataclasses import dataclass

from broker.client.connection import BrokerConnection
from broker.protocol.errors import ErrorCode
from broker.protocol.messages import ApiKey

LATEST = -1


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


def _connect(address: str) -> BrokerConnection:
    return BrokerConnection.from_address(address, client_id="logbus-consumer-groups", timeout=10.0)


def _cluster(bootstrap: str) -> tuple[dict[int, str], dict[tuple[str, int], int]]:
    """Live brokers {id: "host:port"} and partition leaders, from the first bootstrap server that answers."""
    errors = []
    for address in [a.strip() for a in bootstrap.split(",") if a.strip()]:
        try:
            with _connect(address) as conn:
                meta = conn.request(ApiKey.METADATA, 1, {"topics": None})
        except OSError as exc:
            errors.append(f"{address}: {exc}")
            continue
        brokers = {b["node_id"]: f"{b['host']}:{b['port']}" for b in meta["brokers"]}
        leaders = {(t["name"], p["partition_index"]): p["leader_id"] for t in meta["topics"] for p in t["partitions"]}
        return brokers, leaders
    raise ConnectionError("no bootstrap server answered: " + "; ".join(errors))


def list_groups(bootstrap: str) -> list[str]:
    brokers, _ = _cluster(bootstrap)
    groups: set[str] = set()
    for address in brokers.values():
        with _connect(address) as conn:
            groups.update(g["group_id"] for g in conn.request(ApiKey.LIST_GROUPS, 2, {})["groups"])
    return sorted(groups)


def _coordinator(bootstrap: str, brokers: dict[int, str], group: str) -> str:
    with _connect(next(iter(brokers.values()))) as conn:
        found = conn.request(ApiKey.FIND_COORDINATOR, 2, {"key": group, "key_type": 0})
    if found["error_code"] != ErrorCode.NONE:
        raise ConnectionError(f"no coordinator for group '{group}': {ErrorCode(found['error_code']).name}")
    return f"{found['host']}:{found['port']}"


def list_offsets_requests(leaders: dict[tuple[str, int], int], partitions: Iterable[tuple[str, int]],
                          timestamp: int = LATEST) -> dict[int, dict]:
    """One ListOffsets request body per leader broker covering all of its ``partitions`` (never one per partition)."""
    by_leader: dict[int, dict[str, list[dict]]] = {}
    for topic, p in sorted(partitions):
        leader = leaders.get((topic, p), -1)
        if leader >= 0:
            entry = {"partition_index": p, "current_leader_epoch": -1, "timestamp": timestamp}
            by_leader.setdefault(leader, {}).setdefault(topic, []).append(entry)
    return {leader: {"replica_id": -1, "isolation_level": 0,
                     "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()]}
            for leader, topics in by_leader.items()}


def offsets_of(answer: dict) -> dict[tuple[str, int], int]:
    """The offsets a ListOffsets answer gives, partitions with an error left out."""
    return {(t["name"], p["partition_index"]): p["offset"]
            for t in answer["topics"] for p in t["partitions"] if p["error_code"] == ErrorCode.NONE}


def committed_of(answer: dict) -> dict[tuple[str, int], int]:
    """The committed offsets an OffsetFetch answer gives (partitions without one left out)."""
    return {(t["name"], p["partition_index"]): p["committed_offset"]
            for t in answer["topics"] for p in t["partitions"] if p["committed_offset"] >= 0}


def members_of(described: dict) -> list[Member]:
    """The members of one group of a DescribeGroups answer, with their assigned partitions."""
    return [Member(m["member_id"], m["client_id"], m["client_host"], decode_assignment(bytes(m["member_assignment"])))
            for m in described["members"]]


def _log_ends(brokers: dict[int, str], leaders: dict[tuple[str, int], int], partitions: set[tuple[str, int]]) -> dict:
    ends: dict[tuple[str, int], int] = {}
    for leader, body in list_offsets_requests({tp: leaders.get(tp, -1) for tp in partitions if leaders.get(tp, -1) in brokers},
                                              partitions).items():
        with _connect(brokers[leader]) as conn:
            ends.update(offsets_of(conn.request(ApiKey.LIST_OFFSETS, 2, body)))
    return ends


def describe_group(bootstrap: str, group: str) -> GroupView:
    brokers, leaders = _cluster(bootstrap)
    with _connect(_coordinator(bootstrap, brokers, group)) as conn:
        described = conn.request(ApiKey.DESCRIBE_GROUPS, 4, {"groups": [group], "include_authorized_operations": False})
        committed = conn.request(ApiKey.OFFSET_FETCH, 5, {"group_id": group, "topics": None})
    g = described["groups"][0]
    if g["error_code"] != ErrorCode.NONE:
        raise ConnectionError(f"describing group '{group}': {ErrorCode(g['error_code']).name}")
    members = members_of(g)
    offsets = committed_of(committed)
    owner = {tp: m for m in members for tp in m.partitions}
    partitions = set(offsets) | set(owner)
    ends = _log_ends(brokers, leaders, partitions)
    rows = []
    for tp in sorted(partitions):
        current, end, m = offsets.get(tp), ends.get(tp), owner.get(tp)
        lag = end - current if current is not None and end is not None else None
        rows.append((group, tp[0], tp[1], _dash(current), _dash(end), _dash(lag),
                     m.member_id if m else "-", (m.host or "-") if m else "-", m.client_id if m else "-"))
    return GroupView(group, g["group_state"], members, rows, g.get("protocol_data", ""))


def _dash(value: object) -> object:
    return "-" if value is None else value
