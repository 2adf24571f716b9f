"""The loader's configuration: ``conf/loader.yaml``, checked key by key.

A bad file is one ``ConfigError`` naming the key (``topics[1].format: 'xml' is not one of
raw, utf8, json``), raised before anything touches the cluster or the warehouse. The scalar
keys are one table of the configuration mechanism (``LOADER_CONFIG``, ``broker.configdef``):
their types, defaults and checks are declared there, once.
"""

from __future__ import annotations

import datetime as _dt
import os
import re
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from broker.client.security import PLAINTEXT, SECURITY_KEY_NAMES, ClientSecurity
from broker.configdef import ConfigDef, ConfigError, Key, OneOf, Range, Scope, Type

if TYPE_CHECKING:
    from pipelines.fs import WarehouseFS

FORMATS = ("raw", "utf8", "json")
FIELD_TYPES = ("string", "int", "long", "float", "double", "boolean", "timestamp", "binary", "json")
RESET_POLICIES = ("earliest", "latest")
OUT_OF_RANGE_POLICIES = ("fail", "earliest")
PARQUET_WRITERS = ("python", "spark")
LATE_POLICIES = ("reopen", "separate", "drop")
RECORD_TIMESTAMP = "timestamp"  # the time field meaning "the record's own timestamp"


PARQUET_COMPRESSIONS = ("none", "snappy", "gzip", "zstd", "lz4", "brotli")

__all__ = ["ConfigError", "LOADER_CONFIG", "LoaderConfig", "TopicSpec", "load_config", "parse_config", "parse_reset"]


def _one_of(*options: str) -> OneOf:
    return OneOf(options, reason=f"is not one of {', '.join(options)}")


#: The loader's scalar keys, by their path in conf/loader.yaml.
LOADER_CONFIG = ConfigDef(
    Scope.LOADER,
    [
        Key("cluster.request.timeout.ms", Type.INT, 30_000, Range(1), "How long a request to the cluster waits."),
        Key("reset", Type.STRING, "earliest",
            doc="Where a topic with no saved offsets starts: earliest, latest, epoch ms or an ISO-8601 time."),
        Key("out_of_range", Type.STRING, "fail", _one_of(*OUT_OF_RANGE_POLICIES),
            doc="A saved offset the log no longer has: `fail` the run, or restart from `earliest`."),
        Key("max_range_records", Type.INT, 5_000_000, Range(1), "Records per Spark task at most (ranges are split)."),
        Key("max_error_ratio", Type.DOUBLE, 0.0, Range(0, 1),
            doc="Share of undecodable records a run tolerates (sent to `_errors/`)."),
        Key("fetch.max.bytes", Type.INT, 1 << 20, Range(1024), "Bytes per Fetch request of a task."),
        Key("dedup.origin.window.offsets", Type.INT, 100_000, Range(0),
            doc="Records carrying `logbus.origin` headers are written once per origin: per origin source partition the "
                "index keeps the birth offsets written within this many of the highest one (older ones count as "
                "written). 0: no deduplication."),
        Key("parquet.compression", Type.STRING, "snappy", _one_of(*PARQUET_COMPRESSIONS), "The Parquet codec."),
        Key("parquet.row_group_size", Type.INT, 128 * 1024, Range(1), "Rows per Parquet row group."),
        Key("parquet.writer", Type.STRING, None, _one_of(*PARQUET_WRITERS),
            doc="`python` (pyarrow in each task) or `spark`; when unset, `spark` for hdfs://, else `python`."),
        Key("spark.master", Type.STRING, "local[*]", doc="The Spark master URL."),
        Key("spark.app_name", Type.STRING, "logbus-loader", doc="The Spark application name."),
        Key("spark.archives", Type.LIST, None,
            doc="Archives unpacked in each executor's working directory (`spark.archives`), e.g. the packed "
                "environment of `logbus load pack-env`: `env.tar.gz#environment`."),
        Key("spark.python_env", Type.STRING, None,
            doc="The executors' Python (`spark.pyspark.python`), e.g. `./environment/bin/python` from an archive; "
                "unset: `PYSPARK_PYTHON`, else the driver's."),
        Key("spark.ship_code", Type.BOOLEAN, True,
            doc="Ship logbus' own code to the executors of a cluster master (a zip added with `addPyFile`)."),
        Key("spark.probe_timeout_ms", Type.INT, 120_000, Range(1000),
            doc="How long the probe task (can an executor import what the tasks need?) may wait for an executor."),
        Key("webhdfs.user", Type.STRING, None, doc="The HDFS user for webhdfs:// (and hdfs:// outside Spark)."),
        Key("webhdfs.address", Type.STRING, None, doc="host:port of the namenode's HTTP server (hdfs:// outside Spark)."),
        Key("schedule", Type.STRING, "@hourly",
            doc="The Airflow schedule of every topic group without its own (a preset, a cron expression, or `none`: "
                "runs only when triggered)."),
        Key("airflow.retries", Type.INT, 2, Range(0),
            doc="How often Airflow retries a failed task of the load DAGs (a failed validation is never retried)."),
        Key("airflow.retry_delay", Type.STRING, "5m", doc="How long Airflow waits before a retry (`30s`, `5m`)."),
        Key("compaction.target_size", Type.STRING, "256MB",
            doc="`logbus load compact` and the `logbus_compact` DAG merge an hour's small files into files of about "
                "this size (`64MB`, `1GB`, or bytes)."),
        Key("compaction.older_than", Type.STRING, "1d",
            doc="The `logbus_compact` DAG compacts closed hours that ended at least this long ago (`6h`, `1d`)."),
        Key("compaction.schedule", Type.STRING, "@daily",
            doc="The `logbus_compact` DAG's Airflow schedule (`none`: only when triggered)."),
        Key("metrics.pushgateway", Type.STRING, None, doc="The Prometheus Pushgateway's URL; unset: nothing is pushed."),
        Key("metrics.job", Type.STRING, "logbus_loader", doc="The pushgateway's `job` label."),
        Key("metrics.instance", Type.STRING, None, doc="The `instance` label; unset: the run's topic group."),
    ],
)


