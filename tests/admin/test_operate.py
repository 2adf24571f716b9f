"""Operating a cluster, against one module-scoped pair of real brokers: group ids ZooKeeper cannot
store, a half-closed request, the admin APIs users' tools call (DeleteGroups, OffsetDelete,
DeleteRecords, DescribeLogDirs, AlterConfigs/IncrementalAlterConfigs) through confluent-kafka,
kafka-python and `logbus`, bounded CreateTopics/CreatePartitions, and one-line startup errors."""

from __future__ import annotations

import json
import socket
import struct
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewPartitions,
    NewTopic,
)

from broker.client.connection import BrokerConnection
from broker.cluster.embedded_zk import EmbeddedZooKeeper
from broker.cluster.local import BrokerProcess
from broker.cluster.net import free_port
from broker.cluster.zk import ZkClient
from broker.protocol.errors import ErrorCode
from broker.protocol.header import encode_request_header
from broker.protocol.messages import ApiKey
from tests.starting import start_together
from tests.teardown import delete_znodes, stopping
from tests.waiting import wait_until

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
BROKER_OVERRIDES = {
    "group.initial.rebalance.delay.ms": "0",
    "log.retention.check.interval.ms": "300",
    "replica.fetch.wait.max.ms": "200",
    "max.partitions.per.request": "1000",
}
UNSTORABLE_GROUP_IDS = ["\x00", ".", "..", "x/../y"]


class Cluster:
    def __init__(self, brokers: list[BrokerProcess], zk: ZkClient) -> None:
        self.brokers = brokers
        self.zk = zk
        self.bootstrap = ",".join(b.bootstrap for b in brokers)
        self._admin: AdminClient | None = None

    def admin(self) -> AdminClient:
        """One client for the module: a temporary one is destroyed (and its futures failed) when collected."""
        if self._admin is None:
            self._admin = AdminClient({"bootstrap.servers": self.bootstrap})
        return self._admin

    def topic(self, partitions: int = 1, rf: int = 2, config: dict | None = None) -> str:
        name = f"op-{uuid.uuid4().hex[:8]}"
        self.admin().create_topics([NewTopic(name, partitions, rf, config=config or {})], operation_timeout=20)[name].result(30)
        return name

    def produce(self, topic: str, count: int, timestamp_ms: int = 0) -> None:
        # one record a batch: the log rolls into several small segments
        producer = Producer({"bootstrap.servers": self.bootstrap, "batch.num.messages": 1, "acks": "all"})
        for i in range(count):
            producer.produce(topic, value=b"v%05d" % i + b"." * 200, partition=0, timestamp=timestamp_ms)
        assert producer.flush(30) == 0


