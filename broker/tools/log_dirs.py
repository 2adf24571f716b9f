"""`logbus log-dirs --describe --bootstrap-server H:P [--broker-list 1,2] [--topic-list a,b]`:
Kafka's kafka-log-dirs. Prints Kafka's JSON: every broker's log directories and the size and
offset lag of each partition in them (DescribeLogDirs)."""

from __future__ import annotations

import argparse
import json
from typing import Any

from broker.client.connection import BrokerConnectionError
from broker.protocol.errors import ErrorCode
from broker.protocol.messages import ApiKey
from broker.tools import CommandError
from broker.tools.access import ClusterAccess, add_command_config, cluster_access, from_args

DESCRIBE_LOG_DIRS_VERSION = 1


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--describe", action="store_true", required=True, help="describe the log directories")
    parser.add_argument("--bootstrap-server", required=True, metavar="HOST:PORT", help="brokers of the cluster")
    add_command_config(parser)
    parser.add_argument("--broker-list", metavar="ID,ID", help="brokers to ask (default: every live broker)")
    parser.add_argument("--topic-list", metavar="TOPIC,TOPIC", help="topics to show (default: all)")


def _ids(text: str | None) -> list[int] | None:
    if not text:
        return None
    try:
        return [int(i) for i in text.split(",") if i.strip()]
    except ValueError:
        raise CommandError(f"--broker-list {text}: broker ids are comma-separated numbers") from None


def describe(cluster: ClusterAccess | str, broker_ids: list[int] | None, topics: list[str] | None) -> dict[str, Any]:
    """Kafka's JSON document of kafka-log-dirs --describe."""
    access = cluster_access(cluster)
    brokers, leaders = access.metadata()
    missing = sorted(set(broker_ids or []) - set(brokers))
    if missing:
        raise CommandError(f"brokers {missing} are not live")
    request: Any = None
    if topics is not None:
        request = [{"topic": t, "partitions": sorted(p for (n, p) in leaders if n == t)} for t in topics]
    described = []
    for broker_id in broker_ids or sorted(brokers):
        with access.connect(brokers[broker_id], "logbus-log-dirs", timeout=30.0) as conn:
            answer = conn.request(ApiKey.DESCRIBE_LOG_DIRS, DESCRIBE_LOG_DIRS_VERSION, {"topics": request})
        described.append({"broker": broker_id, "logDirs": [
            {
                "logDir": r["log_dir"],
                "error": None if r["error_code"] == ErrorCode.NONE else ErrorCode(r["error_code"]).name,
                "partitions": [
                    {"partition": f"{t['name']}-{p['partition_index']}", "size": p["partition_size"],
                     "offsetLag": p["offset_lag"], "isFuture": p["is_future_key"]}
                    for t in r["topics"] for p in t["partitions"]
                ],
            }
            for r in answer["results"]
        ]})
    return {"version": 1, "brokers": described}


def sizes_of(answer: dict) -> dict[tuple[str, int], int]:
    """Bytes of each partition a DescribeLogDirs answer names (the current replica, not a future one)."""
    return {(t["name"], p["partition_index"]): p["partition_size"]
            for r in answer["results"] if r["error_code"] == ErrorCode.NONE
            for t in r["topics"] for p in t["partitions"] if not p["is_future_key"]}


def run(args: argparse.Namespace) -> int:
    topics = [t for t in args.topic_list.split(",") if t] if args.topic_list else None
    ids = _ids(args.broker_list)
    print("Querying brokers for log directories information")
    try:
        doc = describe(from_args(args), ids, topics)
    except (OSError, BrokerConnectionError) as exc:
        raise CommandError(str(exc)) from exc
    print("Received log directory information from brokers " + ",".join(str(b["broker"]) for b in doc["brokers"]))
    print(json.dumps(doc))
    return 0