def _error(key: str, message: str) -> ConfigError:
    """The loader's error: the key's path first (``topics[1].format: ...``)."""
    return ConfigError(f"{key}: {message}", key)


def _value(section: Mapping, name: str, path: str) -> Any:
    """``section[name]`` (else the default) parsed and checked by the table's key ``path``."""
    value = section.get(name)
    if value is None:
        return LOADER_CONFIG.default(path)
    return LOADER_CONFIG[path].parse(value, path_first=True)


@dataclass(frozen=True)
class FieldSpec:
    name: str
    type: str
    required: bool = False


_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)\s*$")
_DURATION_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}


def parse_duration_ms(value: Any, key: str) -> int:
    """``2h``, ``30m``, ``1d``, ``90s``, ``500ms`` or a number of milliseconds, as milliseconds."""
    if isinstance(value, bool):
        raise _error(key, f"{value!r} is not a duration (e.g. 2h, 30m, 1d)")
    if isinstance(value, int):
        ms = value
    else:
        m = _DURATION.match(str(value))
        if m is None:
            raise _error(key, f"{value!r} is not a duration (e.g. 2h, 30m, 1d)")
        ms = int(float(m[1]) * _DURATION_MS[m[2]])
    if ms < 0:
        raise _error(key, f"{value!r} is negative")
    return ms


_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(B|KB|KIB|MB|MIB|GB|GIB)?\s*$", re.IGNORECASE)
_SIZE_BYTES = {"B": 1, "KB": 1000, "KIB": 1024, "MB": 1000**2, "MIB": 1024**2, "GB": 1000**3, "GIB": 1024**3}


def parse_size_bytes(value: Any, key: str) -> int:
    """``256MB``, ``64MiB``, ``1GB`` or a number of bytes, as bytes (at least 1)."""
    m = _SIZE.match(str(value)) if not isinstance(value, bool) else None
    if m is None:
        raise _error(key, f"{value!r} is not a size (e.g. 256MB, 64MiB, 1GB)")
    size = int(float(m[1]) * _SIZE_BYTES[(m[2] or "B").upper()])
    if size < 1:
        raise _error(key, f"{value!r} is not a positive size")
    return size


@dataclass(frozen=True)
class LatePolicy:
    """What happens to a record of an hour that was already closed (``late_data:``, docs/loader.md)."""

    allowed_lateness_ms: int = 0   # an hour closes once a run planned this long after its end has loaded
    policy: str = "reopen"         # reopen | separate | drop

    def to_dict(self) -> dict:
        return {"allowed_lateness_ms": self.allowed_lateness_ms, "policy": self.policy}

    @classmethod
    def from_dict(cls, d: Mapping | None) -> LatePolicy:
        return cls() if not d else cls(int(d.get("allowed_lateness_ms", 0)), str(d.get("policy", "reopen")))


def _late_policy(raw: Any, key: str) -> LatePolicy:
    if raw is None:
        return LatePolicy()
    if not isinstance(raw, Mapping):
        raise _error(key, "must be a mapping {allowed_lateness: 2h, policy: reopen|separate|drop}")
    _no_unknown(raw, {"allowed_lateness", "policy"}, f"{key}.")
    policy = raw.get("policy", "reopen")
    if policy not in LATE_POLICIES:
        raise _error(f"{key}.policy", f"{policy!r} is not one of {', '.join(LATE_POLICIES)}")
    return LatePolicy(parse_duration_ms(raw.get("allowed_lateness", 0), f"{key}.allowed_lateness"), policy)


