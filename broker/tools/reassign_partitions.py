"""`logbus reassign-partitions --zookeeper Z`: Kafka's kafka-reassign-partitions, in its JSON.

    --generate --topics-to-move-json-file t.json --broker-list 1,2,3   print current and proposed assignments
    --execute --reassignment-json-file r.json [--throttle B/s]         write /admin/reassign_partitions
    --verify --reassignment-json-file r.json                           report each partition's progress
                                                                       (and remove the throttle when done)
    --cancel                                                           stop after the current step

The controller carries a reassignment out (broker/cluster/controller.py): new replicas are added,
join the ISR, leadership moves into the target, the old replicas are dropped. Decommissioning a
broker is reassigning every replica off it.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from broker.cluster.assignment import assign_replicas
from broker.cluster.zk import ZkClient
from broker.cluster.zkdata import ConfigType, ReassignPartitionsZNode
from broker.server.replication_quota import FOLLOWER_REPLICAS, LEADER_REPLICAS, THROTTLE_RATES
from broker.tools import CommandError, zookeeper_session

TopicPartition = tuple[str, int]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--zookeeper", required=True, metavar="HOST:PORT[/CHROOT]", help="the cluster's ZooKeeper")
    action = parser.add_mutually_exclusive_group(required=True)
    action.add_argument("--generate", action="store_true", help="propose an assignment of --topics-to-move-json-file")
    action.add_argument("--execute", action="store_true", help="start the reassignment of --reassignment-json-file")
    action.add_argument("--verify", action="store_true", help="report the progress of --reassignment-json-file")
    action.add_argument("--cancel", action="store_true", help="stop the reassignment in progress after its current step")
    parser.add_argument("--topics-to-move-json-file", metavar="FILE", help='{"topics":[{"topic":"t"}],"version":1}')
    parser.add_argument("--broker-list", metavar="ID,ID", help="brokers to spread the topics over (--generate)")
    parser.add_argument("--reassignment-json-file", metavar="FILE",
                        help='{"version":1,"partitions":[{"topic","partition","replicas"}]}')
    parser.add_argument("--throttle", type=int, default=-1, metavar="BYTES/S",
                        help="with --execute: cap the moving replicas' replication at this rate on every broker "
                             "involved; --verify removes the throttle once the reassignment is complete")


def _read_json(path: str | None, flag: str) -> Any:
    if not path:
        raise CommandError(f"{flag} is required")
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except OSError as exc:
        raise CommandError(f"cannot read {path}: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise CommandError(f"{path} is not JSON: {exc}") from None


def read_reassignment(path: str | None) -> dict[TopicPartition, list[int]]:
    """Kafka's reassignment JSON as {(topic, partition): replicas}; CommandError naming the problem."""
    doc = _read_json(path, "--reassignment-json-file")
    try:
        wanted = {(str(e["topic"]), int(e["partition"])): [int(b) for b in e["replicas"]] for e in doc["partitions"]}
    except (KeyError, TypeError, ValueError) as exc:
        raise CommandError(f"{path}: expected {{\"partitions\": [{{\"topic\", \"partition\", \"replicas\"}}]}} ({exc})") from None
    if not wanted:
        raise CommandError(f"{path}: no partitions listed")
    for (topic, partition), replicas in wanted.items():
        if not replicas or len(set(replicas)) != len(replicas):
            raise CommandError(f"{topic}-{partition}: replicas {replicas} must be distinct and not empty")
    return wanted


def _as_json(assignment: dict[TopicPartition, list[int]]) -> str:
    return json.dumps({"version": 1, "partitions": [
        {"topic": t, "partition": p, "replicas": r} for (t, p), r in sorted(assignment.items())]}, separators=(",", ":"))


def _current(zk: ZkClient, partitions: list[TopicPartition]) -> dict[TopicPartition, list[int]]:
    found: dict[TopicPartition, list[int]] = {}
    for topic in sorted({t for t, _ in partitions}):
        assignment = zk.topic_assignment(topic)
        if assignment is None:
            raise CommandError(f"topic {topic} does not exist")
        for t, p in partitions:
            if t == topic:
                if p not in assignment:
                    raise CommandError(f"partition {t}-{p} does not exist")
                found[(t, p)] = assignment[p]
    return found


def generate(zk: ZkClient, topics_file: str | None, broker_list: str | None) -> int:
    doc = _read_json(topics_file, "--topics-to-move-json-file")
    try:
        topics = [str(t["topic"]) for t in doc["topics"]]
        brokers = sorted({int(b) for b in (broker_list or "").split(",") if b.strip()})
    except (KeyError, TypeError, ValueError) as exc:
        raise CommandError(f"expected {{\"topics\": [{{\"topic\": ...}}]}} and --broker-list 1,2,3 ({exc})") from None
    if not brokers:
        raise CommandError("--generate needs --broker-list")
    current: dict[TopicPartition, list[int]] = {}
    proposed: dict[TopicPartition, list[int]] = {}
    for topic in topics:
        assignment = zk.topic_assignment(topic)
        if assignment is None:
            raise CommandError(f"topic {topic} does not exist")
        rf = len(next(iter(assignment.values())))
        if rf > len(brokers):
            raise CommandError(f"topic {topic} has replication factor {rf}, more than the {len(brokers)} brokers listed")
        current.update({(topic, p): r for p, r in assignment.items()})
        proposed.update({(topic, p): r for p, r in assign_replicas(brokers, len(assignment), rf).items()})
    print(f"Current partition replica assignment\n{_as_json(current)}\n")
    print(f"Proposed partition reassignment configuration\n{_as_json(proposed)}")
    return 0


