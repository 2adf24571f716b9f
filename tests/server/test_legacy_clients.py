"""Every client era against one broker: librdkafka in 0.8 and 0.10 mode (message formats v0 and
v1, converted up on produce and down on fetch), kafka-python pinned to old api_versions, raw
requests for every advertised API version, and Kafka's produce-path validation.

One broker (module scope) serves every test here, to keep the suite's wall time small."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator

import pytest
from confluent_kafka import TIMESTAMP_CREATE_TIME, TIMESTAMP_NOT_AVAILABLE, Consumer, Producer, TopicPartition
from kafka import KafkaConsumer, KafkaProducer
from kafka import TopicPartition as KTopicPartition

from broker.client.connection import BrokerConnection
from broker.cluster.local import BrokerProcess
from broker.cluster.net import free_port
from broker.protocol.errors import ErrorCode
from broker.protocol.messages import ApiKey
from broker.protocol.records import decode_batches, encode_batch, encode_message_set
from broker.protocol.records import layout as L
from tests.scraping import scrape
from tests.teardown import delete_znodes

pytestmark = pytest.mark.integration

LIBRDKAFKA_CODECS = ["none", "gzip", "snappy", "lz4"]  # what a 0.8/0.10 client knows
MODES = {"0.8": {"api.version.request": False, "broker.version.fallback": "0.8.2.2"},
         "0.10": {"api.version.request": False, "broker.version.fallback": "0.10.0.1"},
         "modern": {}}
COUNT = 30


@pytest.fixture(scope="module")
def legacy_broker(zookeeper, tmp_path_factory) -> Iterator[BrokerProcess]:
    chroot = f"/t-{uuid.uuid4().hex[:12]}"
    home = tmp_path_factory.mktemp("legacy-broker")
    props = {"broker.id": "1", "listeners": f"PLAINTEXT://127.0.0.1:{free_port()}", "log.dirs": str(home / "data"),
             "zookeeper.connect": f"{zookeeper.connect_string}{chroot}", "zookeeper.session.timeout.ms": "6000"}
    proc = BrokerProcess(props, home, {"group.initial.rebalance.delay.ms": "0", "metrics.port": str(free_port())})
    proc.start()
    try:
        yield proc
    finally:
        proc.stop()
        delete_znodes(zookeeper.connect_string, [chroot])


def _topic(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def _connection(broker: BrokerProcess) -> BrokerConnection:
    return BrokerConnection.from_address(broker.bootstrap, timeout=20)


def _create(broker: BrokerProcess, topic: str, **configs: str) -> None:
    with _connection(broker) as conn:
        answer = conn.request(ApiKey.CREATE_TOPICS, 2, {"topics": [{
            "name": topic, "num_partitions": 1, "replication_factor": 1, "assignments": [],
            "configs": [{"name": k.replace("_", "."), "value": v} for k, v in configs.items()]}], "timeout_ms": 15000})
    assert answer["topics"][0]["error_code"] == ErrorCode.NONE, answer
    _wait_leader(broker, topic)


def _wait_leader(broker: BrokerProcess, topic: str) -> None:
    deadline = time.monotonic() + 20
    with _connection(broker) as conn:
        while time.monotonic() < deadline:
            meta = conn.request(ApiKey.METADATA, 1, {"topics": [{"name": topic}]})
            parts = meta["topics"][0]["partitions"]
            if parts and all(p["leader_id"] >= 0 for p in parts):
                return
            time.sleep(0.05)
    raise AssertionError(f"{topic} has no leader")


def _produce(bootstrap: str, mode: str, topics: list[str], codec: str, count: int = COUNT,
             t0: int = 1_700_000_000_000) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "compression.codec": codec, "linger.ms": 5, **MODES[mode]})
    errors: list = []
    for topic in topics:
        for i in range(count):
            producer.produce(topic, key=b"k%d" % i, value=b"%s-%d" % (topic.encode(), i), timestamp=t0 + i,
                             on_delivery=lambda err, _m: err and errors.append(err))
    assert producer.flush(20) == 0
    assert not errors, errors


def _consume(bootstrap: str, mode: str, topics: list[str], count: int, group: str | None = None) -> dict[str, list]:
    """``count`` records of each topic's partition 0: from offset 0, or with ``group`` from its
    committed offsets, which are then moved past what was read."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group or _topic("g"), "enable.auto.commit": False,
                         "auto.offset.reset": "earliest", **MODES[mode]})
    got: dict[str, list] = {t: [] for t in topics}
    try:
        consumer.assign([TopicPartition(t, 0) if group else TopicPartition(t, 0, 0) for t in topics])
        deadline = time.monotonic() + 20
        while any(len(m) < count for m in got.values()) and time.monotonic() < deadline:
            for m in consumer.consume(1000, timeout=0.2):
                assert m.error() is None, m.error()
                got[m.topic()].append(m)
        if group:
            positions = [TopicPartition(t, 0, ms[-1].offset() + 1) for t, ms in got.items() if ms]
            consumer.commit(offsets=positions, asynchronous=False)
            committed = consumer.committed([TopicPartition(t, 0) for t in topics], timeout=10)
            assert [c.offset for c in committed] == [p.offset for p in positions]
    finally:
        consumer.close()
    return got