@dataclass(frozen=True)
class TopicSpec:
    """How one topic (or every topic a pattern matches) is decoded and partitioned."""

    name: str | None = None          # an exact topic name ...
    pattern: str | None = None       # ... or a regular expression matched against whole names
    format: str = "raw"
    schema: tuple[FieldSpec, ...] = ()
    time_field: str = RECORD_TIMESTAMP
    require_match: bool = False  # a pattern matching no topic fails the plan (else a warning)
    late_data: LatePolicy = LatePolicy()
    # extra Great Expectations checks (pipelines.validation): ({"type": "expect_...", "kwargs": {...}}, ...)
    expectations: tuple = field(default=(), compare=False)

    def matches(self, topic: str) -> bool:
        if self.name is not None:
            return topic == self.name
        return re.fullmatch(self.pattern or "", topic) is not None

    def to_dict(self) -> dict:
        return {
            "format": self.format,
            "time_field": self.time_field,
            "schema": [{"name": f.name, "type": f.type, "required": f.required} for f in self.schema],
            "late_data": self.late_data.to_dict(),
        }

    @classmethod
    def from_dict(cls, topic: str, d: Mapping) -> TopicSpec:
        return cls(name=topic, format=d["format"], time_field=d.get("time_field", RECORD_TIMESTAMP),
                   schema=tuple(FieldSpec(f["name"], f["type"], bool(f.get("required"))) for f in d.get("schema", ())),
                   late_data=LatePolicy.from_dict(d.get("late_data")))


@dataclass(frozen=True)
class GroupSpec:
    """A topic group: one Airflow DAG (``logbus_load_<name>``) loading these topics together."""

    name: str
    topics: tuple[str, ...]               # topic names or patterns, as configured under ``topics:``
    schedule: str | None = None           # None: the top-level ``schedule``


@dataclass(frozen=True)
class ResetPolicy:
    """Where a topic with no saved offsets starts: earliest, latest, or the first record at/after a time."""

    kind: str                 # earliest | latest | timestamp
    timestamp_ms: int | None = None

    def __str__(self) -> str:
        ts = self.timestamp_ms  # set exactly when kind is timestamp (_reset)
        if self.kind == "timestamp" and ts is not None:
            return _dt.datetime.fromtimestamp(ts / 1000, _dt.UTC).isoformat()
        return self.kind


@dataclass(frozen=True)
class MetricsConfig:
    """Where a committed run's counts are pushed (``metrics:``); no pushgateway: not pushed."""

    pushgateway: str | None = LOADER_CONFIG.default("metrics.pushgateway")  # http(s)://host:port of a Prometheus Pushgateway
    job: str = LOADER_CONFIG.default("metrics.job")                         # the pushgateway's job label
    instance: str | None = LOADER_CONFIG.default("metrics.instance")        # its instance label; None: the run's topic group


