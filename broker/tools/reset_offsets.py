"""`consumer-groups --reset-offsets`: Kafka's offset reset — plan new offsets, print them, commit with --execute.

The plan is pure (``plan_reset``: a scenario, the partitions' committed, earliest and latest
offsets, and the offsets found for a timestamp) so that every ``--to-*`` / ``--shift-by`` rule is
unit-tested; ``reset_bootstrap`` gathers those facts from the brokers (ListOffsets by leader,
OffsetFetch and DescribeGroups from the coordinator) and commits through OffsetCommit with
generation -1, which the coordinator accepts only for an inactive group, as Kafka does.
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime

from broker.protocol.errors import ErrorCode
from broker.protocol.messages import ApiKey
from broker.tools import CommandError
from broker.tools.access import ClusterAccess, from_args

TopicPartition = tuple[str, int]
EARLIEST, LATEST = -2, -1
SCENARIOS = ("to-earliest", "to-latest", "to-current", "to-offset", "shift-by", "to-datetime", "by-duration")
INACTIVE_STATES = ("Empty", "Dead")
NO_EXECUTE_WARNING = (
    "WARN: No action will be performed as the --execute option is missing. "
    "You should add the --dry-run option explicitly if you are scripting this command."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The reset flags, beside consumer-groups' own (the action flag --reset-offsets is theirs)."""
    scenario = parser.add_mutually_exclusive_group()
    scenario.add_argument("--to-earliest", action="store_true", help="reset to the earliest offset")
    scenario.add_argument("--to-latest", action="store_true", help="reset to the latest offset")
    scenario.add_argument("--to-current", action="store_true", help="reset to the current committed offset")
    scenario.add_argument("--to-offset", type=int, metavar="OFFSET", help="reset to this offset (kept within the log)")
    scenario.add_argument("--shift-by", type=int, metavar="N", help="move the committed offset by N (may be negative)")
    scenario.add_argument("--to-datetime", metavar="YYYY-MM-DDTHH:mm:SS.sss", help="the first offset at or after this time")
    scenario.add_argument("--by-duration", metavar="PnDTnHnMnS", help="the first offset at or after now minus this")
    run = parser.add_mutually_exclusive_group()
    run.add_argument("--dry-run", action="store_true", help="print the new offsets only (the default)")
    run.add_argument("--execute", action="store_true", help="commit the new offsets")
    parser.add_argument("--all-topics", action="store_true", help="reset every topic the group has offsets for")
    parser.add_argument("--topic", action="append", default=[], metavar="TOPIC[:P,P]",
                        help="the topic to reset (all its partitions, or the listed ones); repeatable")


@dataclass(frozen=True)
class Scenario:
    """One ``--to-*`` / ``--shift-by`` choice and its argument."""

    name: str
    value: int = 0  # offset, shift, or timestamp in ms


def scenario_of(args: argparse.Namespace, now_ms: Callable[[], int] = lambda: int(time.time() * 1000)) -> Scenario:
    """The chosen scenario; CommandError when none is (Kafka names the choices)."""
    if args.to_earliest:
        return Scenario("to-earliest")
    if args.to_latest:
        return Scenario("to-latest")
    if args.to_current:
        return Scenario("to-current")
    if args.to_offset is not None:
        return Scenario("to-offset", args.to_offset)
    if args.shift_by is not None:
        return Scenario("shift-by", args.shift_by)
    if args.to_datetime is not None:
        return Scenario("to-datetime", parse_datetime(args.to_datetime))
    if args.by_duration is not None:
        return Scenario("by-duration", now_ms() - parse_duration(args.by_duration))
    raise CommandError("--reset-offsets needs one of " + ", ".join(f"--{s}" for s in SCENARIOS))


def parse_datetime(text: str) -> int:
    """Kafka's --to-datetime: ``yyyy-MM-ddTHH:mm:SS.sss`` with an optional zone (Z, +hh:mm); local time without one."""
    s = text.strip()
    if s.endswith("Z"):
        s = s[:-1] + "+00:00"
    try:
        parsed = datetime.fromisoformat(s)
    except ValueError:
        raise CommandError(f"Error parsing timestamp '{text}': expected yyyy-MM-ddTHH:mm:SS.sss[+hh:mm]") from None
    if "T" not in s:
        raise CommandError(f"Error parsing timestamp '{text}': expected yyyy-MM-ddTHH:mm:SS.sss[+hh:mm]")
    if parsed.tzinfo is None:
        parsed = parsed.astimezone()  # the local zone, as Kafka's tool does
    return int(parsed.timestamp() * 1000)


