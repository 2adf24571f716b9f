"""broker.cluster.zkdata: each znode's path, and its bytes in Kafka's JSON shapes, both ways (no ZooKeeper)."""

from __future__ import annotations

import json

import pytest

from broker.cluster.zkdata import (
    BASE_PATHS,
    AclChangeZNode,
    AclEntry,
    AclZNode,
    BrokerIdZNode,
    ClusterIdZNode,
    ConfigChangeNotificationZNode,
    ConfigEntityZNode,
    ConfigType,
    ConsumerIdZNode,
    ConsumerOffsetMetadataZNode,
    ConsumerOffsetZNode,
    ConsumerOwnerZNode,
    ConsumersZNode,
    ControlledShutdownZNode,
    ControllerEpochZNode,
    ControllerZNode,
    DeleteTopicsZNode,
    PreferredReplicaElectionZNode,
    ProducerIdBlock,
    ProducerIdBlockZNode,
    ReassignPartitionsZNode,
    TopicPartitionStateZNode,
    TopicZNode,
)
from broker.config import Listener


def test_paths_are_kafkas() -> None:
    assert BrokerIdZNode.path(3) == "/brokers/ids/3"
    assert TopicZNode.path("ev") == "/brokers/topics/ev"
    assert TopicPartitionStateZNode.path("ev", 2) == "/brokers/topics/ev/partitions/2/state"
    assert (ControllerZNode.path(), ControllerEpochZNode.path()) == ("/controller", "/controller_epoch")
    assert ConfigEntityZNode.path(ConfigType.TOPIC, "ev") == "/config/topics/ev"
    assert ConfigEntityZNode.path(ConfigType.USER, "alice") == "/config/users/alice"
    assert ConfigEntityZNode.path(ConfigType.BROKER, ConfigType.DEFAULT_BROKER) == "/config/brokers/<default>"
    assert ConfigChangeNotificationZNode.create_path() == "/config/changes/config_change_"
    assert DeleteTopicsZNode.path("ev") == "/admin/delete_topics/ev"
    assert ControlledShutdownZNode.path(1) == "/admin/controlled_shutdown/1"
    assert ReassignPartitionsZNode.path() == "/admin/reassign_partitions"
    assert PreferredReplicaElectionZNode.path() == "/admin/preferred_replica_election"
    assert ClusterIdZNode.path() == "/cluster/id"
    assert ProducerIdBlockZNode.path() == "/latest_producer_id_block"
    assert AclZNode.path("Topic", "ev") == "/kafka-acl/Topic/ev"
    assert AclZNode.path("Group", "g-", "PREFIXED") == "/kafka-acl-extended/prefixed/Group/g-"
    assert AclChangeZNode.create_path() == "/kafka-acl-changes/acl_changes_"
    assert AclChangeZNode.create_path("prefixed") == "/kafka-acl-extended-changes/acl_changes_"
    assert ConsumerIdZNode.path("g", "c1") == "/consumers/g/ids/c1"
    assert ConsumerOwnerZNode.path("g", "ev", 0) == "/consumers/g/owners/ev/0"
    assert ConsumerOffsetZNode.path("g", "ev", 0) == "/consumers/g/offsets/ev/0"
    assert ConsumerOffsetMetadataZNode.path("g", "ev", 0) == "/consumers/g/offsets/ev/0/metadata"
    assert BASE_PATHS == ("/brokers/ids", "/brokers/topics", "/config/topics", "/admin/delete_topics", "/consumers")
    assert ConsumersZNode.path() == "/consumers"


def test_broker_registration_is_kafkas_v4_json_and_reads_back() -> None:
    eps = [Listener("PLAINTEXT", "10.0.0.1", 9092), Listener("SSL", "::1", 9093)]
    raw = BrokerIdZNode.encode(eps, rack="r1", security_protocol_map={"SSL": "SSL"}, timestamp_ms="1700000000000")
    assert json.loads(raw) == {
        "listener_security_protocol_map": {"PLAINTEXT": "PLAINTEXT", "SSL": "SSL"},
        "endpoints": ["PLAINTEXT://10.0.0.1:9092", "SSL://[::1]:9093"],
        "jmx_port": -1,
        "host": "10.0.0.1",
        "timestamp": "1700000000000",
        "port": 9092,
        "version": 4,
        "rack": "r1",
    }
    info = BrokerIdZNode.decode(7, raw)
    assert (info.id, info.host, info.port, info.rack) == (7, "10.0.0.1", 9092, "r1")
    assert info.endpoints == eps and info.endpoint("SSL") == eps[1]


def test_broker_without_plaintext_has_no_top_level_host() -> None:
    info = BrokerIdZNode.decode(1, BrokerIdZNode.encode([Listener("INTERNAL", "h", 1)]))
    assert (info.host, info.port, info.endpoint()) == (None, -1, None)


def test_topic_assignment_round_trip_sorts_partitions() -> None:
    raw = TopicZNode.encode({10: [2, 1], 2: [1, 2]})
    assert json.loads(raw) == {"version": 1, "partitions": {"2": [1, 2], "10": [2, 1]}}
    assert list(TopicZNode.decode(raw).items()) == [(2, [1, 2]), (10, [2, 1])]