@dataclass(frozen=True)
class LoaderConfig:
    bootstrap_servers: str | None
    zookeeper_connect: str | None
    warehouse: str
    topics: tuple[TopicSpec, ...]
    reset: ResetPolicy = ResetPolicy("earliest")
    out_of_range: str = "fail"
    max_range_records: int = 5_000_000
    fetch_max_bytes: int = 1 << 20
    dedup_window: int = 100_000           # dedup.origin.window.offsets (pipelines.origin_index); 0: off
    request_timeout_ms: int = 30_000
    max_error_ratio: float = 0.0
    parquet_compression: str = "snappy"
    row_group_size: int = 128 * 1024
    parquet_writer: str = "python"        # python: each task writes its files; spark: Spark's Hadoop writer
    spark_master: str = "local[*]"
    spark_app_name: str = "logbus-loader"
    spark_conf: Mapping[str, str] = field(default_factory=dict)
    spark_archives: tuple[str, ...] = ()  # spark.archives: e.g. the packed environment, env.tar.gz#environment
    spark_python_env: str | None = None   # the executors' Python (spark.pyspark.python)
    spark_ship_code: bool = True          # add logbus' code zip (pipelines.code_zip) on cluster masters
    spark_probe_timeout_ms: int = 120_000
    webhdfs_user: str | None = None
    webhdfs_address: str | None = None    # host:port of the namenode's HTTP server (hdfs:// outside Spark)
    schedule: str = "@hourly"
    source: str = "<dict>"
    groups: tuple[GroupSpec, ...] = ()    # none configured: one group "all" with every topic
    airflow: Mapping[str, Any] = field(default_factory=dict)  # catchup, start_date, load, spark_submit
    metrics: MetricsConfig = MetricsConfig()
    compaction_target_bytes: int = 256 * 1000**2  # compaction.target_size
    compaction_older_than_ms: int = 86_400_000    # compaction.older_than
    compaction_schedule: str = "@daily"           # compaction.schedule
    airflow_retries: int = 2                      # airflow.retries
    airflow_retry_delay_ms: int = 300_000         # airflow.retry_delay
    security: ClientSecurity = PLAINTEXT  # cluster.security.protocol, ssl.*, sasl.* (the password never in a repr)

    def warehouse_fs(self, spark=None) -> WarehouseFS:
        """The warehouse's filesystem (``pipelines.fs.open_fs`` with this config's HDFS settings)."""
        from pipelines.fs import open_fs

        return open_fs(self.warehouse, user=self.webhdfs_user, spark=spark, webhdfs_address=self.webhdfs_address)

    def spec_for(self, topic: str) -> TopicSpec | None:
        for spec in self.topics:
            if spec.matches(topic):
                return replace(spec, name=topic, pattern=None)
        return None

    def with_overrides(self, **kw: Any) -> LoaderConfig:
        return replace(self, **{k: v for k, v in kw.items() if v is not None})

    def topic_groups(self) -> tuple[GroupSpec, ...]:
        if self.groups:
            return self.groups
        return (GroupSpec("all", tuple(t.name or t.pattern or "" for t in self.topics)),)

    def for_group(self, group: str, only: list[str] | None = None) -> LoaderConfig:
        """This config restricted to one group's topics (and, with ``only``, to those topic names)."""
        found = [g for g in self.topic_groups() if g.name == group]
        if not found:
            raise _error("groups", f"no topic group {group!r} (groups: {', '.join(g.name for g in self.topic_groups())})")
        specs = [_group_spec(self, entry, f"groups.{group}.topics[{i}]") for i, entry in enumerate(found[0].topics)]
        if only:
            chosen = []
            for name in only:
                spec = next((s for s in specs if s.matches(name)), None)
                if spec is None:
                    raise _error("topics", f"{name!r} is not a topic of group {group!r}")
                chosen.append(replace(spec, name=name, pattern=None))
            specs = chosen
        group_spec = replace(found[0], topics=tuple(s.name or s.pattern or "" for s in specs))
        return replace(self, topics=tuple(specs), groups=(group_spec,))


def _group_spec(cfg: LoaderConfig, entry: str, key: str) -> TopicSpec:
    for spec in cfg.topics:
        if entry in (spec.name, spec.pattern):
            return spec
    found = cfg.spec_for(entry)
    if found is None:
        raise _error(key, f"{entry!r} is not a topic configured under topics:")
    return found


# --- parsing -----------------------------------------------------------------------------------

_TOP_KEYS = {"cluster", "warehouse", "topics", "reset", "out_of_range", "max_range_records", "max_error_ratio",
             "fetch", "dedup", "parquet", "spark", "webhdfs", "schedule", "groups", "airflow", "metrics",
             "compaction"}


def load_config(path: str | Path, overrides: Mapping[str, Any] | None = None) -> LoaderConfig:
    """Read and check ``path`` (YAML); ``overrides`` are dotted keys (``cluster.bootstrap.servers``)."""
    p = Path(path)
    try:
        text = p.read_text()
    except OSError as exc:
        raise _error(str(path), f"cannot read the loader config: {exc.strerror or exc}") from None
    try:
        raw = yaml.safe_load(text) or {}
    except yaml.YAMLError as exc:
        raise _error(str(path), yaml_problem(exc)) from None
    return parse_config(raw, overrides=overrides, source=str(path))


def yaml_problem(exc: Exception) -> str:
    """A YAML error as one short phrase: where (line, column) and what, without the quoted source."""
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
    where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
    return f"not valid YAML: {where}{problem}"


CLUSTER_KEYS = ("bootstrap.servers", "zookeeper.connect", "request.timeout.ms")
_ENV_REFERENCE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


def _cluster_security(cluster: Mapping[str, Any]) -> ClientSecurity:
    """The cluster section's client security keys; ``${NAME}`` in a value is read from the
    environment (so a password need not be in the file: Airflow or the shell provides it)."""
    props: dict[str, str] = {}
    for key in SECURITY_KEY_NAMES & set(cluster):
        value = str(cluster[key])
        missing = [name for name in _ENV_REFERENCE.findall(value) if name not in os.environ]
        if missing:
            raise _error(f"cluster.{key}", f"the environment variable {missing[0]} is not set")
        props[key] = _ENV_REFERENCE.sub(lambda m: os.environ[m.group(1)], value)
    try:
        return ClientSecurity.from_props(props)
    except ConfigError as exc:
        raise _error(f"cluster.{exc.key or 'security.protocol'}", str(exc)) from None


