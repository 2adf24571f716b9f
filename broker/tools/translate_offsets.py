"""`consumer-groups --translate-from dc1.properties`: a group's dc1 offsets, translated into the aggregate.

Reads group G's committed offsets in the source cluster named by a mirror source file
(``bootstrap.servers``: the group coordinator's OffsetFetch; ``zookeeper.connect``:
``/consumers/G/offsets``), maps each onto the target topic ``<topic.prefix><topic>`` of the
aggregate cluster by searching its partitions' ``logbus.origin`` headers (``mirror.translate``),
prints Kafka's reset table plus where each offset came from, and with ``--execute`` commits the
offsets for G in the aggregate cluster like ``--reset-offsets --execute`` (refused while G has
active members there).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from broker.client.connection import BrokerConnectionError
from broker.config import load_properties
from broker.protocol.errors import ErrorCode, KafkaError
from broker.protocol.messages import ApiKey
from broker.tools import CommandError, reset_offsets
from broker.tools.access import ClusterAccess, access_of_props, cluster_access, from_args

TopicPartition = tuple[str, int]
HEADER = ("GROUP", "TOPIC", "PARTITION", "NEW-OFFSET", "SOURCE-TOPIC", "SOURCE-PARTITION", "SOURCE-OFFSET", "FOUND")


@dataclass
class SourceGroup:
    """What the source cluster says: its cluster id (as origin headers name it), the group's
    committed offsets, and the partition count of each of the group's topics."""

    cluster_id: str
    committed: dict[TopicPartition, int]
    partition_counts: dict[str, int]
    prefix: str
    where: str


def read_source(path: str, group: str, timeout: float = 10.0) -> SourceGroup:
    """The source side of the translation, from a mirror source .properties file."""
    if not Path(path).is_file():
        raise CommandError(f"--translate-from: file {path} does not exist")
    props = {k.strip(): str(v).strip() for k, v in load_properties(path).items()}
    if not (props.get("zookeeper.connect") or props.get("bootstrap.servers") or props.get("metadata.broker.list")):
        raise CommandError(f"--translate-from {path}: set zookeeper.connect or bootstrap.servers of the source cluster")
    return read_source_props(props, group, props.get("topic.prefix", ""), timeout)


def read_source_props(props: Mapping[str, str], group: str, prefix: str, timeout: float = 10.0) -> SourceGroup:
    """The source side from a source's settings (``zookeeper.connect`` wins, as in the mirror)."""
    if props.get("zookeeper.connect"):
        return _read_zookeeper(props["zookeeper.connect"], group, prefix, timeout)
    return _read_bootstrap(access_of_props(props), group, prefix)


def source_groups(props: Mapping[str, str]) -> list[str]:
    """The groups of a source cluster (a ZooKeeper source: every group under /consumers)."""
    from broker.tools import coordinator_groups as cg

    if props.get("zookeeper.connect"):
        from broker.cluster.offset_store import ZkOffsetStore
        from broker.tools import zookeeper_session

        with zookeeper_session(props["zookeeper.connect"]) as zk:
            return ZkOffsetStore(zk.kazoo).groups()
    return cg.list_groups(access_of_props(props))


def target_group(cluster: ClusterAccess | str, group: str) -> tuple[str, dict[TopicPartition, int]]:
    """The group's state and committed offsets in the aggregate cluster (its coordinator)."""
    access = cluster_access(cluster)
    with access.connect(access.coordinator(group, access.metadata()[0])[1]) as conn:
        described = _ask(conn, ApiKey.DESCRIBE_GROUPS, 4, {"groups": [group], "include_authorized_operations": False})
        fetched = _ask(conn, ApiKey.OFFSET_FETCH, 5, {"group_id": group, "topics": None})
    found = described["groups"][0]
    if found["error_code"] != ErrorCode.NONE:
        raise CommandError(f"describing group '{group}': {ErrorCode(found['error_code']).name}")
    committed = {(t["name"], p["partition_index"]): p["committed_offset"]
                 for t in fetched["topics"] for p in t["partitions"] if p["committed_offset"] >= 0}
    return found["group_state"], committed


