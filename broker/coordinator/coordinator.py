"""The group coordinator of one broker: the groups it owns, placement, committed offsets.

A broker owns the groups that ``placement.coordinator_for`` gives it among the live brokers.
When the live set changes, groups that now belong elsewhere are unloaded (parked requests
answer NOT_COORDINATOR, clients find the new coordinator); a new coordinator starts a group
Empty and reads its offsets from ZooKeeper, where every acknowledged commit already is.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import InitVar, dataclass, field
from typing import Any

from twisted.logger import Logger

from broker.cluster.offset_store import ZkOffsetStore
from broker.coordinator.commit_queue import CommitQueue
from broker.coordinator.group import Group, GroupConfig, State
from broker.coordinator.placement import coordinator_for

log = Logger()


@dataclass(eq=False, repr=False)
class GroupCoordinator:
    """The groups this broker coordinates, and the queue writing their commits to ``store``."""

    broker_id: int
    clock: Any  # an IReactorTime: the groups' session and rebalance timers
    config: GroupConfig
    store: ZkOffsetStore
    run_in_thread: InitVar[Callable[..., Any]]  # the commit queue's way to the blocking store
    live_brokers: Callable[[], Iterable[int]]
    groups: dict[str, Group] = field(default_factory=dict, init=False)

    def __post_init__(self, run_in_thread: Callable[..., Any]) -> None:
        self.commits = CommitQueue(self.store, run_in_thread)

    def coordinator_of(self, group_id: str) -> int | None:
        return coordinator_for(group_id, self.live_brokers())

    def owns(self, group_id: str) -> bool:
        return self.coordinator_of(group_id) == self.broker_id

    def group(self, group_id: str) -> Group | None:
        return self.groups.get(group_id)

    def get_or_create(self, group_id: str) -> Group:
        group = self.groups.get(group_id)
        if group is None:
            group = self.groups[group_id] = Group(group_id, self.clock, self.config)
        return group

    def brokers_changed(self) -> None:
        """The live broker set changed: let go of the groups that moved elsewhere."""
        for group_id in [g for g in self.groups if not self.owns(g)]:
            self.unload(group_id)

    def unload(self, group_id: str) -> None:
        group = self.groups.pop(group_id, None)
        if group is not None:
            group.unload()
        self.commits.forget_group(group_id)

    def shutdown(self) -> Any:
        log.info("group coordinator: {stats}", stats=self.commits.stats())
        for group_id in list(self.groups):
            self.unload(group_id)
        return self.commits.idle()

    def listed_groups(self) -> list[Group]:
        return [g for g in self.groups.values() if g.state is not State.DEAD]