def parse_config(raw: Any, overrides: Mapping[str, Any] | None = None, source: str = "<dict>") -> LoaderConfig:
    if not isinstance(raw, Mapping):
        raise _error("<top>", "the loader config must be a mapping")
    raw = _deep_copy(raw)
    for dotted, value in (overrides or {}).items():
        if value is None:
            continue
        _set_dotted(raw, dotted, value)
    unknown = sorted(set(raw) - _TOP_KEYS)
    if unknown:
        raise _error(unknown[0], f"unknown key (known: {', '.join(sorted(_TOP_KEYS))})")

    cluster = _mapping(raw, "cluster", required=True)
    bootstrap = cluster.get("bootstrap.servers")
    zk = cluster.get("zookeeper.connect")
    for k in cluster:
        if k not in CLUSTER_KEYS and k not in SECURITY_KEY_NAMES:
            raise _error(f"cluster.{k}", f"unknown key (known: {', '.join(CLUSTER_KEYS)} and the clients' security "
                                         "keys: security.protocol, ssl.*, sasl.*)")
    security = _cluster_security(cluster)
    if not bootstrap and not zk:
        raise _error("cluster.bootstrap.servers", "set cluster.bootstrap.servers or cluster.zookeeper.connect")
    if bootstrap is not None:
        if isinstance(bootstrap, list):
            bootstrap = ",".join(map(str, bootstrap))
        bootstrap = str(bootstrap)
        for server in bootstrap.split(","):
            host, _, port = server.strip().rpartition(":")
            if not host or not port.isdigit():
                raise _error("cluster.bootstrap.servers", f"{server.strip()!r} is not host:port")
    request_timeout = _value(cluster, "request.timeout.ms", "cluster.request.timeout.ms")

    warehouse = raw.get("warehouse")
    if not isinstance(warehouse, str) or not warehouse:
        raise _error("warehouse", "required: a URL (file:///..., hdfs://..., webhdfs://...)")
    scheme = warehouse.split("://", 1)[0] if "://" in warehouse else ""
    if scheme not in ("file", "hdfs", "webhdfs"):
        raise _error("warehouse", f"{warehouse!r}: the scheme must be file://, hdfs:// or webhdfs://")

    topics_raw = raw.get("topics")
    if not isinstance(topics_raw, list) or not topics_raw:
        raise _error("topics", "required: a list of topics (each with name: or pattern:)")
    topics = tuple(_topic(t, f"topics[{i}]") for i, t in enumerate(topics_raw))

    reset = _reset(raw.get("reset", "earliest"), "reset")
    oor = _value(raw, "out_of_range", "out_of_range")
    max_range = _value(raw, "max_range_records", "max_range_records")
    ratio = _value(raw, "max_error_ratio", "max_error_ratio")

    fetch = _mapping(raw, "fetch")
    fetch_max = _value(fetch, "max.bytes", "fetch.max.bytes")
    _no_unknown(fetch, {"max.bytes"}, "fetch.")
    dedup = _mapping(raw, "dedup")
    dedup_window = _value(dedup, "origin.window.offsets", "dedup.origin.window.offsets")
    _no_unknown(dedup, {"origin.window.offsets"}, "dedup.")
    parquet = _mapping(raw, "parquet")
    compression = _value(parquet, "compression", "parquet.compression")
    row_group = _value(parquet, "row_group_size", "parquet.row_group_size")
    writer = _parquet_writer(parquet.get("writer"), scheme, compression)
    _no_unknown(parquet, {"compression", "row_group_size", "writer"}, "parquet.")

    spark = _mapping(raw, "spark")
    master = spark.get("master", "local[*]")
    if not isinstance(master, str) or not master:
        raise _error("spark.master", f"{master!r} is not a Spark master URL")
    app_name = _value(spark, "app_name", "spark.app_name")
    conf = spark.get("conf", {}) or {}
    if not isinstance(conf, Mapping):
        raise _error("spark.conf", "must be a mapping of Spark settings")
    _no_unknown(spark, {"master", "app_name", "conf", "archives", "python_env", "ship_code", "probe_timeout_ms"},
                "spark.")
    archives = tuple(_value(spark, "archives", "spark.archives") or ())
    python_env = _value(spark, "python_env", "spark.python_env")
    ship_code = _value(spark, "ship_code", "spark.ship_code")
    probe_timeout = _value(spark, "probe_timeout_ms", "spark.probe_timeout_ms")

    webhdfs = _mapping(raw, "webhdfs")
    _no_unknown(webhdfs, {"user", "address"}, "webhdfs.")
    address = webhdfs.get("address")
    if address is not None and not re.fullmatch(r"[^\s:/]+:\d+", str(address)):
        raise _error("webhdfs.address", f"{address!r} is not host:port (the namenode's HTTP address, "
                                             "e.g. namenode:9870)")
    schedule = _value(raw, "schedule", "schedule")
    compaction = _mapping(raw, "compaction")
    _no_unknown(compaction, {"target_size", "older_than", "schedule"}, "compaction.")
    target_bytes = parse_size_bytes(_value(compaction, "target_size", "compaction.target_size"), "compaction.target_size")
    older_than_ms = parse_duration_ms(_value(compaction, "older_than", "compaction.older_than"), "compaction.older_than")
    airflow = dict(_mapping(raw, "airflow"))
    _no_unknown(airflow, {"catchup", "start_date", "load", "spark_submit", "spark_submit_args", "kafka_conn_id",
                          "retries", "retry_delay"}, "airflow.")
    if airflow.get("load", "inline") not in ("inline", "spark-submit"):
        raise _error("airflow.load", f"{airflow.get('load')!r} is not one of inline, spark-submit")
    if not isinstance(airflow.get("catchup", False), bool):
        raise _error("airflow.catchup", f"{airflow.get('catchup')!r} is not true or false")

    cfg = LoaderConfig(
        bootstrap_servers=bootstrap, zookeeper_connect=str(zk) if zk else None, warehouse=warehouse.rstrip("/"),
        topics=topics, reset=reset, out_of_range=oor, max_range_records=max_range, fetch_max_bytes=fetch_max,
        dedup_window=dedup_window,
        request_timeout_ms=request_timeout, max_error_ratio=float(ratio),
        parquet_compression=compression, row_group_size=row_group, parquet_writer=writer,
        spark_master=master, spark_app_name=app_name,
        spark_conf={str(k): str(v) for k, v in conf.items()}, spark_archives=archives, spark_python_env=python_env,
        spark_ship_code=ship_code, spark_probe_timeout_ms=probe_timeout, webhdfs_user=webhdfs.get("user"),
        webhdfs_address=str(address) if address is not None else None, schedule=schedule, source=source,
        airflow=airflow, metrics=_metrics(_mapping(raw, "metrics")), security=security,
        compaction_target_bytes=target_bytes, compaction_older_than_ms=older_than_ms,
        compaction_schedule=_value(compaction, "schedule", "compaction.schedule"),
        airflow_retries=_value(airflow, "retries", "airflow.retries"),
        airflow_retry_delay_ms=parse_duration_ms(_value(airflow, "retry_delay", "airflow.retry_delay"),
                                                 "airflow.retry_delay"),
    )
    groups = _groups(raw.get("groups"))
    if groups:
        cfg = replace(cfg, groups=groups)
        for g in groups:
            for i, entry in enumerate(g.topics):
                _group_spec(cfg, entry, f"groups.{g.name}.topics[{i}]")
    return cfg