@pytest.fixture(scope="module")
def cluster(zookeeper: EmbeddedZooKeeper, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    chroot = f"/t-{uuid.uuid4().hex[:12]}"
    connect = f"{zookeeper.connect_string}{chroot}"
    home = tmp_path_factory.mktemp("admin")
    zk = ZkClient(connect, session_timeout_ms=6000)
    zk.start(timeout=10)
    try:
        with stopping(BrokerProcess.stop) as keep:
            brokers = [
                keep(BrokerProcess({
                    "broker.id": str(i), "listeners": f"PLAINTEXT://127.0.0.1:{free_port()}",
                    "log.dirs": str(home / f"b{i}" / "data"), "zookeeper.connect": connect,
                    "zookeeper.session.timeout.ms": "6000",
                }, home / f"b{i}", BROKER_OVERRIDES))
                for i in (1, 2)
            ]
            start_together(brokers)
            yield Cluster(brokers, zk)
    finally:
        zk.stop()
        delete_znodes(zookeeper.connect_string, [chroot])


# ---------------------------------------------------------------------- robustness


def test_group_ids_zookeeper_cannot_store_are_invalid_group_id(cluster: Cluster) -> None:
    topic = cluster.topic()
    with BrokerConnection.from_address(cluster.brokers[0].bootstrap) as conn:
        described = conn.request(ApiKey.DESCRIBE_GROUPS, 4, {"groups": UNSTORABLE_GROUP_IDS,
                                                             "include_authorized_operations": False})
        assert [g["error_code"] for g in described["groups"]] == [ErrorCode.INVALID_GROUP_ID] * 4
        for group in UNSTORABLE_GROUP_IDS:
            committed = conn.request(ApiKey.OFFSET_COMMIT, 7, {
                "group_id": group, "generation_id": -1, "member_id": "", "group_instance_id": None,
                "topics": [{"name": topic, "partitions": [{"partition_index": 0, "committed_offset": 1,
                                                           "committed_leader_epoch": -1, "committed_metadata": ""}]}],
            })
            assert committed["topics"][0]["partitions"][0]["error_code"] == ErrorCode.INVALID_GROUP_ID
            fetched = conn.request(ApiKey.OFFSET_FETCH, 5, {"group_id": group, "topics": None})
            assert fetched["error_code"] == ErrorCode.INVALID_GROUP_ID
        deleted = conn.request(ApiKey.DELETE_GROUPS, 1, {"groups_names": UNSTORABLE_GROUP_IDS})
        assert [r["error_code"] for r in deleted["results"]] == [ErrorCode.INVALID_GROUP_ID] * 4
        # the connection is still open and answers
        assert conn.request(ApiKey.API_VERSIONS, 2, {})["error_code"] == ErrorCode.NONE


def test_a_request_followed_by_a_half_close_is_answered(cluster: Cluster) -> None:
    frame = encode_request_header(ApiKey.API_VERSIONS, 0, 42, "half-close")
    with socket.create_connection((cluster.brokers[0].host, cluster.brokers[0].port), timeout=10) as sock:
        sock.sendall(struct.pack(">i", len(frame)) + frame)
        sock.shutdown(socket.SHUT_WR)
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    size, correlation_id = struct.unpack_from(">ii", data)
    assert correlation_id == 42 and len(data) == 4 + size


# ---------------------------------------------------------------------- groups


def _commit(cluster: Cluster, group: str, topic: str, offset: int) -> None:
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        consumer.commit(offsets=[TopicPartition(topic, 0, offset)], asynchronous=False)
    finally:
        consumer.close()


def test_delete_consumer_groups_with_confluent_kafka_kafka_python_and_logbus(cluster: Cluster) -> None:
    from kafka.admin import KafkaAdminClient

    topic = cluster.topic()
    cluster.produce(topic, 3)
    groups = {name: f"del-{name}-{uuid.uuid4().hex[:6]}" for name in ("confluent", "kafka-python", "logbus", "live")}
    for group in groups.values():
        _commit(cluster, group, topic, 2)
    live = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": groups["live"], "session.timeout.ms": 6000})
    live.subscribe([topic])
    try:
        wait_until(lambda: live.poll(0.2) is not None or live.assignment(), 20, what="a live member")
        futures = cluster.admin().delete_consumer_groups([groups["confluent"], groups["live"], "never-seen-group"],
                                                         request_timeout=20)
        futures[groups["confluent"]].result(20)
        for group, code in ((groups["live"], KafkaError.NON_EMPTY_GROUP), ("never-seen-group", KafkaError.GROUP_ID_NOT_FOUND)):
            with pytest.raises(Exception) as failed:
                futures[group].result(20)
            assert failed.value.args[0].code() == code
    finally:
        live.close()

    kp = KafkaAdminClient(bootstrap_servers=cluster.bootstrap, request_timeout_ms=20000)
    try:
        deleted = kp.delete_groups([groups["kafka-python"]])  # kafka-python 3: {group: error name}
        assert deleted == {groups["kafka-python"]: "OK"}
    finally:
        kp.close()

    out = _logbus("consumer-groups", "--bootstrap-server", cluster.bootstrap, "--delete", "--group", groups["logbus"])
    assert out.returncode == 0 and "was successful" in out.stdout, out.stderr
    for name in ("confluent", "kafka-python", "logbus"):
        assert not cluster.zk.exists(f"/consumers/{groups[name]}"), name
    assert cluster.zk.exists(f"/consumers/{groups['live']}/offsets/{topic}/0")


def test_delete_offsets_of_one_topic(cluster: Cluster) -> None:
    kept, dropped = cluster.topic(rf=1), cluster.topic(rf=1)
    group = f"offsets-{uuid.uuid4().hex[:6]}"
    _commit(cluster, group, kept, 1)
    _commit(cluster, group, dropped, 1)
    out = _logbus("consumer-groups", "--bootstrap-server", cluster.bootstrap, "--delete-offsets", "--group", group,
                  "--topic", dropped)
    assert out.returncode == 0 and "Successful" in out.stdout, out.stdout + out.stderr
    assert not cluster.zk.exists(f"/consumers/{group}/offsets/{dropped}")
    assert cluster.zk.exists(f"/consumers/{group}/offsets/{kept}/0")


# ---------------------------------------------------------------------- records and log dirs


def _earliest(cluster: Cluster, topic: str) -> int:
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "watermarks"})
    try:
        return consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)[0]
    finally:
        consumer.close()