_DURATION = re.compile(r"^P(?:(\d+)D)?(?:T(?:(\d+)H)?(?:(\d+)M)?(?:(\d+(?:\.\d+)?)S)?)?$", re.IGNORECASE)


def parse_duration(text: str) -> int:
    """Kafka's --by-duration: an ISO-8601 duration ``PnDTnHnMnS`` in milliseconds."""
    m = _DURATION.match(text.strip())
    if m is None or text.strip().upper() in ("P", "PT") or text.strip().upper().endswith("T"):
        raise CommandError(f"Error parsing duration '{text}': expected PnDTnHnMnS, e.g. PT1H30M")
    days, hours, minutes, seconds = (float(g) if g else 0.0 for g in m.groups())
    return int((((days * 24 + hours) * 60 + minutes) * 60 + seconds) * 1000)


def parse_topic_scope(items: list[str]) -> dict[str, list[int] | None]:
    """``--topic t`` (every partition) or ``--topic t:0,2`` (those), repeatable."""
    scope: dict[str, list[int] | None] = {}
    for item in items:
        topic, sep, parts = item.partition(":")
        if not topic:
            raise CommandError(f"--topic needs a topic name, not {item!r}")
        if not sep:
            scope[topic] = None
            continue
        try:
            scope[topic] = sorted({int(p) for p in parts.split(",") if p.strip()})
        except ValueError:
            raise CommandError(f"--topic {item!r}: partitions must be numbers, e.g. {topic}:0,1") from None
    return scope


@dataclass(frozen=True)
class PartitionOffsets:
    """What the plan needs of one partition; ``at_time`` is the offset found for the scenario's timestamp."""

    current: int | None
    earliest: int
    latest: int
    at_time: int | None = None


def plan_reset(scenario: Scenario, facts: Mapping[TopicPartition, PartitionOffsets],
               warn: Callable[[str], None] = lambda line: print(line, file=sys.stderr)) -> dict[TopicPartition, int]:
    """The new offset of each partition, Kafka's rules: targets outside [earliest, latest] are
    moved to the nearer end (with a warning for --to-offset and --shift-by); a partition without
    a committed offset resets from its earliest for --to-current/--shift-by; a timestamp past
    every record means the latest offset."""
    plan = {}
    for tp, f in sorted(facts.items()):
        name = scenario.name
        if name == "to-earliest":
            target = f.earliest
        elif name == "to-latest":
            target = f.latest
        elif name == "to-current":
            target = f.current if f.current is not None else f.earliest
        elif name == "to-offset":
            target = scenario.value
        elif name == "shift-by":
            target = (f.current if f.current is not None else f.earliest) + scenario.value
        else:  # to-datetime, by-duration
            target = f.at_time if f.at_time is not None and f.at_time >= 0 else f.latest
        plan[tp] = _within_log(tp, target, f, warn if name in ("to-offset", "shift-by") else None)
    return plan


def _within_log(tp: TopicPartition, target: int, f: PartitionOffsets, warn: Callable[[str], None] | None) -> int:
    if target > f.latest:
        if warn:
            warn(f"New offset ({target}) is higher than latest offset for topic partition {tp[0]}-{tp[1]}. "
                 f"Value will be set to {f.latest}")
        return f.latest
    if target < f.earliest:
        if warn:
            warn(f"New offset ({target}) is lower than earliest offset for topic partition {tp[0]}-{tp[1]}. "
                 f"Value will be set to {f.earliest}")
        return f.earliest
    return target