def execute(zk: ZkClient, path: str | None, throttle: int = -1) -> int:
    wanted = read_reassignment(path)
    if zk.exists(ReassignPartitionsZNode.path(), retry=True):
        raise CommandError("There is an existing assignment running.")
    current = _current(zk, list(wanted))
    live = set(zk.live_brokers())
    unknown = sorted({b for replicas in wanted.values() for b in replicas} - live)
    if unknown:
        raise CommandError(f"brokers {unknown} are not live: every target replica must be a live broker")
    print(f"Current partition replica assignment\n\n{_as_json(current)}\n")
    print("Save this to use as the --reassignment-json-file option during rollback")
    if throttle >= 0:
        set_throttle(zk, current, wanted, throttle)
        print(f"Warning: You must run --verify periodically, until the reassignment completes, to ensure the "
              f"throttle is removed.\nThe inter-broker throttle limit was set to {throttle} B/s")
    if not zk.create(ReassignPartitionsZNode.path(), ReassignPartitionsZNode.encode(wanted), retry=True):
        raise CommandError("There is an existing assignment running.")
    print("Successfully started partition reassignments for " + ",".join(f"{t}-{p}" for t, p in sorted(wanted)))
    return 0


def set_throttle(zk: ZkClient, current: dict[TopicPartition, list[int]], wanted: dict[TopicPartition, list[int]],
                 rate: int) -> None:
    """As Kafka's tool: both rates on every broker of the old and new replicas; per topic, the old
    replicas as throttled leaders and the new ones as throttled followers."""
    for broker_id in sorted({b for replicas in [*current.values(), *wanted.values()] for b in replicas}):
        config = zk.entity_config(ConfigType.BROKER, str(broker_id))
        zk.change_entity_config(ConfigType.BROKER, str(broker_id), {**config, **dict.fromkeys(THROTTLE_RATES, str(rate))})
    for topic in sorted({t for t, _ in wanted}):
        moves = {p: (current.get((t, p), []), target) for (t, p), target in wanted.items() if t == topic}
        leaders = ",".join(f"{p}:{b}" for p, (old, _) in sorted(moves.items()) for b in old)
        followers = ",".join(f"{p}:{b}" for p, (old, new) in sorted(moves.items()) for b in new if b not in old)
        config = zk.entity_config(ConfigType.TOPIC, topic)
        zk.change_entity_config(ConfigType.TOPIC, topic, {**config, LEADER_REPLICAS: leaders, FOLLOWER_REPLICAS: followers})


def remove_throttle(zk: ZkClient, wanted: dict[TopicPartition, list[int]]) -> bool:
    """Remove what set_throttle wrote (the topics' lists, every broker's rates); whether any was there."""
    removed = False
    for topic in sorted({t for t, _ in wanted}):
        config = zk.entity_config(ConfigType.TOPIC, topic)
        if LEADER_REPLICAS in config or FOLLOWER_REPLICAS in config:
            zk.change_entity_config(ConfigType.TOPIC, topic, {k: v for k, v in config.items()
                                                              if k not in (LEADER_REPLICAS, FOLLOWER_REPLICAS)})
            removed = True
    for broker_id in sorted(zk.live_brokers()):
        config = zk.entity_config(ConfigType.BROKER, str(broker_id))
        if any(k in config for k in THROTTLE_RATES):
            zk.change_entity_config(ConfigType.BROKER, str(broker_id), {k: v for k, v in config.items()
                                                                        if k not in THROTTLE_RATES})
            removed = True
    return removed


def verify(zk: ZkClient, path: str | None) -> int:
    """Each partition: completed (assignment equals the target and not pending), in progress, or failed."""
    wanted = read_reassignment(path)
    found = zk.read(ReassignPartitionsZNode.path(), retry=True)
    pending = ReassignPartitionsZNode.decode(found[0]) if found is not None and found[0] else {}
    print("Status of partition reassignment:")
    complete = True
    for (topic, partition), target in sorted(wanted.items()):
        name = f"{topic}-{partition}"
        if (topic, partition) in pending:
            print(f"Reassignment of partition {name} is still in progress")
            complete = False
        elif (zk.topic_assignment(topic) or {}).get(partition) == target:
            print(f"Reassignment of partition {name} completed successfully")
        else:
            print(f"Reassignment of partition {name} failed")
            complete = False
    if complete and remove_throttle(zk, wanted):
        print("Throttle was removed.")
    return 0 if complete else 1


def run(args: argparse.Namespace) -> int:
    with zookeeper_session(args.zookeeper) as zk:
        if args.generate:
            return generate(zk, args.topics_to_move_json_file, args.broker_list)
        if args.execute:
            return execute(zk, args.reassignment_json_file, args.throttle)
        if args.verify:
            return verify(zk, args.reassignment_json_file)
        zk.delete(ReassignPartitionsZNode.path(), retry=True)
        print("Cancelled the reassignment in progress; replicas added so far stay until reassigned again.")
        return 0