def test_delete_records_with_confluent_kafka_and_logbus_and_log_dirs(cluster: Cluster, tmp_path: Path) -> None:
    topic = cluster.topic(config={"segment.bytes": "2048"})
    cluster.produce(topic, 40)
    futures = cluster.admin().delete_records([TopicPartition(topic, 0, 15)], request_timeout=20)
    [deleted] = [f.result(20) for f in futures.values()]
    assert deleted.low_watermark == 15
    assert _earliest(cluster, topic) == 15

    offsets = tmp_path / "offsets.json"
    offsets.write_text(json.dumps({"version": 1, "partitions": [{"topic": topic, "partition": 0, "offset": -1},
                                                                {"topic": topic, "partition": 7, "offset": 1}]}))
    out = _logbus("delete-records", "--bootstrap-server", cluster.bootstrap, "--offset-json-file", str(offsets))
    assert f"partition: {topic}-0\tlow_watermark: 40" in out.stdout
    assert f"partition: {topic}-7\terror: UNKNOWN_TOPIC_OR_PARTITION" in out.stdout and out.returncode == 1
    assert _earliest(cluster, topic) == 40

    def sizes() -> dict[int, int]:
        out = _logbus("log-dirs", "--describe", "--bootstrap-server", cluster.bootstrap, "--topic-list", topic)
        assert out.returncode == 0, out.stderr
        doc = json.loads(out.stdout.splitlines()[-1])
        return {b["broker"]: sum(p["size"] for d in b["logDirs"] for p in d["partitions"]) for b in doc["brokers"]}

    # both replicas drop the deleted segments: the follower takes the leader's log start offset
    wait_until(lambda: all(size < 2048 for size in sizes().values()), 10, what="segments below the log start deleted")
    bad = tmp_path / "bad.json"
    bad.write_text("{\"partitions\": 3}")
    out = _logbus("delete-records", "--bootstrap-server", cluster.bootstrap, "--offset-json-file", str(bad))
    assert out.returncode == 1 and len(out.stderr.strip().splitlines()) == 1 and "Traceback" not in out.stderr


# ---------------------------------------------------------------------- dynamic configs


