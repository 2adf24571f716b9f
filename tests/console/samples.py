"""A small made-up cluster sample for the console's unit tests: 3 brokers, 2 topics, 2 groups."""

from __future__ import annotations

from broker.client.admin import BrokerDescription, ClusterDescription, PartitionDescription, TopicDescription
from broker.console.reader import ClusterSample, GroupInfo
from broker.tools.coordinator_groups import Member


def sample(ends: dict | None = None, committed: dict | None = None) -> ClusterSample:
    brokers = [BrokerDescription(i, "127.0.0.1", 9090 + i) for i in (1, 2, 3)]
    topics = [
        TopicDescription("events", [PartitionDescription(0, 1, [1, 2, 3], [1, 2, 3]),
                                    PartitionDescription(1, 2, [2, 3, 1], [2, 3]),
                                    PartitionDescription(2, -1, [3, 1, 2], [], 5)]),
        TopicDescription("logs", [PartitionDescription(0, 3, [3], [3])]),
    ]
    cluster = ClusterDescription("c-1", 2, brokers, topics)
    configs = {"events": {"min.insync.replicas": "3"}, "logs": {"min.insync.replicas": "1"}}
    groups = {
        "readers": GroupInfo("readers", 1, "consumer", "Stable", "range",
                             [Member("m-1", "rdkafka", "/127.0.0.1", [("events", 0), ("events", 1)])]),
        "zk-old": GroupInfo("zk-old", 2, ""),
    }
    return ClusterSample(cluster, configs, ends if ends is not None else {("events", 0): 100, ("events", 1): 50, ("logs", 0): 7},
                         groups, committed if committed is not None else
                         {"readers": {("events", 0): 90, ("events", 1): 50}, "zk-old": {("logs", 0): 7}})
