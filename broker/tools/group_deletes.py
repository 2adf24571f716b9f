"""`logbus consumer-groups --delete` and `--delete-offsets`: Kafka's group deletions.

With --bootstrap-server they go to the group's coordinator (DeleteGroups, OffsetDelete), which
refuses a group with live members; with --zookeeper they remove /consumers/<group>[/offsets/...]
directly, refusing a group with a registered ZooKeeper consumer as Kafka 0.8's tool did."""

from __future__ import annotations

import argparse
from typing import Any

from broker.client.connection import BrokerConnectionError
from broker.cluster.offset_store import ZkOffsetStore
from broker.protocol.errors import ErrorCode
from broker.protocol.messages import ApiKey
from broker.tools import CommandError, zookeeper_session
from broker.tools.access import ClusterAccess, from_args
from broker.tools.reset_offsets import parse_topic_scope


def add_arguments(parser: argparse.ArgumentParser, actions: Any) -> None:
    """The two actions (in the tool's exclusive group ``actions``) and --topic, unless the tool has one."""
    actions.add_argument("--delete", action="store_true", help="delete groups (every --group) that have no active member")
    actions.add_argument(
        "--delete-offsets", action="store_true", help="delete a group's committed offsets of --topic TOPIC[:P1,P2...]"
    )
    if "--topic" not in parser._option_string_actions:
        parser.add_argument("--topic", action="append", metavar="TOPIC[:PARTITIONS]", help="topic (and partitions) to act on")


def wanted(args: argparse.Namespace) -> bool:
    return bool(getattr(args, "delete", False) or getattr(args, "delete_offsets", False))


def _groups(args: argparse.Namespace) -> list[str]:
    groups = args.group if isinstance(args.group, list) else [args.group] if args.group else []
    if not groups:
        raise CommandError("--delete and --delete-offsets need --group")
    return groups


def parse_topics(values: Any) -> dict[str, list[int] | None]:
    """``--topic t`` (every partition) or ``--topic t:0,2``; repeatable."""
    if not values:
        raise CommandError("--delete-offsets needs --topic TOPIC[:PARTITIONS]")
    return parse_topic_scope([values] if isinstance(values, str) else values)


def run(args: argparse.Namespace) -> int:
    groups = _groups(args)
    if args.bootstrap_server:
        return _over_bootstrap(args, groups)
    with zookeeper_session(args.zookeeper) as zk:
        store = ZkOffsetStore(zk.kazoo)
        if args.delete:
            return _report_groups({g: _zk_delete(store, g) for g in groups})
        topics = parse_topics(args.topic)
        rows: list[tuple[str, int, int]] = []
        for topic, parts in topics.items():
            partitions = parts if parts is not None else sorted(zk.topic_assignment(topic) or {})
            if store.zk_members(groups[0]):
                raise CommandError(f"consumer group '{groups[0]}' has active members: its offsets cannot be deleted")
            store.delete(groups[0], [(topic, p) for p in partitions])
            rows += [(topic, p, ErrorCode.NONE) for p in partitions]
        return _report_offsets(groups[0], ErrorCode.NONE, rows)


def _zk_delete(store: ZkOffsetStore, group: str) -> int:
    if store.zk_members(group):
        return ErrorCode.NON_EMPTY_GROUP
    return ErrorCode.NONE if store.delete_group(group) else ErrorCode.GROUP_ID_NOT_FOUND


def delete_groups(access: ClusterAccess, groups: list[str], brokers: dict[int, str] | None = None) -> dict[str, int]:
    """DeleteGroups at each group's coordinator: {group: error code} (NON_EMPTY_GROUP while it has members)."""
    brokers = brokers if brokers is not None else access.metadata()[0]
    codes = {}
    for group in groups:
        with access.connect(access.coordinator(group, brokers)[1]) as conn:
            answer = conn.request(ApiKey.DELETE_GROUPS, 1, {"groups_names": [group]})
        codes[group] = answer["results"][0]["error_code"]
    return codes


def _over_bootstrap(args: argparse.Namespace, groups: list[str]) -> int:
    access = from_args(args)
    try:
        brokers, leaders = access.metadata()
        if args.delete:
            return _report_groups(delete_groups(access, groups, brokers))
        chosen = {t: parts if parts is not None else sorted(p for (n, p) in leaders if n == t)
                  for t, parts in parse_topics(args.topic).items()}
        body = {
            "group_id": groups[0],
            "topics": [{"name": t, "partitions": [{"partition_index": p} for p in ps]} for t, ps in chosen.items()],
        }
        with access.connect(access.coordinator(groups[0], brokers)[1]) as conn:
            answer = conn.request(ApiKey.OFFSET_DELETE, 0, body)
    except (OSError, BrokerConnectionError) as exc:
        raise CommandError(str(exc)) from exc
    rows = [(t["name"], p["partition_index"], p["error_code"]) for t in answer["topics"] for p in t["partitions"]]
    return _report_offsets(groups[0], answer["error_code"], rows)


def _report_groups(codes: dict[str, int]) -> int:
    failed = {g: c for g, c in codes.items() if c != ErrorCode.NONE}
    done = [g for g in codes if g not in failed]
    if done:
        print("Deletion of requested consumer groups (" + ", ".join(f"'{g}'" for g in done) + ") was successful.")
    if failed:
        print("Deletion of some consumer groups failed:")
        for g, c in failed.items():
            print(f"* Group '{g}' could not be deleted due to: {ErrorCode(c).name}")
        return 1
    return 0


def _report_offsets(group: str, error: int, rows: list[tuple[str, int, int]]) -> int:
    if error != ErrorCode.NONE:
        raise CommandError(f"offset deletion for group '{group}' failed: {ErrorCode(error).name}")
    width = max([len("TOPIC")] + [len(t) for t, _, _ in rows])
    print(f"{'TOPIC'.ljust(width)} PARTITION  STATUS")
    for topic, partition, code in sorted(rows):
        status = "Successful" if code == ErrorCode.NONE else ErrorCode(code).name
        print(f"{topic.ljust(width)} {str(partition).ljust(10)} {status}")
    return 0 if all(code == ErrorCode.NONE for _, _, code in rows) else 1