def commit(cluster: ClusterAccess | str, group: str, rows: list[Row]) -> None:
    """Commit the rows' offsets for ``group`` in the aggregate cluster (generation -1: an inactive group)."""
    access = cluster_access(cluster)
    reset_offsets.commit_offsets(access, access.metadata()[0], group, {(r.topic, r.partition): r.offset for r in rows})


def _read_bootstrap(access: ClusterAccess, group: str, prefix: str) -> SourceGroup:
    bootstrap = access.bootstrap
    try:
        brokers, leaders = access.metadata()
        with access.connect(next(iter(brokers.values()))) as conn:
            cluster_id = _ask(conn, ApiKey.METADATA, 8, {"topics": [], "allow_auto_topic_creation": False}).get("cluster_id")
        with access.connect(access.coordinator(group, brokers)[1]) as conn:
            fetched = _ask(conn, ApiKey.OFFSET_FETCH, 5, {"group_id": group, "topics": None})
    except (OSError, BrokerConnectionError, KafkaError) as exc:
        raise CommandError(f"source cluster {bootstrap}: {exc}") from exc
    if not cluster_id:
        raise CommandError(f"source cluster {bootstrap}: Metadata has no cluster id")
    committed = {(t["name"], p["partition_index"]): p["committed_offset"]
                 for t in fetched["topics"] for p in t["partitions"] if p["committed_offset"] >= 0}
    counts: dict[str, int] = {}
    for topic, _ in leaders:
        counts[topic] = counts.get(topic, 0) + 1
    return SourceGroup(cluster_id, committed, counts, prefix, bootstrap)


def _read_zookeeper(connect: str, group: str, prefix: str, timeout: float) -> SourceGroup:
    from broker.cluster.offset_store import ZkOffsetStore
    from broker.tools import zookeeper_session
    from mirror.errors import MirrorError
    from mirror.maker import read_cluster_id

    with zookeeper_session(connect) as zk:
        try:
            cluster_id = read_cluster_id(zk, timeout=timeout)
        except MirrorError as exc:
            raise CommandError(str(exc)) from exc
        store = ZkOffsetStore(zk.kazoo)
        found = store.read(group, [(t, p) for t, ps in store.topics(group).items() for p in ps], with_metadata=False)
        committed = {tp: c.offset for tp, c in found.items() if c.offset >= 0}
        counts = {t: len(zk.topic_assignment(t) or {}) for t in {t for t, _ in committed}}
    return SourceGroup(cluster_id, committed, counts, prefix, connect)


@dataclass(frozen=True)
class Row:
    topic: str
    partition: int
    offset: int
    source_topic: str
    source_partition: int
    committed: int
    how: str


