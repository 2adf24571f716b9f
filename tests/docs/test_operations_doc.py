"""docs/operations.md lists every configuration key, with its default, from the key tables.

Every key is declared once in a ``ConfigDef`` table (broker/configdef.py): the broker's, the
topic's, the producer's, the consumer's, the mirror-maker's and the loader's. This test walks
those tables, so a key added to a table without a row in the doc, a default changed without the
doc, or a row for a key no table has, fails here. Besides the tables, the broker reads its
listeners and data directories by hand (HAND_READ_BROKER_KEYS).
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest

from broker import config as broker_config
from broker.client.group_config import CONSUMER_CONFIG
from broker.client.producer_config import PRODUCER_CONFIG
from broker.client.zk_consumer_config import ZK_CONSUMER_CONFIG
from broker.configdef import NO_DEFAULT, ConfigDef, Scope
from broker.storage.config import TOPIC_CONFIG
from mirror.cli import add_arguments as mirror_arguments
from mirror.config import MIRROR_CONFIG
from pipelines.config import LOADER_CONFIG

DOC = Path(__file__).resolve().parents[2] / "docs" / "operations.md"

TABLES: list[ConfigDef] = [broker_config.BROKER_CONFIG, TOPIC_CONFIG, PRODUCER_CONFIG, CONSUMER_CONFIG, ZK_CONSUMER_CONFIG,
                           MIRROR_CONFIG, LOADER_CONFIG]

# The heading (lower case) of the doc's section for each table's keys; the broker's are everywhere else.
SECTIONS = {Scope.TOPIC: "topic-level", Scope.PRODUCER: "producer keys", Scope.ZK_CONSUMER: "zookeeper consumer keys",
            Scope.CONSUMER: "consumer keys", Scope.MIRROR: "mirror-maker keys", Scope.LOADER: "loader keys"}

# Keys the broker reads outside its table, with the default the code applies.
HAND_READ_BROKER_KEYS = {
    "listeners": "PLAINTEXT://0.0.0.0:9092",
    "advertised.listeners": "(listeners)",
    "host.name": "(none)",
    "port": "9092",
    "advertised.host.name": "(none)",
    "advertised.port": "(none)",
    "log.dirs": "/tmp/kafka-logs",
    "log.dir": "(none)",
}

# Keys of a --consumer.config file, not flags of `logbus mirror-maker`.
MIRROR_FILE_ONLY = {"mirror.source.name"}


def format_default(value: object) -> str:
    """How a default is written in the doc's tables."""
    if value is NO_DEFAULT:
        return "(required)"
    if value is None or value == "":
        return "(none)"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, list):
        return ",".join(value)
    if isinstance(value, dict):
        return ",".join(f"{k}:{v}" for k, v in value.items())
    return str(value)


def row_name(scope: Scope, key: str) -> str:
    """A key as _rows names it: ``producer:acks``; broker keys bare."""
    return key if scope is Scope.BROKER else f"{scope.value}:{key}"


def _rows(text: str) -> dict[str, list[str]]:
    """`key` -> the other cells of the table row whose first cell is `key`, named by row_name."""
    rows: dict[str, list[str]] = {}
    scope = Scope.BROKER
    for line in text.splitlines():
        if line.startswith("#"):
            heading = line.lower()
            scope = next((s for s, marker in SECTIONS.items() if marker in heading), Scope.BROKER)
            continue
        m = re.match(r"^\|\s*`([^`]+)`\s*\|(.*)\|\s*$", line)
        if m:
            rows.setdefault(row_name(scope, m.group(1)), [c.strip() for c in m.group(2).split("|")])
    return rows


@pytest.fixture(scope="module")
def rows() -> dict[str, list[str]]:
    return _rows(DOC.read_text(encoding="utf-8"))


def _check(rows: dict[str, list[str]], key: str, default: str) -> None:
    assert key in rows, f"docs/operations.md has no table row for `{key}`"
    assert rows[key] and rows[key][0] == f"`{default}`", (
        f"docs/operations.md gives `{key}` the default {rows[key][0] if rows[key] else '?'}; the code uses `{default}`"
    )


@pytest.mark.parametrize("table", TABLES, ids=lambda t: t.scope.value)
def test_every_key_of_every_table_with_its_default(rows: dict[str, list[str]], table: ConfigDef) -> None:
    assert len(table) > 0
    for key in table:
        _check(rows, row_name(table.scope, key.name), format_default(key.default))


def test_hand_read_broker_keys(rows: dict[str, list[str]]) -> None:
    # the hand-read list above must itself stay complete
    assert broker_config._SPECIAL_KEYS <= HAND_READ_BROKER_KEYS.keys()
    for key, default in HAND_READ_BROKER_KEYS.items():
        _check(rows, key, default)


def test_mirror_keys_are_flags_of_the_command() -> None:
    """The mirror-maker's table keys are the flags the command really takes."""
    parser = argparse.ArgumentParser()
    mirror_arguments(parser)
    flags = {"--" + key.name for key in MIRROR_CONFIG if key.name not in MIRROR_FILE_ONLY}
    assert flags <= set(parser._option_string_actions)


def test_no_stale_rows(rows: dict[str, list[str]]) -> None:
    """A documented key that no table has is an error too."""
    known = {row_name(table.scope, key.name) for table in TABLES for key in table} | set(HAND_READ_BROKER_KEYS)
    stale = sorted(k for k in rows if (":" in k or "." in k or k in ("port", "listeners")) and k not in known)
    assert not stale, f"docs/operations.md documents keys the code does not read: {stale}"
