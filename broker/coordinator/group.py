"""One consumer group's membership state machine (Kafka's classic group protocol).

States: Empty -> PreparingRebalance -> CompletingRebalance -> Stable, and back to
PreparingRebalance whenever a member joins, leaves, changes its protocols or misses its
session timeout. Dead is a group whose coordinator moved away.

No Twisted here: time comes from a ``clock`` with ``callLater(seconds, fn, *args)``
returning a handle with ``cancel()`` and ``active()`` (the reactor, or
``twisted.internet.task.Clock`` in unit tests), and delayed answers (JoinGroup waits for every
member to rejoin, SyncGroup waits for the leader's assignment) are ``respond(dict)``
callbacks the handlers turn into Deferreds.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from broker.protocol.errors import ErrorCode

Respond = Callable[[dict], None]


class State(StrEnum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


@dataclass(frozen=True)
class GroupConfig:
    initial_rebalance_delay_ms: int = 3000
    min_session_timeout_ms: int = 6000
    max_session_timeout_ms: int = 1800000


@dataclass
class Member:
    member_id: str
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]
    assignment: bytes = b""
    awaiting_join: Respond | None = None
    awaiting_sync: Respond | None = None
    timer: Any = None

    def protocol_names(self) -> list[str]:
        return [name for name, _ in self.protocols]

    def metadata(self, protocol: str) -> bytes:
        return next((meta for name, meta in self.protocols if name == protocol), b"")


def _cancel(timer: Any) -> None:
    if timer is not None and timer.active():
        timer.cancel()


def join_error(code: int, member_id: str = "") -> dict:
    return {"error_code": code, "generation_id": -1, "protocol_name": "", "leader": "", "member_id": member_id, "members": []}


def _answer_parked(member: Member, code: int) -> None:
    """Answer the member's parked JoinGroup and SyncGroup, if any, with an error code."""
    if member.awaiting_join is not None:
        cb, member.awaiting_join = member.awaiting_join, None
        cb(join_error(code, member.member_id))
    if member.awaiting_sync is not None:
        cb, member.awaiting_sync = member.awaiting_sync, None
        cb({"error_code": code, "assignment": b""})


