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


def test_an_assignment_read_before_the_one_applied_is_not_applied(replicas: Replicas) -> None:
    """A config change's re-read of the topic can finish after the reassignment's watch delivered
    a newer assignment: applying the older one would drop the replica just added."""
    replicas.manager.apply_topic("growing", {0: [2]}, {}, zxid=10)
    replicas.manager.apply_topic("growing", {0: [2, ME]}, {}, zxid=30)
    assert replicas.logs.get("growing", 0) is not None
    replicas.manager.apply_topic("growing", {0: [2]}, {"retention.ms": "1000"}, zxid=20)
    assert replicas.logs.get("growing", 0) is not None
    assert replicas.manager.metadata.partition("growing", 0).replicas == [2, ME]
    assert replicas.logs.get("growing", 0).config.retention_ms == 1000  # the config of the late read still applies
    replicas.manager.apply_topic("growing", {0: [2]}, {}, zxid=40)
    assert replicas.logs.get("growing", 0) is None
