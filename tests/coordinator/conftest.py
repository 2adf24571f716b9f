"""Helpers for consumer-group tests: brokers with no initial rebalance delay, topics, and
consumers of every client library running in threads (or, to be killed, in processes)."""

from __future__ import annotations

import threading
import uuid

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from tests.starting import start_together
from tests.waiting import wait_until  # noqa: F401  (re-exported to the tests here)

GROUP_BROKER = {"group.initial.rebalance.delay.ms": "0"}
SESSION_MS = 6000




def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def create_topic(bootstrap: str, partitions: int, rf: int = 1) -> str:
    topic = unique("cg")
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, rf)], operation_timeout=20)[topic].result(30)
    return topic


def produce(bootstrap: str, topic: str, partitions: int, per_partition: int, start: int = 0) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for p in range(partitions):
        for i in range(start, start + per_partition):
            producer.produce(topic, value=f"{p}:{i}".encode(), partition=p)
    assert producer.flush(30) == 0


def group_topic(bootstrap: str, partitions: int, per_partition: int, group_prefix: str, rf: int = 1) -> tuple[str, str]:
    """A new topic of ``partitions`` holding ``per_partition`` records each ("p:i"), and a new group name."""
    topic = create_topic(bootstrap, partitions, rf)
    produce(bootstrap, topic, partitions, per_partition)
    return topic, unique(group_prefix)


def three_brokers(broker_factory, overrides: dict) -> tuple[list, str]:
    """Brokers 1, 2 and 3 of one cluster, and their bootstrap string."""
    brokers = start_together([broker_factory(overrides=overrides, broker_id=i, start=False) for i in (1, 2, 3)])
    return brokers, ",".join(b.bootstrap for b in brokers)


@pytest.fixture
def group_broker(broker_factory):
    return broker_factory(overrides=GROUP_BROKER)


class Member(threading.Thread):
    """A consumer polling in a thread: records its assignment and what it read."""

    def __init__(self, make, poll, assignment, close) -> None:
        super().__init__(daemon=True)
        self._make, self._poll, self._assignment, self._close = make, poll, assignment, close
        self.consumer = None
        self.records: list[tuple[int, int, bytes]] = []  # (partition, offset, value)
        self.assigned: frozenset[int] = frozenset()
        self.errors: list[BaseException] = []
        self._halt = threading.Event()
        self._ready = threading.Event()

    def run(self) -> None:
        try:
            self.consumer = self._make()
            self._ready.set()
            while not self._halt.is_set():
                for rec in self._poll(self.consumer):
                    self.records.append(rec)
                self.assigned = frozenset(self._assignment(self.consumer))
        except BaseException as exc:  # surfaced by the test
            self.errors.append(exc)
        finally:
            self._ready.set()
            if self.consumer is not None:
                try:
                    self._close(self.consumer)
                except Exception as exc:
                    self.errors.append(exc)

    def leave(self, timeout: float = 30) -> None:
        self._halt.set()
        self.join(timeout)
        assert not self.is_alive()
        assert not self.errors, self.errors


def confluent_member(bootstrap: str, topic: str, group: str, **extra) -> Member:
    from confluent_kafka import Consumer

    config = {
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "session.timeout.ms": SESSION_MS,
        "heartbeat.interval.ms": 500,
        "auto.offset.reset": "earliest",
        "enable.auto.commit": True,
        "auto.commit.interval.ms": 200,
        "fetch.wait.max.ms": 100,
        "topic.metadata.refresh.interval.ms": 2000,
        **extra,
    }

    def make():
        c = Consumer(config)
        c.subscribe([topic])
        return c

    def poll(c):
        msg = c.poll(0.1)
        if msg is None or msg.error():
            return []
        return [(msg.partition(), msg.offset(), msg.value())]

    m = Member(make, poll, lambda c: {tp.partition for tp in c.assignment()}, lambda c: c.close())
    m.start()
    return m


def kafka_python_member(bootstrap: str, topic: str, group: str, **extra) -> Member:
    from kafka import KafkaConsumer

    def make():
        consumer = KafkaConsumer(
            bootstrap_servers=bootstrap,
            group_id=group,
            session_timeout_ms=SESSION_MS,
            heartbeat_interval_ms=500,
            auto_offset_reset="earliest",
            enable_auto_commit=True,
            auto_commit_interval_ms=200,
            fetch_max_wait_ms=100,
            metadata_max_age_ms=2000,
            **extra,
        )
        consumer.subscribe([topic])
        # Metadata after subscribing, before the first poll joins. kafka-python 3.0.12, leading a
        # group before its metadata has the topic, assigns nothing and never rejoins ("No
        # partition metadata for topic"). And its snapshot of the subscribed partitions is taken
        # at each metadata update only once subscribed: fetched before, the snapshot stays empty,
        # the leader rejoins by itself at the next refresh, and a join answered after the
        # poll(timeout_ms=100) that started it is never collected (the member stays rebalancing,
        # fails its commits locally, and the coordinator expires it).
        consumer.topics()
        return consumer

    def poll(c):
        out = []
        for tp, msgs in c.poll(timeout_ms=100).items():
            out += [(tp.partition, m.offset, m.value) for m in msgs]
        return out

    m = Member(make, poll, lambda c: {tp.partition for tp in c.assignment()}, lambda c: c.close())
    m.start()
    return m


class AioMember(Member):
    """aiokafka's consumer, on an event loop of its own in the member's thread."""

    def __init__(self, bootstrap: str, topic: str, group: str, **extra) -> None:
        import asyncio

        self.loop = asyncio.new_event_loop()
        self._spec = (bootstrap, topic, group, extra)
        run = self.loop.run_until_complete
        super().__init__(lambda: run(self._aio_start()), lambda c: run(self._aio_poll(c)),
                         lambda c: {tp.partition for tp in c.assignment()}, lambda c: run(c.stop()))

    async def _aio_start(self):
        from aiokafka import AIOKafkaConsumer

        bootstrap, topic, group, extra = self._spec
        c = AIOKafkaConsumer(
            topic, bootstrap_servers=bootstrap, group_id=group, session_timeout_ms=SESSION_MS,
            heartbeat_interval_ms=500, auto_offset_reset="earliest", enable_auto_commit=True,
            auto_commit_interval_ms=200, fetch_max_wait_ms=100, metadata_max_age_ms=2000, **extra,
        )
        await c.start()
        return c

    async def _aio_poll(self, c):
        out = []
        for tp, msgs in (await c.getmany(timeout_ms=100)).items():
            out += [(tp.partition, m.offset, m.value) for m in msgs]
        return out


def aiokafka_member(bootstrap: str, topic: str, group: str, **extra) -> Member:
    m = AioMember(bootstrap, topic, group, **extra)
    m.start()
    return m


MEMBER_KINDS = {"confluent": confluent_member, "kafka-python": kafka_python_member, "aiokafka": aiokafka_member}


def settled(members: list[Member], partitions: int) -> bool:
    """Every partition owned by exactly one live member."""
    owned = [p for m in members for p in m.assigned]
    return sorted(owned) == list(range(partitions))
