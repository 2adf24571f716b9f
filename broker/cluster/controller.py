"""The controller: one broker, elected through the ephemeral /controller node, that writes
every partition's leader and ISR when brokers join or die, topics or partitions appear,
a broker shuts down cleanly, or leadership drifts from the preferred replicas.

Blocking (kazoo) and single-threaded: ZooKeeper watches only queue events; one thread
handles them in order. Each win of the election creates /controller and bumps
/controller_epoch in one ZooKeeper transaction (the bump conditional on its version), and
every partition-state write is conditional on the znode version it read, and is refused
when the state carries a newer controller epoch, so a deposed controller cannot overwrite
its successor (the ZooKeeper calls: ``ZkClient``). Brokers learn their roles by watching the state znodes.

Leader choice lives in ``elect_leader``, a pure function.
"""

from __future__ import annotations

import itertools
import logging
import queue
import threading
import time
from collections import Counter
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kazoo.exceptions import BadVersionError

from broker.cluster.zk import PartitionState, PartitionStateChange, ZkClient, ZkVersionConflictError
from broker.cluster.zkdata import ReassignPartitionsZNode, TopicZNode
from broker.protocol.errors import ErrorCode

log = logging.getLogger(__name__)

NO_LEADER = -1
#: how often a reassignment in progress is looked at again (new replicas joining the ISR)
REASSIGN_CHECK_S = 0.5


def elect_leader(
    replicas: Sequence[int],
    isr: Collection[int],
    live: Collection[int],
    unclean: bool = False,
    leader_counts: Mapping[int, int] | None = None,
    exclude: Collection[int] = (),
) -> tuple[int, list[int]] | None:
    """Choose a partition leader: (leader, new ISR), or None when no replica may lead.

    From the live ISR: the preferred replica (first of ``replicas``) if it can, else the
    candidate leading the fewest partitions (``leader_counts``), ties in replica order. Only
    with ``unclean`` from the live replicas outside the ISR (the ISR becomes just the
    leader). Brokers in ``exclude`` (shutting down) never lead and leave the ISR.
    """
    counts = leader_counts or {}
    eligible = [r for r in replicas if r in live and r not in exclude]
    candidates = [r for r in eligible if r in isr]
    if candidates:
        if candidates[0] == replicas[0]:
            leader = candidates[0]
        else:
            leader = min(candidates, key=lambda r: (counts.get(r, 0), replicas.index(r)))
        new_isr = [r for r in isr if r in live and r not in exclude]
        return leader, new_isr
    if unclean and eligible:
        return eligible[0], [eligible[0]]
    return None