@pytest.mark.parametrize("mode", ["0.8", "0.10"])
def test_librdkafka_old_modes_every_codec_both_ways(legacy_broker, mode: str) -> None:
    bootstrap = legacy_broker.bootstrap
    topics = {codec: _topic(f"rdk{mode.replace('.', '')}-{codec}") for codec in LIBRDKAFKA_CODECS}
    for topic in topics.values():
        _create(legacy_broker, topic)
    for codec, topic in topics.items():
        _produce(bootstrap, mode, [topic], codec)
    group = _topic("g")
    old = _consume(bootstrap, mode, list(topics.values()), COUNT, group)
    modern = _consume(bootstrap, "modern", list(topics.values()), COUNT)
    for topic, messages in old.items():
        assert [m.value() for m in messages] == [b"%s-%d" % (topic.encode(), i) for i in range(COUNT)]
        assert [m.offset() for m in messages] == list(range(COUNT))
        assert messages[3].key() == b"k3"
        # message format v1 carries the producer's timestamps; v0 has none
        kind, stamp = messages[3].timestamp()
        if mode == "0.10":
            assert (kind, stamp) == (TIMESTAMP_CREATE_TIME, 1_700_000_000_003)
        else:
            assert kind == TIMESTAMP_NOT_AVAILABLE
        assert [m.value() for m in modern[topic]] == [m.value() for m in messages]
        # up-converted, a v0 message keeps "no timestamp" (-1), as Kafka's up-conversion does
        assert modern[topic][3].timestamp()[1] == (stamp if mode == "0.10" else -1)
    # the reverse: what a modern client writes (lz4, headers), the old one reads from its commit
    _produce(bootstrap, "modern", list(topics.values()), "lz4", count=10, t0=1_700_000_100_000)
    resumed = _consume(bootstrap, mode, list(topics.values()), 10, group)
    for topic, messages in resumed.items():
        assert [m.offset() for m in messages] == list(range(COUNT, COUNT + 10))
        assert messages[0].value() == b"%s-0" % topic.encode()


@pytest.mark.parametrize("api_version", [(0, 8, 2), (0, 9), (0, 10, 1), (1, 0)])
def test_kafka_python_pinned_versions_produce_consume_commit_resume(legacy_broker, api_version) -> None:
    bootstrap = legacy_broker.bootstrap
    topic = _topic("kp" + "".join(map(str, api_version)))
    _create(legacy_broker, topic)
    producer = KafkaProducer(bootstrap_servers=bootstrap, api_version=api_version, compression_type="gzip", linger_ms=5)
    try:
        for i in range(20):
            producer.send(topic, key=b"k%d" % i, value=b"v%d" % i, partition=0)
        producer.flush(20)
    finally:
        producer.close()
    group = _topic("kpg")
    grouped = api_version >= (0, 9)

    def consumer() -> KafkaConsumer:
        c = KafkaConsumer(bootstrap_servers=bootstrap, api_version=api_version, group_id=group, enable_auto_commit=False,
                          auto_offset_reset="earliest", consumer_timeout_ms=15000)
        if grouped:
            c.subscribe([topic])
        else:
            c.assign([KTopicPartition(topic, 0)])
        return c

    def take(c: KafkaConsumer, n: int) -> list:
        out: list = []
        deadline = time.monotonic() + 20
        while len(out) < n and time.monotonic() < deadline:
            for records in c.poll(timeout_ms=500, max_records=n - len(out)).values():
                out += records
        return out

    first = consumer()
    try:
        got = take(first, 12)
        assert [m.value for m in got] == [b"v%d" % i for i in range(12)]
        first.commit()
    finally:
        first.close()
    second = consumer()
    try:
        rest = take(second, 8)
        assert [m.offset for m in rest] == list(range(12, 20))
        assert second.committed(KTopicPartition(topic, 0)) == 12
    finally:
        second.close()


