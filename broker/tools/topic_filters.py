"""Which topics and partitions `logbus topics` shows: Kafka's --topic regex/comma list and the
--describe report filters (--under-replicated-partitions, --unavailable-partitions,
--under-min-isr-partitions, --at-min-isr-partitions, --topics-with-overrides)."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterable

from broker.client.admin import PartitionDescription, TopicDescription
from broker.client.rebalance import Whitelist
from broker.protocol.errors import ErrorCode
from broker.tools import CommandError

PARTITION_REPORTS = ("under_replicated_partitions", "unavailable_partitions", "under_min_isr_partitions",
                     "at_min_isr_partitions")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--under-replicated-partitions", action="store_true",
                        help="with --describe: only partitions whose ISR is smaller than their replicas")
    parser.add_argument("--unavailable-partitions", action="store_true",
                        help="with --describe: only partitions without a leader")
    parser.add_argument("--under-min-isr-partitions", action="store_true",
                        help="with --describe: only partitions whose ISR is below min.insync.replicas")
    parser.add_argument("--at-min-isr-partitions", action="store_true",
                        help="with --describe: only partitions whose ISR is exactly min.insync.replicas")
    parser.add_argument("--topics-with-overrides", action="store_true",
                        help="with --describe: only topics with config overrides (topic lines only)")
    parser.add_argument("--exclude-internal", action="store_true", help="leave out internal topics (__*)")


def matching_topics(names: Iterable[str], pattern: str | None, exclude_internal: bool = False) -> list[str]:
    """The topics ``pattern`` names (Kafka's --topic: a regex matching whole names, commas meaning "or")."""
    try:
        allowed = Whitelist(pattern).is_topic_allowed if pattern else (lambda _name: True)
    except ValueError as exc:
        raise CommandError(str(exc)) from exc
    return sorted(n for n in names if allowed(n) and not (exclude_internal and n.startswith("__")))


def is_pattern(topic: str) -> bool:
    """Whether --topic is more than one literal name (then a miss is not an error for --describe)."""
    return any(c in topic for c in ",*+?[](){}|^$\\")


def partition_reports(args: argparse.Namespace) -> list[str]:
    return [name for name in PARTITION_REPORTS if getattr(args, name, False)]


def _unavailable(p: PartitionDescription) -> bool:
    return p.leader < 0 or p.error_code == ErrorCode.LEADER_NOT_AVAILABLE


def partition_predicate(reports: list[str], min_isr: int) -> Callable[[PartitionDescription], bool]:
    """True for the partitions any of the chosen reports would list (all of them when none is chosen)."""
    tests: dict[str, Callable[[PartitionDescription], bool]] = {
        "under_replicated_partitions": lambda p: len(p.isr) < len(p.replicas),
        "unavailable_partitions": _unavailable,
        "under_min_isr_partitions": lambda p: len(p.isr) < min_isr,
        "at_min_isr_partitions": lambda p: len(p.isr) == min_isr,
    }
    if not reports:
        return lambda p: True
    return lambda p: any(tests[r](p) for r in reports)


def reported(topic: TopicDescription, reports: list[str], min_isr: int) -> TopicDescription:
    """``topic`` with only the partitions the reports list."""
    keep = partition_predicate(reports, min_isr)
    return TopicDescription(topic.name, [p for p in topic.partitions if keep(p)], topic.configs)
