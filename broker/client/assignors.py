"""The two standard assignors of the "consumer" protocol, range and roundrobin, as Kafka's.

An assignor maps {member id: subscribed topics} and {topic: partition count} to
{member id: [(topic, partition)]}; every member appears in the result.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

from broker.client.rebalance import range_assign

Plan = dict[str, list[tuple[str, int]]]
Assignor = Callable[[Mapping[str, Iterable[str]], Mapping[str, int]], Plan]


def range_assignor(subscriptions: Mapping[str, Iterable[str]], partitions: Mapping[str, int]) -> Plan:
    """Kafka's RangeAssignor: per topic, sorted members take consecutive runs of partitions."""
    result: Plan = {m: [] for m in subscriptions}
    members_of: dict[str, list[str]] = {}
    for member, topics in subscriptions.items():
        for topic in set(topics):
            members_of.setdefault(topic, []).append(member)
    for topic, members in members_of.items():
        for member, parts in range_assign(range(partitions.get(topic, 0)), members).items():
            result[member] += [(topic, p) for p in parts]
    return result


def roundrobin_assignor(subscriptions: Mapping[str, Iterable[str]], partitions: Mapping[str, int]) -> Plan:
    """Kafka's RoundRobinAssignor: all partitions in (topic, partition) order dealt to sorted
    members in turn, skipping members not subscribed to the partition's topic."""
    result: Plan = {m: [] for m in subscriptions}
    members = sorted(subscriptions)
    if not members:
        return result
    wants = {m: set(subscriptions[m]) for m in members}
    topics = sorted(set().union(*wants.values()))
    turn = 0
    for topic in topics:
        for partition in range(partitions.get(topic, 0)):
            while topic not in wants[members[turn % len(members)]]:
                turn += 1
            result[members[turn % len(members)]].append((topic, partition))
            turn += 1
    return result


#: Protocol names as every Kafka client spells them, in our order of preference.
ASSIGNORS: dict[str, Assignor] = {"range": range_assignor, "roundrobin": roundrobin_assignor}
