"""`logbus delete-records --bootstrap-server H:P --offset-json-file f.json`: Kafka's
kafka-delete-records. The file is Kafka's: {"version":1,"partitions":[{"topic":"t","partition":0,
"offset":42}]} (offset -1: up to the high watermark); each partition's leader moves its log start."""

from __future__ import annotations

import argparse
import json
from typing import Any

from broker.client.connection import BrokerConnectionError
from broker.protocol.errors import ErrorCode
from broker.protocol.messages import ApiKey
from broker.tools import CommandError
from broker.tools.access import ClusterAccess, add_command_config, cluster_access, from_args

DELETE_RECORDS_VERSION = 1
TIMEOUT_MS = 30000


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--bootstrap-server", required=True, metavar="HOST:PORT", help="brokers of the cluster")
    add_command_config(parser)
    parser.add_argument("--offset-json-file", required=True, metavar="FILE", help="partitions and the offset to delete up to")


def read_offsets(path: str) -> dict[tuple[str, int], int]:
    """The file's {(topic, partition): offset}; CommandError naming what is wrong."""
    try:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
        entries = doc["partitions"]
        offsets = {(str(e["topic"]), int(e["partition"])): int(e["offset"]) for e in entries}
    except OSError as exc:
        raise CommandError(f"cannot read {path}: {exc.strerror or exc}") from None
    except (ValueError, KeyError, TypeError) as exc:
        raise CommandError(
            f"{path}: expected {{\"partitions\": [{{\"topic\", \"partition\", \"offset\"}}, ...]}} ({exc})"
        ) from None
    if not offsets:
        raise CommandError(f"{path}: no partitions listed")
    return offsets


def delete_records(cluster: ClusterAccess | str, offsets: dict[tuple[str, int], int]) -> dict[tuple[str, int], tuple[int, int]]:
    """Ask each partition's leader; {(topic, partition): (error code, low watermark)}."""
    access = cluster_access(cluster)
    brokers, leaders = access.metadata()
    results: dict[tuple[str, int], tuple[int, int]] = {}
    by_leader: dict[int, dict[str, list[dict[str, Any]]]] = {}
    for (topic, partition), offset in sorted(offsets.items()):
        leader = leaders.get((topic, partition))
        if leader is None:
            results[(topic, partition)] = (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, -1)
        elif leader not in brokers:
            results[(topic, partition)] = (ErrorCode.LEADER_NOT_AVAILABLE, -1)
        else:
            by_leader.setdefault(leader, {}).setdefault(topic, []).append({"partition_index": partition, "offset": offset})
    for leader, topics in by_leader.items():
        body = {"topics": [{"name": t, "partitions": ps} for t, ps in topics.items()], "timeout_ms": TIMEOUT_MS}
        with access.connect(brokers[leader], "logbus-delete-records", timeout=30.0) as conn:
            answer = conn.request(ApiKey.DELETE_RECORDS, DELETE_RECORDS_VERSION, body)
        for t in answer["topics"]:
            for p in t["partitions"]:
                results[(t["name"], p["partition_index"])] = (p["error_code"], p["low_watermark"])
    return results


def run(args: argparse.Namespace) -> int:
    offsets = read_offsets(args.offset_json_file)
    print("Executing records delete operation")
    try:
        results = delete_records(from_args(args), offsets)
    except (OSError, BrokerConnectionError) as exc:
        raise CommandError(str(exc)) from exc
    print("Records delete operation completed:")
    for (topic, partition), (code, low) in sorted(results.items()):
        outcome = f"low_watermark: {low}" if code == ErrorCode.NONE else f"error: {ErrorCode(code).name}"
        print(f"partition: {topic}-{partition}\t{outcome}")
    return 0 if all(code == ErrorCode.NONE for code, _ in results.values()) else 1
