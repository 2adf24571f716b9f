"""The controller's reassignment steps, a pure function: Kafka's order, one step per pass."""

from __future__ import annotations

from broker.cluster.controller import reassign_step
from broker.cluster.zkdata import PartitionState


def state(leader: int, isr: list[int], epoch: int = 5) -> PartitionState:
    return PartitionState(leader=leader, leader_epoch=epoch, isr=isr, controller_epoch=1, zk_version=7)


def walk(current: list[int], target: list[int], leader: int, isr: list[int], live: set[int]) -> list[tuple[list[int], int, list[int]]]:
    """Apply steps until done, the new replicas joining the ISR whenever a pass waits for them."""
    seen = []
    for _ in range(10):
        s = state(leader, isr)
        step = reassign_step(current, s, target, live)
        if step.replicas is None and step.leader is None:
            if step.done:
                return seen
            isr = isr + [b for b in current if b not in isr and b in live]  # the followers catch up
            continue
        current = step.replicas if step.replicas is not None else current
        leader, isr = step.leader if step.leader is not None else leader, step.isr if step.isr is not None else isr
        seen.append((current, leader, isr))
        if step.done:
            return seen
    raise AssertionError(f"no end: {seen}")


def test_adding_a_replica_then_finishing():
    assert walk([1], [1, 2], leader=1, isr=[1], live={1, 2}) == [
        ([1, 2], 1, [1]),  # added: a new leader epoch, the ISR unchanged
    ]  # then done, with nothing to write, once the new replica is in the ISR


def test_moving_every_replica_moves_leadership_before_dropping_the_old():
    assert walk([1, 2], [3, 4], leader=1, isr=[1, 2], live={1, 2, 3, 4}) == [
        ([3, 4, 1, 2], 1, [1, 2]),
        ([3, 4, 1, 2], 3, [1, 2, 3, 4]),
        ([3, 4], 3, [3, 4]),
    ]


def test_waits_while_the_new_replicas_are_outside_the_isr():
    step = reassign_step([2, 1], state(2, [2]), [2, 1], {1, 2})
    assert not step.done and step.replicas is None and step.leader is None


def test_no_live_target_in_the_isr_waits_rather_than_electing_outside_it():
    step = reassign_step([1, 2], state(1, [1, 2]), [2], live={1})
    assert not step.done and step.leader is None


def test_an_isr_left_with_a_removed_replica_is_trimmed_even_when_the_assignment_is_already_the_target():
    step = reassign_step([1, 2], state(1, [1, 2, 3]), [1, 2], {1, 2, 3})
    assert step.done and step.replicas is None and (step.leader, step.isr) == (1, [1, 2])
    assert reassign_step([1, 2], state(1, [1, 2]), [1, 2], {1, 2}).done
