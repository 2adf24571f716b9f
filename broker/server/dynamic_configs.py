"""Dynamic configs: what AlterConfigs/IncrementalAlterConfigs may change, and applying changes.

Topic overrides live at /config/topics/<t>; dynamic broker keys at /config/brokers/<id> (one
broker) and /config/brokers/<default> (every broker), over server.properties in that order, as
in Kafka. A writer adds a /config/changes notification; every broker watches that node and
re-reads the entity it names, so a change applies everywhere within moments, without a restart.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from twisted.internet import defer, threads
from twisted.logger import Logger

from broker.cluster.zkdata import ConfigType
from broker.config import BROKER_CONFIG
from broker.configdef import ConfigError
from broker.protocol.errors import InvalidConfigError, InvalidRequestError, UnknownTopicOrPartitionError
from broker.server.notification_watcher import NotificationWatcher
from broker.server.replication_quota import THROTTLE_RATES
from broker.storage.config import BROKER_TO_TOPIC, TOPIC_CONFIG, LogConfig

if TYPE_CHECKING:
    from broker.cluster.zk import ZkClient
    from broker.server.broker import Broker

log = Logger()

TOPIC_RESOURCE = 2
BROKER_RESOURCE = 4
#: Broker keys Kafka lets an operator change without a restart (the log defaults, per broker or cluster-wide).
DYNAMIC_BROKER_KEYS = frozenset(BROKER_TO_TOPIC) | {"log.retention.ms", "log.roll.ms", "log.flush.interval.ms"} | set(
    THROTTLE_RATES)
#: Keys whose value is a comma-separated list (IncrementalAlterConfigs APPEND and SUBTRACT apply to them).
LIST_KEYS = frozenset({"cleanup.policy", "log.cleanup.policy"})

SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3


def entity_of(resource_type: int, name: str) -> tuple[str, str]:
    """The /config entity (type, name) of an AlterConfigs resource; a broker "" is the cluster default."""
    if resource_type == TOPIC_RESOURCE:
        return ConfigType.TOPIC, name
    if resource_type == BROKER_RESOURCE:
        if name == "":
            return ConfigType.BROKER, ConfigType.DEFAULT_BROKER
        if not name.isdigit():
            raise InvalidRequestError(f"broker resource name {name!r} is not a broker id")
        return ConfigType.BROKER, name
    raise InvalidRequestError(f"resource type {resource_type} cannot be altered")


def validate(entity_type: str, config: Mapping[str, str]) -> None:
    """Raise InvalidConfigError (one line naming the key) for an unknown key or a bad value."""
    try:
        if entity_type == ConfigType.TOPIC:
            LogConfig().with_overrides(config)
            return
        fixed = sorted(set(config) - DYNAMIC_BROKER_KEYS)
        if fixed:
            raise InvalidConfigError(f"Cannot update these configs dynamically: {', '.join(fixed)}")
        LogConfig.from_broker(config)
        throttle_rates(config)
    except (ConfigError, ValueError) as exc:
        if isinstance(exc, InvalidConfigError):
            raise
        raise InvalidConfigError(str(exc)) from None


def throttle_rates(props: Mapping[str, str]) -> dict[str, int]:
    """The two replication throttle rates of a broker's props (Kafka's default: unlimited)."""
    return {key: BROKER_CONFIG.parse_value(key, props[key]) if key in props else BROKER_CONFIG.default(key)
            for key in THROTTLE_RATES}


def apply_operations(current: Mapping[str, str], operations: list[dict[str, Any]]) -> dict[str, str]:
    """IncrementalAlterConfigs: SET, DELETE, APPEND and SUBTRACT (list keys only) over ``current``."""
    config = dict(current)
    for op in operations:
        name, kind, value = op["name"], op["config_operation"], op.get("value")
        if kind == SET:
            if value is None:
                raise InvalidConfigError(f"{name}: SET needs a value")
            config[name] = value
        elif kind == DELETE:
            config.pop(name, None)
        elif kind in (APPEND, SUBTRACT):
            if name not in LIST_KEYS:
                raise InvalidConfigError(f"{name} is not a list: APPEND and SUBTRACT apply to {', '.join(sorted(LIST_KEYS))}")
            items = [v for v in config.get(name, _default_of(name)).split(",") if v]
            given = [v for v in (value or "").split(",") if v]
            items = items + [v for v in given if v not in items] if kind == APPEND else [v for v in items if v not in given]
            config[name] = ",".join(items)
        else:
            raise InvalidRequestError(f"{name}: unknown config operation {kind}")
    return config


def _default_of(name: str) -> str:
    key = name if name in TOPIC_CONFIG else BROKER_TO_TOPIC.get(name, name)
    default = TOPIC_CONFIG.default(key) if key in TOPIC_CONFIG else ""
    return ",".join(default) if isinstance(default, list) else str(default or "")


def alter(broker: Broker, resource: dict, replace: bool, validate_only: bool) -> defer.Deferred[None]:
    """Validate and store one resource's change (AlterConfigs replaces; incremental applies
    operations); the Deferred fails with the KafkaError to answer."""
    try:
        entity_type, name = entity_of(resource["resource_type"], resource["resource_name"])
        if entity_type == ConfigType.TOPIC and name not in broker.metadata.topics:
            raise UnknownTopicOrPartitionError(f"Topic '{name}' does not exist.")
    except Exception as exc:
        return defer.fail(exc)

    def in_thread() -> None:
        zk = broker.zk
        if replace:
            config = {c["name"]: c["value"] for c in resource["configs"] if c.get("value") is not None}
        else:
            config = apply_operations(zk.entity_config(entity_type, name), resource["configs"])
        validate(entity_type, config)
        if not validate_only:
            zk.change_entity_config(entity_type, name, config)

    return threads.deferToThread(in_thread)


def effective_broker_props(static: Mapping[str, str], zk: ZkClient, broker_id: int) -> dict[str, str]:
    """server.properties under /config/brokers/<default> under /config/brokers/<id> (blocking)."""
    merged = dict(static)
    merged.update(zk.entity_config(ConfigType.BROKER, ConfigType.DEFAULT_BROKER))
    merged.update(zk.entity_config(ConfigType.BROKER, str(broker_id)))
    return merged


class ConfigChangeListener(NotificationWatcher[tuple[set[tuple[str, str]], dict[str, str] | None]]):
    """Applies /config/changes notifications on one broker: topics are re-read, broker-wide log
    defaults rebuilt. Notifications already present at start were applied by the initial load."""

    what = "config changes"

    def __init__(self, broker: Broker) -> None:
        super().__init__(broker)
        self.last_seen = -1

    def start(self) -> None:
        """Apply the dynamic broker configs now (blocking, before the reactor runs), then watch."""
        zk = self.broker.zk
        changes = zk.config_changes()
        self.last_seen = changes[-1][0] if changes else -1
        self._apply_broker_props(effective_broker_props(self.broker.config.props, zk, self.broker.broker_id))
        zk.watch_config_changes(self.on_notifications)

    def read_new(self) -> tuple[set[tuple[str, str]], dict[str, str] | None]:
        """The entities named since the last pass, and the broker props if a broker entity changed."""
        zk = self.broker.zk
        changed: set[tuple[str, str]] = set()
        for seq, child in zk.config_changes():
            if seq > self.last_seen:
                self.last_seen = seq
                entity = zk.config_change(child)
                if entity is not None:
                    changed.add(entity)
        mine = {ConfigType.DEFAULT_BROKER, str(self.broker.broker_id)}
        touched = any(t == ConfigType.BROKER and n in mine for t, n in changed)
        props = effective_broker_props(self.broker.config.props, zk, self.broker.broker_id) if touched else None
        return changed, props

    def apply(self, found: tuple[set[tuple[str, str]], dict[str, str] | None]) -> None:
        changed, props = found
        if props is not None:
            self._apply_broker_props(props)
        for entity_type, name in sorted(changed):
            if entity_type == ConfigType.TOPIC and name in self.broker.metadata.topics:
                log.info("dynamic config of topic {t} changed", t=name)
                self.broker.refresh_topic(name).addErrback(self._reload_failed, name)

    @staticmethod
    def _reload_failed(failure: Any, topic: str) -> None:
        log.failure("reloading topic {t}", failure, t=topic)

    def _apply_broker_props(self, props: dict[str, str]) -> None:
        try:
            config = LogConfig.from_broker(props)
            rates = throttle_rates(props)
        except (ConfigError, ValueError) as exc:
            log.warn("ignoring invalid dynamic broker config: {exc}", exc=exc)
            return
        for key, quota in (("leader.replication.throttled.rate", self.broker.leader_quota),
                           ("follower.replication.throttled.rate", self.broker.follower_quota)):
            if quota.rate != rates[key]:
                log.info("{key} is now {rate} bytes/s", key=key, rate=rates[key])
                quota.rate = rates[key]
        if config != self.broker.log_config:
            log.info("broker-wide log defaults changed by a dynamic broker config")
            self.broker.log_config = config
            if self.broker.has_replicas:
                self.broker.replicas.set_base_config(config)
