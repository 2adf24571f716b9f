"""Standard clients in consumer groups against real broker processes: partitions split with no
overlap and nothing left out, rebalances on join/leave/death, commits that survive restarts."""

from __future__ import annotations

import time

import pytest

from tests.coordinator.conftest import GROUP_BROKER, MEMBER_KINDS, create_topic, produce, settled, unique, wait_until

PARTITIONS = 6

# The module's tests share one broker (tests/conftest.py: module_broker): each uses groups and
# topics of its own on it, and none stops or reconfigures it.
MODULE_BROKER_OVERRIDES = GROUP_BROKER


@pytest.fixture
def group_broker(module_broker):
    return module_broker


@pytest.mark.parametrize("kind", list(MEMBER_KINDS))
def test_group_splits_rebalances_and_resumes(group_broker, kind):
    make = MEMBER_KINDS[kind]
    bootstrap = group_broker.bootstrap
    topic = create_topic(bootstrap, PARTITIONS)
    group = unique("g")
    produce(bootstrap, topic, PARTITIONS, 10)
    members = [make(bootstrap, topic, group) for _ in range(3)]
    try:
        wait_until(lambda: settled(members, PARTITIONS), 40, what="3 members to split the partitions")
        wait_until(lambda: sum(len(m.records) for m in members) >= PARTITIONS * 10, 30, what="all records")
        # one leaves: the other two take its partitions at once
        members[0].leave()
        wait_until(lambda: settled(members[1:], PARTITIONS), 20, what="2 members to take over")
    finally:
        for m in members:
            if m.is_alive():
                m.leave()
    seen = {(p, o) for m in members for p, o, _ in m.records}
    assert len(seen) == PARTITIONS * 10
    # everything was committed: a new member of the group starts after it
    produce(bootstrap, topic, PARTITIONS, 5, start=10)
    late = make(bootstrap, topic, group)
    try:
        wait_until(lambda: len(late.records) >= PARTITIONS * 5, 30, what="new records")
        time.sleep(1)
    finally:
        late.leave()
    assert sorted(int(v.split(b":")[1]) for _, _, v in late.records) == sorted(list(range(10, 15)) * PARTITIONS)
