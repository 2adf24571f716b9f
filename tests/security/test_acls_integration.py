"""ACLs on real brokers with real clients (every client is User:ANONYMOUS until SASL), against one
module-scoped cluster of four brokers in one ZooKeeper chroot: brokers 1 and 2 with Kafka's
AclAuthorizer name and allow.everyone.if.no.acl.found=false, broker 3 with super.users=User:ANONYMOUS,
broker 4 with allow.everyone.if.no.acl.found=true. ANONYMOUS starts with ClusterAction, Create,
Alter and Describe on the cluster only (replication, creating topics, the ACL APIs)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator

import pytest
from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import AclBinding as CkAclBinding
from confluent_kafka.admin import AclBindingFilter as CkAclBindingFilter
from confluent_kafka.admin import AclOperation as CkOp
from confluent_kafka.admin import AclPermissionType as CkPerm
from confluent_kafka.admin import AdminClient, NewTopic
from confluent_kafka.admin import ResourcePatternType as CkPattern
from confluent_kafka.admin import ResourceType as CkResource

from broker.client.connection import BrokerConnection
from broker.cluster.acls import add_acls, remove_acls
from broker.cluster.embedded_zk import EmbeddedZooKeeper
from broker.cluster.local import BrokerProcess
from broker.cluster.net import free_port
from broker.cluster.zk import ZkClient
from broker.protocol.errors import ErrorCode
from broker.protocol.messages import ApiKey
from broker.security.acl import (
    CLUSTER_NAME,
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from broker.security.principal import ANONYMOUS
from tests.starting import start_together
from tests.teardown import delete_znodes, stopping
from tests.waiting import wait_until

pytestmark = pytest.mark.integration

AUTHORIZERS = {
    1: {"authorizer.class.name": "kafka.security.authorizer.AclAuthorizer"},
    2: {"authorizer.class.name": "kafka.security.authorizer.AclAuthorizer"},
    3: {"authorizer.class.name": "kafka.security.auth.SimpleAclAuthorizer", "super.users": "User:alice;User:ANONYMOUS"},
    4: {"authorizer.class.name": "broker.security.authorizer.AclAuthorizer", "allow.everyone.if.no.acl.found": "true"},
}
BASE = {"group.initial.rebalance.delay.ms": "0", "replica.fetch.wait.max.ms": "200"}


def allow(op: AclOperation, principal: str = ANONYMOUS) -> AccessControlEntry:
    return AccessControlEntry(principal, "*", op, AclPermissionType.ALLOW)


class Cluster:
    def __init__(self, brokers: dict[int, BrokerProcess], zk: ZkClient, connect: str) -> None:
        self.brokers = brokers
        self.zk = zk
        self.connect = connect
        self.admin = AdminClient({"bootstrap.servers": brokers[1].bootstrap})

    def topic(self, leader: int, prefix: str = "acl-") -> str:
        """A new one-partition topic led by broker ``leader``, its log created there."""
        name = f"{prefix}{uuid.uuid4().hex[:8]}"
        self.admin.create_topics([NewTopic(name, 1, replica_assignment=[[leader]])], operation_timeout=20)[name].result(30)
        wait_until(lambda: name in self.log_dir_topics(leader) and self.metadata(3, name) == ErrorCode.NONE, 10,
                   what=f"{name} led by broker {leader}")
        return name

    def coordinator(self, group: str) -> int:
        """The broker coordinating ``group`` (asked of broker 3, where ANONYMOUS is a super user)."""
        answer = self.request(3, ApiKey.FIND_COORDINATOR, 1, {"key": group, "key_type": 0})
        assert answer["error_code"] == ErrorCode.NONE
        return int(answer["node_id"])

    def log_dir_topics(self, broker: int) -> set[str]:
        """The topics with a log on ``broker`` (DescribeLogDirs: ANONYMOUS may Describe the cluster)."""
        answer = self.request(broker, ApiKey.DESCRIBE_LOG_DIRS, 1, {"topics": None})
        return {t["name"] for r in answer["results"] for t in r["topics"]}

    def request(self, broker: int, api: ApiKey, version: int, body: dict) -> dict:
        with BrokerConnection.from_address(self.brokers[broker].bootstrap, client_id="acl-test", timeout=10.0) as conn:
            answer = conn.request(api, version, body)
        assert answer is not None
        return answer

    def metadata(self, broker: int, topic: str | None) -> int | list[str]:
        """A named topic's error code; with None, the names of every topic listed."""
        body = {"topics": None if topic is None else [{"name": topic}], "allow_auto_topic_creation": False}
        answer = self.request(broker, ApiKey.METADATA, 8, body)
        if topic is None:
            return sorted(t["name"] for t in answer["topics"])
        return int(answer["topics"][0]["error_code"])

    def grant(self, pattern: ResourcePattern, *entries: AccessControlEntry) -> None:
        """Through ZooKeeper (as `logbus acls --authorizer-properties`), then wait for brokers 1 and 2."""
        add_acls(self.zk, [AclBinding(pattern, e) for e in entries])
        wait_until(lambda: all(self._holds(b, pattern, entries) for b in (1, 2)), 5, what=f"ACLs of {pattern} applied")

    def _holds(self, broker: int, pattern: ResourcePattern, entries: tuple[AccessControlEntry, ...]) -> bool:
        body = {"resource_type_filter": int(pattern.resource_type), "resource_name_filter": pattern.name,
                "pattern_type_filter": int(pattern.pattern_type), "principal_filter": None, "host_filter": None,
                "operation": int(AclOperation.ANY), "permission_type": int(AclPermissionType.ANY)}
        answer = self.request(broker, ApiKey.DESCRIBE_ACLS, 1, body)
        held = {(a["principal"], a["operation"], a["permission_type"]) for r in answer["resources"] for a in r["acls"]}
        return {(e.principal, int(e.operation), int(e.permission_type)) for e in entries} <= held


