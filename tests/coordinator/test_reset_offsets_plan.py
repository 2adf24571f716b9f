"""consumer-groups --reset-offsets without a cluster: Kafka's rules for every --to-* / --shift-by,
its --to-datetime and --by-duration formats, --topic scopes and the NEW-OFFSET table."""

from __future__ import annotations

import argparse
from datetime import UTC, datetime

import pytest

from broker.tools import CommandError, group_views
from broker.tools.coordinator_groups import GroupView, Member
from broker.tools.reset_offsets import (
    PartitionOffsets,
    Scenario,
    add_arguments,
    format_plan,
    parse_datetime,
    parse_duration,
    parse_topic_scope,
    plan_reset,
    scenario_of,
)

FACTS = {
    ("t", 0): PartitionOffsets(current=5, earliest=2, latest=10, at_time=7),
    ("t", 1): PartitionOffsets(current=None, earliest=0, latest=4, at_time=-1),
}


def _plan(name: str, value: int = 0) -> tuple[dict, list[str]]:
    warnings: list[str] = []
    return plan_reset(Scenario(name, value), FACTS, warnings.append), warnings


@pytest.mark.parametrize(("name", "value", "expected"), [
    ("to-earliest", 0, {("t", 0): 2, ("t", 1): 0}),
    ("to-latest", 0, {("t", 0): 10, ("t", 1): 4}),
    ("to-current", 0, {("t", 0): 5, ("t", 1): 0}),  # no committed offset: from the earliest
    ("to-offset", 3, {("t", 0): 3, ("t", 1): 3}),
    ("shift-by", -2, {("t", 0): 3, ("t", 1): 0}),
    ("to-datetime", 123, {("t", 0): 7, ("t", 1): 4}),  # no record at or after the time: the latest
])
def test_each_scenario_follows_kafkas_rule(name: str, value: int, expected: dict) -> None:
    assert _plan(name, value)[0] == expected


def test_offsets_outside_the_log_go_to_the_nearer_end_with_kafkas_warning() -> None:
    plan, warnings = _plan("to-offset", 50)
    assert plan == {("t", 0): 10, ("t", 1): 4}
    assert warnings[0] == "New offset (50) is higher than latest offset for topic partition t-0. Value will be set to 10"
    plan, warnings = _plan("shift-by", -100)
    assert plan == {("t", 0): 2, ("t", 1): 0}
    assert warnings[0] == "New offset (-95) is lower than earliest offset for topic partition t-0. Value will be set to 2"


def test_datetime_and_duration_formats() -> None:
    assert parse_datetime("2026-01-02T03:04:05.678Z") == int(
        datetime(2026, 1, 2, 3, 4, 5, 678000, tzinfo=UTC).timestamp() * 1000)
    assert parse_datetime("2026-01-02T03:04:05.000+02:00") == int(
        datetime(2026, 1, 2, 1, 4, 5, tzinfo=UTC).timestamp() * 1000)
    assert parse_duration("PT1H30M") == 90 * 60 * 1000
    assert parse_duration("P1DT2S") == (86400 + 2) * 1000
    for bad in ("yesterday", "2026-01-02"):
        with pytest.raises(CommandError, match="Error parsing timestamp"):
            parse_datetime(bad)
    for bad in ("1h", "P", "PT"):
        with pytest.raises(CommandError, match="Error parsing duration"):
            parse_duration(bad)


def _args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    return parser.parse_args(list(argv))


def test_the_scenario_comes_from_the_flags_and_one_is_required() -> None:
    assert scenario_of(_args("--shift-by", "-3")) == Scenario("shift-by", -3)
    assert scenario_of(_args("--by-duration", "PT1M"), now_ms=lambda: 100_000) == Scenario("by-duration", 40_000)
    with pytest.raises(CommandError, match="--to-earliest"):
        scenario_of(_args("--execute"))
    with pytest.raises(SystemExit):
        _args("--to-earliest", "--to-latest")
    with pytest.raises(SystemExit):
        _args("--to-earliest", "--dry-run", "--execute")


def test_topic_scopes_name_all_partitions_or_some() -> None:
    assert parse_topic_scope(["a", "b:0,2", "c:1"]) == {"a": None, "b": [0, 2], "c": [1]}
    with pytest.raises(CommandError, match="partitions must be numbers"):
        parse_topic_scope(["b:x"])


def test_the_plan_prints_as_kafkas_table() -> None:
    assert format_plan("g", {("topic", 1): 12, ("topic", 0): 3}) == [
        "GROUP TOPIC PARTITION NEW-OFFSET",
        "g     topic 0         3",
        "g     topic 1         12",
    ]


def test_state_and_members_views() -> None:
    view = GroupView("g", "Stable", [Member("m-2", "c2", "/10.0.0.2", [("t", 0), ("t", 1)]),
                                     Member("m-1", "c1", "", [])], [], "range")
    assert group_views.table(group_views.STATE_HEADER, group_views.state_rows(view, "h:9092", 1, view.protocol)) == [
        "GROUP COORDINATOR (ID) ASSIGNMENT-STRATEGY STATE  #MEMBERS",
        "g     h:9092 (1)       range               Stable 2",
    ]
    assert group_views.table(group_views.MEMBERS_HEADER, group_views.member_rows(view))[1:] == [
        "g     m-1         -         c1        0",
        "g     m-2         /10.0.0.2 c2        2",
    ]
