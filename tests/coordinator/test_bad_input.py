"""Bad group requests, spoken raw: each gets Kafka's error code and the group is unharmed."""

from __future__ import annotations

import pytest

from broker.client.connection import BrokerConnection
from broker.protocol.errors import ErrorCode
from broker.protocol.messages import ApiKey
from tests.coordinator.conftest import GROUP_BROKER, create_topic, unique, wait_until
from tests.starting import start_together

E = ErrorCode

# The module's tests share one broker (tests/conftest.py: module_broker): each uses groups and
# topics of its own on it, and none stops or reconfigures it.
MODULE_BROKER_OVERRIDES = GROUP_BROKER


@pytest.fixture
def group_broker(module_broker):
    return module_broker


def _conn(broker) -> BrokerConnection:
    return BrokerConnection.from_address(broker.bootstrap)


def _join_body(group: str, member: str = "", protocols=(("range", b"m"),), ptype: str = "consumer", session: int = 6000) -> dict:
    return {
        "group_id": group, "session_timeout_ms": session, "rebalance_timeout_ms": 10000, "member_id": member,
        "group_instance_id": None, "protocol_type": ptype,
        "protocols": [{"name": n, "metadata": m} for n, m in protocols],
    }


def _join(conn, group, **kw) -> dict:
    return conn.request(ApiKey.JOIN_GROUP, 5, _join_body(group, **kw))


def _sync(conn, group, member, generation, assignments=()) -> dict:
    return conn.request(ApiKey.SYNC_GROUP, 3, {
        "group_id": group, "generation_id": generation, "member_id": member, "group_instance_id": None,
        "assignments": [{"member_id": m, "assignment": a} for m, a in assignments],
    })


def _heartbeat(conn, group, member, generation) -> int:
    return conn.request(ApiKey.HEARTBEAT, 3, {"group_id": group, "generation_id": generation, "member_id": member,
                                              "group_instance_id": None})["error_code"]


def _commit(conn, group, topic, offset, member="", generation=-1) -> int:
    r = conn.request(ApiKey.OFFSET_COMMIT, 7, {
        "group_id": group, "generation_id": generation, "member_id": member, "group_instance_id": None,
        "topics": [{"name": topic, "partitions": [{"partition_index": 0, "committed_offset": offset,
                                                    "committed_leader_epoch": -1, "committed_metadata": ""}]}],
    })
    return r["topics"][0]["partitions"][0]["error_code"]


def _fetch(conn, group, topic) -> int:
    r = conn.request(ApiKey.OFFSET_FETCH, 5, {"group_id": group, "topics": [{"name": topic, "partition_indexes": [0]}]})
    return r["topics"][0]["partitions"][0]["committed_offset"]


def _describe(conn, group) -> dict:
    return conn.request(ApiKey.DESCRIBE_GROUPS, 4, {"groups": [group], "include_authorized_operations": False})["groups"][0]


def test_unknown_group(group_broker):
    with _conn(group_broker) as conn:
        group = unique("nobody")
        assert _heartbeat(conn, group, "m-1", 1) == E.UNKNOWN_MEMBER_ID
        assert _sync(conn, group, "m-1", 1)["error_code"] == E.UNKNOWN_MEMBER_ID
        leave = conn.request(ApiKey.LEAVE_GROUP, 1, {"group_id": group, "member_id": "m-1"})
        assert leave["error_code"] == E.UNKNOWN_MEMBER_ID
        described = _describe(conn, group)
        assert (described["error_code"], described["group_state"]) == (E.NONE, "Dead")
        topic = create_topic(group_broker.bootstrap, 1)
        assert _fetch(conn, group, topic) == -1
        assert _commit(conn, group, topic, 5, "m-1", 3) == E.ILLEGAL_GENERATION
        assert _commit(conn, "", topic, 5) == E.INVALID_GROUP_ID
        assert _commit(conn, group, "no-such-topic", 5) == E.UNKNOWN_TOPIC_OR_PARTITION
        assert _fetch(conn, group, topic) == -1