class Controller:
    """Runs in every broker; acts only while this broker holds /controller."""

    def __init__(
        self,
        zk: ZkClient,
        broker_id: int,
        unclean_default: bool = False,
        auto_rebalance: bool = True,
        rebalance_interval_s: float = 300.0,
        on_controller_change: Callable[[int], None] | None = None,
    ) -> None:
        self.zk = zk
        self.broker_id = broker_id
        self.unclean_default = unclean_default
        self.auto_rebalance = auto_rebalance
        self.rebalance_interval_s = rebalance_interval_s
        self.on_controller_change = on_controller_change or (lambda _id: None)
        self.active = False
        self.epoch = 0
        self.controller_id = -1
        self._events: queue.Queue[tuple[Any, ...]] = queue.Queue()
        self._thread = threading.Thread(target=self._run, name=f"controller-{broker_id}", daemon=True)
        self._stopped = threading.Event()
        self._topic_watches: set[str] = set()
        self._shutting_down: set[int] = set()
        self._tickets = itertools.count(1)  # orders queued reconcile events against the passes that ran
        self._reconciled_from = 0  # the ticket a whole pass last started at

    # -- lifecycle ------------------------------------------------------------------------------

    def start(self) -> None:
        """Start the event thread and the watches (blocking: call off the reactor)."""
        self.zk.add_state_listener(self._on_zk_state)
        self.zk.add_new_session_callback(lambda: self._events.put(("elect",)))
        self._thread.start()
        self.zk.watch_controller(self._on_controller_node)
        self.zk.watch_brokers(lambda _ids: self._events.put(("reconcile", next(self._tickets))))
        self.zk.watch_topics(lambda _names: self._events.put(("topics",)))
        self.zk.watch_topic_deletions(self._on_topic_deletions)
        self.zk.watch_controlled_shutdowns(lambda _ids: self._events.put(("reconcile", next(self._tickets))))
        self.zk.watch_data(ReassignPartitionsZNode.path(), self._on_reassignment_node)
        if self.auto_rebalance:
            threading.Thread(target=self._rebalance_timer, name="leader-rebalance", daemon=True).start()

    def stop(self) -> None:
        self._stopped.set()
        self.active = False
        self._events.put(("stop",))

    def request_rebalance(self) -> None:
        self._events.put(("rebalance",))

    # -- watches (kazoo threads): only queue events ----------------------------------------------

    def _on_controller_node(self, data: bytes | None, stat: Any, *args: Any) -> bool | None:
        if self._stopped.is_set():
            return False
        self._events.put(("elect",))
        return None

    def _on_reassignment_node(self, data: bytes | None, stat: Any, *args: Any) -> bool | None:
        if self._stopped.is_set():
            return False
        if data:
            self._events.put(("reassign",))
        return None

    def _on_topic_deletions(self, names: list[str]) -> None:
        if names:
            self._events.put(("delete_topics",))

    def _on_zk_state(self, state: str) -> None:
        if state == "LOST":  # see ZkClient.add_state_listener
            if self.active:
                log.warning("controller %d: ZooKeeper session lost; no longer controller", self.broker_id)
            self.active = False

    def _rebalance_timer(self) -> None:
        while not self._stopped.wait(self.rebalance_interval_s):
            self._events.put(("rebalance",))

    # -- the event thread ---------------------------------------------------------------------

    def _run(self) -> None:
        handlers: dict[str, Callable[..., None]] = {
            "elect": self._elect,
            "reconcile": self._reconcile_all,
            "topics": self._on_topics,
            "topic": self._reconcile_topic,
            "rebalance": self._rebalance,
            "delete_topics": self._delete_topics,
            "reassign": self._reassign,
            "elect_leaders": self._elect_leaders,
        }
        while not self._stopped.is_set():
            event = self._events.get()
            if event[0] == "stop":
                return
            if event[0] != "elect" and not self.active:
                continue
            try:
                handlers[event[0]](*event[1:])
            except Exception:
                if not self._stopped.is_set():
                    log.exception("controller %d: handling %s failed; retrying in 1s", self.broker_id, event[0])
                    time.sleep(1.0)
                    self._events.put(event if event[0] != "topic" else ("reconcile",))

    def _elect(self) -> None:
        if not self.zk.connected:
            return
        found = self.zk.controller()
        if found is not None:
            holder, ours = found
            if holder == self.broker_id and not ours:
                holder = -1  # our previous session's node, about to vanish
            if holder != self.broker_id:
                self.active = False
            self._set_controller(holder)
            if holder == self.broker_id and not self.active:
                self._become_controller()  # our node, from before a reconnect
            return
        epoch = self.zk.claim_controller(self.broker_id)
        if epoch is None:
            self._events.put(("elect",))
            return
        self._become_controller(epoch)

    def _set_controller(self, controller_id: int) -> None:
        if controller_id != self.controller_id:
            self.controller_id = controller_id
            self.on_controller_change(controller_id)

    def _become_controller(self, epoch: int | None = None) -> None:
        """Act as the controller at ``epoch`` (None: our /controller node survived a reconnect,
        so the epoch is bumped now, conditionally on its version)."""
        if epoch is None:
            epoch = self.zk.bump_controller_epoch()
        self.epoch = epoch
        self.active = True
        self._topic_watches.clear()
        log.info("broker %d is the controller (epoch %d)", self.broker_id, epoch)
        self._set_controller(self.broker_id)
        self._on_topics()
        self._reconcile_all()
        self._events.put(("reassign",))  # carry on with a reassignment a previous controller started

    # -- reacting to changes ------------------------------------------------------------------

    def _on_topics(self) -> None:
        """Watch new topics' assignments (partition additions), and bring them up."""
        for topic in self.zk.all_topics():
            if topic not in self._topic_watches:
                self._topic_watches.add(topic)
                self._watch_topic(topic)

    def _watch_topic(self, topic: str) -> None:
        epoch = self.epoch

        def on_change(data: bytes | None, stat: Any, *args: Any) -> bool | None:
            if self._stopped.is_set() or self.epoch != epoch or data is None:
                self._topic_watches.discard(topic)
                return False
            self._events.put(("topic", topic, next(self._tickets)))
            return None

        self.zk.watch_topic(topic, on_change)

    def _delete_topics(self) -> None:
        for topic in self.zk.pending_topic_deletions():
            log.info("controller: deleting topic %s", topic)
            self.zk.delete_topic(topic)

    def _live(self) -> tuple[set[int], set[int]]:
        live = set(self.zk.live_brokers())
        shutting = self.zk.brokers_shutting_down()
        return live, shutting & live

    def _reconcile_all(self, queued: int | None = None) -> None:
        """A pass over every partition; skipped for an event (a broker gone, whose session's expiry
        also elected us) queued before a whole pass that has started since, which saw its cause."""
        if queued is not None and queued < self._reconciled_from:
            return
        self._reconciled_from = next(self._tickets)
        self._reconcile_topics(self.zk.all_topics())

    def _reconcile_topic(self, topic: str, queued: int) -> None:
        """A topic's assignment changed (or its watch was just set): skipped when a whole pass has
        started since (becoming controller sets every topic's watch, then reconciles all)."""
        if queued > self._reconciled_from:
            self._reconcile_topics([topic])

    def _reconcile_topics(self, topics: Iterable[str]) -> None:
        live, shutting = self._live()
        states = self._read_states(topics)
        brokers = _Brokers(live, shutting, Counter(state.leader for _, state in states.values()
                                                   if state is not None and state.leader != NO_LEADER))
        started = self._start_new_partitions(states, brokers)
        pending: list[tuple[Any, ...]] = []  # (replicas, then _write's arguments): written together below
        for (topic, partition), (replicas, state) in sorted(states.items()):
            if (topic, partition) in started:
                continue
            if state is None:
                self._reconcile(topic, partition, replicas, state, brokers)
                continue
            self._reconcile_once(topic, partition, replicas, state, brokers,
                                 write=lambda *change, r=replicas: pending.append((r, *change)))
            if not self.active:
                return
        self._write_all(pending, brokers)

    def _write_all(self, pending: list[tuple[Any, ...]], brokers: _Brokers) -> None:
        """The pass's state changes, pipelined (a failover moving 3,000 leaders waits for one round
        trip, not 3,000), new leaders first as in Kafka (a partition without a leader is unavailable,
        a dead broker left in an ISR is not); a change whose znode moved on meanwhile is reconciled
        again on its own."""
        pending.sort(key=lambda change: change[4] == change[3].leader)  # (replicas, topic, partition, state, leader, ...)
        changes = [PartitionStateChange(topic, partition, leader, epoch, isr, state.zk_version)
                   for _, topic, partition, state, leader, epoch, isr, _ in pending]
        for (replicas, topic, partition, state, leader, epoch, isr, why), ok in zip(
                pending, self.zk.set_partition_states(changes, self.epoch)):
            if ok:
                _log_change(topic, partition, state, leader, epoch, isr, why)
            else:
                self._reconcile(topic, partition, replicas, self.zk.partition_state(topic, partition), brokers)

    def _start_new_partitions(self, states: Mapping[tuple[str, int], tuple[list[int], PartitionState | None]],
                              brokers: _Brokers) -> set[tuple[str, int]]:
        """First states of a topic's new partitions, written in ZooKeeper transactions (a topic of
        10,000 partitions: 20 round trips, not 50,000); a topic whose batch fails is left to the
        per-partition path. Returns the partitions started."""
        firsts: dict[str, dict[int, tuple[int, list[int]]]] = {}
        for (topic, partition), (replicas, state) in states.items():
            if state is None:
                firsts.setdefault(topic, {})[partition] = _first_state(replicas, brokers)
        started: set[tuple[str, int]] = set()
        for topic, new in sorted(firsts.items()):
            if not self.active or not self.zk.create_partition_states(topic, new, self.epoch):
                continue
            leaders = Counter(leader for leader, _ in new.values())
            brokers.leader_counts.update(leaders)
            started.update((topic, partition) for partition in new)
            log.info("controller: %d partition(s) of %s start, leaders %s", len(new), topic,
                     ", ".join(f"{b}: {n}" for b, n in sorted(leaders.items())))
        return started

    def _read_states(self, topics: Iterable[str]) -> dict[tuple[str, int], tuple[list[int], PartitionState | None]]:
        found = {}
        for topic in topics:
            assignment = self.zk.topic_assignment(topic) or {}
            states = self.zk.partition_states(topic, assignment)
            for partition, replicas in assignment.items():
                found[(topic, partition)] = (replicas, states[partition])
        return found

    def _unclean(self, topic: str) -> bool:
        value = self.zk.topic_config(topic).get("unclean.leader.election.enable")
        return self.unclean_default if value is None else value.strip().lower() == "true"

    def _reconcile(
        self, topic: str, partition: int, replicas: list[int], state: PartitionState | None, brokers: _Brokers
    ) -> None:
        """Bring one partition's state in line with the live brokers (retrying on conflicts)."""
        for _ in range(10):
            if not self.active:
                return
            try:
                self._reconcile_once(topic, partition, replicas, state, brokers)
                return
            except ZkVersionConflictError:
                state = self.zk.partition_state(topic, partition)
        log.warning("controller: gave up on %s-%d after repeated conflicts", topic, partition)

    def _reconcile_once(
        self, topic: str, partition: int, replicas: list[int], state: PartitionState | None, brokers: _Brokers,
        write: Callable[..., None] | None = None,
    ) -> None:
        """``write``: how a state change is written (default ``_write``, at once)."""
        write = write or self._write
        live, shutting, counts = brokers.live, brokers.shutting, brokers.leader_counts
        if state is None:
            leader, isr = _first_state(replicas, brokers)
            if not self.zk.exists(TopicZNode.path(topic)):
                return  # deleted meanwhile
            self.zk.create_partition_state(topic, partition, leader, 0, isr, self.epoch)
            counts[leader] += 1
            log.info("controller: %s-%d starts with leader %d, isr %s", topic, partition, leader, isr)
            return
        if state.controller_epoch > self.epoch:
            log.warning("controller %d: a newer controller (epoch %d) exists; resigning", self.broker_id, state.controller_epoch)
            self.active = False
            return
        leader_ok = state.leader != NO_LEADER and state.leader in live and state.leader not in shutting
        if leader_ok:
            dead = [r for r in state.isr if r not in live or r in shutting]
            if dead:
                new_isr = [r for r in state.isr if r not in dead]
                write(topic, partition, state, state.leader, state.leader_epoch, new_isr, f"isr loses {dead}")
            return
        if topic not in brokers.unclean:
            brokers.unclean[topic] = self._unclean(topic)
        choice = elect_leader(replicas, state.isr, live, brokers.unclean[topic], counts, exclude=shutting)
        if choice is None:
            if state.leader in shutting:
                return  # no other replica can take over: the broker keeps leading until it stops
            if state.leader != NO_LEADER:
                why = "no replica in the isr is live"
                write(topic, partition, state, NO_LEADER, state.leader_epoch + 1, state.isr, why)
            return
        leader, new_isr = choice
        if counts[state.leader] > 0:  # a Counter: 0 for a broker leading nothing
            counts[state.leader] -= 1
        counts[leader] += 1
        write(topic, partition, state, leader, state.leader_epoch + 1, new_isr, f"leader {state.leader} gone")

    def _write(
        self, topic: str, partition: int, state: PartitionState, leader: int, leader_epoch: int, isr: list[int], why: str
    ) -> None:
        self.zk.set_partition_state(topic, partition, leader, leader_epoch, isr, self.epoch, version=state.zk_version)
        _log_change(topic, partition, state, leader, leader_epoch, isr, why)

    def _rebalance(self) -> None:
        """Give leadership back to preferred replicas that are live and in the ISR."""
        live, shutting = self._live()
        for (topic, partition), (replicas, state) in sorted(self._read_states(self.zk.all_topics()).items()):
            if state is None or not replicas:
                continue
            preferred = replicas[0]
            if state.leader == preferred or preferred not in live or preferred in shutting or preferred not in state.isr:
                continue
            if state.controller_epoch > self.epoch or not self.active:
                return
            try:
                self._write(topic, partition, state, preferred, state.leader_epoch + 1, state.isr, "preferred replica election")
            except ZkVersionConflictError:
                continue


    # -- leader elections asked for (ElectLeaders, kafka-leader-election) ---------------------------

    def elect_leaders(
        self, partitions: list[tuple[str, int]] | None, unclean: bool, timeout_s: float
    ) -> dict[tuple[str, int], tuple[int, str | None]] | None:
        """Run a preferred (or, only when asked, unclean) election of ``partitions`` (None: all) on
        the event thread and wait: {partition: (error code, message)}, or None when this broker is
        not the controller or the election did not finish in time. Blocking."""
        if not self.active:
            return None
        done = threading.Event()
        results: dict[tuple[str, int], tuple[int, str | None]] = {}
        self._events.put(("elect_leaders", partitions, unclean, results, done))
        return results if done.wait(timeout_s) else None

    def _elect_leaders(
        self, partitions: list[tuple[str, int]] | None, unclean: bool,
        results: dict[tuple[str, int], tuple[int, str | None]], done: threading.Event,
    ) -> None:
        try:
            live, shutting = self._live()
            topics = sorted({t for t, _ in partitions}) if partitions is not None else self.zk.all_topics()
            assignments = {t: self.zk.topic_assignment(t) or {} for t in topics}
            wanted = partitions if partitions is not None else [(t, p) for t in topics for p in sorted(assignments[t])]
            for topic, partition in wanted:
                code = self._elect_one(topic, partition, assignments[topic].get(partition), unclean, live, shutting)
                if partitions is not None or code[0] != ErrorCode.ELECTION_NOT_NEEDED:
                    results[(topic, partition)] = code
        finally:
            done.set()

    def _elect_one(
        self, topic: str, partition: int, replicas: list[int] | None, unclean: bool, live: set[int], shutting: set[int]
    ) -> tuple[int, str | None]:
        state = self.zk.partition_state(topic, partition) if replicas else None
        if not replicas or state is None:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"{topic}-{partition} does not exist"
        if unclean:
            if state.leader != NO_LEADER and state.leader in live:
                return ErrorCode.ELECTION_NOT_NEEDED, None
            choice = elect_leader(replicas, state.isr, live, unclean=True, exclude=shutting)
            if choice is None:
                return ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE, f"no live replica of {topic}-{partition}"
            leader, isr = choice
            why = "unclean election asked for" if leader not in state.isr else "election asked for"
        else:
            leader, isr = replicas[0], state.isr
            if state.leader == leader:
                return ErrorCode.ELECTION_NOT_NEEDED, None
            if leader not in live or leader in shutting or leader not in state.isr:
                return ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE, f"preferred replica {leader} is not live and in the isr"
            why = "preferred replica election asked for"
        try:
            self._write(topic, partition, state, leader, state.leader_epoch + 1, isr, why)
        except ZkVersionConflictError:
            return ErrorCode.NOT_CONTROLLER, "the partition state changed meanwhile; try again"
        return ErrorCode.NONE, None

    # -- partition reassignment (kafka-reassign-partitions, /admin/reassign_partitions) ---------------

    def _reassign(self) -> None:
        """One pass over the requested reassignments: each partition moves a step (``reassign_step``);
        a topic's assignment is written once per pass and the state changes pipelined, so a pass
        over 1,000 partitions costs a few round trips, not four per partition. Finished ones leave
        the znode, which goes when empty."""
        found = self.zk.read(ReassignPartitionsZNode.path(), retry=True)
        if found is None or not found[0]:
            return
        try:
            wanted = ReassignPartitionsZNode.decode(found[0])
        except (ValueError, KeyError, TypeError):
            log.warning("controller: ignoring an unreadable %s", ReassignPartitionsZNode.path())
            self.zk.delete(ReassignPartitionsZNode.path(), version=found[1].version)
            return
        live, _ = self._live()
        by_topic: dict[str, dict[int, list[int]]] = {}
        for (topic, partition), target in wanted.items():
            by_topic.setdefault(topic, {})[partition] = target
        finished: set[tuple[str, int]] = set()
        new_assignments: dict[str, dict[int, list[int]]] = {}
        steps: list[tuple[PartitionStateChange, PartitionState, ReassignStep]] = []
        for topic, targets in sorted(by_topic.items()):
            assignment = self.zk.topic_assignment(topic) or {}
            states = self.zk.partition_states(topic, [p for p in targets if p in assignment])
            for partition, target in sorted(targets.items()):
                if partition not in assignment or not target or len(set(target)) != len(target):
                    log.warning("controller: dropping the reassignment of %s-%d to %s: no such partition or bad "
                                "replicas", topic, partition, target)
                    finished.add((topic, partition))
                    continue
                state = states[partition]
                if state is None:
                    continue
                step = reassign_step(assignment[partition], state, target, live)
                if step.replicas is not None:
                    assignment[partition] = step.replicas
                    new_assignments[topic] = assignment
                if step.leader is not None and step.isr is not None:
                    leader_epoch = state.leader_epoch + 1
                    steps.append((PartitionStateChange(topic, partition, step.leader, leader_epoch, step.isr,
                                                       state.zk_version), state, step))
                elif step.done:
                    finished.add((topic, partition))
        for topic, assignment in sorted(new_assignments.items()):
            self.zk.set_topic_assignment(topic, assignment)  # before the states: a new epoch finds its replicas
        for (change, state, step), ok in zip(steps, self.zk.set_partition_states([c for c, _, _ in steps], self.epoch)):
            if not ok:
                continue  # the state moved meanwhile: the next pass reads it again
            _log_change(change.topic, change.partition, state, change.leader, change.leader_epoch, change.isr, step.why)
            if step.done:
                finished.add((change.topic, change.partition))
        remaining = {tp: target for tp, target in wanted.items() if tp not in finished}
        try:
            if finished and remaining:
                self.zk.set_data(ReassignPartitionsZNode.path(), ReassignPartitionsZNode.encode(remaining),
                                 version=found[1].version)
            elif finished:
                self.zk.delete(ReassignPartitionsZNode.path(), version=found[1].version)
        except (ZkVersionConflictError, BadVersionError):
            remaining = wanted  # a new request was added meanwhile: read it all again
        if remaining and self.active and not self._stopped.is_set():
            timer = threading.Timer(REASSIGN_CHECK_S, lambda: self._events.put(("reassign",)))
            timer.daemon = True
            timer.start()