def format_plan(group: str, plan: Mapping[TopicPartition, int]) -> list[str]:
    """Kafka's table: GROUP TOPIC PARTITION NEW-OFFSET."""
    rows = [("GROUP", "TOPIC", "PARTITION", "NEW-OFFSET")] + [(group, t, str(p), str(o)) for (t, p), o in sorted(plan.items())]
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    return [" ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]


# -- against the brokers ------------------------------------------------------------------------


def reset_bootstrap(args: argparse.Namespace) -> int:
    """``consumer-groups --bootstrap-server ... --reset-offsets``: plan, print, commit with --execute."""
    scenario = scenario_of(args)
    if not (args.all_topics or args.topic):
        raise CommandError("One of the reset scopes should be defined: --all-topics, --topic.")
    if not (args.dry_run or args.execute):
        print(NO_EXECUTE_WARNING, file=sys.stderr)
    plan = reset_group(from_args(args), args.group, scenario, None if args.all_topics else args.topic, args.execute)
    for line in format_plan(args.group, plan):
        print(line)
    return 0


def reset_group(access: ClusterAccess, group: str, scenario: Scenario, topics: list[str] | None, execute: bool,
                warn: Callable[[str], None] = lambda line: print(line, file=sys.stderr)) -> dict[TopicPartition, int]:
    """The new offsets of ``group`` on ``topics`` (``TOPIC[:P,P]`` each; None: every topic it has
    offsets for), committed when ``execute``; CommandError when the group is active and ``execute``."""
    brokers, leaders = access.metadata()
    with access.connect(access.coordinator(group, brokers)[1]) as conn:
        described = conn.request(ApiKey.DESCRIBE_GROUPS, 4, {"groups": [group], "include_authorized_operations": False})
        committed = conn.request(ApiKey.OFFSET_FETCH, 5, {"group_id": group, "topics": None})
    state = described["groups"][0]["group_state"]
    if execute and state not in INACTIVE_STATES:
        raise CommandError(f"Assignments can only be reset if the group '{group}' is inactive, "
                           f"but the current state is {state}.")
    current = {(t["name"], p["partition_index"]): p["committed_offset"]
               for t in committed["topics"] for p in t["partitions"] if p["committed_offset"] >= 0}
    partitions = _scope(topics, leaders, current)
    plan = plan_reset(scenario, _facts(access, brokers, leaders, partitions, current, scenario), warn)
    if execute:
        commit_offsets(access, brokers, group, plan)
    return plan


def _scope(topics: list[str] | None, leaders: Mapping[TopicPartition, int],
           current: Mapping[TopicPartition, int]) -> list[TopicPartition]:
    """The partitions to reset: the named ones, or (None) every one the group has offsets for."""
    if topics is None:
        named = {t for t, _ in current}
        return sorted(tp for tp in leaders if tp[0] in named)
    out = []
    for topic, parts in parse_topic_scope(topics).items():
        known = sorted(p for t, p in leaders if t == topic)
        if not known:
            raise CommandError(f"Topic '{topic}' does not exist")
        missing = sorted(set(parts or []) - set(known))
        if missing:
            raise CommandError(f"Topic '{topic}' has no partition {','.join(map(str, missing))}")
        out += [(topic, p) for p in (parts if parts is not None else known)]
    return out


def _facts(access: ClusterAccess, brokers: dict[int, str], leaders: Mapping[TopicPartition, int],
           partitions: list[TopicPartition], current: Mapping[TopicPartition, int],
           scenario: Scenario) -> dict[TopicPartition, PartitionOffsets]:
    unavailable = [tp for tp in partitions if leaders.get(tp, -1) not in brokers]
    if unavailable:
        raise CommandError("no leader for " + ", ".join(f"{t}-{p}" for t, p in unavailable))
    earliest = list_offsets(access, brokers, leaders, dict.fromkeys(partitions, EARLIEST))
    latest = list_offsets(access, brokers, leaders, dict.fromkeys(partitions, LATEST))
    at_time: dict[TopicPartition, int] = {}
    if scenario.name in ("to-datetime", "by-duration"):
        at_time = list_offsets(access, brokers, leaders, dict.fromkeys(partitions, scenario.value))
    return {tp: PartitionOffsets(current.get(tp), earliest[tp], latest[tp], at_time.get(tp)) for tp in partitions}


def list_offsets(access: ClusterAccess, brokers: dict[int, str], leaders: Mapping[TopicPartition, int],
                 timestamps: Mapping[TopicPartition, int]) -> dict[TopicPartition, int]:
    """The offset for each partition's timestamp (-1: none); any partition's error is a CommandError."""
    found = access.list_offsets(brokers, leaders, timestamps)
    for (topic, p), (code, _) in sorted(found.items()):
        if code != ErrorCode.NONE:
            raise CommandError(f"ListOffsets {topic}-{p}: {ErrorCode(code).name}")
    return {tp: offset for tp, (_, offset) in found.items()}


def commit_offsets(access: ClusterAccess, brokers: dict[int, str], group: str, plan: Mapping[TopicPartition, int]) -> None:
    """Commit ``plan`` for an inactive ``group`` at its coordinator (generation -1)."""
    topics: dict[str, list[dict]] = {}
    for (topic, p), offset in sorted(plan.items()):
        topics.setdefault(topic, []).append({"partition_index": p, "committed_offset": offset, "committed_metadata": ""})
    body = {"group_id": group, "generation_id": -1, "member_id": "", "retention_time_ms": -1,
            "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()]}
    with access.connect(access.coordinator(group, brokers)[1]) as conn:
        answer = conn.request(ApiKey.OFFSET_COMMIT, 2, body)
    codes = {p["error_code"] for t in answer["topics"] for p in t["partitions"]} - {ErrorCode.NONE}
    errors = {ErrorCode(c).name for c in codes}
    if errors:
        raise CommandError(f"Error committing the new offsets of group '{group}': {', '.join(sorted(errors))}")