def test_bad_requests_leave_the_group_unharmed(group_broker):
    topic = create_topic(group_broker.bootstrap, 1)
    group = unique("strict")
    with _conn(group_broker) as a, _conn(group_broker) as b:
        joined = _join(a, group)
        assert joined["error_code"] == E.NONE and joined["generation_id"] == 1
        me = joined["member_id"]
        assert joined["leader"] == me and [m["member_id"] for m in joined["members"]] == [me]
        assert _sync(a, group, me, 1, [(me, b"mine")]) == {"throttle_time_ms": 0, "error_code": E.NONE, "assignment": b"mine"}

        assert _heartbeat(a, group, "stranger", 1) == E.UNKNOWN_MEMBER_ID
        assert _heartbeat(a, group, me, 0) == E.ILLEGAL_GENERATION
        assert _commit(a, group, topic, 4, me, 0) == E.ILLEGAL_GENERATION
        assert _commit(a, group, topic, 4, "stranger", 1) == E.UNKNOWN_MEMBER_ID
        assert _join(b, group, protocols=(("other", b""),))["error_code"] == E.INCONSISTENT_GROUP_PROTOCOL
        assert _join(b, group, ptype="connect")["error_code"] == E.INCONSISTENT_GROUP_PROTOCOL
        assert _join(b, group, session=10)["error_code"] == E.INVALID_SESSION_TIMEOUT
        assert _join(b, group, member="made-up")["error_code"] == E.UNKNOWN_MEMBER_ID

        # unharmed: still Stable, one member, generation 1, commits accepted
        assert _heartbeat(a, group, me, 1) == E.NONE
        described = _describe(a, group)
        assert described["group_state"] == "Stable" and [m["member_id"] for m in described["members"]] == [me]
        assert described["protocol_data"] == "range" and described["members"][0]["member_assignment"] == b"mine"
        assert _commit(a, group, topic, 4, me, 1) == E.NONE
        assert _fetch(a, group, topic) == 4


def test_rebalance_protocol(group_broker):
    """A second member joins: the first learns REBALANCE_IN_PROGRESS by heartbeat, rejoins, and
    both get generation 2; the old generation can no longer commit."""
    topic = create_topic(group_broker.bootstrap, 1)
    group = unique("two")
    with _conn(group_broker) as a, _conn(group_broker) as b:
        first = _join(a, group, protocols=(("roundrobin", b"a-rr"), ("range", b"a-r")))
        ma = first["member_id"]
        _sync(a, group, ma, 1, [(ma, b"all")])
        b.send_request(ApiKey.JOIN_GROUP, 5, _join_body(group, protocols=(("range", b"b-r"),)))  # parked
        wait_until(lambda: _describe(a, group)["group_state"] == "PreparingRebalance", 10, what="b's join")
        assert _heartbeat(a, group, ma, 1) == E.REBALANCE_IN_PROGRESS
        again = _join(a, group, member=ma, protocols=(("roundrobin", b"a-rr"), ("range", b"a-r")))
        _, other = b.receive_response()
        assert again["generation_id"] == other["generation_id"] == 2
        assert again["protocol_name"] == other["protocol_name"] == "range"  # the only common one
        assert again["leader"] == ma
        assert sorted(m["metadata"] for m in again["members"]) == [b"a-r", b"b-r"]
        assert other["members"] == []
        assert _commit(a, group, topic, 1, ma, 1) == E.ILLEGAL_GENERATION
        mb = other["member_id"]
        b.send_request(ApiKey.SYNC_GROUP, 3, {"group_id": group, "generation_id": 2, "member_id": mb,
                                              "group_instance_id": None, "assignments": []})  # waits for the leader
        assert _commit(a, group, topic, 1, ma, 2) == E.REBALANCE_IN_PROGRESS  # CompletingRebalance
        assert _sync(a, group, ma, 2, [(ma, b"p0"), (mb, b"none")])["assignment"] == b"p0"
        assert b.receive_response()[1]["assignment"] == b"none"
        assert _commit(a, group, topic, 1, ma, 2) == E.NONE
        # the leader leaves: b is alone, rejoins and leads generation 3
        assert a.request(ApiKey.LEAVE_GROUP, 3, {"group_id": group, "members": [{"member_id": ma, "group_instance_id": None}]})["members"][0]["error_code"] == E.NONE
        assert _heartbeat(b, group, mb, 2) == E.REBALANCE_IN_PROGRESS
        solo = _join(b, group, member=mb, protocols=(("range", b"b-r"),))
        assert (solo["generation_id"], solo["leader"]) == (3, mb)


def test_non_coordinator_answers_not_coordinator(broker_factory):
    from broker.coordinator.placement import coordinator_for

    brokers = start_together([broker_factory(overrides=GROUP_BROKER, broker_id=i, start=False) for i in (1, 2)])
    group = unique("where")
    owner = coordinator_for(group, [1, 2])
    other = next(b for b in brokers if int(b.broker_id) != owner)
    for b in brokers:  # the first broker learns of the second a moment after both are up
        with _conn(b) as conn:
            wait_until(lambda: len(conn.request(ApiKey.METADATA, 1, {"topics": []})["brokers"]) == 2, 10,
                       what=f"broker {b.broker_id} seeing both brokers")
    for b in brokers:  # every broker points at the same coordinator
        with _conn(b) as conn:
            found = conn.request(ApiKey.FIND_COORDINATOR, 2, {"key": group, "key_type": 0})
            assert (found["error_code"], found["node_id"]) == (E.NONE, owner)
    with _conn(other) as conn:
        assert _join(conn, group)["error_code"] == E.NOT_COORDINATOR
        assert _heartbeat(conn, group, "m", 1) == E.NOT_COORDINATOR
        r = conn.request(ApiKey.OFFSET_FETCH, 5, {"group_id": group, "topics": None})
        assert r["error_code"] == E.NOT_COORDINATOR