def test_retention_changed_with_logbus_configs_applies_on_every_broker(cluster: Cluster) -> None:
    topic = cluster.topic(config={"segment.bytes": "2048"})
    cluster.produce(topic, 40, timestamp_ms=int(time.time() * 1000) - 3600_000)  # an hour old
    leader_and_follower = [b.bootstrap for b in cluster.brokers]

    def log_size(bootstrap: str) -> int:
        with BrokerConnection.from_address(bootstrap) as conn:
            answer = conn.request(ApiKey.DESCRIBE_LOG_DIRS, 1, {"topics": [{"topic": topic, "partitions": [0]}]})
        return sum(p["partition_size"] for r in answer["results"] for t in r["topics"] for p in t["partitions"])

    wait_until(lambda: all(log_size(b) > 4096 for b in leader_and_follower), 10, what="both replicas hold the records")
    out = _logbus("configs", "--bootstrap-server", cluster.bootstrap, "--entity-type", "topics", "--entity-name", topic,
                  "--alter", "--add-config", "retention.ms=60000")
    assert out.returncode == 0 and "Completed updating config" in out.stdout, out.stderr
    started = time.monotonic()
    wait_until(lambda: all(log_size(b) < 4096 for b in leader_and_follower), 5, what="retention applied on both brokers")
    print(f"\nretention.ms applied on both brokers {time.monotonic() - started:.2f}s after `logbus configs --alter`")
    described = _logbus("configs", "--bootstrap-server", cluster.bootstrap, "--entity-type", "topics", "--entity-name",
                        topic, "--describe")
    assert "retention.ms=60000 sensitive=false" in described.stdout
    refused = _logbus("configs", "--bootstrap-server", cluster.bootstrap, "--entity-type", "topics", "--entity-name",
                      topic, "--alter", "--add-config", "retention.ms=soon")
    assert refused.returncode == 1 and "INVALID_CONFIG" in refused.stderr and len(refused.stderr.splitlines()) == 1


def test_incremental_alter_configs_with_librdkafka(cluster: Cluster) -> None:
    topic = cluster.topic(config={"retention.ms": "86400000"})
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic, incremental_configs=[
        ConfigEntry("retention.bytes", "1048576", incremental_operation=AlterConfigOpType.SET),
        ConfigEntry("retention.ms", None, incremental_operation=AlterConfigOpType.DELETE),
    ])
    admin = cluster.admin()
    admin.incremental_alter_configs([resource])[resource].result(20)
    configs = admin.describe_configs([ConfigResource(ConfigResource.Type.TOPIC, topic)])
    [described] = configs.values()
    entries = described.result(20)
    assert entries["retention.bytes"].value == "1048576" and not entries["retention.bytes"].is_default
    assert entries["retention.ms"].is_default
    broker = ConfigResource(ConfigResource.Type.BROKER, "1", incremental_configs=[
        ConfigEntry("log.retention.ms", "600000", incremental_operation=AlterConfigOpType.SET)])
    admin.incremental_alter_configs([broker])[broker].result(20)
    assert cluster.zk.entity_config("brokers", "1") == {"log.retention.ms": "600000"}
    fixed = ConfigResource(ConfigResource.Type.BROKER, "1", incremental_configs=[
        ConfigEntry("broker.id", "9", incremental_operation=AlterConfigOpType.SET)])
    with pytest.raises(Exception) as refused:
        admin.incremental_alter_configs([fixed])[fixed].result(20)
    assert refused.value.args[0].code() == KafkaError.INVALID_CONFIG


# ---------------------------------------------------------------------- bounded requests


def test_requests_past_max_partitions_per_request_are_refused_at_once(cluster: Cluster) -> None:
    admin = cluster.admin()
    name = f"huge-{uuid.uuid4().hex[:6]}"
    started = time.monotonic()
    with pytest.raises(Exception) as refused:
        admin.create_topics([NewTopic(name, 32769, 1)], operation_timeout=20)[name].result(20)
    assert refused.value.args[0].code() == KafkaError.INVALID_PARTITIONS
    topic = cluster.topic(rf=1)
    with pytest.raises(Exception) as grown:
        # past the broker's limit, inside librdkafka's own (at most 100000)
        admin.create_partitions([NewPartitions(topic, 50_000)], validate_only=True)[topic].result(20)
    assert grown.value.args[0].code() == KafkaError.INVALID_PARTITIONS
    a, b = f"a-{uuid.uuid4().hex[:6]}", f"b-{uuid.uuid4().hex[:6]}"
    futures = admin.create_topics([NewTopic(a, 600, 1), NewTopic(b, 600, 1)], validate_only=True)
    futures[a].result(20)
    with pytest.raises(Exception) as over_budget:
        futures[b].result(20)
    assert over_budget.value.args[0].code() == KafkaError.POLICY_VIOLATION
    assert time.monotonic() - started < 5
    assert not cluster.zk.exists(f"/brokers/topics/{name}")


# ---------------------------------------------------------------------- startup errors


def _logbus(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "broker.cli", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=timeout)


