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

from broker.client.producer_config import PRODUCER_CONFIG
from broker.config import load_properties
from broker.configdef import ConfigDef, ConfigError, Key, Range, Scope, Type
from mirror.group_props import check_group_props
from mirror.resume import DEFAULT_SCAN_MAX_RECORDS

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


#: The mirror's own settings (command-line flags; the two source keys of a consumer file).
MIRROR_CONFIG = ConfigDef(
    Scope.MIRROR,
    [
        Key("num.streams", Type.INT, 1, Range(1), "Consumer streams (threads) per source."),
        Key("abort.on.send.failure", Type.LENIENT_BOOLEAN, True, doc="Stop the mirror when a record cannot be sent."),
        Key("offset.commit.interval.ms", Type.INT, 5000, Range(1), "How often the mirror commits the sources' offsets."),
        Key("stats.interval.ms", Type.INT, 5000, doc="How often the status file and the stats line are written."),
        Key("status.file", Type.STRING, DEFAULT_STATUS_FILE, doc="Where `--status` reads the mirror's state."),
        Key("target.replication.factor", Type.INT, -1, doc="Replicas of topics the mirror creates; -1: the broker's default."),
        Key("metrics.port", Type.INT, 0, Range(0, 65535), "The Prometheus endpoint's port; 0 turns it off."),
        Key("metrics.host", Type.STRING, DEFAULT_METRICS_HOST, doc="The interface the endpoint listens on."),
        Key("resume.scan.max.records", Type.INT, DEFAULT_SCAN_MAX_RECORDS, Range(0),
            "Records of each target partition's tail read back to find where copying got to; 0: resume from "
            "the committed offsets (exact resume off)."),
        Key("sync.topic.configs.interval.ms", Type.INT, 60000, Range(0),
            "How often a source topic's config overrides are applied to its target again; 0: only at creation."),
        Key("refresh.topics.interval.ms", Type.INT, 60000, Range(0),
            "How often partitions added to a source topic are added to its target; 0: never."),
        Key("sync.group.offsets", Type.LENIENT_BOOLEAN, False,
            doc="Translate the sources' consumer groups' offsets into the aggregate cluster, continuously "
                "(groups inactive there; offsets only moved forward)."),
        Key("sync.group.offsets.interval.ms", Type.INT, 60000, Range(100), "How often the group offsets are synced."),
        Key("mirror.source.name", Type.STRING, "", doc="(consumer file) A name for this source; default: the cluster id."),
        Key("topic.prefix", Type.STRING, "", doc="(consumer file) Put before this source's topic names in the aggregate."),
    ],
)


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
    num_streams: int = MIRROR_CONFIG.default("num.streams")
    abort_on_send_failure: bool = MIRROR_CONFIG.default("abort.on.send.failure")
    offset_commit_interval_ms: int = MIRROR_CONFIG.default("offset.commit.interval.ms")
    stats_interval_ms: int = MIRROR_CONFIG.default("stats.interval.ms")
    status_file: str = MIRROR_CONFIG.default("status.file")
    target_replication_factor: int = MIRROR_CONFIG.default("target.replication.factor")
    metrics_port: int = MIRROR_CONFIG.default("metrics.port")  # Prometheus endpoint (GET /metrics); 0: off
    metrics_host: str = MIRROR_CONFIG.default("metrics.host")
    resume_scan_max_records: int = MIRROR_CONFIG.default("resume.scan.max.records")
    sync_topic_configs_interval_ms: int = MIRROR_CONFIG.default("sync.topic.configs.interval.ms")
    refresh_topics_interval_ms: int = MIRROR_CONFIG.default("refresh.topics.interval.ms")
    sync_group_offsets: bool = MIRROR_CONFIG.default("sync.group.offsets")
    sync_group_offsets_interval_ms: int = MIRROR_CONFIG.default("sync.group.offsets.interval.ms")
    extra: dict[str, Any] = field(default_factory=dict)

    def topic_filter(self):
        from broker.client.rebalance import Blacklist, Whitelist

        if self.whitelist is not None:
            return Whitelist(self.whitelist)
        return Blacklist(self.blacklist or "")


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
    resume_scan_max_records: int = DEFAULT_SCAN_MAX_RECORDS,
    sync_topic_configs_interval_ms: int = 60000,
    refresh_topics_interval_ms: int = 60000,
    sync_group_offsets: Any = False,
    sync_group_offsets_interval_ms: int = 60000,
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
    flags = MIRROR_CONFIG.parse({
        "num.streams": num_streams, "abort.on.send.failure": abort_on_send_failure,
        "offset.commit.interval.ms": offset_commit_interval_ms, "stats.interval.ms": stats_interval_ms,
        "status.file": status_file, "target.replication.factor": target_replication_factor,
        "metrics.port": metrics_port, "metrics.host": metrics_host,
        "resume.scan.max.records": resume_scan_max_records,
        "sync.topic.configs.interval.ms": sync_topic_configs_interval_ms,
        "refresh.topics.interval.ms": refresh_topics_interval_ms,
        "sync.group.offsets": sync_group_offsets, "sync.group.offsets.interval.ms": sync_group_offsets_interval_ms,
    })
    prefixes = list(topic_prefixes or [])
    if len(prefixes) > len(consumer_configs):
        raise ConfigError(
            f"{len(prefixes)} --topic.prefix values for {len(consumer_configs)} --consumer.config files "
            "(the n-th prefix belongs to the n-th consumer config)", "topic.prefix")

    sources: list[SourceConfig] = []
    for i, path in enumerate(consumer_configs):
        raw = _load(path, "consumer.config")
        name = MIRROR_CONFIG.parse_value("mirror.source.name", raw.pop("mirror.source.name", ""))
        prefix = MIRROR_CONFIG.parse_value("topic.prefix", raw.pop("topic.prefix", ""))
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
    if not PRODUCER_CONFIG.parse_value("enable.idempotence", producer.get("enable.idempotence", "true")):
        raise ConfigError("the mirror's producer needs enable.idempotence=true (no data loss)", "enable.idempotence")
    producer.pop("request.required.acks", None)
    producer["acks"] = "all"
    if not any(producer.get(k) for k in ("bootstrap.servers", "metadata.broker.list", "zookeeper.connect")):
        raise ConfigError(f"{producer_config}: set bootstrap.servers of the aggregate cluster", "bootstrap.servers")

    return MirrorConfig(
        sources=sources,
        producer_props=producer,
        whitelist=whitelist,
        blacklist=blacklist,
        num_streams=flags["num.streams"],
        abort_on_send_failure=flags["abort.on.send.failure"],
        offset_commit_interval_ms=flags["offset.commit.interval.ms"],
        stats_interval_ms=flags["stats.interval.ms"],
        status_file=flags["status.file"] or DEFAULT_STATUS_FILE,
        target_replication_factor=flags["target.replication.factor"],
        metrics_port=flags["metrics.port"],
        metrics_host=flags["metrics.host"] or DEFAULT_METRICS_HOST,
        resume_scan_max_records=flags["resume.scan.max.records"],
        sync_topic_configs_interval_ms=flags["sync.topic.configs.interval.ms"],
        refresh_topics_interval_ms=flags["refresh.topics.interval.ms"],
        sync_group_offsets=flags["sync.group.offsets"],
        sync_group_offsets_interval_ms=flags["sync.group.offsets.interval.ms"],
    )
