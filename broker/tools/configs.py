"""`logbus configs`: Kafka's kafka-configs for dynamic configs.

    logbus configs --bootstrap-server H:P --entity-type topics --entity-name t --alter --add-config retention.ms=1000
    logbus configs --bootstrap-server H:P --entity-type brokers --entity-default --alter --delete-config log.retention.ms
    logbus configs --bootstrap-server H:P --entity-type topics --entity-name t --describe
    logbus configs --zookeeper Z:2181 --entity-type users --entity-name alice --alter \
        --add-config 'SCRAM-SHA-256=[iterations=8192,password=alice-secret]'

Each entity type is one entry of ENTITY_TYPES (how to alter and describe it); topics and brokers
go through IncrementalAlterConfigs and DescribeConfigs, so every broker applies a change within
moments through /config/changes. Users (SCRAM credentials) are written to ZooKeeper
(/config/users/<user>, salted, as Kafka stores them): brokers read them at each login.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass

from broker.client.connection import BrokerConnection, BrokerConnectionError
from broker.cluster.zk import ZkClient
from broker.cluster.zkdata import ConfigType, is_storable_name
from broker.protocol.errors import ErrorCode
from broker.protocol.messages import ApiKey
from broker.security.scram import DEFAULT_ITERATIONS, ScramCredential, ScramFormatError, make_credential
from broker.security.scram import MECHANISMS as SCRAM_MECHANISMS
from broker.tools import CommandError
from broker.tools.access import add_command_config, from_args

INCREMENTAL_ALTER_CONFIGS_VERSION = 0
DESCRIBE_CONFIGS_VERSION = 1
SET, DELETE = 0, 1
SOURCE_NAMES = {1: "DYNAMIC_TOPIC_CONFIG", 2: "DYNAMIC_BROKER_CONFIG", 3: "DYNAMIC_DEFAULT_BROKER_CONFIG"}


@dataclass(frozen=True)
class EntityType:
    """How `configs` alters and describes one entity type: ``alter(args, name, to_set, to_delete)``
    and ``describe(args, name)`` print their outcome and return the exit status."""

    label: str  # "topic", "broker": as Kafka's messages name it
    alter: Callable[[argparse.Namespace, str, dict[str, str], list[str]], int]
    describe: Callable[[argparse.Namespace, str], int]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--bootstrap-server", metavar="HOST:PORT", help="brokers of the cluster")
    where.add_argument("--zookeeper", metavar="HOST:PORT[/chroot]", help="the cluster's ZooKeeper (users: SCRAM credentials)")
    add_command_config(parser)
    parser.add_argument("--entity-type", required=True, choices=sorted(ENTITY_TYPES), help="what to configure")
    name = parser.add_mutually_exclusive_group()
    name.add_argument("--entity-name", help="the topic name or broker id")
    name.add_argument("--entity-default", action="store_true", help="the cluster-wide default (brokers)")
    action = parser.add_mutually_exclusive_group(required=True)
    action.add_argument("--alter", action="store_true", help="change the entity's dynamic config")
    action.add_argument("--describe", action="store_true", help="show the entity's dynamic config")
    parser.add_argument("--add-config", metavar="K=V,K2=[A,B]", help="keys to set (a list value in brackets)")
    parser.add_argument("--delete-config", metavar="K,K2", help="keys to remove")


def parse_add_config(text: str | None) -> dict[str, str]:
    """Kafka's ``k1=v1,k2=[a,b]``: commas inside brackets belong to the value."""
    if not text:
        return {}
    pairs, depth, current = [], 0, ""
    for ch in text:
        depth += {"[": 1, "]": -1}.get(ch, 0)
        if ch == "," and depth == 0:
            pairs.append(current)
            current = ""
        else:
            current += ch
    pairs.append(current)
    config = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise CommandError(f"--add-config: expected key=value, got {pair!r}")
        value = value.strip()
        config[key.strip()] = value[1:-1] if value.startswith("[") and value.endswith("]") else value
    return config


def _connection(args: argparse.Namespace) -> BrokerConnection:
    if not args.bootstrap_server:
        raise CommandError(f"--entity-type {args.entity_type} needs --bootstrap-server")
    try:
        return from_args(args, timeout=30.0).first_answering("logbus-configs")
    except BrokerConnectionError as exc:
        raise CommandError(str(exc)) from None


def _alter_over_protocol(resource_type: int, label: str) -> Callable[[argparse.Namespace, str, dict[str, str], list[str]], int]:
    def alter(args: argparse.Namespace, name: str, to_set: dict[str, str], to_delete: list[str]) -> int:
        ops = [{"name": k, "config_operation": SET, "value": v} for k, v in to_set.items()]
        ops += [{"name": k, "config_operation": DELETE, "value": None} for k in to_delete]
        body = {"resources": [{"resource_type": resource_type, "resource_name": name, "configs": ops}], "validate_only": False}
        with _connection(args) as conn:
            answer = conn.request(ApiKey.INCREMENTAL_ALTER_CONFIGS, INCREMENTAL_ALTER_CONFIGS_VERSION, body)
        result = answer["responses"][0]
        if result["error_code"] != ErrorCode.NONE:
            raise CommandError(f"{ErrorCode(result['error_code']).name}: {result['error_message'] or ''}".rstrip(": "))
        print(f"Completed updating config for {label} {name or '<default>'}.")
        return 0

    return alter


