"""Security settings a broker refuses at start-up, each in one line naming the key."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from broker.cluster.local import write_properties
from broker.cluster.net import free_port
from broker.config import BrokerConfig
from broker.configdef import ConfigError
from tests.security.certs import make_certs

BASE = {"broker.id": "1", "zookeeper.connect": "127.0.0.1:1", "log.dirs": "/tmp/unused"}


def _props(**extra: str) -> dict[str, str]:
    return {**BASE, **{k.replace("_", "."): v for k, v in extra.items()}}


@pytest.mark.parametrize(("props", "message"), [
    ({"listeners": "SSL://:9093"}, "set ssl.keystore.location"),
    ({"listeners": "SSL://:9093", "ssl.keystore.location": "/no/such/file"}, "file not found or not readable"),
    ({"listeners": "SSL://:9093", "ssl.keystore.location": __file__, "ssl.enabled.protocols": "TLSv1.1"},
     "ssl.enabled.protocols"),
    ({"listeners": "SSL://:9093", "ssl.keystore.location": __file__, "ssl.keystore.type": "JKS"}, "ssl.keystore.type"),
    ({"listeners": "SASL_PLAINTEXT://:9093", "sasl.enabled.mechanisms": "GSSAPI"}, "GSSAPI is not supported"),
    ({"listeners": "SASL_PLAINTEXT://:9093", "listener.name.sasl_plaintext.plain.sasl.jaas.config": "Broken"},
     "listener.name.sasl_plaintext.plain.sasl.jaas.config"),
    ({"listeners": "SASL_PLAINTEXT://:9093", "security.inter.broker.protocol": "SASL_PLAINTEXT"},
     "set username and password in listener.name.sasl_plaintext.plain.sasl.jaas.config"),
    ({"listeners": "PLAINTEXT://:9092", "security.inter.broker.protocol": "SSL"}, "inter-broker listener SSL"),
    ({"listeners": "PLAINTEXT://:9092", "inter.broker.listener.name": "PLAINTEXT",
      "security.inter.broker.protocol": "PLAINTEXT"}, "Only one of"),
])
def test_refused_in_one_line(props: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError) as refused:
        BrokerConfig.from_properties({**BASE, **props})
    assert message in str(refused.value) and "\n" not in str(refused.value)


def test_listener_overrides_are_not_unknown_keys() -> None:
    config = BrokerConfig.from_properties({**BASE, "listeners": "SASL_PLAINTEXT://:9093",
                                           "listener.name.sasl_plaintext.plain.sasl.jaas.config":
                                               'org.apache.kafka.common.security.plain.PlainLoginModule required '
                                               'username="a" password="b" user_a="b";'})
    assert config.unknown_keys() == []
    assert config.security("SASL_PLAINTEXT").plain_users == {"a": "b"}


def test_a_keystore_that_does_not_load_stops_the_broker_in_one_line(zk_chroot: str, tmp_path: Path) -> None:
    certs = make_certs(tmp_path / "certs")
    props = {"broker.id": "1", "zookeeper.connect": zk_chroot, "log.dirs": str(tmp_path / "data"),
             "listeners": f"SSL://127.0.0.1:{free_port()}", "ssl.keystore.location": str(certs.broker)}  # no password
    config = write_properties(tmp_path / "server.properties", props)
    done = subprocess.run([sys.executable, "-m", "broker.cli", "server-start", str(config)], capture_output=True,
                          text=True, timeout=60)
    assert done.returncode != 0
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "ssl.keystore.location" in lines[0] and "ssl.key.password" in lines[0], done.stderr
