"""The console's sample is batched: per round one ListOffsets per leader broker and one
OffsetFetch per group, whatever the number of partitions (counted on a made-up cluster)."""

from __future__ import annotations

from collections import Counter

from broker.client.admin import BrokerDescription, ClusterDescription, PartitionDescription, TopicDescription
from broker.console.reader import ClusterReader
from broker.protocol.messages import ApiKey
from broker.tools.access import ClusterAccess

BROKERS = [BrokerDescription(i, "127.0.0.1", 9000 + i) for i in (1, 2, 3)]
TOPICS = [TopicDescription(f"t{t}", [PartitionDescription(p, 1 + (p + t) % 3, [1, 2, 3], [1, 2, 3]) for p in range(100)])
          for t in range(10)]


class CountingReader(ClusterReader):
    def __init__(self) -> None:
        super().__init__(ClusterAccess("127.0.0.1:9001"))
        self.asked: Counter = Counter()
        self.addresses: Counter = Counter()

    def _with_admin(self, call):
        self.asked["admin"] += 1
        return ClusterDescription("c", 1, BROKERS, TOPICS) if self.asked["admin"] == 1 else {}

    def _request(self, address, api, version, body):
        self.asked[api] += 1
        self.addresses[(api, address)] += 1
        node = int(address.rsplit(":", 1)[1]) - 9000
        if api == ApiKey.LIST_OFFSETS:
            return {"topics": [{"name": t["name"], "partitions": [
                {"partition_index": p["partition_index"], "error_code": 0, "offset": 7} for p in t["partitions"]]}
                for t in body["topics"]]}
        if api == ApiKey.LIST_GROUPS:
            return {"groups": [{"group_id": f"g{node}-{i}", "protocol_type": "consumer"} for i in range(5)]}
        if api == ApiKey.DESCRIBE_GROUPS:
            return {"groups": [{"error_code": 0, "group_id": g, "group_state": "Stable", "protocol_data": "range",
                                "members": []} for g in body["groups"]]}
        if api == ApiKey.OFFSET_FETCH:
            return {"error_code": 0, "topics": [{"name": "t0", "partitions": [
                {"partition_index": p, "committed_offset": 3} for p in range(100)]}]}
        raise AssertionError(api)


def test_one_round_asks_each_broker_once_per_api_and_each_group_once():
    reader = CountingReader()
    sample = reader.sample()
    assert len(sample.ends) == 1000 and len(sample.groups) == 15 and all(len(c) == 100 for c in sample.committed.values())
    assert reader.asked[ApiKey.LIST_OFFSETS] == 3, "one per leader broker, not one per partition"
    assert reader.asked[ApiKey.LIST_GROUPS] == 3 and reader.asked[ApiKey.DESCRIBE_GROUPS] == 3
    assert reader.asked[ApiKey.OFFSET_FETCH] == 15, "one per group, all its partitions at once"
    assert reader.asked["admin"] == 2, "Metadata and DescribeConfigs, each once"
    assert max(reader.addresses.values()) == 5, "the coordinator of 5 groups is asked 5 OffsetFetches, nothing more"
