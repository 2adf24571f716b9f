"""logbus's own clients over SASL_SSL, and what a secured broker refuses: a wrong password, a
plaintext client on a TLS port, a truncated TLS handshake, a SASL exchange out of order, a SCRAM
message of garbage, an expired client certificate, a certificate for another host. Each refusal
is logged once and the broker keeps serving."""

from __future__ import annotations

import json
import socket
import ssl
import struct
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from broker.client.connection import BrokerConnection, BrokerConnectionError
from broker.client.group_consumer import GroupConsumer
from broker.client.producer import Producer
from broker.client.security import ClientSecurity
from broker.protocol.errors import ErrorCode, SaslAuthenticationFailedError
from broker.protocol.header import encode_request_header
from broker.protocol.messages import REQUESTS, RESPONSES, ApiKey
from tests.security.conftest import SecuredBroker
from tests.waiting import wait_until


def scram(secured: SecuredBroker, user: str = "alice", password: str = "alice-secret",
          mechanism: str = "SCRAM-SHA-256") -> dict[str, str]:
    return {"security.protocol": "SASL_SSL", "ssl.truststore.location": str(secured.certs.ca),
            "sasl.mechanism": mechanism, "sasl.username": user, "sasl.password": password}


def _frame(api_key: ApiKey, version: int, body: dict, correlation_id: int = 1) -> bytes:
    payload = encode_request_header(api_key, version, correlation_id, "test") + REQUESTS[api_key].encode_bytes(version, body)
    return struct.pack(">i", len(payload)) + payload


def _read_frame(sock: socket.socket) -> bytes | None:
    """One response frame (without size), None when the broker closed the connection."""
    data = b""
    while len(data) < 4:
        chunk = sock.recv(4 - len(data))
        if not chunk:
            return None
        data += chunk
    (size,) = struct.unpack(">i", data)
    body = b""
    while len(body) < size:
        chunk = sock.recv(size - len(body))
        if not chunk:
            return None
        body += chunk
    return body


def _closed(sock: socket.socket, timeout: float = 5.0) -> bool:
    sock.settimeout(timeout)
    try:
        while True:
            if not sock.recv(65536):
                return True
    except TimeoutError:
        return False  # still open
    except OSError:  # reset, or a TLS alert
        return True


def _tls(secured: SecuredBroker, listener: str) -> ssl.SSLSocket:
    context = ssl.create_default_context(cafile=str(secured.certs.ca))
    raw = socket.create_connection(("127.0.0.1", secured.ports[listener]), timeout=10)
    return context.wrap_socket(raw, server_hostname="127.0.0.1")


def _log_count(secured: SecuredBroker, text: str, wait: float = 3.0, since: int = 0) -> int:
    """Occurrences of ``text`` in the broker's log (from character ``since``: an ephemeral port named in a
    line may have been an earlier connection's too, the broker being shared by the module's tests)."""
    deadline = time.monotonic() + wait
    while True:
        count = secured.log_text()[since:].count(text)
        if count or time.monotonic() > deadline:
            return count
        time.sleep(0.1)


def assert_serving(secured: SecuredBroker) -> None:
    """A SCRAM login over TLS and a Metadata request still work."""
    with BrokerConnection("127.0.0.1", secured.ports["SASL_SSL"], security=ClientSecurity.from_props(scram(secured))) as conn:
        answer: Any = conn.request(ApiKey.METADATA, 1, {"topics": []})
        assert [b["port"] for b in answer["brokers"]] == [secured.ports["SASL_SSL"]]


def test_logbus_producer_and_group_consumer_over_sasl_ssl(secured: SecuredBroker) -> None:
    topic = f"lb-{uuid.uuid4().hex[:8]}"
    props = {"bootstrap.servers": secured.address("SASL_SSL"), **scram(secured, "bob", "bob-secret", "SCRAM-SHA-512")}
    producer = Producer({**props, "acks": "all"})
    try:
        for i in range(20):
            producer.send(topic, f"v{i}".encode())
        producer.flush(30)
    finally:
        producer.close()
    consumer = GroupConsumer({**props, "group.id": f"g-{topic}", "auto.offset.reset": "earliest",
                              "enable.auto.commit": "false"})
    got: list[bytes] = []
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + 30
        while len(got) < 20 and time.monotonic() < deadline:
            got.extend(m.value for m in consumer.poll(0.5) if m.value is not None)
        consumer.commit()
    finally:
        consumer.close()
    assert got == [f"v{i}".encode() for i in range(20)]