def _produce_raw(broker: BrokerProcess, topic: str, batch: bytes, version: int = 3) -> dict:
    with _connection(broker) as conn:
        answer = conn.request(ApiKey.PRODUCE, version, {"acks": 1, "timeout_ms": 5000, "topic_data": [
            {"name": topic, "partition_data": [{"index": 0, "records": batch}]}]})
    return answer["responses"][0]["partition_responses"][0]


def _log_end(broker: BrokerProcess, topic: str) -> int:
    with _connection(broker) as conn:
        answer = conn.request(ApiKey.LIST_OFFSETS, 1, {"replica_id": -1, "topics": [
            {"name": topic, "partitions": [{"partition_index": 0, "timestamp": -1}]}]})
    return answer["topics"][0]["partitions"][0]["offset"]


def test_validation_on_the_produce_path(legacy_broker) -> None:
    now = int(time.time() * 1000)
    topic = _topic("valid")
    _create(legacy_broker, topic, message_timestamp_difference_max_ms="3600000")
    # a client that writes maxTimestamp = -1: the broker sets it from the records
    batch = bytearray(encode_batch([(None, b"a", None, now - 5000), (None, b"b", None, now - 1000)]))
    L.set_max_timestamp(batch, 0, len(batch), -1)
    assert _produce_raw(legacy_broker, topic, bytes(batch))["error_code"] == ErrorCode.NONE
    consumer = KafkaConsumer(bootstrap_servers=legacy_broker.bootstrap)
    try:
        found = consumer.offsets_for_times({KTopicPartition(topic, 0): now - 3000})[KTopicPartition(topic, 0)]
    finally:
        consumer.close()
    assert (found.offset, found.timestamp) == (1, now - 1000)
    # out of message.timestamp.difference.max.ms: refused, nothing appended
    stale = encode_batch([(None, b"c", None, now), (None, b"d", None, now - 7_200_000)])
    assert _produce_raw(legacy_broker, topic, stale)["error_code"] == ErrorCode.INVALID_TIMESTAMP
    # a header count that disagrees with the records: refused
    lying = bytearray(encode_batch([(None, b"e", None, now), (None, b"f", None, now)]))
    L.INT32.pack_into(lying, L.RECORDS_COUNT_POS, 3)
    L.INT32.pack_into(lying, L.LAST_OFFSET_DELTA_POS, 2)
    lying[L.CRC_POS:L.CRC_POS + 4] = L.compute_crc(lying, 0, len(lying)).to_bytes(4, "big")
    assert _produce_raw(legacy_broker, topic, bytes(lying))["error_code"] == ErrorCode.INVALID_RECORD
    assert _log_end(legacy_broker, topic) == 2
    # a compacted topic refuses a keyless record, and nothing of its batch
    compacted = _topic("compact")
    _create(legacy_broker, compacted, cleanup_policy="compact")
    mixed = encode_batch([(b"k", b"v", None, now), (None, b"no key", None, now)])
    assert _produce_raw(legacy_broker, compacted, mixed)["error_code"] == ErrorCode.INVALID_RECORD
    assert _produce_raw(legacy_broker, compacted, encode_batch([(b"k", b"v", None, now)]))["error_code"] == 0
    assert _log_end(legacy_broker, compacted) == 1