def _describe_over_protocol(resource_type: int, label: str) -> Callable[[argparse.Namespace, str], int]:
    def describe(args: argparse.Namespace, name: str) -> int:
        body = {"resources": [{"resource_type": resource_type, "resource_name": name, "configuration_keys": None}],
                "include_synonyms": False}
        with _connection(args) as conn:
            answer = conn.request(ApiKey.DESCRIBE_CONFIGS, DESCRIBE_CONFIGS_VERSION, body)
        result = answer["results"][0]
        if result["error_code"] != ErrorCode.NONE:
            raise CommandError(f"{ErrorCode(result['error_code']).name}: {result['error_message'] or ''}".rstrip(": "))
        dynamic = [c for c in result["configs"] if c["config_source"] in SOURCE_NAMES]
        print(f"Dynamic configs for {label} {name or '<default>'} are:")
        for c in dynamic:
            value = "null" if c["value"] is None else c["value"]
            source = SOURCE_NAMES[c["config_source"]]
            print(f"  {c['name']}={value} sensitive={str(c['is_sensitive']).lower()} synonyms={{{source}:{c['name']}={value}}}")
        return 0

    return describe


def _zk(args: argparse.Namespace) -> ZkClient:
    if not args.zookeeper:
        raise CommandError("--entity-type users needs --zookeeper (AlterUserScramCredentials is not served)")
    zk = ZkClient(args.zookeeper, session_timeout_ms=10000)
    try:
        zk.start(timeout=15)
    except Exception as exc:
        raise CommandError(f"cannot reach ZooKeeper {args.zookeeper}: {exc}") from None
    return zk


def scram_settings(mechanism: str, value: str) -> tuple[str, int]:
    """``iterations=8192,password=secret`` (iterations optional) -> (password, iterations)."""
    fields: dict[str, str] = {}
    for part in value.split(","):
        key, sep, val = part.partition("=")
        if not sep:
            raise CommandError(f"{mechanism}: expected [iterations=N,]password=P, got {value!r}")
        fields[key.strip()] = val
    if "password" not in fields:
        raise CommandError(f"{mechanism}: password=... is required")
    try:
        return fields["password"], int(fields.get("iterations", DEFAULT_ITERATIONS))
    except ValueError:
        raise CommandError(f"{mechanism}: iterations must be a number") from None


def _alter_user(args: argparse.Namespace, name: str, to_set: dict[str, str], to_delete: list[str]) -> int:
    unknown = sorted((set(to_set) | set(to_delete)) - set(SCRAM_MECHANISMS))
    if unknown:
        raise CommandError(f"users take {', '.join(SCRAM_MECHANISMS)} only, not {', '.join(unknown)}")
    if not is_storable_name(name):
        raise CommandError(f"{name!r} cannot be a user name")
    credentials = {}
    for mechanism, value in to_set.items():
        password, iterations = scram_settings(mechanism, value)
        try:
            credentials[mechanism] = make_credential(mechanism, password, iterations).to_config()
        except ScramFormatError as exc:
            raise CommandError(str(exc)) from None
    zk = _zk(args)
    try:
        config = zk.entity_config(ConfigType.USER, name)
        config.update(credentials)
        for mechanism in to_delete:
            config.pop(mechanism, None)
        zk.change_entity_config(ConfigType.USER, name, config)
    finally:
        zk.stop()
    print(f"Completed updating config for user {name}.")
    return 0


def _describe_user(args: argparse.Namespace, name: str) -> int:
    zk = _zk(args)
    try:
        config = zk.entity_config(ConfigType.USER, name)
    finally:
        zk.stop()
    shown = []
    for mechanism in SCRAM_MECHANISMS:
        if mechanism in config:
            try:
                shown.append(f"{mechanism}=iterations={ScramCredential.from_config(config[mechanism]).iterations}")
            except ScramFormatError:
                shown.append(f"{mechanism}=(unreadable)")
    print(f"SCRAM credential configs for user-principal '{name}' are {', '.join(shown)}")
    return 0


#: entity type -> how to alter and describe it.
ENTITY_TYPES: dict[str, EntityType] = {
    "topics": EntityType("topic", _alter_over_protocol(2, "topic"), _describe_over_protocol(2, "topic")),
    "brokers": EntityType("broker", _alter_over_protocol(4, "broker"), _describe_over_protocol(4, "broker")),
    "users": EntityType("user", _alter_user, _describe_user),
}


def run(args: argparse.Namespace) -> int:
    entity = ENTITY_TYPES[args.entity_type]
    if args.entity_default and args.entity_type != "brokers":
        raise CommandError("--entity-default applies to --entity-type brokers")
    if not args.entity_default and args.entity_name is None:
        raise CommandError("--entity-name or --entity-default is required")
    name = "" if args.entity_default else args.entity_name
    try:
        if args.describe:
            return entity.describe(args, name)
        to_set = parse_add_config(args.add_config)
        to_delete = [k.strip() for k in (args.delete_config or "").split(",") if k.strip()]
        if not to_set and not to_delete:
            raise CommandError("--alter needs --add-config or --delete-config")
        return entity.alter(args, name, to_set, to_delete)
    except (OSError, BrokerConnectionError) as exc:
        raise CommandError(str(exc)) from exc