_LABEL_VALUE = re.compile(r"[A-Za-z0-9_.:-]{1,200}")


def _metrics(raw: Mapping) -> MetricsConfig:
    """``metrics: {pushgateway: http://host:9091, job: logbus_loader, instance: ...}``."""
    _no_unknown(raw, {"pushgateway", "job", "instance"}, "metrics.")
    url = raw.get("pushgateway")
    if url is not None:
        url = str(url).rstrip("/")
        parts = urllib.parse.urlsplit(url)
        try:
            port_ok = parts.port is None or 0 < parts.port
        except ValueError:
            port_ok = False
        if parts.scheme not in ("http", "https") or not parts.hostname or not port_ok or parts.query or parts.fragment:
            raise _error("metrics.pushgateway", f"{url!r} is not a pushgateway URL (http://host:9091)")
    labels: dict[str, str] = {}
    for key in ("job", "instance"):
        value = raw.get(key)
        if value is not None:
            if not _LABEL_VALUE.fullmatch(str(value)):
                raise _error(f"metrics.{key}", f"{value!r} must be 1-200 letters, digits, _ . : -")
            labels[key] = str(value)
    return MetricsConfig(pushgateway=url, **labels)


def _parquet_writer(value: Any, scheme: str, compression: str) -> str:
    """``python`` (each task writes Parquet with pyarrow) or ``spark`` (Spark's Hadoop writer, the
    only one that reaches hdfs://); unset: ``spark`` for hdfs://, else ``python``."""
    if value is None:
        value = "spark" if scheme == "hdfs" else "python"
    value = LOADER_CONFIG["parquet.writer"].parse(value, path_first=True)
    if value == "python" and scheme == "hdfs":
        raise _error("parquet.writer", "python cannot write an hdfs:// warehouse (pyarrow has no libhdfs here): "
                                            "use spark, or webhdfs:// for the same cluster")
    if value == "spark" and compression == "brotli":
        raise _error("parquet.compression", "brotli is not built into Spark's Parquet writer (parquet.writer: "
                                                 "spark): use none, snappy, gzip, zstd or lz4")
    return value


