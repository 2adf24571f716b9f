"""The group state machine alone, on a fake clock: generations, leaders, protocol choice,
timeouts."""

from __future__ import annotations

from twisted.internet.task import Clock

from broker.coordinator.group import Group, GroupConfig, State
from broker.coordinator.placement import coordinator_for, java_string_hash
from broker.protocol.errors import ErrorCode as E


def _group(delay_ms: int = 0) -> tuple[Group, Clock]:
    clock = Clock()
    return Group("g", clock, GroupConfig(initial_rebalance_delay_ms=delay_ms)), clock


def _join(group: Group, member: str = "", protocols=(("range", b"r"),), session=6000, rebalance=10000) -> list[dict]:
    out: list[dict] = []
    group.join(member, "client", "/127.0.0.1", session, rebalance, "consumer", list(protocols), out.append)
    return out


def test_first_member_leads_generation_one():
    g, _ = _group()
    [r] = _join(g)
    assert (r["error_code"], r["generation_id"], r["leader"]) == (E.NONE, 1, r["member_id"])
    assert g.state is State.COMPLETING_REBALANCE
    got: list[dict] = []
    g.sync(r["member_id"], 1, {r["member_id"]: b"x"}, got.append)
    assert got == [{"error_code": E.NONE, "assignment": b"x"}] and g.state is State.STABLE


def test_rebalance_times_out_members_that_do_not_rejoin():
    g, clock = _group()
    [a] = _join(g)
    g.sync(a["member_id"], 1, {}, lambda r: None)
    b = _join(g)
    assert b == [] and g.state is State.PREPARING_REBALANCE
    clock.advance(5)
    assert g.heartbeat(a["member_id"], 1) == E.REBALANCE_IN_PROGRESS
    clock.advance(10)  # a never rejoins within the rebalance timeout: it is dropped
    assert b[0]["generation_id"] == 2 and list(g.members) == [b[0]["member_id"]]
    assert b[0]["leader"] == b[0]["member_id"]


def test_session_timeout_evicts_and_rebalances():
    g, clock = _group()
    [a] = _join(g, session=6000)
    g.sync(a["member_id"], 1, {}, lambda r: None)
    clock.advance(5.9)
    assert g.heartbeat(a["member_id"], 1) == E.NONE
    clock.advance(5.9)
    assert a["member_id"] in g.members
    clock.advance(0.2)
    assert not g.members and g.state is State.EMPTY and g.generation == 2


def test_protocol_is_the_most_preferred_common_one():
    g, _ = _group(delay_ms=100)
    a = _join(g, protocols=(("cooperative-sticky", b"a"), ("range", b"a")))
    b = _join(g, protocols=(("cooperative-sticky", b"b"), ("roundrobin", b"b"), ("range", b"b")))
    c = _join(g, protocols=(("roundrobin", b"c"), ("range", b"c"), ("cooperative-sticky", b"c")))
    g.clock.advance(0.2)
    assert {r[0]["protocol_name"] for r in (a, b, c)} == {"cooperative-sticky"}
    assert _join(g, protocols=(("roundrobin", b"d"),))[0]["error_code"] == E.INCONSISTENT_GROUP_PROTOCOL


def test_initial_delay_gathers_members_into_one_generation():
    g, clock = _group(delay_ms=3000)
    a, b = _join(g), _join(g)
    assert a == b == []
    clock.advance(3)
    assert a[0]["generation_id"] == b[0]["generation_id"] == 1
    assert len(a[0]["members"]) == 2 or len(b[0]["members"]) == 2


def test_unload_answers_parked_requests_not_coordinator():
    g, _ = _group(delay_ms=3000)
    a = _join(g)
    g.unload()
    assert a[0]["error_code"] == E.NOT_COORDINATOR and g.state is State.DEAD


def test_placement_is_java_hash_over_sorted_live_brokers():
    assert java_string_hash("hello") == 99162322
    assert java_string_hash("my-group") == -1906497762
    assert coordinator_for("my-group", [3, 1, 2]) == [1, 2, 3][(-1906497762 & 0x7FFFFFFF) % 3]
    assert coordinator_for("g", []) is None
    spread = {coordinator_for(f"group-{i}", [1, 2, 3]) for i in range(30)}
    assert spread == {1, 2, 3}
