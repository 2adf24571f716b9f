"""The mirror-maker's settings: Kafka's MirrorMaker flags plus the consumer/producer .properties files.

Keys the mirror reads from a ``--consumer.config`` file besides the ZooKeeper consumer's own
(``zookeeper.connect``, ``group.id``, ``auto.offset.reset``, ``fetch.*``, ...). A file with
``bootstrap.servers`` and no ``zookeeper.connect`` is a group-protocol source: its keys are
translated for GroupConsumer by ``mirror.group_props`` (checked here, so a bad key stops the start).

- ``mirror.source.name``  a name for this source in logs and ``--status`` (default: the cluster id)
- ``topic.prefix``        prefix put before this source's topic names in the aggregate cluster

``--topic.prefix`` on the command line may be repeated too; the n-th one belongs to the n-th
``--consumer.config`` and wins over the key in the file.

See conf/mirror-maker.properties for every key with its default.
"""

from __future__ import annotations

import itertools
import os
import re
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from broker.config import ConfigError, load_properties
from mirror.group_props import check_group_props

MIRROR_SOURCE_KEYS = ("mirror.source.name", "topic.prefix")
DEFAULT_GROUP = "logbus-mirror-maker"
DEFAULT_STATUS_FILE = os.path.join(tempfile.gettempdir(), "logbus-mirror-maker.status.json")
#: ``--metrics.host``: all interfaces, as a broker's metrics.port on a 0.0.0.0 listener, so the
#: Prometheus host can scrape it once ``--metrics.port`` turns it on.
DEFAULT_METRICS_HOST = "0.0.0.0"

#: Set by the mirror on every source consumer: offsets are committed by the mirror itself,
#: only after the producer has flushed what came before them.
FORCED_CONSUMER = {"auto.commit.enable": "false"}
#: Defaults for source consumers that the file may override.
CONSUMER_DEFAULTS = {
    "auto.offset.reset": "smallest",  # a topic picked up later is copied from its start
    "rebalance.backoff.ms": "1000",
    "rebalance.max.retries": "60",
    "zookeeper.session.timeout.ms": "6000",
    "consumer.timeout.ms": "1000",  # stream threads wake up to notice a stop
    "fetch.message.max.bytes": "1048576",
    "queued.max.message.chunks": "10",
}
#: Producer defaults; acks=all and idempotence are required (no data loss).
PRODUCER_DEFAULTS = {
    "acks": "all",
    "enable.idempotence": "true",
    "linger.ms": "10",
    "batch.size": "262144",
    "client.id": "logbus-mirror-maker",
    "allow.auto.create.topics": "false",
}


@dataclass
class SourceConfig:
    """One source cluster (one datacenter)."""

    index: int
    path: str
    consumer_props: dict[str, str]
    name: str = ""
    topic_prefix: str = ""

    @property
    def zookeeper_connect(self) -> str:
        return self.consumer_props.get("zookeeper.connect", "")

    @property
    def bootstrap_servers(self) -> str:
        return self.consumer_props.get("bootstrap.servers", "") or self.consumer_props.get("metadata.broker.list", "")

    @property
    def group(self) -> str:
        return self.consumer_props["group.id"]


@dataclass
class MirrorConfig:
    sources: list[SourceConfig]
    producer_props: dict[str, str]
    whitelist: str | None = None
    blacklist: str | None = None
    num_streams: int = 1
    abort_on_send_failure: bool = True
    offset_commit_interval_ms: int = 5000
    stats_interval_ms: int = 5000
    status_file: str = DEFAULT_STATUS_FILE
    target_replication_factor: int = -1
    metrics_port: int = 0  # Prometheus endpoint (GET /metrics); 0: off
    metrics_host: str = DEFAULT_METRICS_HOST
    extra: dict[str, Any] = field(default_factory=dict)

    def topic_filter(self):
        from broker.client.rebalance import Blacklist, Whitelist

        if self.whitelist is not None:
            return Whitelist(self.whitelist)
        return Blacklist(self.blacklist or "")


def _bool(value: Any, key: str) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("true", "1", "yes"):
        return True
    if text in ("false", "0", "no"):
        return False
    raise ConfigError(f"Invalid value {value!r} for {key}: expected true or false", key)


def _addresses(source: SourceConfig) -> set[str]:
    """What names a source's cluster: its ZooKeeper (with chroot), else its bootstrap brokers.
    (A ZooKeeper source and a bootstrap one of the same cluster are caught by cluster id at start.)"""
    if source.zookeeper_connect:
        return {source.zookeeper_connect}
    return {a.strip().lower() for a in source.bootstrap_servers.split(",") if a.strip()}


def _load(path: str, what: str) -> dict[str, str]:
    if not Path(path).is_file():
        raise ConfigError(f"{what} file {path} does not exist", what)
    return {k.strip(): str(v).strip() for k, v in load_properties(path).items()}


