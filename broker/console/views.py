"""What each console page shows, computed from one cluster sample and the lag history: plain
dicts and lists for the templates, so the numbers are unit-tested without a server."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from broker.client.admin import PartitionDescription, TopicDescription
from broker.console.charts import bar_chart, line_chart
from broker.console.lag_history import LagView
from broker.console.lag_status import Status
from broker.console.reader import ClusterSample

TopicPartition = tuple[str, int]


def min_isr(sample: ClusterSample, topic: str) -> int:
    return int(sample.configs.get(topic, {}).get("min.insync.replicas", "1"))


def partition_flags(p: PartitionDescription, min_insync: int) -> list[str]:
    """Which of Kafka's reports list the partition: offline, under-replicated, under-min-ISR."""
    flags = []
    if p.leader < 0:
        flags.append("offline")
    if len(p.isr) < len(p.replicas):
        flags.append("under-replicated")
    if len(p.isr) < min_insync:
        flags.append("under-min-isr")
    return flags


def cluster_page(sample: ClusterSample) -> dict[str, Any]:
    """Brokers with their partition and leader counts, the controller, and the partitions in trouble."""
    replicas: dict[int, int] = {b.node_id: 0 for b in sample.cluster.brokers}
    leaders: dict[int, int] = dict.fromkeys(replicas, 0)
    trouble: dict[str, list[dict[str, Any]]] = {"offline": [], "under-replicated": [], "under-min-isr": []}
    partitions = 0
    for topic in sample.cluster.topics:
        floor = min_isr(sample, topic.name)
        for p in topic.partitions:
            partitions += 1
            for r in p.replicas:
                replicas[r] = replicas.get(r, 0) + 1
            if p.leader >= 0:
                leaders[p.leader] = leaders.get(p.leader, 0) + 1
            for flag in partition_flags(p, floor):
                trouble[flag].append(_partition_row(topic, p))
    live = {b.node_id for b in sample.cluster.brokers}
    brokers: list[dict[str, Any]] = [{"id": b.node_id, "address": b.address, "rack": b.rack or "-",
                "controller": b.node_id == sample.cluster.controller,
                "partitions": replicas.get(b.node_id, 0), "leaders": leaders.get(b.node_id, 0)}
               for b in sample.cluster.brokers]
    brokers += [{"id": n, "address": "(not live)", "rack": "-", "controller": False, "partitions": replicas[n],
                 "leaders": leaders.get(n, 0)} for n in sorted(replicas) if n not in live]
    chart = bar_chart([(str(b["id"]), (replicas.get(b["id"], 0), leaders.get(b["id"], 0))) for b in brokers])
    return {"cluster_id": sample.cluster.cluster_id or "-", "controller": sample.cluster.controller,
            "brokers": brokers, "live": len(live), "topics": len(sample.cluster.topics), "partitions": partitions,
            "offline": trouble["offline"], "under_replicated": trouble["under-replicated"],
            "under_min_isr": trouble["under-min-isr"], "chart": chart}


def _partition_row(topic: TopicDescription, p: PartitionDescription) -> dict[str, Any]:
    return {"topic": topic.name, "partition": p.partition, "leader": p.leader if p.leader >= 0 else "none",
            "replicas": ",".join(map(str, p.replicas)), "isr": ",".join(map(str, p.isr))}


def topics_page(sample: ClusterSample) -> dict[str, Any]:
    """One row per topic: partitions, replication factor, records at the log ends, partitions in trouble."""
    rows = []
    for topic in sorted(sample.cluster.topics, key=lambda t: t.name):
        floor = min_isr(sample, topic.name)
        flags = [f for p in topic.partitions for f in partition_flags(p, floor)]
        rows.append({"name": topic.name, "partitions": len(topic.partitions), "replication_factor": topic.replication_factor,
                     "end_total": sum(sample.ends.get((topic.name, p.partition), 0) for p in topic.partitions),
                     "offline": flags.count("offline"), "under_replicated": flags.count("under-replicated"),
                     "under_min_isr": flags.count("under-min-isr")})
    return {"topics": rows}


def topic_page(sample: ClusterSample, name: str, starts: Mapping[TopicPartition, int], sizes: Mapping[TopicPartition, int],
               overrides: Mapping[str, str]) -> dict[str, Any] | None:
    """One topic's partitions (leader, replicas, ISR, log start and end, bytes on the leader) and its
    config overrides; None if unknown."""
    topic = next((t for t in sample.cluster.topics if t.name == name), None)
    if topic is None:
        return None
    floor = min_isr(sample, name)
    partitions = []
    for p in topic.partitions:
        start, end = starts.get((name, p.partition)), sample.ends.get((name, p.partition))
        partitions.append({**_partition_row(topic, p), "start": _dash(start), "end": _dash(end),
                           "records": _dash(end - start if start is not None and end is not None else None),
                           "size": _dash(sizes.get((name, p.partition))),
                           "flags": " ".join(partition_flags(p, floor))})
    return {"name": name, "partitions": partitions, "replication_factor": topic.replication_factor,
            "size": sum(sizes.get((name, p.partition), 0) for p in topic.partitions),
            "min_insync_replicas": floor, "overrides": sorted(overrides.items())}