def _groups(raw: Any) -> tuple[GroupSpec, ...]:
    """``groups: {name: [topic, ...]}`` or ``{name: {topics: [...], schedule: '@daily'}}``."""
    if raw is None:
        return ()
    if not isinstance(raw, Mapping) or not raw:
        raise _error("groups", "must be a mapping of group name to a list of topics")
    out = []
    for name, value in raw.items():
        key = f"groups.{name}"
        if not re.fullmatch(r"[A-Za-z0-9_.-]{1,100}", str(name)):
            raise _error(key, f"{name!r} is not a valid group name (letters, digits, _ . -)")
        schedule = None
        if isinstance(value, Mapping):
            _no_unknown(value, {"topics", "schedule"}, f"{key}.")
            schedule = value.get("schedule")
            value = value.get("topics")
        if not isinstance(value, list) or not value or not all(isinstance(t, str) for t in value):
            raise _error(f"{key}.topics", "must be a non-empty list of topic names or patterns")
        out.append(GroupSpec(str(name), tuple(value), str(schedule) if schedule is not None else None))
    return tuple(out)


def parse_reset(value: Any, key: str = "reset") -> ResetPolicy:
    """``earliest``, ``latest``, epoch milliseconds, or an ISO-8601 time (UTC when no zone)."""
    return _reset(value, key)


def _reset(value: Any, key: str) -> ResetPolicy:
    if isinstance(value, str) and value in RESET_POLICIES:
        return ResetPolicy(value)
    if isinstance(value, bool):
        raise _error(key, f"{value!r} is not earliest, latest or a timestamp")
    if isinstance(value, int) or (isinstance(value, str) and value.isdigit()):
        return ResetPolicy("timestamp", int(value))
    if isinstance(value, _dt.datetime):
        when = value
    elif isinstance(value, str):
        try:
            when = _dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            raise _error(key, f"{value!r} is not earliest, latest, epoch milliseconds or an ISO-8601 time") from None
    else:
        raise _error(key, f"{value!r} is not earliest, latest or a timestamp")
    if when.tzinfo is None:
        when = when.replace(tzinfo=_dt.UTC)
    return ResetPolicy("timestamp", int(when.timestamp() * 1000))


