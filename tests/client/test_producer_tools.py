"""`logbus console-producer` and `logbus producer-perf-test` against a real broker."""

from __future__ import annotations

import io
import re
import sys
import time
import uuid

import pytest
from confluent_kafka import Consumer, TopicPartition

from broker.cli import main
from broker.client.admin import AdminClient
from broker.cluster.net import free_port


@pytest.fixture
def broker(module_broker):
    """The module's one broker (tests/conftest.py): every test here creates topics of its own on it,
    and none stops or reconfigures it."""
    return module_broker


def consume(bootstrap: str, topic: str, count: int, timeout: float = 20) -> list:
    """Every record of partition 0, read with confluent-kafka."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused", "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, 0, 0)])
    messages: list = []
    deadline = time.monotonic() + timeout
    try:
        while len(messages) < count and time.monotonic() < deadline:
            messages += [m for m in consumer.consume(1000, 0.2) if not m.error()]
    finally:
        consumer.close()
    return messages


def _stdin(monkeypatch, data: bytes) -> None:
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data)))


def test_console_producer_keys_codec_and_properties(broker, monkeypatch, capsys, tmp_path):
    topic = f"console-{uuid.uuid4().hex[:8]}"
    with AdminClient(broker.bootstrap) as admin:
        admin.create_topic(topic, 1, 1)
    config = tmp_path / "producer.properties"
    config.write_text("acks=1\nlinger.ms=1\nclient.id=from-file\n")
    _stdin(monkeypatch, b"k1:hello\nk2:world:with:colons\n:empty-key\n")
    code = main([
        "console-producer", "--broker-list", broker.bootstrap, "--topic", topic,
        "--property", "parse.key=true", "--property", "key.separator=:",
        "--compression-codec", "lz4", "--producer.config", str(config),
        "--producer-property", "retries=3", "--request-required-acks", "all", "--sync",
    ])
    assert code == 0, capsys.readouterr().err
    got = consume(broker.bootstrap, topic, 3)
    assert [(m.key(), m.value()) for m in got] == [(b"k1", b"hello"), (b"k2", b"world:with:colons"), (b"", b"empty-key")]


def test_console_producer_plain_lines_and_errors(broker, monkeypatch, capsys):
    topic = f"console-{uuid.uuid4().hex[:8]}"
    _stdin(monkeypatch, b"one\ntwo\n")
    assert main(["console-producer", "--bootstrap-server", broker.bootstrap, "--topic", topic]) == 0
    assert [(m.key(), m.value()) for m in consume(broker.bootstrap, topic, 2)] == [(None, b"one"), (None, b"two")]

    _stdin(monkeypatch, b"no-separator\n")
    capsys.readouterr()
    code = main(["console-producer", "--bootstrap-server", broker.bootstrap, "--topic", topic, "--property", "parse.key=true"])
    err = capsys.readouterr().err
    assert code == 1 and err.count("\n") == 1 and "No key separator found on line number 1" in err

    _stdin(monkeypatch, b"x\n")
    dead = f"127.0.0.1:{free_port()}"
    code = main(["console-producer", "--bootstrap-server", dead, "--topic", topic, "--max-block-ms", "500"])
    err = capsys.readouterr().err
    assert code == 1 and err.count("\n") == 1 and "cannot connect" in err and "Traceback" not in err


SUMMARY = re.compile(
    r"^(\d+) records sent, [\d.]+ records/sec \([\d.]+ MB/sec\), [\d.]+ ms avg latency, [\d.]+ ms max latency, "
    r"\d+ ms 50th, \d+ ms 95th, \d+ ms 99th, \d+ ms 99.9th\.$"
)


def test_producer_perf_test_prints_kafkas_summary(broker, capsys, tmp_path):
    topic = f"perf-{uuid.uuid4().hex[:8]}"
    config = tmp_path / "perf.properties"
    config.write_text(f"bootstrap.servers={broker.bootstrap}\n")
    code = main([
        "producer-perf-test", "--topic", topic, "--num-records", "20000", "--record-size", "100",
        "--throughput", "-1", "--producer-props", "acks=1", "compression.type=snappy", "--producer.config", str(config),
    ])
    out = capsys.readouterr().out.strip().splitlines()
    assert code == 0
    match = SUMMARY.match(out[-1])
    assert match and int(match.group(1)) == 20000, out[-1]
    assert len(consume(broker.bootstrap, topic, 20000, timeout=30)) == 20000


def test_producer_perf_test_throttles_and_reports_bad_input(broker, capsys):
    topic = f"perf-{uuid.uuid4().hex[:8]}"
    code = main([
        "producer-perf-test", "--topic", topic, "--num-records", "300", "--record-size", "10",
        "--throughput", "1000", "--producer-props", f"bootstrap.servers={broker.bootstrap}",
    ])
    out = capsys.readouterr().out.strip().splitlines()
    assert code == 0
    rate = float(re.search(r"records sent, ([\d.]+) records/sec", out[-1]).group(1))
    assert rate < 1300
    code = main(["producer-perf-test", "--topic", topic, "--num-records", "1", "--record-size", "1", "--throughput", "-1"])
    err = capsys.readouterr().err
    assert code == 1 and "bootstrap.servers" in err
    code = main([
        "producer-perf-test", "--topic", topic, "--num-records", "1", "--record-size", "1", "--throughput", "-1",
        "--producer-props", f"bootstrap.servers={broker.bootstrap}", "acks=maybe",
    ])
    err = capsys.readouterr().err
    assert code == 1 and "acks" in err and err.count("\n") == 1
