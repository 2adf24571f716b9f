"""DescribeConfigs: a topic's effective configuration (overrides over broker defaults), or a
broker's own settings."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from twisted.internet import defer, threads

from broker.cluster.zkdata import ConfigType
from broker.protocol.errors import ErrorCode, InvalidRequestError, KafkaError, UnknownTopicOrPartitionError
from broker.protocol.header import RequestHeader
from broker.protocol.messages import ApiKey
from broker.server.authz import Requester, requester
from broker.server.dispatch import Handler

if TYPE_CHECKING:
    from broker.server.broker import Broker

TOPIC = 2
BROKER = 4
# Kafka's ConfigSource ids.
DYNAMIC_TOPIC_CONFIG = 1
DYNAMIC_BROKER_CONFIG = 2
DYNAMIC_DEFAULT_BROKER_CONFIG = 3
STATIC_BROKER_CONFIG = 4
DEFAULT_CONFIG = 5
SENSITIVE_WORDS = ("password", "secret", "sasl.jaas")


def handle(broker: Broker, header: RequestHeader, request: dict) -> defer.Deferred[dict]:
    resources = request["resources"]
    who = requester(broker)
    d = defer.DeferredList([_describe(broker, who, r) for r in resources], consumeErrors=True)
    return d.addCallback(lambda results: {"throttle_time_ms": 0, "results": [_result(r, o) for r, o in zip(resources, results)]})


def _describe(broker: Broker, who: Requester, resource: dict) -> defer.Deferred[list[dict]]:
    refused = who.config_refusal(ApiKey.DESCRIBE_CONFIGS, resource["resource_type"], resource["resource_name"])
    if refused is not None:
        return defer.fail(refused)
    describe: Callable[[Broker, str], Any] | None = DESCRIBERS.get(resource["resource_type"])
    if describe is None:
        return defer.fail(InvalidRequestError(f"resource type {resource['resource_type']} is not supported"))
    d = defer.maybeDeferred(describe, broker, resource["resource_name"])
    keys = resource.get("configuration_keys")
    if keys is not None:
        d.addCallback(lambda configs: [c for c in configs if c["name"] in set(keys)])
    return d


def _topic_configs(broker: Broker, topic: str) -> defer.Deferred[list[dict]]:
    if topic not in broker.metadata.topics:
        return defer.fail(UnknownTopicOrPartitionError(f"topic {topic} does not exist"))
    d = threads.deferToThread(broker.zk.topic_config, topic)

    def merge(overrides: dict[str, str]) -> list[dict]:
        effective = broker.log_config.with_overrides(overrides).topic_props()
        return [
            _entry(name, value, DYNAMIC_TOPIC_CONFIG if name in overrides else DEFAULT_CONFIG)
            for name, value in sorted(effective.items())
        ]

    return d.addCallback(merge)


def _broker_configs(broker: Broker, name: str) -> defer.Deferred[list[dict]]:
    """server.properties, under the dynamic cluster default, under this broker's dynamic keys."""
    if name not in ("", str(broker.broker_id)):
        raise InvalidRequestError(f"this is broker {broker.broker_id}, not {name}")

    def read() -> list[dict]:
        layers = [
            (STATIC_BROKER_CONFIG, broker.config.props),
            (DYNAMIC_DEFAULT_BROKER_CONFIG, broker.zk.entity_config(ConfigType.BROKER, ConfigType.DEFAULT_BROKER)),
            (DYNAMIC_BROKER_CONFIG, broker.zk.entity_config(ConfigType.BROKER, str(broker.broker_id))),
        ]
        effective = {key: (value, source) for source, props in layers for key, value in props.items()}
        return [_entry(key, value, source) for key, (value, source) in sorted(effective.items())]

    return threads.deferToThread(read)


def _entry(name: str, value: str, source: int) -> dict:
    sensitive = any(word in name for word in SENSITIVE_WORDS)
    return {
        "name": name,
        "value": None if sensitive else value,
        "read_only": source not in (DYNAMIC_TOPIC_CONFIG, DYNAMIC_BROKER_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG),
        "is_default": source == DEFAULT_CONFIG,
        "config_source": source,
        "is_sensitive": sensitive,
        "synonyms": [],
        "config_type": 0,
        "documentation": None,
    }


def _result(resource: dict, outcome: tuple[bool, Any]) -> dict:
    ok, value = outcome
    result = {"resource_type": resource["resource_type"], "resource_name": resource["resource_name"]}
    if ok:
        return {**result, "error_code": ErrorCode.NONE, "error_message": None, "configs": value}
    exc = value.value
    code = exc.code if isinstance(exc, KafkaError) else ErrorCode.UNKNOWN_SERVER_ERROR
    return {**result, "error_code": code, "error_message": str(exc), "configs": []}


DESCRIBERS: dict[int, Callable[[Broker, str], Any]] = {TOPIC: _topic_configs, BROKER: _broker_configs}

HANDLER = Handler(ApiKey.DESCRIBE_CONFIGS, 0, 3, handle)
