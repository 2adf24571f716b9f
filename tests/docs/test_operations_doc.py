"""docs/operations.md lists every config key the code reads, with the default the code uses.

The tables are the doc's; this test only checks them against the key tables in the code
(broker/config.py KNOWN_KEYS and its hand-read keys, broker/storage/config.py's topic keys and
LogConfig defaults, the loader's ``metrics:`` keys from pipelines/config.py's MetricsConfig, the
mirror-maker's ``--metrics.*`` flags from mirror/config.py's MirrorConfig), so adding a key or
changing a default without the doc fails here.
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

from broker import config as broker_config
from broker.storage import config as storage_config
from mirror.cli import add_arguments as mirror_arguments
from mirror.config import MirrorConfig
from pipelines.config import MetricsConfig

DOC = Path(__file__).resolve().parents[2] / "docs" / "operations.md"

# Keys the broker reads outside KNOWN_KEYS, with the default the code applies.
HAND_READ_BROKER_KEYS = {
    "listeners": "PLAINTEXT://0.0.0.0:9092",
    "advertised.listeners": "(listeners)",
    "host.name": "(none)",
    "port": "9092",
    "advertised.host.name": "(none)",
    "advertised.port": "(none)",
    "log.dirs": "/tmp/kafka-logs",
    "log.dir": "(none)",
    "producer.id.expiration.ms": str(storage_config.LogConfig().producer_id_expiration_ms),
}


def format_default(value: object) -> str:
    """How a default is written in the doc's tables."""
    if value is broker_config._NO_DEFAULT:
        return "(required)"
    if value is None:
        return "(none)"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, list):
        return ",".join(value)
    if isinstance(value, dict):
        return ",".join(f"{k}:{v}" for k, v in value.items())
    return str(value)


def _rows(text: str) -> dict[str, list[str]]:
    """`key` -> the other cells of the table row whose first cell is `key`.

    Rows under a heading containing "Topic-level" are topic keys, returned as `topic:<key>`
    (several names, min.insync.replicas for one, are both broker and topic keys).
    """
    rows: dict[str, list[str]] = {}
    topic_section = False
    for line in text.splitlines():
        if line.startswith("#"):
            topic_section = "topic-level" in line.lower()
            continue
        m = re.match(r"^\|\s*`([^`]+)`\s*\|(.*)\|\s*$", line)
        if m:
            key = ("topic:" if topic_section else "") + m.group(1)
            rows.setdefault(key, [c.strip() for c in m.group(2).split("|")])
    return rows


@pytest.fixture(scope="module")
def rows() -> dict[str, list[str]]:
    return _rows(DOC.read_text(encoding="utf-8"))


def _check(rows: dict[str, list[str]], key: str, default: str) -> None:
    assert key in rows, f"docs/operations.md has no table row for `{key}`"
    assert rows[key] and rows[key][0] == f"`{default}`", (
        f"docs/operations.md gives `{key}` the default {rows[key][0] if rows[key] else '?'}; the code uses `{default}`"
    )


def test_every_broker_key_with_its_default(rows: dict[str, list[str]]) -> None:
    for key, spec in broker_config.KNOWN_KEYS.items():
        _check(rows, key, format_default(spec.default))


def test_hand_read_broker_keys(rows: dict[str, list[str]]) -> None:
    # the hand-read list above must itself stay complete
    assert broker_config._SPECIAL_KEYS <= HAND_READ_BROKER_KEYS.keys()
    for key, default in HAND_READ_BROKER_KEYS.items():
        _check(rows, key, default)


def test_every_topic_key_with_its_default(rows: dict[str, list[str]]) -> None:
    defaults = {f.name: f.default for f in dataclasses.fields(storage_config.LogConfig)}
    for key, (attr, _) in storage_config._TOPIC_KEYS.items():
        _check(rows, f"topic:{key}", format_default(defaults[attr]))


def test_accepted_but_unused_topic_keys_are_listed(rows: dict[str, list[str]]) -> None:
    for key in storage_config._OTHER_TOPIC_KEYS:
        assert f"topic:{key}" in rows, f"docs/operations.md has no table row for `topic:{key}`"


def test_loader_metrics_keys(rows: dict[str, list[str]]) -> None:
    """The loader's ``metrics:`` keys (the pushgateway), documented with the monitoring."""
    for f in dataclasses.fields(MetricsConfig):
        _check(rows, f"metrics.{f.name}", format_default(f.default))


def _mirror_metrics_flags() -> dict[str, object]:
    """``--metrics.port`` -> MirrorConfig's default, for its ``metrics_*`` fields."""
    return {"--" + f.name.replace("_", "."): f.default for f in dataclasses.fields(MirrorConfig)
            if f.name.startswith("metrics_")}


def test_mirror_metrics_flags(rows: dict[str, list[str]]) -> None:
    """The mirror-maker's Prometheus endpoint flags, which the command really takes."""
    import argparse

    parser = argparse.ArgumentParser()
    mirror_arguments(parser)
    flags = _mirror_metrics_flags()
    assert flags and set(flags) <= set(parser._option_string_actions)
    for flag, default in flags.items():
        _check(rows, flag, format_default(default))


def test_no_stale_rows(rows: dict[str, list[str]]) -> None:
    """A documented key the code no longer reads is an error too."""
    known = set(broker_config.KNOWN_KEYS) | set(HAND_READ_BROKER_KEYS)
    known |= {f"metrics.{f.name}" for f in dataclasses.fields(MetricsConfig)}
    known |= set(_mirror_metrics_flags())
    known |= {f"topic:{k}" for k in storage_config._TOPIC_KEYS} | {f"topic:{k}" for k in storage_config._OTHER_TOPIC_KEYS}
    stale = sorted(k for k in rows if (k.startswith("topic:") or "." in k or k in ("port", "listeners")) and k not in known)
    assert not stale, f"docs/operations.md documents keys the code does not read: {stale}"