@dataclass(frozen=True)
class ReassignStep:
    """One pass's move of a partition under reassignment: a new replica list and/or a new state
    (leader, ISR; written at the next leader epoch); ``done`` once the written step finishes it."""

    done: bool
    replicas: list[int] | None = None
    leader: int | None = None
    isr: list[int] | None = None
    why: str = ""


def reassign_step(current: list[int], state: PartitionState, target: list[int], live: Collection[int]) -> ReassignStep:
    """Kafka's order: add the target's new replicas (a new leader epoch, so the leader tracks
    them), wait until they are in the ISR, move leadership into the target, then drop the old
    replicas from the assignment and the ISR."""
    added = [b for b in target if b not in current]
    if added:
        return ReassignStep(False, list(target) + [b for b in current if b not in target], state.leader, list(state.isr),
                            f"reassignment adds replicas {added}")
    if not all(b in state.isr for b in target):
        return ReassignStep(False)  # the new replicas are still catching up
    if state.leader not in target or state.leader not in live:
        candidates = [b for b in target if b in live and b in state.isr]
        if not candidates:
            return ReassignStep(False)
        return ReassignStep(False, None, candidates[0], list(state.isr), "reassignment moves leadership into the target replicas")
    new_isr = [b for b in state.isr if b in target]
    if current == target and new_isr == state.isr:
        return ReassignStep(True)
    return ReassignStep(True, None if current == target else list(target), state.leader, new_isr,
                        f"reassignment to {target} complete")


