"""`logbus topics` filters without a cluster: --topic as a regex or comma list, and each
--describe report (under-replicated, unavailable, under/at min ISR)."""

from __future__ import annotations

import pytest

from broker.client.admin import PartitionDescription, TopicDescription
from broker.tools import CommandError
from broker.tools.topic_filters import is_pattern, matching_topics, reported

NAMES = ["orders", "orders-eu", "payments", "__consumer_offsets"]
TOPIC = TopicDescription("t", [
    PartitionDescription(0, 1, [1, 2, 3], [1, 2, 3]),
    PartitionDescription(1, 2, [2, 3, 1], [2, 3]),
    PartitionDescription(2, -1, [3, 1, 2], [3], error_code=5),
])


def test_topic_patterns_match_whole_names_and_commas_mean_or() -> None:
    assert matching_topics(NAMES, "orders") == ["orders"]
    assert matching_topics(NAMES, "orders.*") == ["orders", "orders-eu"]
    assert matching_topics(NAMES, "orders,payments") == ["orders", "payments"]
    assert matching_topics(NAMES, None, exclude_internal=True) == ["orders", "orders-eu", "payments"]
    assert (is_pattern("orders"), is_pattern("a,b"), is_pattern("o.*"), is_pattern("my.topic")) == (False, True, True, False)
    with pytest.raises(CommandError, match="invalid topic filter"):
        matching_topics(NAMES, "(")


@pytest.mark.parametrize(("reports", "min_isr", "partitions"), [
    (["under_replicated_partitions"], 2, [1, 2]),
    (["unavailable_partitions"], 2, [2]),
    (["under_min_isr_partitions"], 2, [2]),
    (["at_min_isr_partitions"], 2, [1]),
    (["unavailable_partitions", "at_min_isr_partitions"], 2, [1, 2]),
    ([], 2, [0, 1, 2]),
])
def test_each_report_lists_its_partitions(reports: list[str], min_isr: int, partitions: list[int]) -> None:
    assert [p.partition for p in reported(TOPIC, reports, min_isr).partitions] == partitions
