"""Dynamic config rules without a cluster: which entity a resource names, what may change, how
IncrementalAlterConfigs operations combine, and the tool's --add-config syntax."""

from __future__ import annotations

import pytest

from broker.protocol.errors import InvalidConfigError, InvalidRequestError
from broker.server.dynamic_configs import APPEND, DELETE, SET, SUBTRACT, apply_operations, entity_of, validate
from broker.tools import CommandError
from broker.tools.configs import parse_add_config


def test_resources_name_config_entities() -> None:
    assert entity_of(2, "events") == ("topics", "events")
    assert entity_of(4, "3") == ("brokers", "3")
    assert entity_of(4, "") == ("brokers", "<default>")
    with pytest.raises(InvalidRequestError):
        entity_of(4, "not-an-id")
    with pytest.raises(InvalidRequestError):
        entity_of(3, "x")


def test_only_known_valid_keys_and_dynamic_broker_keys_are_accepted() -> None:
    validate("topics", {"retention.ms": "1000", "cleanup.policy": "delete"})
    with pytest.raises(InvalidConfigError, match="retention.ms"):
        validate("topics", {"retention.ms": "soon"})
    with pytest.raises(InvalidConfigError, match="no.such.key"):
        validate("topics", {"no.such.key": "1"})
    validate("brokers", {"log.retention.ms": "60000", "min.insync.replicas": "2"})
    with pytest.raises(InvalidConfigError, match="dynamically: broker.id"):
        validate("brokers", {"broker.id": "7"})


def test_incremental_operations() -> None:
    current = {"retention.ms": "1000", "cleanup.policy": "delete"}
    ops = [
        {"name": "segment.bytes", "config_operation": SET, "value": "4096"},
        {"name": "retention.ms", "config_operation": DELETE, "value": None},
        {"name": "cleanup.policy", "config_operation": APPEND, "value": "compact"},
    ]
    assert apply_operations(current, ops) == {"segment.bytes": "4096", "cleanup.policy": "delete,compact"}
    after = apply_operations({"cleanup.policy": "delete,compact"}, [{"name": "cleanup.policy", "config_operation": SUBTRACT,
                                                                     "value": "delete"}])
    assert after == {"cleanup.policy": "compact"}
    with pytest.raises(InvalidConfigError):
        apply_operations({}, [{"name": "retention.ms", "config_operation": APPEND, "value": "1"}])


def test_add_config_syntax() -> None:
    assert parse_add_config("retention.ms=1000,cleanup.policy=[delete,compact]") == {
        "retention.ms": "1000", "cleanup.policy": "delete,compact"}
    with pytest.raises(CommandError):
        parse_add_config("retention.ms")