@pytest.mark.parametrize("problem", ["port in use", "unwritable log dir", "zookeeper down"])
def test_startup_failures_are_one_line(cluster: Cluster, tmp_path: Path, problem: str) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    props = {
        "broker.id": "9",
        "listeners": f"PLAINTEXT://127.0.0.1:{free_port()}",
        "log.dirs": str(tmp_path / "data"),
        "zookeeper.connect": cluster.zk.connect,
        "zookeeper.connection.timeout.ms": "1500",
    }
    props.update({
        "port in use": {"listeners": f"PLAINTEXT://{cluster.brokers[0].bootstrap}"},
        "unwritable log dir": {"log.dirs": str(blocker / "data")},
        "zookeeper down": {"zookeeper.connect": f"127.0.0.1:{free_port()}"},
    }[problem])
    config = tmp_path / "server.properties"
    config.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
    out = _logbus("server-start", str(config))
    assert out.returncode == 1
    everything = out.stdout + out.stderr
    assert "Traceback" not in everything, everything
    errors = [line for line in out.stderr.splitlines() if line.strip()]
    assert len(errors) == 1 and errors[0].startswith("logbus server-start: error: broker 9 failed to start"), everything


# ---------------------------------------------------------------------- partition reassignment


def test_reassign_partitions_under_idempotent_produce_loses_and_duplicates_nothing(cluster: Cluster, tmp_path: Path) -> None:
    import threading

    name = f"move-{uuid.uuid4().hex[:6]}"
    cluster.admin().create_topics([NewTopic(name, 2, replica_assignment=[[1], [1]])], operation_timeout=20)[name].result(30)
    acked: list[bytes] = []
    stop = threading.Event()

    def produce() -> None:
        # one request in flight: see tests/admin/test_grow.py's producer (librdkafka issue 4953)
        producer = Producer({"bootstrap.servers": cluster.bootstrap, "enable.idempotence": True, "acks": "all",
                             "linger.ms": 2, "max.in.flight.requests.per.connection": 1})

        def delivered(err, msg) -> None:
            if err is None:
                acked.append(msg.value())

        i = 0
        while not stop.is_set():
            producer.produce(name, value=b"r%06d" % i, partition=i % 2, on_delivery=delivered)
            producer.poll(0.005)
            i += 1
        assert producer.flush(30) == 0

    producing = threading.Thread(target=produce, daemon=True)
    producing.start()
    wait_until(lambda: len(acked) > 50, 20, what="records acknowledged before the move")
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [{"topic": name, "partition": 0, "replicas": [2]},
                                                             {"topic": name, "partition": 1, "replicas": [2, 1]}]}))
    started = _logbus("reassign-partitions", "--zookeeper", cluster.zk.connect, "--execute",
                      "--reassignment-json-file", str(plan), "--throttle", "4000000")
    assert started.returncode == 0 and "Successfully started" in started.stdout, started.stderr
    assert "throttle limit was set to 4000000 B/s" in started.stdout
    throttled = cluster.zk.entity_config("topics", name)  # the old replicas lead, the new ones follow, throttled
    assert (throttled["leader.replication.throttled.replicas"], throttled["follower.replication.throttled.replicas"]) == (
        "0:1,1:1", "0:2,1:2")
    assert cluster.zk.entity_config("brokers", "2")["follower.replication.throttled.rate"] == "4000000"
    verify = ["reassign-partitions", "--zookeeper", cluster.zk.connect, "--verify", "--reassignment-json-file", str(plan)]
    reports: list[str] = []

    def verified() -> bool:
        out = _logbus(*verify)
        reports.append(out.stdout)
        return out.returncode == 0

    wait_until(verified, 30, interval=0.5, what="--verify reporting completion")
    assert "completed successfully" in reports[-1] and "Throttle was removed." in reports[-1]
    assert "follower.replication.throttled.replicas" not in cluster.zk.entity_config("topics", name)
    assert "follower.replication.throttled.rate" not in cluster.zk.entity_config("brokers", "2")
    wait_until(lambda: len(acked) > 50 + 50, 20, what="records acknowledged after the move")
    stop.set()
    producing.join(30)
    assert cluster.zk.topic_assignment(name) == {0: [2], 1: [2, 1]}

    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": f"check-{name}", "auto.offset.reset": "earliest",
                         "enable.auto.commit": False})
    consumer.assign([TopicPartition(name, 0, 0), TopicPartition(name, 1, 0)])
    seen: list[bytes] = []
    deadline = time.monotonic() + 30
    while len(seen) < len(acked) and time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is not None and msg.error() is None:
            seen.append(msg.value())
    consumer.close()
    assert sorted(seen) == sorted(acked), "every acknowledged record once, nothing else"
    with BrokerConnection.from_address(cluster.brokers[0].bootstrap) as conn:
        dirs = conn.request(ApiKey.DESCRIBE_LOG_DIRS, 1, {"topics": [{"topic": name, "partitions": [0, 1]}]})
    assert sorted(p["partition_index"] for r in dirs["results"] for t in r["topics"] for p in t["partitions"]) == [1]