@dataclass
class _Brokers:
    """What one reconciliation pass knows of the brokers; ``leader_counts`` follows its own writes."""

    live: set[int]
    shutting: set[int]
    leader_counts: Counter[int]
    unclean: dict[str, bool] = field(default_factory=dict)  # unclean.leader.election.enable per topic, read once


def _log_change(topic: str, partition: int, before: PartitionState, leader: int, leader_epoch: int, isr: list[int],
                why: str) -> None:
    """The one line a written state change leaves in the log."""
    log.info("controller: %s-%d leader %d -> %d (epoch %d), isr %s -> %s (%s)",
             topic, partition, before.leader, leader, leader_epoch, before.isr, isr, why)


def _first_state(replicas: list[int], brokers: _Brokers) -> tuple[int, list[int]]:
    """(leader, isr) of a new partition: the live replicas in order, led by the first not shutting down."""
    isr = [r for r in replicas if r in brokers.live]
    eligible = [r for r in isr if r not in brokers.shutting] or isr
    return (eligible[0] if eligible else NO_LEADER), isr


def request_controlled_shutdown(zk: ZkClient, broker_id: int) -> None:
    """Ask the controller to move leadership off ``broker_id`` (ephemeral, gone with the session)."""
    zk.request_controlled_shutdown(broker_id)