def _bodies(topic: str, version_of: dict) -> dict:
    """A request body per API (the schema fills what a version lacks)."""
    now = int(time.time() * 1000)

    def records(api_version: int) -> bytes:
        if api_version < 3:
            return encode_message_set([(b"k", b"raw", None, now)], magic=0 if api_version < 2 else 1)
        return encode_batch([(b"k", b"raw", None, now)])

    one_partition = {"partition_index": 0}
    return {
        ApiKey.PRODUCE: lambda v: {"acks": 1, "timeout_ms": 5000, "topic_data": [
            {"name": topic, "partition_data": [{"index": 0, "records": records(v)}]}]},
        ApiKey.FETCH: lambda v: {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 1 << 20, "topics": [
            {"topic": topic, "partitions": [{"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 20}]}]},
        ApiKey.LIST_OFFSETS: lambda v: {"replica_id": -1, "topics": [
            {"name": topic, "partitions": [{**one_partition, "timestamp": -1, "max_num_offsets": 3}]}]},
        ApiKey.METADATA: lambda v: {"topics": [{"name": topic}]},
        ApiKey.OFFSET_COMMIT: lambda v: {"group_id": f"raw-{topic}", "generation_id": -1, "member_id": "", "topics": [
            {"name": topic, "partitions": [{**one_partition, "committed_offset": v + 1, "committed_metadata": "m"}]}]},
        ApiKey.OFFSET_FETCH: lambda v: {"group_id": f"raw-{topic}", "topics": [{"name": topic, "partition_indexes": [0]}]},
        ApiKey.FIND_COORDINATOR: lambda v: {"key": f"raw-{topic}", "key_type": 0},
        ApiKey.DESCRIBE_CONFIGS: lambda v: {"resources": [
            {"resource_type": 2, "resource_name": topic, "configuration_keys": None}]},
        ApiKey.CREATE_TOPICS: lambda v: {"topics": [{"name": f"{topic}-c{v}", "num_partitions": 1, "replication_factor": 1,
                                                     "assignments": [], "configs": []}], "timeout_ms": 15000},
        ApiKey.DELETE_TOPICS: lambda v: {"topic_names": [f"{topic}-c{v}"], "timeout_ms": 15000},
        ApiKey.DESCRIBE_GROUPS: lambda v: {"groups": [f"raw-{topic}"]},
        ApiKey.SASL_HANDSHAKE: lambda v: {"mechanism": "PLAIN"},
    }


def _errors(answer: object) -> list[int]:
    """Every error code anywhere in a response."""
    if isinstance(answer, dict):
        return [c for k, v in answer.items() for c in ([v] if k == "error_code" else _errors(v))]
    if isinstance(answer, list):
        return [c for item in answer for c in _errors(item)]
    return []


def test_every_advertised_api_version_answers(legacy_broker) -> None:
    topic = _topic("raw")
    _create(legacy_broker, topic)
    with _connection(legacy_broker) as conn:
        advertised = conn.request(ApiKey.API_VERSIONS, 0, {})["api_keys"]
    versions = {ApiKey(a["api_key"]): (a["min_version"], a["max_version"]) for a in advertised}
    assert versions[ApiKey.PRODUCE][0] == versions[ApiKey.FETCH][0] == versions[ApiKey.LIST_OFFSETS][0] == 0
    assert versions[ApiKey.OFFSET_COMMIT][0] == versions[ApiKey.OFFSET_FETCH][0] == versions[ApiKey.DESCRIBE_CONFIGS][0] == 0
    bodies = _bodies(topic, versions)
    # CreateTopics before DeleteTopics, Produce before Fetch, OffsetCommit before OffsetFetch
    for key in sorted(versions):
        lo, hi = versions[key]
        for version in range(lo, hi + 1):
            body = bodies.get(key, lambda v: {})(version)
            with _connection(legacy_broker) as conn:  # SASL and group APIs change a connection's state
                answer = conn.request(key, version, body)
            assert answer is not None
            assert ErrorCode.UNSUPPORTED_VERSION not in _errors(answer), (key.name, version, answer)
            if key in (ApiKey.PRODUCE, ApiKey.CREATE_TOPICS, ApiKey.DELETE_TOPICS, ApiKey.DESCRIBE_CONFIGS,
                       ApiKey.METADATA, ApiKey.OFFSET_COMMIT, ApiKey.LIST_OFFSETS):
                assert set(_errors(answer)) <= {ErrorCode.NONE}, (key.name, version, answer)
            if key == ApiKey.FETCH:
                data = answer["responses"][0]["partitions"][0]["records"]
                magics = {d.header.magic for d in decode_batches(bytes(data))}
                assert magics == {0 if version < 2 else 1 if version < 4 else 2}, (version, magics)
            if key == ApiKey.LIST_OFFSETS and version == 0:
                offsets = answer["topics"][0]["partitions"][0]["old_style_offsets"]
                assert offsets[0] == versions[ApiKey.PRODUCE][1] + 1  # one record per Produce version
            if key == ApiKey.OFFSET_FETCH:
                part = answer["topics"][0]["partitions"][0]
                assert part["committed_offset"] == versions[ApiKey.OFFSET_COMMIT][1] + 1
    # Produce v0-2 and Fetch v0-3 above were converted, and counted
    scraped = scrape(int(legacy_broker.overrides["metrics.port"]))
    assert scraped[f'logbus_topic_produce_message_conversions_total{{topic="{topic}"}}'] == 3
    assert f'logbus_topic_fetch_message_conversions_total{{topic="{topic}"}}' in scraped