@pytest.fixture(scope="module")
def cluster(zookeeper: EmbeddedZooKeeper, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    chroot = f"/t-{uuid.uuid4().hex[:12]}"
    connect = f"{zookeeper.connect_string}{chroot}"
    home = tmp_path_factory.mktemp("acls")
    zk = ZkClient(connect, session_timeout_ms=6000)
    zk.start(timeout=10)
    cluster_pattern = ResourcePattern(ResourceType.CLUSTER, CLUSTER_NAME)
    ops = (AclOperation.CLUSTER_ACTION, AclOperation.CREATE, AclOperation.ALTER, AclOperation.DESCRIBE)
    add_acls(zk, [AclBinding(cluster_pattern, allow(op)) for op in ops])
    try:
        with stopping(BrokerProcess.stop) as keep:
            brokers = {
                i: keep(BrokerProcess({
                    "broker.id": str(i), "listeners": f"PLAINTEXT://127.0.0.1:{free_port()}",
                    "log.dirs": str(home / f"b{i}" / "data"), "zookeeper.connect": connect,
                    "zookeeper.session.timeout.ms": "6000",
                }, home / f"b{i}", {**BASE, **AUTHORIZERS[i]}))
                for i in AUTHORIZERS
            }
            start_together(list(brokers.values()))
            yield Cluster(brokers, zk, connect)
    finally:
        zk.stop()
        delete_znodes(zookeeper.connect_string, [chroot])


def test_acl_added_through_broker_1_is_enforced_by_broker_2_within_5s(cluster: Cluster) -> None:
    topic = cluster.topic(leader=2)
    body = {"creations": [{"resource_type": int(ResourceType.TOPIC), "resource_name": topic,
                           "resource_pattern_type": int(PatternType.LITERAL), "principal": ANONYMOUS, "host": "*",
                           "operation": int(AclOperation.WRITE), "permission_type": int(AclPermissionType.ALLOW)}]}
    answer = cluster.request(1, ApiKey.CREATE_ACLS, 1, body)
    assert answer["results"] == [{"error_code": 0, "error_message": None}]
    added = time.monotonic()
    wait_until(lambda: cluster.metadata(2, topic) == ErrorCode.NONE, 5, interval=0.05, what="broker 2 applies the ACL")
    assert time.monotonic() - added < 5
    # and a real producer writes through broker 2 (Write implies Describe)
    producer = Producer({"bootstrap.servers": cluster.brokers[2].bootstrap, "acks": "all"})
    failures: list[KafkaError] = []
    producer.produce(topic, b"allowed", on_delivery=lambda err, _msg: err and failures.append(err))
    assert producer.flush(20) == 0 and failures == []


def test_confluent_admin_client_creates_describes_and_deletes_acls(cluster: Cluster) -> None:
    topic = f"adm-{uuid.uuid4().hex[:8]}"
    prefixed = CkAclBinding(CkResource.TOPIC, topic, CkPattern.PREFIXED, "User:alice", "*", CkOp.READ, CkPerm.ALLOW)
    denied = CkAclBinding(CkResource.GROUP, "g1", CkPattern.LITERAL, "User:bob", "10.0.0.1", CkOp.ALL, CkPerm.DENY)
    for future in cluster.admin.create_acls([prefixed, denied], request_timeout=20).values():
        future.result(20)
    everything = CkAclBindingFilter(CkResource.ANY, None, CkPattern.ANY, None, None, CkOp.ANY, CkPerm.ANY)
    found = cluster.admin.describe_acls(everything, request_timeout=20).result(20)
    assert prefixed in found and denied in found
    # MATCH: the prefixed ACL applies to a topic under its prefix, not to another one
    match = CkAclBindingFilter(CkResource.TOPIC, topic + "-x", CkPattern.MATCH, None, None, CkOp.ANY, CkPerm.ANY)
    assert prefixed in cluster.admin.describe_acls(match, request_timeout=20).result(20)
    other = CkAclBindingFilter(CkResource.TOPIC, "zz" + topic, CkPattern.MATCH, None, None, CkOp.ANY, CkPerm.ANY)
    assert prefixed not in cluster.admin.describe_acls(other, request_timeout=20).result(20)
    # Kafka's znode, Kafka's JSON
    raw = cluster.zk.read(f"/kafka-acl-extended/prefixed/Topic/{topic}")
    assert raw is not None and json.loads(raw[0]) == {
        "version": 1, "acls": [{"principal": "User:alice", "permissionType": "Allow", "operation": "Read", "host": "*"}]}
    by_bob = CkAclBindingFilter(CkResource.GROUP, None, CkPattern.ANY, "User:bob", None, CkOp.ANY, CkPerm.ANY)
    deleted = cluster.admin.delete_acls([by_bob], request_timeout=20)[by_bob].result(20)
    assert deleted == [denied]
    found = cluster.admin.describe_acls(everything, request_timeout=20).result(20)
    assert denied not in found and prefixed in found
    assert cluster.zk.read("/kafka-acl/Group/g1") is None


def test_producer_without_write_gets_topic_authorization_failed(cluster: Cluster) -> None:
    topic = cluster.topic(leader=1)
    cluster.grant(ResourcePattern(ResourceType.TOPIC, topic), allow(AclOperation.READ))  # Describe, not Write
    producer = Producer({"bootstrap.servers": cluster.brokers[1].bootstrap, "message.timeout.ms": 10000})
    failures: list[KafkaError] = []
    producer.produce(topic, b"refused", on_delivery=lambda err, _msg: err and failures.append(err))
    producer.flush(20)
    assert [e.code() for e in failures] == [KafkaError.TOPIC_AUTHORIZATION_FAILED]
    # nothing was written
    answer = cluster.request(1, ApiKey.LIST_OFFSETS, 1, {"replica_id": -1, "topics": [
        {"name": topic, "partitions": [{"partition_index": 0, "timestamp": -1}]}]})
    assert answer["topics"][0]["partitions"][0]["offset"] == 0


def test_consumer_group_needs_read_on_its_group_and_a_prefix_grants_exactly_it(cluster: Cluster) -> None:
    from confluent_kafka import Consumer
    from kafka import KafkaConsumer

    topic = cluster.topic(leader=1)
    cluster.grant(ResourcePattern(ResourceType.TOPIC, topic), allow(AclOperation.READ), allow(AclOperation.WRITE))
    producer = Producer({"bootstrap.servers": cluster.brokers[1].bootstrap})
    for i in range(3):
        producer.produce(topic, b"r%d" % i)
    assert producer.flush(20) == 0
    prefix = f"team-{uuid.uuid4().hex[:6]}-"
    while not {cluster.coordinator(prefix + "a"), cluster.coordinator(prefix[:-1])} <= {1, 2}:
        prefix = f"team-{uuid.uuid4().hex[:6]}-"  # coordinated by brokers 3 or 4, the group would be open

    def refused(group: str) -> list[int]:
        """confluent-kafka's consumer in ``group``: the errors it reports (no record may come)."""
        consumer = Consumer({"bootstrap.servers": cluster.brokers[1].bootstrap, "group.id": group,
                             "auto.offset.reset": "earliest"})
        consumer.subscribe([topic])
        errors: list[int] = []
        try:
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline and not errors:
                msg = consumer.poll(0.5)
                if msg is not None:
                    assert msg.error() is not None, "a refused group read a record"
                    errors.append(msg.error().code())
        finally:
            consumer.close()
        return errors

    assert refused(prefix + "a") == [KafkaError.GROUP_AUTHORIZATION_FAILED]
    cluster.grant(ResourcePattern(ResourceType.GROUP, prefix, PatternType.PREFIXED), allow(AclOperation.READ))
    consumer = KafkaConsumer(topic, bootstrap_servers=cluster.brokers[1].bootstrap, group_id=prefix + "a",
                             auto_offset_reset="earliest", consumer_timeout_ms=4000, api_version=(2, 5))
    try:
        assert [m.value for m in consumer] == [b"r0", b"r1", b"r2"]
        consumer.commit()
    finally:
        consumer.close()
    # the prefix without its last character is not under it
    assert refused(prefix[:-1]) == [KafkaError.GROUP_AUTHORIZATION_FAILED]


def test_group_apis_at_the_coordinator_check_group_and_topic(cluster: Cluster) -> None:
    topic, unread = cluster.topic(leader=1), cluster.topic(leader=1)
    cluster.grant(ResourcePattern(ResourceType.TOPIC, topic), allow(AclOperation.READ))
    group, open_group = f"raw-{uuid.uuid4().hex[:6]}", f"raw-{uuid.uuid4().hex[:6]}"
    while cluster.coordinator(group) not in (1, 2) or cluster.coordinator(open_group) not in (1, 2):
        group, open_group = f"raw-{uuid.uuid4().hex[:6]}", f"raw-{uuid.uuid4().hex[:6]}"
    cluster.grant(ResourcePattern(ResourceType.GROUP, open_group), allow(AclOperation.READ))

    def join(g: str) -> int:
        body = {"group_id": g, "session_timeout_ms": 10000, "rebalance_timeout_ms": 10000, "member_id": "",
                "protocol_type": "consumer", "protocols": [{"name": "range", "metadata": b""}]}
        return int(cluster.request(cluster.coordinator(g), ApiKey.JOIN_GROUP, 1, body)["error_code"])

    def commit(g: str) -> dict[str, int]:
        body = {"group_id": g, "generation_id": -1, "member_id": "", "retention_time_ms": -1, "topics": [
            {"name": t, "partitions": [{"partition_index": 0, "committed_offset": 0, "committed_metadata": ""}]}
            for t in (topic, unread)]}
        answer = cluster.request(cluster.coordinator(g), ApiKey.OFFSET_COMMIT, 2, body)
        return {t["name"]: t["partitions"][0]["error_code"] for t in answer["topics"]}

    assert join(group) == ErrorCode.GROUP_AUTHORIZATION_FAILED
    assert commit(group) == {topic: ErrorCode.GROUP_AUTHORIZATION_FAILED, unread: ErrorCode.GROUP_AUTHORIZATION_FAILED}
    assert commit(open_group) == {topic: ErrorCode.NONE, unread: ErrorCode.TOPIC_AUTHORIZATION_FAILED}
    # offsets of a topic the principal may no longer Describe: left out of "all", refused by name
    cluster.grant(ResourcePattern(ResourceType.TOPIC, unread), allow(AclOperation.READ))
    assert commit(open_group) == {topic: ErrorCode.NONE, unread: ErrorCode.NONE}
    cluster.grant(ResourcePattern(ResourceType.TOPIC, unread),
                  AccessControlEntry(ANONYMOUS, "*", AclOperation.DESCRIBE, AclPermissionType.DENY))

    def fetch(topics: list[dict] | None) -> dict[str, int]:
        body = {"group_id": open_group, "topics": topics}
        answer = cluster.request(cluster.coordinator(open_group), ApiKey.OFFSET_FETCH, 2, body)
        return {t["name"]: t["partitions"][0]["error_code"] for t in answer["topics"]}

    assert fetch(None) == {topic: ErrorCode.NONE}
    named = fetch([{"name": t, "partition_indexes": [0]} for t in (topic, unread)])
    assert named == {topic: ErrorCode.NONE, unread: ErrorCode.TOPIC_AUTHORIZATION_FAILED}


def test_metadata_hides_topics_the_principal_may_not_describe(cluster: Cluster) -> None:
    shown, hidden = cluster.topic(leader=1), cluster.topic(leader=1)
    cluster.grant(ResourcePattern(ResourceType.TOPIC, shown), allow(AclOperation.DESCRIBE))
    cluster.grant(ResourcePattern(ResourceType.TOPIC, hidden), allow(AclOperation.READ, principal="User:alice"))
    listed = cluster.metadata(1, None)
    assert isinstance(listed, list) and shown in listed and hidden not in listed
    assert cluster.metadata(1, hidden) == ErrorCode.TOPIC_AUTHORIZATION_FAILED
    # a super user (broker 3) sees everything
    wait_until(lambda: cluster.metadata(3, hidden) == ErrorCode.NONE, 5, what="broker 3 knows the topic")
    # allow.everyone.if.no.acl.found (broker 4) opens topics without any ACL, not those with one
    bare = cluster.topic(leader=1)
    wait_until(lambda: cluster.metadata(4, bare) == ErrorCode.NONE, 5, what="broker 4 opens a topic without ACLs")
    assert cluster.metadata(4, hidden) == ErrorCode.TOPIC_AUTHORIZATION_FAILED
    assert cluster.metadata(1, bare) == ErrorCode.TOPIC_AUTHORIZATION_FAILED


def test_deny_wins_and_a_super_user_bypasses_it(cluster: Cluster) -> None:
    prefix = f"deny-{uuid.uuid4().hex[:6]}-"
    refused, bypassed = cluster.topic(leader=1, prefix=prefix), cluster.topic(leader=3, prefix=prefix)
    deny = AccessControlEntry(ANONYMOUS, "*", AclOperation.WRITE, AclPermissionType.DENY)
    everything = ResourcePattern(ResourceType.TOPIC, prefix, PatternType.PREFIXED)
    cluster.grant(everything, allow(AclOperation.ALL), deny)
    outcomes = {}
    for topic, leader in ((refused, 1), (bypassed, 3)):
        producer = Producer({"bootstrap.servers": cluster.brokers[leader].bootstrap, "message.timeout.ms": 10000})
        failures: list[KafkaError] = []
        producer.produce(topic, b"x", on_delivery=lambda err, _msg, failures=failures: err and failures.append(err))
        producer.flush(20)
        outcomes[topic] = [e.code() for e in failures]
    assert outcomes == {refused: [KafkaError.TOPIC_AUTHORIZATION_FAILED], bypassed: []}


def _logbus(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "broker.cli", "acls", *args], capture_output=True, text=True, timeout=60)