def plan(source: SourceGroup, target: ClusterAccess | str, group: str, topics: list[str],
         max_records: int, warn: Callable[[str], None] = lambda line: print(line, file=sys.stderr)) -> list[Row]:
    """The translated offset of every target partition of the group's (chosen) topics."""
    from mirror.resume import TailScanner

    access = cluster_access(target)
    aggregate = access.bootstrap
    from mirror.translate import translate_topic

    if not source.committed:
        raise CommandError(f"consumer group '{group}' has no committed offsets in the source cluster {source.where}")
    scope = reset_offsets.parse_topic_scope(topics)
    chosen = sorted({t for t, _ in source.committed} if not scope else scope)
    for topic in chosen:
        if not any(t == topic for t, _ in source.committed):
            raise CommandError(f"consumer group '{group}' has no committed offsets for topic '{topic}' in {source.where}")
    try:
        _, leaders = access.metadata()
    except (OSError, BrokerConnectionError, KafkaError) as exc:
        raise CommandError(f"aggregate cluster {aggregate}: {exc}") from exc
    scanner = TailScanner(aggregate, max_records=max_records, security=access.security)
    rows: list[Row] = []
    try:
        for topic in chosen:
            target = source.prefix + topic
            target_parts = sorted(p for t, p in leaders if t == target)
            if not target_parts:
                if scope:
                    raise CommandError(f"Topic '{target}' does not exist in the aggregate cluster {aggregate}")
                warn(f"WARN: topic '{target}' does not exist in the aggregate cluster: '{topic}' is not translated")
                continue
            wanted_parts = scope.get(topic)
            committed = {p: c for (t, p), c in source.committed.items()
                         if t == topic and (wanted_parts is None or p in wanted_parts)}
            bounds = {p: scanner.bounds(target, p) for p in target_parts}

            def probes(tp: int, sp: int, target: str = target, topic: str = topic):
                wanted = (source.cluster_id, topic, sp)
                return lambda lo, hi: scanner.first_copy(target, tp, wanted, lo, hi)

            count = source.partition_counts.get(topic) or len(target_parts)  # source topic gone: as if kept
            for tp, t in translate_topic(probes, bounds, topic, count, committed).items():
                rows.append(Row(target, tp, t.offset, t.source_topic, t.source_partition, t.committed, t.how))
    except (OSError, BrokerConnectionError, KafkaError) as exc:
        raise CommandError(f"reading the aggregate cluster {aggregate}: {exc}") from exc
    finally:
        scanner.close()
    if not rows:
        raise CommandError(f"none of group '{group}''s topics has a target topic in the aggregate cluster {aggregate}")
    return rows


def format_rows(group: str, rows: list[Row]) -> list[str]:
    """Kafka's reset table (GROUP TOPIC PARTITION NEW-OFFSET) and the source position each came from."""
    table = [HEADER] + [(group, r.topic, str(r.partition), str(r.offset), r.source_topic or "-",
                         str(r.source_partition) if r.source_partition >= 0 else "-",
                         str(r.committed) if r.committed >= 0 else "-", r.how) for r in rows]
    widths = [max(len(r[i]) for r in table) for i in range(len(HEADER))]
    return [" ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in table]


def run(args: argparse.Namespace) -> int:
    """``consumer-groups --bootstrap-server AGG --group G --translate-from FILE [--topic T] [--execute]``."""
    from mirror.resume import DEFAULT_SCAN_MAX_RECORDS

    if not args.group:
        raise CommandError("--translate-from needs --group")
    if not args.bootstrap_server:
        raise CommandError("--translate-from needs --bootstrap-server (the aggregate cluster)")
    aggregate = from_args(args)
    source = read_source(args.translate_from, args.group)
    rows = plan(source, aggregate, args.group, args.topic, DEFAULT_SCAN_MAX_RECORDS)
    if args.execute:
        try:
            state, _ = target_group(aggregate, args.group)
            if state not in reset_offsets.INACTIVE_STATES:
                raise CommandError(f"Assignments can only be reset if the group '{args.group}' is inactive, "
                                   f"but the current state is {state}.")
            commit(aggregate, args.group, rows)
        except (OSError, BrokerConnectionError, KafkaError) as exc:
            raise CommandError(f"aggregate cluster {args.bootstrap_server}: {exc}") from exc
    elif not args.dry_run:
        print(reset_offsets.NO_EXECUTE_WARNING, file=sys.stderr)
    for line in format_rows(args.group, rows):
        print(line)
    if any(r.how == "scan-bound" for r in rows):
        print("WARN: a search hit its bound of records without a copy: those offsets are the earliest "
              "the group can be at (it may read some records again)", file=sys.stderr)
    return 0


def _ask(conn: Any, api: ApiKey, version: int, body: dict) -> dict:
    """A request's answer; an empty answer is an error (a request with an answer always has one)."""
    answer = conn.request(api, version, body)
    if answer is None:
        raise CommandError(f"no answer to {api.name}")
    return answer
