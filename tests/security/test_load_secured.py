"""The loader from a secured cluster: `cluster:` carries the client security keys (SASL_SSL with
SCRAM-SHA-256 here), the password comes from the environment (`${NAME}`), and neither the
manifest nor the plan written next to the data holds it."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest

from broker.client.admin import AdminClient
from broker.client.producer import Producer
from broker.client.security import ClientSecurity
from broker.configdef import ConfigError
from pipelines.config import parse_config
from pipelines.loader import Loader
from tests.pipelines.helpers import loader_config, read_rows
from tests.security.conftest import SecuredBroker


def _cluster(secured: SecuredBroker, password: str = "${LOGBUS_TEST_SASL_PASSWORD}") -> dict:
    return {"bootstrap.servers": secured.address("SASL_SSL"), "security.protocol": "SASL_SSL",
            "ssl.ca.location": str(secured.certs.ca), "sasl.mechanism": "SCRAM-SHA-256",
            "sasl.username": "alice", "sasl.password": password}


def test_load_over_sasl_ssl_with_the_password_from_the_environment(secured: SecuredBroker, spark, tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LOGBUS_TEST_SASL_PASSWORD", "alice-secret")
    cluster = _cluster(secured)
    security = ClientSecurity.from_props({**cluster, "sasl.password": "alice-secret"})
    topic = f"secured-{uuid.uuid4().hex[:6]}"
    with AdminClient(cluster["bootstrap.servers"], security=security) as admin:
        admin.create_topic(topic, 2, 1, {})
    with Producer({**cluster, "sasl.password": "alice-secret", "acks": "all"}) as producer:
        for i in range(40):
            producer.send(topic, b"v%d" % i, b"k%d" % i, i % 2)
        producer.flush()
    warehouse = tmp_path / "wh"
    raw = loader_config("unused:1", warehouse, [{"name": topic, "format": "raw"}])
    raw["cluster"] = cluster
    cfg = parse_config(raw)
    assert "alice-secret" not in repr(cfg)
    with Loader(cfg, spark=spark) as loader:
        [run] = loader.run()
    assert run.records == 40 and run.errors == 0
    assert sorted(r["value"] for r in read_rows(warehouse, topic)) == sorted(b"v%d" % i for i in range(40))
    written = [p.read_bytes() for p in warehouse.rglob("*") if p.is_file() and p.suffix != ".parquet"]
    assert written and not any(b"alice-secret" in data for data in written)


def test_bad_security_settings_are_one_line(secured: SecuredBroker, tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("LOGBUS_TEST_SASL_PASSWORD", raising=False)
    raw = loader_config("unused:1", tmp_path, [{"name": "t", "format": "raw"}])
    raw["cluster"] = _cluster(secured)
    with pytest.raises(ConfigError, match=r"^cluster.sasl.password: the environment variable "
                                          r"LOGBUS_TEST_SASL_PASSWORD is not set$"):
        parse_config(raw)
    raw["cluster"] = {**_cluster(secured, "x"), "sasl.mechanism": "GSSAPI"}
    with pytest.raises(ConfigError, match=r"^cluster.sasl.mechanism: "):
        parse_config(raw)
    raw["cluster"] = {**_cluster(secured, "x"), "ssl.keystroe.location": "/x"}
    with pytest.raises(ConfigError, match=r"^cluster.ssl.keystroe.location: unknown key"):
        parse_config(raw)


def test_the_dag_steps_take_the_cluster_credentials_from_an_airflow_connection(
        secured: SecuredBroker, spark, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``airflow.kafka_conn_id``: the file names only the cluster's address; the Airflow connection
    (Kafka provider's shape: extra = client keys, login/password = the SASL user) brings the rest.
    plan -> load -> commit log in with it; no file the run writes holds the password."""
    import yaml

    from pipelines import airflow_tasks as steps

    conn = {"conn_type": "kafka", "login": "bob", "password": "bob-secret",
            "extra": {"security.protocol": "SASL_SSL", "ssl.ca.location": str(secured.certs.ca),
                      "sasl.mechanism": "SCRAM-SHA-512"}}
    monkeypatch.setenv("AIRFLOW_CONN_LOGBUS_SECURED", json.dumps(conn))
    topic = f"from-conn-{uuid.uuid4().hex[:6]}"
    with Producer({**_cluster(secured, "alice-secret"), "acks": "all"}) as producer:  # alice writes, bob loads
        for i in range(30):
            producer.send(topic, b"v%d" % i, b"k%d" % i, 0)
        producer.flush()
    warehouse = tmp_path / "wh"
    path = tmp_path / "loader.yaml"
    raw = loader_config(secured.address("SASL_SSL"), warehouse, [{"name": topic, "format": "raw"}],
                        airflow={"kafka_conn_id": "logbus_secured"})
    path.write_text(yaml.safe_dump(raw))

    info = steps.plan_step(str(path), "all")
    assert info["offsets"] == 30
    assert steps.load_step(str(path), "all", info)["records"] == 30
    assert steps.commit_step(str(path), "all", info)["committed"] == [topic]
    assert sorted(r["value"] for r in read_rows(warehouse, topic)) == sorted(b"v%d" % i for i in range(30))
    written = [p.read_bytes() for p in warehouse.rglob("*") if p.is_file() and p.suffix != ".parquet"]
    assert written and not any(b"bob-secret" in data for data in written)

    # a spark-submit child is handed the keys through its environment, not its command line
    child = steps.child_environment(steps._connection(str(path)))
    assert "bob-secret" not in " ".join(steps.submit_command(str(path), "all", info, steps.group_config(str(path), "all")))
    monkeypatch.setenv(*next(iter(child.items())))
    from pipelines.airflow_connection import inherited_overrides
    from pipelines.config import load_config

    assert load_config(path, inherited_overrides()).security.username == "bob"

    monkeypatch.delenv("AIRFLOW_CONN_LOGBUS_SECURED")
    with pytest.raises(ConfigError, match=r"^airflow.kafka_conn_id: the Airflow connection 'logbus_secured' cannot be read"):
        steps.plan_step(str(path), "all")