def test_logbus_acls_round_trip_through_brokers_and_zookeeper(cluster: Cluster) -> None:
    topic = f"tool-{uuid.uuid4().hex[:8]}"
    via_broker = ["--bootstrap-server", cluster.brokers[2].bootstrap]
    via_zk = ["--authorizer-properties", f"zookeeper.connect={cluster.connect}"]
    header = f"Current ACLs for resource `ResourcePattern(resourceType=TOPIC, name={topic}, patternType=PREFIXED)`: "
    entry = " \t(principal=User:alice, host=*, operation=READ, permissionType=ALLOW) "

    added = _logbus(*via_broker, "--add", "--allow-principal", "User:alice", "--operation", "Read",
                    "--topic", topic, "--resource-pattern-type", "prefixed")
    assert added.returncode == 0, added.stderr
    assert header in added.stdout.splitlines() and entry in added.stdout.splitlines()
    listed = _logbus(*via_zk, "--list", "--topic", topic, "--resource-pattern-type", "prefixed")
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.splitlines()[:2] == [header, entry]

    group = f"g-{uuid.uuid4().hex[:6]}"
    consumer = _logbus(*via_zk, "--add", "--allow-principal", "User:bob", "--consumer", "--topic", topic, "--group", group)
    assert consumer.returncode == 0, consumer.stderr
    wait_until(lambda: f"name={group}," in _logbus(*via_broker, "--list", "--principal", "User:bob").stdout, 5,
               what="broker 2 lists the ACLs written to ZooKeeper")
    listed = _logbus(*via_broker, "--list", "--principal", "User:bob").stdout
    for op in ("READ", "DESCRIBE"):
        assert f"(principal=User:bob, host=*, operation={op}, permissionType=ALLOW)" in listed

    removed = _logbus(*via_zk, "--remove", "--force", "--topic", topic, "--resource-pattern-type", "prefixed")
    assert removed.returncode == 0, removed.stderr
    assert "Removing ACLs for resource `ResourcePattern(resourceType=TOPIC" in removed.stdout
    removed = _logbus(*via_broker, "--remove", "--force", "--allow-principal", "User:bob", "--topic", topic, "--group", group)
    assert removed.returncode == 0, removed.stderr
    wait_until(lambda: _logbus(*via_broker, "--list", "--topic", topic, "--resource-pattern-type", "any").stdout == "", 5,
               what="no ACL of the topic left")
    assert _logbus(*via_zk, "--list", "--group", group).stdout == ""

    producer = _logbus(*via_zk, "--add", "--allow-principal", "User:app", "--producer", "--idempotent",
                       "--topic", topic, "--deny-principal", "User:eve", "--deny-host", "10.0.0.9")
    assert producer.returncode == 0, producer.stderr
    raw = cluster.zk.read("/kafka-acl/Cluster/kafka-cluster")
    assert raw is not None
    assert {"principal": "User:app", "permissionType": "Allow", "operation": "IdempotentWrite", "host": "*"} in json.loads(
        raw[0])["acls"]
    listed = _logbus(*via_broker, "--list", "--topic", topic).stdout
    for op in ("WRITE", "DESCRIBE", "CREATE"):
        assert f"(principal=User:app, host=*, operation={op}, permissionType=ALLOW)" in listed
        assert f"(principal=User:eve, host=10.0.0.9, operation={op}, permissionType=DENY)" in listed
    kept = subprocess.run([sys.executable, "-m", "broker.cli", "acls", *via_broker, "--remove", "--topic", topic],
                          input="n\n", capture_output=True, text=True, timeout=60)
    assert kept.returncode == 0 and "Are you sure" in kept.stdout
    assert _logbus(*via_broker, "--list", "--topic", topic).stdout == listed
    assert _logbus(*via_broker, "--remove", "--force", "--topic", topic).returncode == 0
    assert _logbus(*via_zk, "--remove", "--force", "--allow-principal", "User:app", "--cluster").returncode == 0
    assert '"User:app"' not in (cluster.zk.read("/kafka-acl/Cluster/kafka-cluster") or (b"",))[0].decode()

    bad = _logbus(*via_broker, "--add", "--allow-principal", "alice", "--topic", topic)
    assert bad.returncode == 1 and bad.stderr.count("\n") == 1 and "User:alice" in bad.stderr


