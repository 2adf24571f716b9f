"""A reassignment changes a partition's replicas: the leader tracks an added follower as soon as
the assignment arrives (before or after the new state), and a broker taken off the replica list
drops its log."""

from __future__ import annotations

from tests.server.unit.harness import ME, Replicas


def test_the_leader_tracks_a_replica_added_by_a_reassignment(replicas: Replicas) -> None:
    replicas.lead("moving", [ME])
    assert replicas.partition("moving").followers == {}
    replicas.manager.apply_topic("moving", {0: [ME, 2]}, {})
    assert set(replicas.partition("moving").followers) == {2}
    replicas.manager.apply_topic("moving", {0: [ME]}, {})
    assert replicas.partition("moving").followers == {}


def test_a_broker_taken_off_the_replica_list_drops_its_log(replicas: Replicas) -> None:
    replicas.lead("leaving", [ME, 2])
    assert replicas.logs.get("leaving", 0) is not None
    replicas.manager.apply_topic("leaving", {0: [2]}, {})
    assert ("leaving", 0) not in replicas.manager.partitions
    assert replicas.logs.get("leaving", 0) is None