# ---------------------------------------------------------------------- leader elections


def test_preferred_leader_election_with_logbus_and_librdkafka(cluster: Cluster) -> None:
    from confluent_kafka import ElectionType

    name = f"elect-{uuid.uuid4().hex[:6]}"
    cluster.admin().create_topics([NewTopic(name, 2, replica_assignment=[[1, 2], [1, 2]])], operation_timeout=20)[name].result(30)
    cluster.produce(name, 5)
    zk = cluster.zk
    wait_until(lambda: all(sorted(zk.partition_state(name, p).isr) == [1, 2] for p in (0, 1)), 20, what="both in the isr")
    for p in (0, 1):  # as after a failover: broker 2 leads although broker 1 is preferred
        s = zk.partition_state(name, p)
        zk.set_partition_state(name, p, 2, s.leader_epoch + 1, s.isr, s.controller_epoch, version=s.zk_version)
    out = _logbus("leader-election", "--bootstrap-server", cluster.bootstrap, "--election-type", "preferred",
                  "--topic", name, "--partition", "0")
    assert out.returncode == 0 and f"Successfully completed leader election (PREFERRED) for partitions {name}-0" in out.stdout, \
        out.stdout + out.stderr
    assert zk.partition_state(name, 0).leader == 1
    result = cluster.admin().elect_leaders(ElectionType.PREFERRED, [TopicPartition(name, 1)]).result(30)
    assert list(result.values()) == [None] and zk.partition_state(name, 1).leader == 1
    unclean = cluster.admin().elect_leaders(ElectionType.UNCLEAN, [TopicPartition(name, 1)]).result(30)
    [not_needed] = unclean.values()
    assert not_needed is not None and not_needed.code() == KafkaError.ELECTION_NOT_NEEDED
    cluster.produce(name, 5)  # the elected leaders serve


def test_acl_apis_answer_security_disabled_without_an_authorizer(cluster: Cluster) -> None:
    from confluent_kafka.admin import AclBinding, AclOperation, AclPermissionType, ResourcePatternType, ResourceType
    from kafka.admin import ACLFilter, ACLOperation, ACLPermissionType, KafkaAdminClient, ResourcePatternFilter
    from kafka.admin import ACLResourcePatternType as Pattern
    from kafka.admin import ResourceType as KpResource
    from kafka.errors import SecurityDisabledError

    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap)
    try:
        with pytest.raises(SecurityDisabledError):
            admin.describe_acls(ACLFilter(None, "*", ACLOperation.ANY, ACLPermissionType.ANY,
                                          ResourcePatternFilter(KpResource.ANY, None, Pattern.ANY)))
    finally:
        admin.close()
    binding = AclBinding(ResourceType.TOPIC, "t", ResourcePatternType.LITERAL, "User:alice", "*", AclOperation.READ,
                         AclPermissionType.ALLOW)
    with pytest.raises(Exception) as refused:
        cluster.admin().create_acls([binding], request_timeout=20)[binding].result(20)
    assert refused.value.args[0].code() == KafkaError.SECURITY_DISABLED