def test_partition_state_round_trip() -> None:
    raw = TopicPartitionStateZNode.encode(leader=2, leader_epoch=5, isr=[2, 3], controller_epoch=9)
    assert json.loads(raw) == {"controller_epoch": 9, "leader": 2, "version": 1, "leader_epoch": 5, "isr": [2, 3]}
    state = TopicPartitionStateZNode.decode(raw, zk_version=4)
    assert (state.leader, state.leader_epoch, state.isr, state.controller_epoch, state.zk_version) == (2, 5, [2, 3], 9, 4)


def test_controller_and_epoch() -> None:
    raw = ControllerZNode.encode(3, timestamp_ms="5")
    assert json.loads(raw) == {"version": 1, "brokerid": 3, "timestamp": "5"}
    assert ControllerZNode.decode(raw) == 3
    assert ControllerEpochZNode.encode(12) == b"12"
    assert ControllerEpochZNode.decode(b"12") == 12 and ControllerEpochZNode.decode(b"") == 0


def test_config_entity_values_are_strings() -> None:
    raw = ConfigEntityZNode.encode({"retention.ms": 1000, "cleanup.policy": "compact"})
    assert json.loads(raw) == {"version": 1, "config": {"retention.ms": "1000", "cleanup.policy": "compact"}}
    assert ConfigEntityZNode.decode(raw) == {"retention.ms": "1000", "cleanup.policy": "compact"}
    assert ConfigEntityZNode.decode(None) == {} and ConfigEntityZNode.decode(b"") == {}


def test_config_change_notification() -> None:
    raw = ConfigChangeNotificationZNode.encode(ConfigType.TOPIC, "ev")
    assert json.loads(raw) == {"version": 2, "entity_path": "topics/ev"}
    assert ConfigChangeNotificationZNode.decode(raw) == ("topics", "ev")


def test_reassignment_and_preferred_election() -> None:
    raw = ReassignPartitionsZNode.encode({("ev", 1): [3, 1], ("ev", 0): [1, 2]})
    assert json.loads(raw) == {"version": 1, "partitions": [
        {"topic": "ev", "partition": 0, "replicas": [1, 2]}, {"topic": "ev", "partition": 1, "replicas": [3, 1]}]}
    assert ReassignPartitionsZNode.decode(raw) == {("ev", 0): [1, 2], ("ev", 1): [3, 1]}
    raw = PreferredReplicaElectionZNode.encode([("ev", 1), ("a", 0), ("ev", 1)])
    assert json.loads(raw) == {"version": 1, "partitions": [{"topic": "a", "partition": 0}, {"topic": "ev", "partition": 1}]}
    assert PreferredReplicaElectionZNode.decode(raw) == {("a", 0), ("ev", 1)}


def test_cluster_id_and_producer_id_block_write_strings_where_kafka_does() -> None:
    raw = ClusterIdZNode.encode("AbC-_1")
    assert json.loads(raw) == {"version": "1", "id": "AbC-_1"} and ClusterIdZNode.decode(raw) == "AbC-_1"
    block = ProducerIdBlock(broker=2, start=1000, end=1999)
    raw = ProducerIdBlockZNode.encode(block)
    assert json.loads(raw) == {"version": 1, "broker": 2, "block_start": "1000", "block_end": "1999"}
    assert ProducerIdBlockZNode.decode(raw) == block


def test_acls_and_their_change_notifications() -> None:
    acls = [AclEntry("User:alice", "Allow", "Read", "*"), AclEntry("User:bob", "Deny", "Write", "10.0.0.1")]
    raw = AclZNode.encode(acls)
    assert json.loads(raw)["acls"][0] == {"principal": "User:alice", "permissionType": "Allow", "operation": "Read", "host": "*"}
    assert json.loads(raw)["version"] == 1 and AclZNode.decode(raw) == acls
    assert AclChangeZNode.encode("Topic", "ev") == b"Topic:ev"
    assert AclChangeZNode.decode(b"Topic:ev") == ("Topic", "ev", "literal")
    raw = AclChangeZNode.encode("Group", "g-", "prefixed")
    assert json.loads(raw) == {"version": 1, "resourceType": "Group", "name": "g-", "patternType": "PREFIXED"}
    assert AclChangeZNode.decode(raw) == ("Group", "g-", "prefixed")
    with pytest.raises(ValueError):
        AclChangeZNode.decode(b"no-separator")


def test_consumer_registration_owner_and_offset() -> None:
    raw = ConsumerIdZNode.encode({"ev": 2}, "static", timestamp_ms="9")
    assert raw == b'{"version":1,"subscription":{"ev":2},"pattern":"static","timestamp":"9"}'
    assert ConsumerIdZNode.decode(raw)["subscription"] == {"ev": 2}
    with pytest.raises(ValueError):
        ConsumerIdZNode.decode(b"[1]")
    assert ConsumerOwnerZNode.decode(ConsumerOwnerZNode.encode("g_c1-0")) == "g_c1-0"
    assert ConsumerOffsetZNode.encode(42) == b"42"
    assert [ConsumerOffsetZNode.decode(b) for b in (b"42", b" 7\n", b"x", b"\xff", None)] == [42, 7, None, None, None]
    assert ConsumerOffsetMetadataZNode.decode(ConsumerOffsetMetadataZNode.encode("ckpt é")) == "ckpt é"
    assert ConsumerOffsetMetadataZNode.decode(None) == ""
