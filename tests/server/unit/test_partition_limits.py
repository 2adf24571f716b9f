"""max.partitions.per.request and max.broker.partition.count, checked before any work."""

from __future__ import annotations

import pytest

from broker.protocol.errors import InvalidPartitionsError, PolicyViolationError
from broker.server.topics import PartitionBudget, check_broker_partition_counts


def test_one_topic_over_the_limit_is_invalid_partitions_and_a_request_over_budget_a_policy_violation() -> None:
    budget = PartitionBudget(100)
    with pytest.raises(InvalidPartitionsError, match="max.partitions.per.request"):
        budget.take("huge", 16_711_682)
    budget.take("a", 60)
    with pytest.raises(PolicyViolationError):
        budget.take("b", 41)
    budget.take("c", 40)  # what is left still fits
    assert budget.used == 100


def test_a_broker_over_max_broker_partition_count_is_refused() -> None:
    check_broker_partition_counts({1: 3, 2: 3}, {0: [1, 2], 1: [2, 1]}, limit=5)
    with pytest.raises(PolicyViolationError, match=r"\[2\]"):
        check_broker_partition_counts({1: 3, 2: 4}, {0: [1, 2], 1: [2, 3]}, limit=5)
