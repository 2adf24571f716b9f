"""`logbus leader-election --bootstrap-server H:P --election-type preferred|unclean
(--topic T --partition P | --all-topic-partitions)`: Kafka's kafka-leader-election (ElectLeaders,
sent to the controller). An unclean election, which may lose acknowledged records, happens only
when asked for by name."""

from __future__ import annotations

import argparse

from broker.client.connection import BrokerConnectionError
from broker.protocol.errors import ErrorCode
from broker.protocol.messages import ApiKey
from broker.tools import CommandError
from broker.tools.access import ClusterAccess, add_command_config, from_args

ELECT_LEADERS_VERSION = 1
ELECTION_TYPES = {"preferred": 0, "unclean": 1}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--bootstrap-server", required=True, metavar="HOST:PORT", help="brokers of the cluster")
    add_command_config(parser, "--admin.config")
    parser.add_argument("--election-type", required=True, choices=sorted(ELECTION_TYPES), help="preferred or unclean")
    which = parser.add_mutually_exclusive_group(required=True)
    which.add_argument("--topic", help="the topic of the partition to elect a leader for")
    which.add_argument("--all-topic-partitions", action="store_true", help="every partition of every topic")
    parser.add_argument("--partition", type=int, help="the partition (with --topic)")


def _controller(access: ClusterAccess) -> str:
    errors = []
    for address in access.addresses:
        try:
            with access.connect(address, "logbus-leader-election") as conn:
                meta = conn.request(ApiKey.METADATA, 1, {"topics": []})
        except (OSError, BrokerConnectionError, ValueError) as exc:
            errors.append(f"{address}: {exc}")
            continue
        brokers = {b["node_id"]: f"{b['host']}:{b['port']}" for b in meta["brokers"]}
        if meta["controller_id"] in brokers:
            return brokers[meta["controller_id"]]
        errors.append(f"{address}: no controller is elected")
    raise CommandError("cannot find the controller: " + "; ".join(errors))


def run(args: argparse.Namespace) -> int:
    if args.topic is not None and args.partition is None:
        raise CommandError("--topic needs --partition")
    kind = args.election_type.upper()
    body = {
        "election_type": ELECTION_TYPES[args.election_type],
        "topic_partitions": None if args.all_topic_partitions else [{"topic": args.topic, "partitions": [args.partition]}],
        "timeout_ms": 30000,
    }
    try:
        access = from_args(args)
        with access.connect(_controller(access), "logbus-leader-election", timeout=40.0) as conn:
            answer = conn.request(ApiKey.ELECT_LEADERS, ELECT_LEADERS_VERSION, body)
    except (OSError, BrokerConnectionError) as exc:
        raise CommandError(str(exc)) from exc
    if answer["error_code"] != ErrorCode.NONE:
        raise CommandError(f"leader election ({kind}) failed: {ErrorCode(answer['error_code']).name}")
    done, not_needed, failed = [], [], []
    for topic in answer["replica_election_results"]:
        for p in topic["partition_result"]:
            name = f"{topic['topic']}-{p['partition_id']}"
            if p["error_code"] == ErrorCode.NONE:
                done.append(name)
            elif p["error_code"] == ErrorCode.ELECTION_NOT_NEEDED:
                not_needed.append(name)
            else:
                why = f" ({p['error_message']})" if p["error_message"] else ""
                failed.append(f"{name}: {ErrorCode(p['error_code']).name}{why}")
    if done:
        print(f"Successfully completed leader election ({kind}) for partitions {', '.join(done)}")
    if not_needed:
        print(f"Valid replica already elected for partitions {', '.join(not_needed)}")
    if not (done or not_needed or failed):
        print("No partition needed a leader election")
    for line in failed:
        print(f"Error completing leader election ({kind}) for partition: {line}")
    return 1 if failed else 0