def groups_page(sample: ClusterSample, lag: LagView) -> dict[str, Any]:
    """One row per group: kind, state, members, partitions, total lag and status."""
    rows = []
    for name in sorted(set(sample.groups) | set(sample.committed)):
        info, group = sample.groups.get(name), lag.group(name)
        rows.append({"name": name, "kind": _kind(info.protocol_type if info else ""),
                     "state": (info.state if info else "") or "-", "members": len(info.members) if info else 0,
                     "partitions": len(sample.committed.get(name, {})), "lag": group.total, "status": group.status.name})
    return {"groups": rows}


def _kind(protocol_type: str) -> str:
    return "coordinator" if protocol_type else "offsets only (ZooKeeper consumers or none live)"


def group_page(sample: ClusterSample, lag: LagView, name: str, zk_members: list[str] | None = None,
               zk_owners: Mapping[TopicPartition, str] | None = None) -> dict[str, Any] | None:
    """One group: its members, each partition's committed offset, log end, lag, status and owner,
    the lag-over-time chart; None when the cluster does not know the group."""
    if name not in sample.groups and name not in sample.committed:
        return None
    info, group = sample.groups.get(name), lag.group(name)
    members = info.members if info else []
    owner = {tp: m for m in members for tp in m.partitions}
    committed = sample.committed.get(name, {})
    rows = []
    for tp in sorted(set(committed) | set(owner) | set(zk_owners or {})):
        m, known = owner.get(tp), group.partitions.get(tp)
        holder = (m.client_id + " " + (m.host or "")).strip() if m else (zk_owners or {}).get(tp, "-")
        rows.append({"topic": tp[0], "partition": tp[1], "committed": _dash(committed.get(tp)),
                     "end": _dash(sample.ends.get(tp)), "lag": _dash(known.lag if known else None),
                     "status": (known.status if known else Status.OK).name, "owner": holder})
    kind = "ZooKeeper consumers" if zk_members else _kind(info.protocol_type if info else "")
    return {"name": name, "kind": kind, "state": (info.state if info else "") or "-",
            "protocol": (info.protocol if info else "") or "-",
            "members": [{"id": m.member_id, "client_id": m.client_id, "host": m.host or "-",
                         "partitions": len(m.partitions)} for m in sorted(members, key=lambda m: m.member_id)],
            "zk_members": zk_members or [], "partitions": rows, "lag": group.total,
            "status": group.status.name, "chart": line_chart(group.series)}


def _dash(value: int | None) -> int | str:
    return "-" if value is None else value


def loads_page(runs: list[dict[str, Any]], warehouse: str) -> dict[str, Any]:
    """The loader's runs, newest first, each with its validation verdict and a link to its Data Docs;
    the count per status and per verdict on top."""
    rows = []
    for r in runs:
        v = r.get("validation")
        verdict = "-" if v is None else ("passed" if v.get("success") else "FAILED")
        rows.append({"run_id": r["run_id"], "topic": r["topic"], "kind": r.get("kind", "load"), "status": r["status"],
                     "partitions": r.get("partitions", 0), "ranges": r.get("ranges", ""),
                     "records": _dash(r.get("records")), "errors": _dash(r.get("errors")),
                     "duplicates": _dash(r.get("duplicates")), "validation": verdict,
                     "checks": "-" if v is None else f"{v.get('evaluated', 0) - v.get('failed', 0)}/{v.get('evaluated', 0)}",
                     "docs": v is not None})
    counts: dict[str, int] = {}
    for row in rows:
        for key in (row["status"], f"validation {row['validation']}"):
            counts[key] = counts.get(key, 0) + 1
    return {"runs": rows, "warehouse": warehouse, "counts": sorted(counts.items())}


def mirrors_page(statuses: list[dict[str, Any]]) -> dict[str, Any]:
    """Each mirror's status file as it wrote it: state, per source and topic the rate and lag, the
    age of copied records at the aggregate's acknowledgement, the totals; a file that cannot be read says why."""
    return {"mirrors": [{**s, "lagging": sum(1 for t in s.get("topics", []) if t.get("lag"))} for s in statuses]}
