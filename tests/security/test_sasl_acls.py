"""Logins and ACLs together, as an operator runs them: a SASL_SSL listener with an authorizer;
the admin (a super user, PLAIN) creates topics and ACLs with confluent-kafka's AdminClient; alice
(SCRAM-SHA-256) may write and read her prefix and her group only; bob (SCRAM-SHA-512) may do
nothing; a wrong password gets no further than the login."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)

from broker.cluster.embedded_zk import EmbeddedZooKeeper
from tests.security.conftest import start_sasl_ssl_broker
from tests.teardown import delete_znodes

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def guarded(zookeeper: EmbeddedZooKeeper, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    broker = start_sasl_ssl_broker(
        zookeeper, tmp_path_factory.mktemp("guarded"),
        **{"authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
           "super.users": "User:admin;User:ANONYMOUS"})  # ANONYMOUS: the plaintext inter-broker listener
    base = {"bootstrap.servers": broker.address, "security.protocol": "SASL_SSL", "ssl.ca.location": str(broker.ca)}
    try:
        yield {
            "admin": {**base, "sasl.mechanism": "PLAIN", "sasl.username": "admin", "sasl.password": "admin-secret"},
            "alice": {**base, "sasl.mechanism": "SCRAM-SHA-256", "sasl.username": "alice",
                      "sasl.password": "alice-secret"},
            "bob": {**base, "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "bob", "sasl.password": "bob-secret"},
        }
    finally:
        broker.process.stop()
        delete_znodes(zookeeper.connect_string, [broker.chroot])


def _produce(props: dict, topic: str, n: int = 5) -> list:
    producer = Producer({**props, "acks": "all", "message.timeout.ms": 10000})
    errors: list = []
    for i in range(n):
        producer.produce(topic, b"v%d" % i, on_delivery=lambda err, msg: errors.append(err))
    producer.flush(20)
    return errors


def test_alice_gets_her_prefix_and_group_bob_and_a_wrong_password_get_nothing(guarded: dict[str, Any]) -> None:
    suffix = uuid.uuid4().hex[:6]
    mine, other, group = f"alice-{suffix}", f"other-{suffix}", f"alice-g-{suffix}"
    admin = AdminClient(guarded["admin"])
    for f in admin.create_topics([NewTopic(mine, 1, 1), NewTopic(other, 1, 1)], operation_timeout=20).values():
        f.result(30)
    bindings = [
        AclBinding(ResourceType.TOPIC, "alice-", ResourcePatternType.PREFIXED, "User:alice", "*", op,
                   AclPermissionType.ALLOW) for op in (AclOperation.WRITE, AclOperation.READ)
    ] + [AclBinding(ResourceType.GROUP, group, ResourcePatternType.LITERAL, "User:alice", "*", AclOperation.READ,
                    AclPermissionType.ALLOW)]
    for f in admin.create_acls(bindings).values():
        f.result(20)

    assert _produce(guarded["alice"], mine) == [None] * 5
    consumer = Consumer({**guarded["alice"], "group.id": group, "auto.offset.reset": "earliest"})
    consumer.subscribe([mine])
    got = []
    try:
        for _ in range(100):
            msg = consumer.poll(0.2)
            if msg is not None and msg.error() is None:
                got.append(msg.value())
            if len(got) == 5:
                break
        consumer.commit(asynchronous=False)
    finally:
        consumer.close()
    assert got == [b"v%d" % i for i in range(5)]

    refused = _produce(guarded["alice"], other, 1)
    assert [e.code() for e in refused] == [KafkaError.TOPIC_AUTHORIZATION_FAILED]
    refused = _produce(guarded["bob"], mine, 1)
    assert [e.code() for e in refused] == [KafkaError.TOPIC_AUTHORIZATION_FAILED]
    stranger = Consumer({**guarded["alice"], "group.id": f"not-hers-{suffix}", "auto.offset.reset": "earliest"})
    stranger.subscribe([mine])
    try:
        error = None
        for _ in range(50):
            msg = stranger.poll(0.2)
            if msg is not None and msg.error() is not None:
                error = msg.error()
                break
        assert error is not None and error.code() == KafkaError.GROUP_AUTHORIZATION_FAILED
    finally:
        stranger.close()

    wrong = AdminClient({**guarded["alice"], "sasl.password": "not-her-password"})
    with pytest.raises(KafkaException) as failed:
        wrong.list_topics(timeout=5)
    assert failed.value.args[0].code() in (KafkaError._AUTHENTICATION, KafkaError._TRANSPORT,
                                            KafkaError.SASL_AUTHENTICATION_FAILED)
    # the admin sees every topic; alice's metadata lists only what she may describe
    assert {mine, other} <= set(admin.list_topics(timeout=10).topics)
    visible = set(AdminClient(guarded["alice"]).list_topics(timeout=10).topics)
    assert mine in visible and other not in visible
    # what each may do, as AdminClients ask it (Metadata's and DescribeGroups' authorized operations)
    from confluent_kafka import TopicCollection

    alices = AdminClient(guarded["alice"])  # kept alive: a collected client fails its futures
    mine_ops = alices.describe_topics(TopicCollection([mine]), include_authorized_operations=True)
    assert set(mine_ops[mine].result(20).authorized_operations) == {
        AclOperation.READ, AclOperation.WRITE, AclOperation.DESCRIBE}  # Describe: implied by Read and Write
    group_ops = alices.describe_consumer_groups([group], include_authorized_operations=True)
    assert set(group_ops[group].result(20).authorized_operations) == {AclOperation.READ, AclOperation.DESCRIBE}
    cluster = admin.describe_cluster(include_authorized_operations=True).result(20)
    assert {AclOperation.ALTER, AclOperation.DESCRIBE, AclOperation.CREATE, AclOperation.CLUSTER_ACTION} <= set(
        cluster.authorized_operations)  # a super user may do everything
    assert not alices.describe_cluster(include_authorized_operations=True).result(20).authorized_operations