def build_config(
    consumer_configs: list[str],
    producer_config: str,
    *,
    whitelist: str | None = None,
    blacklist: str | None = None,
    num_streams: int = 1,
    topic_prefixes: list[str] | None = None,
    abort_on_send_failure: Any = True,
    offset_commit_interval_ms: int = 5000,
    stats_interval_ms: int = 5000,
    status_file: str | None = None,
    target_replication_factor: int = -1,
    metrics_port: int = 0,
    metrics_host: str | None = None,
) -> MirrorConfig:
    """Validate the command line's choices and read the files; ConfigError names what is wrong."""
    if not consumer_configs:
        raise ConfigError("give at least one --consumer.config (one per source cluster)", "consumer.config")
    if not producer_config:
        raise ConfigError("--producer.config is required", "producer.config")
    if whitelist is not None and blacklist is not None:
        raise ConfigError("give --whitelist or --blacklist, not both", "whitelist")
    if whitelist is None and blacklist is None:
        raise ConfigError("give --whitelist or --blacklist (a regex over topic names)", "whitelist")
    for flag, regex in (("whitelist", whitelist), ("blacklist", blacklist)):
        if regex is not None:
            try:
                re.compile(regex)
            except re.error as exc:
                raise ConfigError(f"--{flag} {regex!r} is not a valid regex: {exc}", flag) from None
    if num_streams < 1:
        raise ConfigError("--num.streams must be at least 1", "num.streams")
    if offset_commit_interval_ms < 1:
        raise ConfigError("--offset.commit.interval.ms must be positive", "offset.commit.interval.ms")
    if not 0 <= metrics_port <= 65535:
        raise ConfigError(f"--metrics.port {metrics_port} is not a port (0 turns the endpoint off)", "metrics.port")
    prefixes = list(topic_prefixes or [])
    if len(prefixes) > len(consumer_configs):
        raise ConfigError(
            f"{len(prefixes)} --topic.prefix values for {len(consumer_configs)} --consumer.config files "
            "(the n-th prefix belongs to the n-th consumer config)", "topic.prefix")

    sources: list[SourceConfig] = []
    for i, path in enumerate(consumer_configs):
        raw = _load(path, "consumer.config")
        name = raw.pop("mirror.source.name", "")
        prefix = raw.pop("topic.prefix", "")
        if i < len(prefixes):
            prefix = prefixes[i]
        props = {**CONSUMER_DEFAULTS, **raw, **FORCED_CONSUMER}
        props.setdefault("group.id", DEFAULT_GROUP)
        if not props.get("zookeeper.connect") and not (props.get("bootstrap.servers") or props.get("metadata.broker.list")):
            raise ConfigError(f"{path}: set zookeeper.connect (or bootstrap.servers) of the source cluster",
                              "zookeeper.connect")
        if not props.get("zookeeper.connect"):
            check_group_props(path, props)  # a group-protocol source: its keys must make sense there
        sources.append(SourceConfig(i, path, props, name, prefix))
    for a, b in itertools.combinations(sources, 2):
        if _addresses(a) & _addresses(b):
            raise ConfigError(f"{a.path} and {b.path} name the same source cluster "
                              f"({', '.join(sorted(_addresses(a) & _addresses(b)))})",
                              "zookeeper.connect" if a.zookeeper_connect else "bootstrap.servers")

    producer = {**PRODUCER_DEFAULTS, **_load(producer_config, "producer.config")}
    acks = producer.get("acks", producer.get("request.required.acks", "all")).strip().lower()
    if acks not in ("all", "-1"):
        raise ConfigError(f"the mirror's producer needs acks=all (no data loss), not acks={acks}", "acks")
    if not _bool(producer.get("enable.idempotence", "true"), "enable.idempotence"):
        raise ConfigError("the mirror's producer needs enable.idempotence=true (no data loss)", "enable.idempotence")
    producer.pop("request.required.acks", None)
    producer["acks"] = "all"
    if not producer.get("bootstrap.servers") and not producer.get("metadata.broker.list") and not producer.get("zookeeper.connect"):
        raise ConfigError(f"{producer_config}: set bootstrap.servers of the aggregate cluster", "bootstrap.servers")

    return MirrorConfig(
        sources=sources,
        producer_props=producer,
        whitelist=whitelist,
        blacklist=blacklist,
        num_streams=num_streams,
        abort_on_send_failure=_bool(abort_on_send_failure, "abort.on.send.failure"),
        offset_commit_interval_ms=offset_commit_interval_ms,
        stats_interval_ms=stats_interval_ms,
        status_file=status_file or DEFAULT_STATUS_FILE,
        target_replication_factor=target_replication_factor,
        metrics_port=metrics_port,
        metrics_host=metrics_host or DEFAULT_METRICS_HOST,
    )