def _topic(raw: Any, key: str) -> TopicSpec:
    if isinstance(raw, str):
        raw = {"name": raw}
    if not isinstance(raw, Mapping):
        raise _error(key, "must be a topic name or a mapping with name: or pattern:")
    _no_unknown(raw, {"name", "pattern", "format", "schema", "time_field", "expectations", "require_match",
                      "late_data"}, f"{key}.")
    name, pattern = raw.get("name"), raw.get("pattern")
    if (name is None) == (pattern is None):
        raise _error(key, "set exactly one of name: or pattern:")
    if name is not None and (not isinstance(name, str) or not re.fullmatch(r"[A-Za-z0-9._-]{1,249}", name)):
        raise _error(f"{key}.name", f"{name!r} is not a valid topic name")
    if pattern is not None:
        try:
            re.compile(str(pattern))
        except re.error as exc:
            raise _error(f"{key}.pattern", f"{pattern!r} is not a valid regular expression: {exc}") from None
    fmt = raw.get("format", "raw")
    fmt = {"utf-8": "utf8", "bytes": "raw"}.get(fmt, fmt)
    if fmt not in FORMATS:
        raise _error(f"{key}.format", f"{fmt!r} is not one of {', '.join(FORMATS)}")
    schema: list[FieldSpec] = []
    schema_raw = raw.get("schema")
    if fmt == "json":
        if not isinstance(schema_raw, (list, Mapping)) or not schema_raw:
            raise _error(f"{key}.schema", "format json needs a schema: a list of {name, type, required} or a mapping name: type")
        items = schema_raw.items() if isinstance(schema_raw, Mapping) else enumerate(schema_raw)
        seen = set()
        reserved = {"topic", "partition", "offset", "timestamp", "key", "headers", "dt", "hour"}
        ftype: str | None  # as configured: checked against FIELD_TYPES below
        for i, item in items:
            fkey = f"{key}.schema.{i}" if isinstance(schema_raw, Mapping) else f"{key}.schema[{i}]"
            if isinstance(schema_raw, Mapping):
                fname = str(i)
                if isinstance(item, str):
                    ftype, required = item, False
                elif isinstance(item, Mapping):
                    ftype, required = item.get("type"), bool(item.get("required", False))
                else:
                    raise _error(fkey, "must be a type name or {type:, required:}")
            else:
                if not isinstance(item, Mapping) or "name" not in item:
                    raise _error(fkey, "must be a mapping with name: and type:")
                fname, ftype, required = str(item["name"]), item.get("type"), bool(item.get("required", False))
            if ftype not in FIELD_TYPES:
                raise _error(f"{fkey}.type" if not isinstance(schema_raw, Mapping) else fkey,
                                  f"{ftype!r} is not one of {', '.join(FIELD_TYPES)}")
            if fname in reserved:
                raise _error(fkey, f"field name {fname!r} clashes with a loader column ({', '.join(sorted(reserved))})")
            if fname in seen:
                raise _error(fkey, f"field {fname!r} is declared twice")
            seen.add(fname)
            schema.append(FieldSpec(fname, ftype, required))
    elif schema_raw is not None:
        raise _error(f"{key}.schema", f"a schema applies to format json only (this topic is {fmt})")
    time_field = raw.get("time_field", RECORD_TIMESTAMP)
    if time_field != RECORD_TIMESTAMP:
        if fmt != "json":
            raise _error(f"{key}.time_field", f"only a json topic can partition by a value field (this topic is {fmt})")
        types = {f.name: f.type for f in schema}
        if time_field not in types:
            raise _error(f"{key}.time_field", f"{time_field!r} is not a field of the schema")
        if types[time_field] not in ("timestamp", "long", "int"):
            raise _error(f"{key}.time_field", f"{time_field!r} has type {types[time_field]}; use timestamp or long (epoch ms)")
    require_match = raw.get("require_match", False)
    if not isinstance(require_match, bool):
        raise _error(f"{key}.require_match", f"{require_match!r} is not true or false")
    return TopicSpec(name=name, pattern=str(pattern) if pattern is not None else None, format=fmt,
                     schema=tuple(schema), time_field=time_field, require_match=require_match,
                     late_data=_late_policy(raw.get("late_data"), f"{key}.late_data"),
                     expectations=_expectations(raw.get("expectations"), f"{key}.expectations"))


def _expectations(raw: Any, key: str) -> tuple:
    """Extra Great Expectations checks: a list of ``{expect_x: {kwargs}}`` or ``{type: expect_x, kwargs: {}}``."""
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise _error(key, "must be a list of {expect_...: {arguments}}")
    out = []
    for i, item in enumerate(raw):
        k = f"{key}[{i}]"
        if isinstance(item, Mapping) and "type" in item:
            etype, kwargs = item["type"], item.get("kwargs", {})
        elif isinstance(item, Mapping) and len(item) == 1:
            [(etype, kwargs)] = item.items()
        else:
            raise _error(k, "must be {expect_...: {arguments}} or {type: expect_..., kwargs: {...}}")
        if not isinstance(etype, str) or not re.fullmatch(r"expect_[a-z0-9_]+", etype):
            raise _error(k, f"{etype!r} is not a Great Expectations expectation name (expect_...)")
        if not isinstance(kwargs or {}, Mapping):
            raise _error(k, "the arguments must be a mapping")
        out.append({"type": etype, "kwargs": _deep_copy(dict(kwargs or {}))})
    return tuple(out)


def _mapping(raw: Mapping, key: str, required: bool = False) -> Mapping:
    value = raw.get(key)
    if value is None:
        if required:
            raise _error(key, "required")
        return {}
    if not isinstance(value, Mapping):
        raise _error(key, "must be a mapping")
    return value


def _no_unknown(raw: Mapping, known: set[str], prefix: str) -> None:
    for k in raw:
        if k not in known:
            raise _error(f"{prefix}{k}", f"unknown key (known: {', '.join(sorted(known))})")


def _deep_copy(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: _deep_copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_deep_copy(v) for v in value]
    return value


def _set_dotted(raw: dict, dotted: str, value: Any) -> None:
    """``cluster.bootstrap.servers`` -> raw['cluster']['bootstrap.servers'] (Kafka keys keep their dots)."""
    head, _, rest = dotted.partition(".")
    if not rest or head not in ("cluster", "spark", "fetch", "parquet", "webhdfs", "metrics"):
        raw[dotted] = value
        return
    section = raw.setdefault(head, {})
    if head == "spark" and rest.startswith("conf."):
        section.setdefault("conf", {})[rest[5:]] = value
    else:
        section[rest] = value