def test_wrong_password_is_refused_and_gets_no_access(secured: SecuredBroker) -> None:
    security = ClientSecurity.from_props(scram(secured, password="not-alice-secret"))
    with pytest.raises(SaslAuthenticationFailedError, match="invalid credentials"):
        BrokerConnection("127.0.0.1", secured.ports["SASL_SSL"], security=security)
    # By hand: the refusal is answered, then the connection closes; nothing else is served.
    with _tls(secured, "SASL_SSL") as sock:
        sock.sendall(_frame(ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"}))
        assert RESPONSES[ApiKey.SASL_HANDSHAKE].decode(1, memoryview(_read_frame(sock) or b"")[4:])["error_code"] == 0
        sock.sendall(_frame(ApiKey.SASL_AUTHENTICATE, 1, {"auth_bytes": b"\0carol\0wrong"}, 2)
                     + _frame(ApiKey.METADATA, 1, {"topics": []}, 3))
        answer = RESPONSES[ApiKey.SASL_AUTHENTICATE].decode(1, memoryview(_read_frame(sock) or b"")[4:])
        assert answer["error_code"] == ErrorCode.SASL_AUTHENTICATION_FAILED
        assert _read_frame(sock) is None  # no Metadata answer: closed
    # librdkafka sees the failure too, and produces nothing.
    from confluent_kafka import KafkaError
    from confluent_kafka import Producer as CkProducer

    errors: list[Any] = []
    ck = CkProducer({"bootstrap.servers": secured.address("SASL_SSL"), "security.protocol": "SASL_SSL",
                     "ssl.ca.location": str(secured.certs.ca), "sasl.mechanism": "SCRAM-SHA-512",
                     "sasl.username": "bob", "sasl.password": "wrong", "error_cb": errors.append,
                     "message.timeout.ms": 3000})
    ck.produce("never", b"x")
    ck.flush(10)
    assert any(e.code() == KafkaError._AUTHENTICATION for e in errors)
    assert _log_count(secured, "refused: Authentication failed") >= 2
    assert_serving(secured)


def test_request_before_login_closes(secured: SecuredBroker) -> None:
    with socket.create_connection(("127.0.0.1", secured.ports["SASL_PLAINTEXT"]), timeout=10) as sock:
        sock.sendall(_frame(ApiKey.API_VERSIONS, 0, {}))
        assert _read_frame(sock) is not None  # ApiVersions is answered before a login
        sock.sendall(_frame(ApiKey.METADATA, 1, {"topics": []}, 2))
        assert _read_frame(sock) is None
    assert _log_count(secured, "request before SASL authentication") == 1


def test_large_request_before_login_closes(secured: SecuredBroker) -> None:
    """sasl.server.max.receive.size (512 KiB): an unauthenticated client cannot make the broker buffer more."""
    mark = len(secured.log_text())
    with socket.create_connection(("127.0.0.1", secured.ports["SASL_PLAINTEXT"]), timeout=10) as sock:
        local = sock.getsockname()[1]
        sock.sendall(struct.pack(">i", 600_000) + b"\0" * 1000)
        assert _closed(sock)
    assert _log_count(secured, f"port={local}): request size 600000 before a SASL login", since=mark) == 1
    assert_serving(secured)


def test_sasl_out_of_order_is_refused(secured: SecuredBroker) -> None:
    port = secured.ports["SASL_PLAINTEXT"]
    mark = len(secured.log_text())
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        local = sock.getsockname()[1]
        sock.sendall(_frame(ApiKey.SASL_AUTHENTICATE, 1, {"auth_bytes": b"\0carol\0carol-secret"}))
        answer = RESPONSES[ApiKey.SASL_AUTHENTICATE].decode(1, memoryview(_read_frame(sock) or b"")[4:])
        assert answer["error_code"] == ErrorCode.ILLEGAL_SASL_STATE
        assert _read_frame(sock) is None
    assert _log_count(secured, f"SASL login from 127.0.0.1:{local} ", since=mark) == 1
    assert_serving(secured)


def test_scram_garbage_is_refused(secured: SecuredBroker) -> None:
    mark = len(secured.log_text())
    with _tls(secured, "SASL_SSL") as sock:
        local = sock.getsockname()[1]
        sock.sendall(_frame(ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "SCRAM-SHA-256"}))
        _read_frame(sock)
        sock.sendall(_frame(ApiKey.SASL_AUTHENTICATE, 1, {"auth_bytes": b"\xff\xfe,,=n=\x00garbage"}, 2))
        answer = RESPONSES[ApiKey.SASL_AUTHENTICATE].decode(1, memoryview(_read_frame(sock) or b"")[4:])
        assert answer["error_code"] == ErrorCode.SASL_AUTHENTICATION_FAILED
        assert _closed(sock)
    assert _log_count(secured, f"SASL login from 127.0.0.1:{local} ", since=mark) == 1
    assert_serving(secured)


def test_unknown_scram_user_is_refused(secured: SecuredBroker) -> None:
    with pytest.raises(SaslAuthenticationFailedError):
        BrokerConnection("127.0.0.1", secured.ports["SASL_SSL"],
                         security=ClientSecurity.from_props(scram(secured, user="mallory", password="x")))


def test_sasl_handshake_v0_with_bare_tokens(secured: SecuredBroker) -> None:
    """Old clients: SaslHandshake v0, then the PLAIN token framed by its size only."""
    with socket.create_connection(("127.0.0.1", secured.ports["SASL_PLAINTEXT"]), timeout=10) as sock:
        sock.sendall(_frame(ApiKey.SASL_HANDSHAKE, 0, {"mechanism": "PLAIN"}))
        assert RESPONSES[ApiKey.SASL_HANDSHAKE].decode(0, memoryview(_read_frame(sock) or b"")[4:])["error_code"] == 0
        token = b"\0carol\0carol-secret"
        sock.sendall(struct.pack(">i", len(token)) + token)
        assert _read_frame(sock) == b""  # PLAIN's empty server token
        sock.sendall(_frame(ApiKey.METADATA, 1, {"topics": []}, 2))
        assert _read_frame(sock) is not None


def test_sasl_handshake_v0_scram_with_bare_tokens(secured: SecuredBroker) -> None:
    """SaslHandshake v0 with SCRAM: the credential is read from ZooKeeper between bare tokens."""
    from broker.security.scram import ScramClient

    with _tls(secured, "SASL_SSL") as sock:
        sock.sendall(_frame(ApiKey.SASL_HANDSHAKE, 0, {"mechanism": "SCRAM-SHA-512"}))
        assert RESPONSES[ApiKey.SASL_HANDSHAKE].decode(0, memoryview(_read_frame(sock) or b"")[4:])["error_code"] == 0
        client = ScramClient("SCRAM-SHA-512", "bob", "bob-secret")
        first = client.first()
        sock.sendall(struct.pack(">i", len(first)) + first)
        final = client.final(_read_frame(sock) or b"")
        sock.sendall(struct.pack(">i", len(final)) + final)
        client.verify(_read_frame(sock) or b"")
        sock.sendall(_frame(ApiKey.METADATA, 1, {"topics": []}, 2))
        assert _read_frame(sock) is not None
    with _tls(secured, "SASL_SSL") as sock:  # a wrong proof: closed without an answer, as Kafka does
        sock.sendall(_frame(ApiKey.SASL_HANDSHAKE, 0, {"mechanism": "SCRAM-SHA-512"}))
        _read_frame(sock)
        client = ScramClient("SCRAM-SHA-512", "bob", "not-bob-secret")
        first = client.first()
        sock.sendall(struct.pack(">i", len(first)) + first)
        final = client.final(_read_frame(sock) or b"")
        sock.sendall(struct.pack(">i", len(final)) + final)
        assert _read_frame(sock) is None


def test_plaintext_client_on_tls_port_is_closed(secured: SecuredBroker) -> None:
    with socket.create_connection(("127.0.0.1", secured.ports["SSL"]), timeout=10) as sock:
        local = sock.getsockname()[1]
        sock.sendall(_frame(ApiKey.API_VERSIONS, 0, {}))
        assert _closed(sock)
    assert _log_count(secured, f"TLS handshake with 127.0.0.1:{local} ") == 1
    assert_serving(secured)


def test_truncated_tls_handshake(secured: SecuredBroker) -> None:
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    client = ssl.create_default_context().wrap_bio(incoming, outgoing, server_hostname="127.0.0.1")
    with pytest.raises(ssl.SSLWantReadError):
        client.do_handshake()
    hello = outgoing.read()
    with socket.create_connection(("127.0.0.1", secured.ports["SSL"]), timeout=10) as sock:
        local = sock.getsockname()[1]
        sock.sendall(hello[: len(hello) // 2])
    assert _log_count(secured, f"TLS handshake with 127.0.0.1:{local} ") == 1
    assert_serving(secured)


def test_client_certificates(secured: SecuredBroker) -> None:
    """ssl.client.auth=required: a certificate from the CA is let in; an expired one, or none, is not."""
    base = {"security.protocol": "SSL", "ssl.truststore.location": str(secured.certs.ca)}
    good = ClientSecurity.from_props({**base, "ssl.keystore.location": str(secured.certs.client)})
    with BrokerConnection("127.0.0.1", secured.ports["MTLS"], security=good) as conn:
        assert conn.request(ApiKey.METADATA, 1, {"topics": []}) is not None
    for bad in ({**base, "ssl.keystore.location": str(secured.certs.expired)}, base):
        with pytest.raises(BrokerConnectionError):
            with BrokerConnection("127.0.0.1", secured.ports["MTLS"], security=ClientSecurity.from_props(bad)) as conn:
                conn.request(ApiKey.METADATA, 1, {"topics": []})  # TLS 1.3: the refusal comes after the handshake
    assert _log_count(secured, "client certificate has expired") == 1
    assert_serving(secured)


def test_wrong_host_certificate_is_refused_by_clients(secured: SecuredBroker) -> None:
    props = {"security.protocol": "SSL", "ssl.truststore.location": str(secured.certs.ca)}
    with pytest.raises(BrokerConnectionError, match="certificate verify failed"):
        BrokerConnection("127.0.0.1", secured.ports["WRONGHOST"], security=ClientSecurity.from_props(props))
    off = ClientSecurity.from_props({**props, "ssl.endpoint.identification.algorithm": ""})
    with BrokerConnection("127.0.0.1", secured.ports["WRONGHOST"], security=off) as conn:
        assert conn.request(ApiKey.METADATA, 1, {"topics": []}) is not None


def test_large_fetch_over_tls_is_sent_in_chunks(secured: SecuredBroker) -> None:
    """A fetch answer larger than one read chunk (1 MiB) arrives whole over TLS."""
    from confluent_kafka import Consumer
    from confluent_kafka import Producer as CkProducer

    topic = f"big-{uuid.uuid4().hex[:8]}"
    values = [bytes([i]) * 200_000 for i in range(20)]  # 4 MB
    producer = CkProducer({"bootstrap.servers": secured.address("PLAINTEXT"), "linger.ms": 50,
                           "message.max.bytes": 1_000_000})
    for value in values:
        producer.produce(topic, value, partition=0)
    assert producer.flush(30) == 0
    consumer = Consumer({"bootstrap.servers": secured.address("SSL"), "security.protocol": "SSL",
                         "ssl.ca.location": str(secured.certs.ca), "group.id": f"g-{topic}",
                         "auto.offset.reset": "earliest", "fetch.max.bytes": 16_000_000,
                         "max.partition.fetch.bytes": 16_000_000, "fetch.wait.max.ms": 100})
    consumer.subscribe([topic])
    got: list[bytes] = []
    try:
        deadline = time.monotonic() + 30
        while len(got) < len(values) and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                got.append(msg.value())
    finally:
        consumer.close()
    assert got == values


def _logbus(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "broker.cli", *args], capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("way", ["zookeeper", "bootstrap-server"])
def test_configs_tool_manages_scram_users(secured: SecuredBroker, tmp_path: Path, way: str) -> None:
    """kafka-configs' users: straight into ZooKeeper, or over SASL_SSL (--command-config) through
    AlterUserScramCredentials / DescribeUserScramCredentials; the same results either way."""
    name = f"dave-{way[:2]}"

    def can_log_in(mechanism: str) -> bool:
        try:
            BrokerConnection("127.0.0.1", secured.ports["SASL_SSL"],
                             security=ClientSecurity.from_props(scram(secured, name, "dave-secret", mechanism))).close()
            return True
        except SaslAuthenticationFailedError:
            return False

    config = tmp_path / "client.properties"
    config.write_text("".join(f"{k}={v}\n" for k, v in scram(secured).items()))
    where = (["--zookeeper", secured.zk_connect] if way == "zookeeper" else
             ["--bootstrap-server", secured.address("SASL_SSL"), "--command-config", str(config)])
    user = [*where, "--entity-type", "users", "--entity-name", name]
    added = _logbus("configs", *user, "--alter", "--add-config",
                    "SCRAM-SHA-256=[iterations=8192,password=dave-secret],SCRAM-SHA-512=[password=dave-secret]")
    assert added.returncode == 0, added.stderr
    assert can_log_in("SCRAM-SHA-256") and can_log_in("SCRAM-SHA-512")
    described = _logbus("configs", *user, "--describe")
    assert "SCRAM-SHA-256=iterations=8192, SCRAM-SHA-512=iterations=4096" in described.stdout, described.stderr
    assert "dave-secret" not in described.stdout
    deleted = _logbus("configs", *user, "--alter", "--delete-config", "SCRAM-SHA-256")
    assert deleted.returncode == 0, deleted.stderr
    assert not can_log_in("SCRAM-SHA-256") and can_log_in("SCRAM-SHA-512")
    too_few = _logbus("configs", *user, "--alter", "--add-config", "SCRAM-SHA-256=[iterations=10,password=x]")
    assert too_few.returncode != 0 and "between 4096 and 16384" in too_few.stderr
    assert len(too_few.stderr.strip().splitlines()) == 1, too_few.stderr
    brokers = _logbus("configs", *where, "--entity-type", "brokers", "--entity-default", "--describe")
    assert (brokers.returncode == 0) == (way == "bootstrap-server"), brokers.stderr  # brokers' configs: over the protocol


def test_enabled_protocols_and_cipher_suites_per_listener(secured: SecuredBroker) -> None:
    """listener.name.tls12.ssl.enabled.protocols=TLSv1.2 and .ssl.cipher.suites: what is negotiated."""
    def connect(minimum: ssl.TLSVersion, maximum: ssl.TLSVersion) -> ssl.SSLSocket:
        context = ssl.create_default_context(cafile=str(secured.certs.ca))
        context.minimum_version, context.maximum_version = minimum, maximum
        raw = socket.create_connection(("127.0.0.1", secured.ports["TLS12"]), timeout=10)
        return context.wrap_socket(raw, server_hostname="127.0.0.1")

    with connect(ssl.TLSVersion.TLSv1_2, ssl.TLSVersion.TLSv1_3) as sock:
        assert sock.version() == "TLSv1.2"
        assert sock.cipher()[0] == "ECDHE-ECDSA-AES256-GCM-SHA384"
    with pytest.raises(ssl.SSLError):
        connect(ssl.TLSVersion.TLSv1_3, ssl.TLSVersion.TLSv1_3)
    with socket.create_connection(("127.0.0.1", secured.ports["SSL"]), timeout=10) as raw:
        context = ssl.create_default_context(cafile=str(secured.certs.ca))
        with context.wrap_socket(raw, server_hostname="127.0.0.1") as sock:
            assert sock.version() == "TLSv1.3"  # the default listener: TLSv1.2 and TLSv1.3


def test_logbus_clients_with_a_wrong_password_fail_fast(secured: SecuredBroker) -> None:
    props = {"bootstrap.servers": secured.address("SASL_SSL"), **scram(secured, password="wrong")}
    started = time.monotonic()
    with pytest.raises(SaslAuthenticationFailedError):
        producer = Producer({**props, "max.block.ms": 5000})
        try:
            producer.send("never", b"x").get(10)
        finally:
            producer.close(5)
    with pytest.raises(SaslAuthenticationFailedError):
        consumer = GroupConsumer({**props, "group.id": "never"})
        try:
            consumer.subscribe(["never"])
            consumer.poll(5)
        finally:
            consumer.close()
    assert time.monotonic() - started < 20


def test_pipelined_answers_over_tls_are_all_reachable_without_blocking(secured: SecuredBroker) -> None:
    """Answers that arrive together sit in the TLS layer, where ``select`` cannot see them: a
    pipelining reader (the producer's sender) must drain ``pending()`` (it once waited a whole
    request.timeout.ms for an answer that had already come)."""
    import select

    security = ClientSecurity.from_props({"security.protocol": "SSL", "ssl.ca.location": str(secured.certs.ca)})

    def connected() -> BrokerConnection | None:  # the fixture's broker may still be opening this listener
        try:
            return BrokerConnection("127.0.0.1", secured.ports["SSL"], security=security, timeout=10)
        except BrokerConnectionError:
            return None

    with wait_until(connected, 10, 0.1, what="the SSL listener") as conn:
        for _ in range(20):
            for _ in range(8):
                conn.send_request(ApiKey.API_VERSIONS, 2, {})
            deadline = time.monotonic() + 10
            answered = 0
            while answered < 8:
                ready = conn.pending() or select.select([conn.fileno()], [], [], 0.5)[0]
                assert ready or time.monotonic() < deadline, f"answer {answered + 1} of 8 not reachable"
                if ready:
                    conn.receive_response()
                    answered += 1


def test_every_broker_tool_takes_the_client_properties_file(secured: SecuredBroker, tmp_path: Path) -> None:
    """Each tool that talks to brokers logs in over SASL_SSL with Kafka's flag for a client
    properties file (--command-config; --admin.config, --consumer.config where Kafka says so);
    without it, the same command is one line and exit 1."""
    config = tmp_path / "client.properties"
    config.write_text("".join(f"{k}={v}\n" for k, v in scram(secured).items()))
    server, topic, group = secured.address("SASL_SSL"), f"tools-{uuid.uuid4().hex[:6]}", f"g-{uuid.uuid4().hex[:6]}"
    secure = ["--bootstrap-server", server, "--command-config", str(config)]

    def ok(*args: str) -> str:
        out = _logbus(*args)
        assert out.returncode == 0, (args, out.stderr)
        return out.stdout

    ok("topics", *secure, "--create", "--topic", topic, "--partitions", "2", "--replication-factor", "1")
    assert topic in ok("topics", *secure, "--list").split()
    with Producer({"bootstrap.servers": server, "acks": "all", **scram(secured)}) as producer:
        for i in range(20):
            producer.send(topic, f"v{i}".encode(), partition=i % 2)
        producer.flush(30)
    with GroupConsumer({"bootstrap.servers": server, "group.id": group, "auto.offset.reset": "earliest",
                        "enable.auto.commit": "false", **scram(secured)}) as consumer:
        consumer.subscribe([topic])
        wait_until(lambda: len(consumer.poll(0.5)) > 0, 20, 0, what="the group's first records")
        consumer.commit({(topic, 0): 4, (topic, 1): 6})

    assert group in ok("consumer-groups", *secure, "--list").split()
    described = [line.split() for line in ok("consumer-groups", *secure, "--describe", "--group", group).splitlines()]
    assert {(r[2], r[3], r[4]) for r in described if r[:2] == [group, topic]} == {("0", "4", "10"), ("1", "6", "10")}
    assert "Empty" in ok("consumer-groups", *secure, "--describe", "--group", group, "--state")
    reset = ok("consumer-groups", *secure, "--group", group, "--reset-offsets", "--to-earliest", "--topic", topic, "--execute")
    assert [line.split()[-1] for line in reset.splitlines()[1:]] == ["0", "0"]
    assert "log_dir" not in ok("log-dirs", *secure, "--describe", "--topic-list", topic)  # Kafka's camelCase JSON
    offsets = tmp_path / "offsets.json"
    offsets.write_text(json.dumps({"partitions": [{"topic": topic, "partition": 0, "offset": 3}], "version": 1}))
    assert "low_watermark: 3" in ok("delete-records", *secure, "--offset-json-file", str(offsets))
    elected = _logbus("leader-election", "--bootstrap-server", server, "--admin.config", str(config),
                      "--election-type", "preferred", "--topic", topic, "--partition", "0")
    assert elected.returncode == 0 and "Valid replica already elected" in elected.stdout, elected.stderr
    read = ok("console-consumer", "--bootstrap-server", server, "--consumer.config", str(config), "--topic", topic,
              "--partition", "1", "--from-beginning", "--max-messages", "3", "--timeout-ms", "5000")
    assert read.split() == ["v1", "v3", "v5"]
    listed = _logbus("acls", *secure, "--list")
    assert "SECURITY_DISABLED" in listed.stderr, listed.stderr  # logged in: the broker has no authorizer to ask
    ok("consumer-groups", *secure, "--delete", "--group", group)

    for args in (["consumer-groups", "--bootstrap-server", server, "--list"],
                 ["topics", "--bootstrap-server", server, "--list"],
                 ["log-dirs", "--bootstrap-server", server, "--describe"]):
        out = _logbus(*args)  # the SASL_SSL port without the file: the broker does not speak to it
        assert out.returncode == 1 and len(out.stderr.strip().splitlines()) == 1, (args, out.stderr)
        assert "is security.protocol set?" in out.stderr, out.stderr
    assert_serving(secured)


def test_scram_users_managed_over_the_protocol_by_librdkafka(secured: SecuredBroker) -> None:
    """AlterUserScramCredentials and DescribeUserScramCredentials (flexible versions: compact
    strings, tagged fields, header v2) from confluent-kafka's AdminClient: a user made over
    SASL_SSL logs in, is described, loses the mechanism again; bad changes get Kafka's codes."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import (
        AdminClient,
        ScramCredentialInfo,
        ScramMechanism,
        UserScramCredentialDeletion,
        UserScramCredentialUpsertion,
    )

    librdkafka = {**scram(secured), "ssl.ca.location": str(secured.certs.ca)}
    del librdkafka["ssl.truststore.location"]
    admin = AdminClient({"bootstrap.servers": secured.address("SASL_SSL"), **librdkafka})
    user = f"erin-{uuid.uuid4().hex[:6]}"
    sha512 = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 8192)
    done = admin.alter_user_scram_credentials([UserScramCredentialUpsertion(user, sha512, b"erin-secret")])
    done[user].result(20)

    def can_log_in(password: str) -> bool:
        try:
            BrokerConnection("127.0.0.1", secured.ports["SASL_SSL"], timeout=10,
                             security=ClientSecurity.from_props(scram(secured, user, password, "SCRAM-SHA-512"))).close()
            return True
        except (SaslAuthenticationFailedError, BrokerConnectionError):
            return False

    assert can_log_in("erin-secret") and not can_log_in("wrong")
    described = admin.describe_user_scram_credentials([user])[user].result(20)
    assert [(i.mechanism, i.iterations) for i in described.scram_credential_infos] == [(ScramMechanism.SCRAM_SHA_512, 8192)]
    everyone = admin.describe_user_scram_credentials().result(20)
    assert {user, "alice", "bob"} <= set(everyone)

    too_few = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 10)
    with pytest.raises(KafkaException, match="UNACCEPTABLE_CREDENTIAL|iterations"):
        admin.alter_user_scram_credentials([UserScramCredentialUpsertion(user, too_few, b"x")])[user].result(20)
    missing = f"nobody-{uuid.uuid4().hex[:6]}"
    with pytest.raises(KafkaException, match="RESOURCE_NOT_FOUND|does not exist"):
        admin.describe_user_scram_credentials([missing])[missing].result(20)

    admin.alter_user_scram_credentials([UserScramCredentialDeletion(user, ScramMechanism.SCRAM_SHA_512)])[user].result(20)
    assert not can_log_in("erin-secret")
    assert_serving(secured)
