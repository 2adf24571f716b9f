"""The cluster's address and credentials from an Airflow connection (``airflow.kafka_conn_id``),
so a DAG's password lives in Airflow's connections or secrets backend, never in loader.yaml.

The connection follows the Kafka provider's convention: ``extra`` is a JSON object of client
keys (``bootstrap.servers``, ``security.protocol``, ``sasl.mechanism``, ``ssl.ca.location``...);
``login``/``password`` are the SASL user and password and ``host``:``port`` the bootstrap server
when ``extra`` names none. A spark-submit child gets them through ``CLUSTER_ENV`` (its
environment), not through its command line or a file."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping

from pipelines.config import CLUSTER_KEYS, ConfigError

#: The environment variable carrying the resolved keys to a spark-submit child (JSON object).
CLUSTER_ENV = "LOGBUS_LOADER_CLUSTER"


def connection_props(conn_id: str) -> dict[str, str]:
    """The client keys an Airflow connection holds; ConfigError (one line) when it is unusable."""
    from airflow.sdk import BaseHook

    try:
        conn = BaseHook.get_connection(conn_id)
    except Exception as exc:  # noqa: BLE001 - Airflow raises its own NotFound types across versions
        raise ConfigError(f"airflow.kafka_conn_id: the Airflow connection {conn_id!r} cannot be read: {exc}",
                          "airflow.kafka_conn_id") from None
    props = {str(k): str(v) for k, v in (conn.extra_dejson or {}).items() if v is not None}
    if conn.login:
        props.setdefault("sasl.username", conn.login)
    if conn.password:
        props.setdefault("sasl.password", conn.password)
    if conn.host and "bootstrap.servers" not in props:
        props["bootstrap.servers"] = f"{conn.host}:{conn.port}" if conn.port else conn.host
    _check_keys(props, f"the Airflow connection {conn_id!r}")
    return props


def as_overrides(props: Mapping[str, str]) -> dict[str, str]:
    """Cluster keys as dotted overrides of the config's cluster section (``load_config``)."""
    return {f"cluster.{k}": v for k, v in props.items()}


def _check_keys(props: Mapping[str, str], where: str) -> None:
    """Keys a cluster section cannot hold are refused in one line (a typo must not pass silently)."""
    from broker.client.security import SECURITY_KEY_NAMES

    unknown = sorted(k for k in props if k not in CLUSTER_KEYS and k not in SECURITY_KEY_NAMES)
    if unknown:
        raise ConfigError(f"{where}: {unknown[0]} is not a cluster key (known: {', '.join(CLUSTER_KEYS)}, "
                          "security.protocol, ssl.*, sasl.*)", "cluster")


def child_environment(props: Mapping[str, str]) -> dict[str, str]:
    """The environment entry that hands ``props`` (cluster keys) to a spark-submit child."""
    return {CLUSTER_ENV: json.dumps(dict(props))} if props else {}


def inherited_overrides() -> dict[str, str]:
    """The cluster overrides a parent passed through ``CLUSTER_ENV`` ({} when none), for ``load_config``."""
    raw = os.environ.get(CLUSTER_ENV)
    if not raw:
        return {}
    try:
        props = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"${CLUSTER_ENV} is not a JSON object: {exc}", CLUSTER_ENV) from None
    if not isinstance(props, dict):
        raise ConfigError(f"${CLUSTER_ENV} is not a JSON object", CLUSTER_ENV)
    found = {str(k): str(v) for k, v in props.items()}
    _check_keys(found, f"${CLUSTER_ENV}")
    return as_overrides(found)