@dataclass
class Group:
    group_id: str
    clock: Any
    config: GroupConfig = field(default_factory=GroupConfig)
    state: State = State.EMPTY
    generation: int = 0
    protocol_type: str | None = None
    protocol: str | None = None
    leader: str | None = None
    members: dict[str, Member] = field(default_factory=dict)
    _rebalance_timer: Any = None
    _initial_delay: Any = None

    # -- JoinGroup ---------------------------------------------------------------------------

    def join(
        self,
        member_id: str,
        client_id: str,
        client_host: str,
        session_timeout_ms: int,
        rebalance_timeout_ms: int,
        protocol_type: str,
        protocols: list[tuple[str, bytes]],
        respond: Respond,
    ) -> None:
        cfg = self.config
        if not cfg.min_session_timeout_ms <= session_timeout_ms <= cfg.max_session_timeout_ms:
            return respond(join_error(ErrorCode.INVALID_SESSION_TIMEOUT, member_id))
        if self.state is State.DEAD:
            return respond(join_error(ErrorCode.NOT_COORDINATOR, member_id))
        if not protocols or not self._accepts(member_id, protocol_type, [n for n, _ in protocols]):
            return respond(join_error(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, member_id))
        if member_id == "":
            member_id = f"{client_id or 'member'}-{uuid.uuid4()}"
            member = Member(member_id, client_id, client_host, session_timeout_ms, rebalance_timeout_ms, protocol_type, protocols)
            self.members[member_id] = member
            if self.leader is None:
                self.leader = member_id
            self.protocol_type = protocol_type
            member.awaiting_join = respond
            self._prepare_rebalance()
            self._maybe_complete_join()
            return None
        known = self.members.get(member_id)
        if known is None:
            return respond(join_error(ErrorCode.UNKNOWN_MEMBER_ID, member_id))
        member = known
        changed = member.protocols != protocols
        member.protocols = protocols
        member.session_timeout_ms = session_timeout_ms
        member.rebalance_timeout_ms = rebalance_timeout_ms
        if self.state is State.PREPARING_REBALANCE:
            member.awaiting_join = respond
            self._maybe_complete_join()
        elif self.state is State.COMPLETING_REBALANCE and not changed:
            respond(self._join_response(member))
        elif self.state is State.STABLE and not changed and member_id != self.leader:
            respond(self._join_response(member))
        else:  # a changed subscription, or the leader rejoining: everyone rebalances
            member.awaiting_join = respond
            self._prepare_rebalance()
            self._maybe_complete_join()
        return None

    def _accepts(self, member_id: str, protocol_type: str, names: list[str]) -> bool:
        others = [m for mid, m in self.members.items() if mid != member_id]
        if not others:
            return True
        if protocol_type != self.protocol_type:
            return False
        common = set(names)
        for m in others:
            common &= set(m.protocol_names())
        return bool(common)

    # -- rebalancing -------------------------------------------------------------------------

    def _prepare_rebalance(self) -> None:
        if self.state is State.PREPARING_REBALANCE:
            return
        if self.state is State.COMPLETING_REBALANCE:
            for member in self.members.values():
                member.assignment = b""
                if member.awaiting_sync is not None:
                    cb, member.awaiting_sync = member.awaiting_sync, None
                    cb({"error_code": ErrorCode.REBALANCE_IN_PROGRESS, "assignment": b""})
        was_empty = self.state is State.EMPTY
        self.state = State.PREPARING_REBALANCE
        timeout_ms = max((m.rebalance_timeout_ms for m in self.members.values()), default=0)
        _cancel(self._rebalance_timer)
        self._rebalance_timer = self.clock.callLater(timeout_ms / 1000.0, self._rebalance_timed_out)
        delay = self.config.initial_rebalance_delay_ms
        if was_empty and delay > 0:
            self._initial_delay = self.clock.callLater(min(delay, timeout_ms) / 1000.0, self._initial_delay_over)

    def _initial_delay_over(self) -> None:
        self._initial_delay = None
        self._maybe_complete_join()

    def _rebalance_timed_out(self) -> None:
        self._rebalance_timer = None
        _cancel(self._initial_delay)
        self._initial_delay = None
        if self.state is State.PREPARING_REBALANCE:
            self._complete_join()

    def _maybe_complete_join(self) -> None:
        if self.state is not State.PREPARING_REBALANCE or self._initial_delay is not None:
            return
        if all(m.awaiting_join is not None for m in self.members.values()):
            self._complete_join()

    def _complete_join(self) -> None:
        _cancel(self._rebalance_timer)
        self._rebalance_timer = None
        for member in [m for m in self.members.values() if m.awaiting_join is None]:
            self._remove(member)  # did not rejoin within the rebalance timeout
        self.generation += 1
        if not self.members:
            self.state = State.EMPTY
            self.protocol = None
            self.leader = None
            return
        self.protocol = self._select_protocol()
        if self.leader not in self.members:
            self.leader = next(iter(self.members))
        self.state = State.COMPLETING_REBALANCE
        for member in self.members.values():
            cb, member.awaiting_join = member.awaiting_join, None
            self._schedule_expiry(member)
            if cb is not None:
                cb(self._join_response(member))

    def _select_protocol(self) -> str:
        members = list(self.members.values())
        common = set(members[0].protocol_names())
        for m in members[1:]:
            common &= set(m.protocol_names())
        votes: dict[str, int] = {}
        for m in members:  # each member votes for the first protocol it lists that all share
            choice = next(name for name in m.protocol_names() if name in common)
            votes[choice] = votes.get(choice, 0) + 1
        order = [n for n in members[0].protocol_names() if n in votes]
        return max(order, key=lambda n: votes[n])

    def _join_response(self, member: Member) -> dict:
        is_leader = member.member_id == self.leader
        return {
            "error_code": ErrorCode.NONE,
            "generation_id": self.generation,
            "protocol_name": self.protocol or "",
            "leader": self.leader or "",
            "member_id": member.member_id,
            "members": [
                {"member_id": m.member_id, "group_instance_id": None, "metadata": m.metadata(self.protocol or "")}
                for m in self.members.values()
            ]
            if is_leader
            else [],
        }

    # -- SyncGroup ---------------------------------------------------------------------------

    def sync(self, member_id: str, generation: int, assignments: dict[str, bytes], respond: Respond) -> None:
        error = self._check_member(member_id, generation)
        if error is not None:
            return respond({"error_code": error, "assignment": b""})
        member = self.members[member_id]
        if self.state is State.PREPARING_REBALANCE:
            return respond({"error_code": ErrorCode.REBALANCE_IN_PROGRESS, "assignment": b""})
        if self.state is State.STABLE:
            return respond({"error_code": ErrorCode.NONE, "assignment": member.assignment})
        # CompletingRebalance: wait for the leader's assignment
        member.awaiting_sync = respond
        self._schedule_expiry(member)
        if member_id == self.leader:
            for m in self.members.values():
                m.assignment = assignments.get(m.member_id, b"")
            self.state = State.STABLE
            for m in self.members.values():
                if m.awaiting_sync is not None:
                    cb, m.awaiting_sync = m.awaiting_sync, None
                    cb({"error_code": ErrorCode.NONE, "assignment": m.assignment})
        return None

    # -- Heartbeat, LeaveGroup, OffsetCommit checks ------------------------------------------

    def heartbeat(self, member_id: str, generation: int) -> int:
        error = self._check_member(member_id, generation)
        if error is not None:
            return error
        self._schedule_expiry(self.members[member_id])
        if self.state is State.PREPARING_REBALANCE:
            return ErrorCode.REBALANCE_IN_PROGRESS
        return ErrorCode.NONE

    def leave(self, member_id: str) -> int:
        member = self.members.get(member_id)
        if member is None or self.state is State.DEAD:
            return ErrorCode.UNKNOWN_MEMBER_ID
        self._member_gone(member)
        return ErrorCode.NONE

    def check_commit(self, member_id: str, generation: int) -> int | None:
        """None: the commit may be stored; else Kafka's error for it."""
        if self.state is State.DEAD:
            return ErrorCode.NOT_COORDINATOR
        if generation < 0 and self.state is State.EMPTY:
            return None  # a group that only stores offsets (simple consumers, tools)
        error = self._check_member(member_id, generation)
        if error is not None:
            return error
        if self.state is State.COMPLETING_REBALANCE:
            return ErrorCode.REBALANCE_IN_PROGRESS
        self._schedule_expiry(self.members[member_id])
        return None

    def _check_member(self, member_id: str, generation: int) -> int | None:
        if self.state is State.DEAD:
            return ErrorCode.NOT_COORDINATOR
        if member_id not in self.members:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if generation != self.generation:
            return ErrorCode.ILLEGAL_GENERATION
        return None

    # -- members leaving ---------------------------------------------------------------------

    def _schedule_expiry(self, member: Member) -> None:
        _cancel(member.timer)
        member.timer = self.clock.callLater(member.session_timeout_ms / 1000.0, self._session_expired, member.member_id)

    def _session_expired(self, member_id: str) -> None:
        member = self.members.get(member_id)
        if member is None:
            return
        member.timer = None
        if member.awaiting_join is not None or member.awaiting_sync is not None:
            self._schedule_expiry(member)  # parked in a request: alive by definition
            return
        self._member_gone(member)

    def _member_gone(self, member: Member) -> None:
        _answer_parked(member, ErrorCode.UNKNOWN_MEMBER_ID)
        self._remove(member)
        if self.state in (State.STABLE, State.COMPLETING_REBALANCE):
            self._prepare_rebalance()
        self._maybe_complete_join()

    def _remove(self, member: Member) -> None:
        _cancel(member.timer)
        self.members.pop(member.member_id, None)
        if self.leader == member.member_id:
            self.leader = next(iter(self.members), None)

    # -- coordinator moved away --------------------------------------------------------------

    def unload(self) -> None:
        """The coordinator moved: answer parked requests NOT_COORDINATOR, stop every timer."""
        self.state = State.DEAD
        _cancel(self._rebalance_timer)
        _cancel(self._initial_delay)
        for member in self.members.values():
            _cancel(member.timer)
            _answer_parked(member, ErrorCode.NOT_COORDINATOR)
        self.members.clear()

    # -- DescribeGroups ----------------------------------------------------------------------

    def describe(self) -> dict:
        stable = self.state is State.STABLE
        return {
            "error_code": ErrorCode.NONE,
            "group_id": self.group_id,
            "group_state": self.state.value,
            "protocol_type": self.protocol_type or "",
            "protocol_data": self.protocol or "",
            "members": [
                {
                    "member_id": m.member_id,
                    "group_instance_id": None,
                    "client_id": m.client_id,
                    "client_host": m.client_host,
                    "member_metadata": m.metadata(self.protocol or "") if stable else b"",
                    "member_assignment": m.assignment if stable else b"",
                }
                for m in self.members.values()
            ],
        }