def _partition_error(answer: dict, topics: str = "topics", partitions: str = "partitions") -> int:
    return int(answer[topics][0][partitions][0]["error_code"])


#: API -> (version, body for topic T / group G, the error code the answer carries). Neither T nor G has an ACL.
TOPIC_AND_GROUP_REFUSALS = {
    "ListOffsets": (ApiKey.LIST_OFFSETS, 1, lambda t, g: {"replica_id": -1, "topics": [
        {"name": t, "partitions": [{"partition_index": 0, "timestamp": -1}]}]}, _partition_error),
    "Fetch": (ApiKey.FETCH, 4, lambda t, g: {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 1 << 20,
                                             "isolation_level": 0, "topics": [{"topic": t, "partitions": [
                                                 {"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 20}]}]},
              lambda a: int(a["responses"][0]["partitions"][0]["error_code"])),
    "OffsetForLeaderEpoch": (ApiKey.OFFSET_FOR_LEADER_EPOCH, 2, lambda t, g: {"topics": [
        {"topic": t, "partitions": [{"partition": 0, "current_leader_epoch": -1, "leader_epoch": 0}]}]}, _partition_error),
    "DeleteRecords": (ApiKey.DELETE_RECORDS, 0, lambda t, g: {"topics": [
        {"name": t, "partitions": [{"partition_index": 0, "offset": 0}]}], "timeout_ms": 5000}, _partition_error),
    "CreatePartitions": (ApiKey.CREATE_PARTITIONS, 0, lambda t, g: {"topics": [{"name": t, "count": 2, "assignments": None}],
                                                                   "timeout_ms": 5000, "validate_only": True},
                         lambda a: int(a["results"][0]["error_code"])),
    "DeleteTopics": (ApiKey.DELETE_TOPICS, 1, lambda t, g: {"topic_names": [t], "timeout_ms": 5000},
                     lambda a: int(a["responses"][0]["error_code"])),
    "DescribeConfigs": (ApiKey.DESCRIBE_CONFIGS, 1, lambda t, g: {"resources": [
        {"resource_type": 2, "resource_name": t, "configuration_keys": None}], "include_synonyms": False},
        lambda a: int(a["results"][0]["error_code"])),
    "IncrementalAlterConfigs": (ApiKey.INCREMENTAL_ALTER_CONFIGS, 0, lambda t, g: {"resources": [
        {"resource_type": 2, "resource_name": t, "configs": [{"name": "retention.ms", "config_operation": 0, "value": "1"}]}],
        "validate_only": True}, lambda a: int(a["responses"][0]["error_code"])),
    "DescribeGroups": (ApiKey.DESCRIBE_GROUPS, 1, lambda t, g: {"groups": [g]}, lambda a: int(a["groups"][0]["error_code"])),
    "DeleteGroups": (ApiKey.DELETE_GROUPS, 0, lambda t, g: {"groups_names": [g]}, lambda a: int(a["results"][0]["error_code"])),
    "OffsetDelete": (ApiKey.OFFSET_DELETE, 0, lambda t, g: {"group_id": g, "topics": [
        {"name": t, "partitions": [{"partition_index": 0}]}]}, lambda a: int(a["error_code"])),
    "Heartbeat": (ApiKey.HEARTBEAT, 1, lambda t, g: {"group_id": g, "generation_id": 1, "member_id": "m"},
                  lambda a: int(a["error_code"])),
    "SyncGroup": (ApiKey.SYNC_GROUP, 1, lambda t, g: {"group_id": g, "generation_id": 1, "member_id": "m", "assignments": []},
                  lambda a: int(a["error_code"])),
    "LeaveGroup": (ApiKey.LEAVE_GROUP, 1, lambda t, g: {"group_id": g, "member_id": "m"}, lambda a: int(a["error_code"])),
}


def test_every_api_refuses_a_topic_or_group_without_acl(cluster: Cluster) -> None:
    topic = cluster.topic(leader=1)
    group = f"none-{uuid.uuid4().hex[:6]}"
    while cluster.coordinator(group) != 1:
        group = f"none-{uuid.uuid4().hex[:6]}"
    answers = {}
    for name, (api, version, body, code_of) in TOPIC_AND_GROUP_REFUSALS.items():
        answers[name] = ErrorCode(code_of(cluster.request(1, api, version, body(topic, group))))
    expected = {name: ErrorCode.GROUP_AUTHORIZATION_FAILED if api in (
        ApiKey.DESCRIBE_GROUPS, ApiKey.DELETE_GROUPS, ApiKey.OFFSET_DELETE, ApiKey.HEARTBEAT, ApiKey.SYNC_GROUP,
        ApiKey.LEAVE_GROUP) else ErrorCode.TOPIC_AUTHORIZATION_FAILED
        for name, (api, *_rest) in TOPIC_AND_GROUP_REFUSALS.items()}
    assert answers == expected
    assert topic in cluster.log_dir_topics(1)  # DeleteTopics deleted nothing
    # a follower's OffsetForLeaderEpoch needs ClusterAction on the cluster (granted), not the topic
    assert _follower_epoch(cluster, topic) == ErrorCode.NONE


def _follower_epoch(cluster: Cluster, topic: str) -> int:
    answer = cluster.request(1, ApiKey.OFFSET_FOR_LEADER_EPOCH, 3, {"replica_id": 2, "topics": [
        {"topic": topic, "partitions": [{"partition": 0, "current_leader_epoch": -1, "leader_epoch": 0}]}]})
    return _partition_error(answer)


def test_replication_needs_only_cluster_action(cluster: Cluster) -> None:
    """A topic on brokers 1 and 2 replicates with ANONYMOUS holding ClusterAction on the cluster and,
    on the topic, only Write for the producer: acks=all completes once the follower has fetched."""
    name = f"repl-{uuid.uuid4().hex[:8]}"
    cluster.admin.create_topics([NewTopic(name, 1, replica_assignment=[[1, 2]])], operation_timeout=20)[name].result(30)
    wait_until(lambda: name in cluster.log_dir_topics(2), 10, what="the follower's log")
    cluster.grant(ResourcePattern(ResourceType.TOPIC, name), allow(AclOperation.WRITE))
    producer = Producer({"bootstrap.servers": cluster.brokers[1].bootstrap, "acks": "all", "message.timeout.ms": 15000})
    failures: list[KafkaError] = []
    for i in range(5):
        producer.produce(name, b"r%d" % i, on_delivery=lambda err, _msg: err and failures.append(err))
    assert producer.flush(20) == 0 and failures == []
    def follower_bytes() -> int:
        answer = cluster.request(2, ApiKey.DESCRIBE_LOG_DIRS, 1, {"topics": [{"topic": name, "partitions": [0]}]})
        return sum(p["partition_size"] for r in answer["results"] for t in r["topics"] for p in t["partitions"])

    wait_until(lambda: follower_bytes() > 0, 5, what="the records on the follower")


def test_cluster_apis_refused_without_their_cluster_operation(cluster: Cluster) -> None:
    """ANONYMOUS denied Alter, Describe, Create and ClusterAction on the cluster for a moment (the
    module's topics have one replica: nothing replicates meanwhile)."""
    topic = cluster.topic(leader=1)
    cluster_pattern = ResourcePattern(ResourceType.CLUSTER, CLUSTER_NAME)
    denials = [AccessControlEntry(ANONYMOUS, "*", op, AclPermissionType.DENY) for op in (
        AclOperation.ALTER, AclOperation.DESCRIBE, AclOperation.CREATE, AclOperation.CLUSTER_ACTION,
        AclOperation.DESCRIBE_CONFIGS)]
    acl_filter = {"resource_type_filter": 1, "resource_name_filter": None, "pattern_type_filter": 1, "principal_filter": None,
                  "host_filter": None, "operation": 1, "permission_type": 1}
    from broker.cluster.acls import remove_acls
    from broker.cluster.zkdata import ConsumerOffsetZNode
    from broker.security.acl import AclBindingFilter

    # ListGroups: a group ANONYMOUS may describe, and one with offsets it may not (written straight to ZooKeeper)
    shown, hidden = f"lg-{uuid.uuid4().hex[:6]}", f"lg-{uuid.uuid4().hex[:6]}"
    while cluster.coordinator(shown) != 1 or cluster.coordinator(hidden) != 1:
        shown, hidden = f"lg-{uuid.uuid4().hex[:6]}", f"lg-{uuid.uuid4().hex[:6]}"
    cluster.grant(ResourcePattern(ResourceType.GROUP, shown), allow(AclOperation.DESCRIBE))
    for g in (shown, hidden):
        cluster.zk.create(ConsumerOffsetZNode.path(g, topic, 0), ConsumerOffsetZNode.encode(0))

    def listed() -> set[str]:
        return {g["group_id"] for g in cluster.request(1, ApiKey.LIST_GROUPS, 1, {})["groups"]} & {shown, hidden}

    assert listed() == {shown, hidden}  # Describe on the cluster lists every group
    # Metadata's auto-creation: ANONYMOUS may describe the name, but creating needs Create
    auto = f"auto-{uuid.uuid4().hex[:6]}"
    cluster.grant(ResourcePattern(ResourceType.TOPIC, auto), allow(AclOperation.DESCRIBE))

    def auto_create() -> int:
        body = {"topics": [{"name": auto}], "allow_auto_topic_creation": True}
        return int(cluster.request(1, ApiKey.METADATA, 8, body)["topics"][0]["error_code"])

    add_acls(cluster.zk, [AclBinding(cluster_pattern, e) for e in denials])
    try:
        wait_until(lambda: cluster.request(1, ApiKey.DESCRIBE_ACLS, 1, acl_filter)["error_code"]
                   == ErrorCode.CLUSTER_AUTHORIZATION_FAILED, 5, what="broker 1 applies the denials")
        created = cluster.request(1, ApiKey.CREATE_TOPICS, 2, {"topics": [
            {"name": f"new-{uuid.uuid4().hex[:6]}", "num_partitions": 1, "replication_factor": 1, "assignments": [],
             "configs": []}], "timeout_ms": 5000, "validate_only": True})
        assert created["topics"][0]["error_code"] == ErrorCode.TOPIC_AUTHORIZATION_FAILED
        elected = cluster.request(1, ApiKey.ELECT_LEADERS, 0, {"topic_partitions": [{"topic": topic, "partitions": [0]}],
                                                              "timeout_ms": 5000})
        assert elected["replica_election_results"][0]["partition_result"][0]["error_code"] == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        assert cluster.request(1, ApiKey.DESCRIBE_LOG_DIRS, 1, {"topics": None})["results"] == []
        configs = cluster.request(1, ApiKey.DESCRIBE_CONFIGS, 1, {"resources": [
            {"resource_type": 4, "resource_name": "1", "configuration_keys": None}], "include_synonyms": False})
        assert configs["results"][0]["error_code"] == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        body = {"creations": [{"resource_type": 2, "resource_name": topic, "resource_pattern_type": 3,
                               "principal": ANONYMOUS, "host": "*", "operation": 3, "permission_type": 3}]}
        assert cluster.request(1, ApiKey.CREATE_ACLS, 1, body)["results"][0]["error_code"] == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        follower = cluster.request(1, ApiKey.FETCH, 4, {
            "replica_id": 2, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 1 << 20, "isolation_level": 0,
            "topics": [{"topic": topic, "partitions": [{"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 20}]}]})
        assert follower["responses"][0]["partitions"][0]["error_code"] == ErrorCode.TOPIC_AUTHORIZATION_FAILED
        assert _follower_epoch(cluster, topic) == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        assert listed() == {shown}
        assert auto_create() == ErrorCode.TOPIC_AUTHORIZATION_FAILED
        assert cluster.metadata(3, auto) == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION  # not created
    finally:
        remove_acls(cluster.zk, [AclBindingFilter(ResourceType.CLUSTER, CLUSTER_NAME, PatternType.LITERAL,
                                                  permission_type=AclPermissionType.DENY)])
    wait_until(lambda: all(cluster.request(b, ApiKey.DESCRIBE_ACLS, 1, acl_filter)["error_code"] == ErrorCode.NONE
                           for b in (1, 2)), 5, what="the denials lifted")
    assert auto_create() in (ErrorCode.NONE, ErrorCode.LEADER_NOT_AVAILABLE)  # Create on the cluster: created
    wait_until(lambda: cluster.metadata(3, auto) == ErrorCode.NONE, 10, what="the auto-created topic")


def test_a_fetch_session_loses_a_topic_whose_read_is_revoked(cluster: Cluster) -> None:
    """Fetch sessions (KIP-227) are authorized at every fetch, not only when a partition joins:
    once Read on the topic is revoked, the session's next incremental fetch answers its
    partition TOPIC_AUTHORIZATION_FAILED and reads it no more."""
    topic = cluster.topic(leader=1)
    pattern = ResourcePattern(ResourceType.TOPIC, topic)
    cluster.grant(pattern, allow(AclOperation.READ))

    def fetch(conn: BrokerConnection, session_id: int, epoch: int, named: bool) -> dict:
        return conn.request(ApiKey.FETCH, 11, {
            "replica_id": -1, "max_wait_ms": 0, "min_bytes": 1, "max_bytes": 1 << 20, "isolation_level": 0,
            "session_id": session_id, "session_epoch": epoch, "forgotten_topics_data": [], "rack_id": "",
            "topics": [{"topic": topic, "partitions": [{"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 20}]}]
            if named else []})

    with BrokerConnection.from_address(cluster.brokers[1].bootstrap, client_id="acl-session", timeout=10.0) as conn:
        opened = fetch(conn, 0, 0, True)
        assert _partition_error_of_fetch(opened) == ErrorCode.NONE and opened["session_id"] != 0
        session = opened["session_id"]
        assert fetch(conn, session, 1, False)["responses"] == []  # nothing new
        remove_acls(cluster.zk, [AclBindingFilter(ResourceType.TOPIC, topic, PatternType.LITERAL)])
        wait_until(lambda: cluster.metadata(1, topic) == ErrorCode.TOPIC_AUTHORIZATION_FAILED, 5, what="revocation applied")
        refused = fetch(conn, session, 2, False)
        assert _partition_error_of_fetch(refused) == ErrorCode.TOPIC_AUTHORIZATION_FAILED
        assert fetch(conn, session, 3, False)["responses"] == [], "the partition left the session"


def _partition_error_of_fetch(answer: dict) -> int:
    [topic] = answer["responses"]
    [part] = topic["partitions"]
    return int(part["error_code"])
