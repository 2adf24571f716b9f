"""The authorizer's rules (Kafka's AclAuthorizer) with explicit principals: deny wins, prefixed
patterns grant exactly their prefix, the wildcard, implied operations, super users, and
allow.everyone.if.no.acl.found."""

import pytest

from broker.security.acl import (
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
    invalid_binding,
)
from broker.security.authorizer import AclAuthorizer, check_authorizer_class_name, parse_super_users

Op, Perm, T = AclOperation, AclPermissionType, ResourceType
ALICE, BOB = "User:alice", "User:bob"


def allow(principal: str, op: AclOperation, host: str = "*") -> AccessControlEntry:
    return AccessControlEntry(principal, host, op, Perm.ALLOW)


def deny(principal: str, op: AclOperation, host: str = "*") -> AccessControlEntry:
    return AccessControlEntry(principal, host, op, Perm.DENY)


def topic(name: str, pattern: PatternType = PatternType.LITERAL) -> ResourcePattern:
    return ResourcePattern(T.TOPIC, name, pattern)


def authorizer(acls: dict, **kw) -> AclAuthorizer:
    a = AclAuthorizer(**kw)
    a.replace_all(acls)
    return a


def test_literal_allow_grants_only_its_principal_operation_and_topic():
    a = authorizer({topic("orders"): [allow(ALICE, Op.READ)]})
    assert a.authorize(ALICE, "10.0.0.1", Op.READ, T.TOPIC, "orders")
    assert not a.authorize(BOB, "10.0.0.1", Op.READ, T.TOPIC, "orders")
    assert not a.authorize(ALICE, "10.0.0.1", Op.WRITE, T.TOPIC, "orders")
    assert not a.authorize(ALICE, "10.0.0.1", Op.READ, T.TOPIC, "orders2")  # no ACL at all: refused by default
    assert not a.authorize(ALICE, "10.0.0.1", Op.READ, T.GROUP, "orders")


def test_deny_wins_over_allow_and_over_all():
    a = authorizer({
        topic("orders"): [allow(ALICE, Op.ALL), deny(ALICE, Op.WRITE)],
        topic("*"): [allow("User:*", Op.READ)],
        topic("logs"): [allow(ALICE, Op.READ), deny("User:*", Op.READ)],
    })
    assert a.authorize(ALICE, "h", Op.READ, T.TOPIC, "orders")
    assert not a.authorize(ALICE, "h", Op.WRITE, T.TOPIC, "orders")
    assert not a.authorize(ALICE, "h", Op.READ, T.TOPIC, "logs")  # a wildcard-principal deny
    a.set_acls(topic("orders"), [allow(ALICE, Op.WRITE), deny(ALICE, Op.ALL)])
    assert not a.authorize(ALICE, "h", Op.WRITE, T.TOPIC, "orders")


def test_deny_by_host_only_refuses_that_host():
    a = authorizer({topic("t"): [allow(ALICE, Op.READ), deny(ALICE, Op.READ, host="10.0.0.9")]})
    assert a.authorize(ALICE, "10.0.0.1", Op.READ, T.TOPIC, "t")
    assert not a.authorize(ALICE, "10.0.0.9", Op.READ, T.TOPIC, "t")
    hosted = authorizer({topic("t"): [allow(ALICE, Op.READ, host="10.0.0.1")]})
    assert hosted.authorize(ALICE, "10.0.0.1", Op.READ, T.TOPIC, "t")
    assert not hosted.authorize(ALICE, "10.0.0.2", Op.READ, T.TOPIC, "t")


def test_prefixed_pattern_grants_exactly_its_prefix():
    a = authorizer({topic("sales-", PatternType.PREFIXED): [allow(ALICE, Op.WRITE)]})
    for name in ("sales-", "sales-eu", "sales-eu-1"):
        assert a.authorize(ALICE, "h", Op.WRITE, T.TOPIC, name), name
    for name in ("sales", "salesx", "presales-eu", "Sales-eu"):
        assert not a.authorize(ALICE, "h", Op.WRITE, T.TOPIC, name), name


def test_prefixed_deny_under_a_wider_allow():
    a = authorizer({
        topic("a", PatternType.PREFIXED): [allow(ALICE, Op.READ)],
        topic("ab", PatternType.PREFIXED): [deny(ALICE, Op.READ)],
    })
    assert a.authorize(ALICE, "h", Op.READ, T.TOPIC, "ax")
    assert not a.authorize(ALICE, "h", Op.READ, T.TOPIC, "abc")


def test_wildcard_resource_and_principal():
    a = authorizer({topic("*"): [allow("User:*", Op.READ)]})
    assert a.authorize(ALICE, "h", Op.READ, T.TOPIC, "anything")
    assert a.authorize(BOB, "h", Op.READ, T.TOPIC, "else")
    assert not a.authorize(BOB, "h", Op.WRITE, T.TOPIC, "else")


@pytest.mark.parametrize("granted", [Op.READ, Op.WRITE, Op.DELETE, Op.ALTER, Op.DESCRIBE, Op.ALL])
def test_describe_is_implied(granted):
    a = authorizer({topic("t"): [allow(ALICE, granted)]})
    assert a.authorize(ALICE, "h", Op.DESCRIBE, T.TOPIC, "t")


@pytest.mark.parametrize("granted", [Op.CREATE, Op.CLUSTER_ACTION, Op.DESCRIBE_CONFIGS, Op.IDEMPOTENT_WRITE])
def test_describe_is_not_implied_by_others(granted):
    a = authorizer({topic("t"): [allow(ALICE, granted)]})
    assert not a.authorize(ALICE, "h", Op.DESCRIBE, T.TOPIC, "t")


def test_describe_configs_implied_by_alter_configs_and_not_the_reverse():
    a = authorizer({topic("t"): [allow(ALICE, Op.ALTER_CONFIGS)], topic("u"): [allow(ALICE, Op.DESCRIBE_CONFIGS)]})
    assert a.authorize(ALICE, "h", Op.DESCRIBE_CONFIGS, T.TOPIC, "t")
    assert not a.authorize(ALICE, "h", Op.ALTER_CONFIGS, T.TOPIC, "u")


def test_deny_of_read_does_not_deny_an_implied_describe():
    a = authorizer({topic("t"): [allow(ALICE, Op.WRITE), deny(ALICE, Op.READ)]})
    assert a.authorize(ALICE, "h", Op.DESCRIBE, T.TOPIC, "t")
    assert not a.authorize(ALICE, "h", Op.READ, T.TOPIC, "t")


def test_super_user_bypasses_even_a_deny():
    a = authorizer({topic("t"): [deny("User:*", Op.ALL)]}, super_users=parse_super_users("User:admin; User:ops"))
    assert a.authorize("User:admin", "h", Op.WRITE, T.TOPIC, "t")
    assert a.authorize("User:ops", "h", Op.ALTER, T.CLUSTER, "kafka-cluster")
    assert not a.authorize(ALICE, "h", Op.WRITE, T.TOPIC, "t")


def test_allow_everyone_if_no_acl_found_only_where_there_is_none():
    a = authorizer({topic("locked"): [allow(BOB, Op.READ)]}, allow_everyone_if_no_acl_found=True)
    assert a.authorize(ALICE, "h", Op.WRITE, T.TOPIC, "open")
    assert not a.authorize(ALICE, "h", Op.READ, T.TOPIC, "locked")  # some ACL exists: it decides
    closed = authorizer({}, allow_everyone_if_no_acl_found=False)
    assert not closed.authorize(ALICE, "h", Op.READ, T.TOPIC, "open")


def test_set_acls_replaces_and_removes():
    a = authorizer({topic("t"): [allow(ALICE, Op.READ)]})
    a.set_acls(topic("t"), [allow(BOB, Op.READ)])
    assert not a.authorize(ALICE, "h", Op.READ, T.TOPIC, "t") and a.authorize(BOB, "h", Op.READ, T.TOPIC, "t")
    a.set_acls(topic("t"), [])
    assert a.acls() == {}


def test_authorize_any_for_idempotent_producers():
    a = authorizer({topic("p-", PatternType.PREFIXED): [allow(ALICE, Op.WRITE)]})
    assert a.authorize_any(ALICE, "h", Op.WRITE, T.TOPIC)
    assert not a.authorize_any(BOB, "h", Op.WRITE, T.TOPIC)
    a.set_acls(topic("*"), [deny(ALICE, Op.WRITE)])
    assert not a.authorize_any(ALICE, "h", Op.WRITE, T.TOPIC)


def test_filters_select_like_describe_acls():
    acls = {
        topic("t"): [allow(ALICE, Op.READ), deny(BOB, Op.WRITE)],
        topic("t-", PatternType.PREFIXED): [allow(ALICE, Op.WRITE)],
        topic("*"): [allow(BOB, Op.DESCRIBE)],
        ResourcePattern(T.GROUP, "g"): [allow(ALICE, Op.READ)],
    }
    a = authorizer(acls)
    assert len(a.bindings()) == 5
    assert {b.pattern for b in a.bindings(AclBindingFilter(T.TOPIC, "t", PatternType.LITERAL))} == {topic("t")}
    match = {b.pattern for b in a.bindings(AclBindingFilter(T.TOPIC, "t-1", PatternType.MATCH))}
    assert match == {topic("t-", PatternType.PREFIXED), topic("*")}
    assert [b.entry.principal for b in a.bindings(AclBindingFilter(principal=BOB, permission_type=Perm.DENY))] == [BOB]
    assert {b.pattern.resource_type for b in a.bindings(AclBindingFilter(operation=Op.READ))} == {T.TOPIC, T.GROUP}


def test_invalid_bindings_are_named():
    ok = AclBinding(topic("t"), allow(ALICE, Op.READ))
    assert invalid_binding(ok) is None
    assert invalid_binding(AclBinding(ResourcePattern(T.ANY, "t"), allow(ALICE, Op.READ)))
    assert invalid_binding(AclBinding(topic("t", PatternType.MATCH), allow(ALICE, Op.READ)))
    assert invalid_binding(AclBinding(topic("t"), allow(ALICE, Op.ANY)))
    assert invalid_binding(AclBinding(topic("t"), allow("alice", Op.READ)))
    assert invalid_binding(AclBinding(ResourcePattern(T.CLUSTER, "c"), allow(ALICE, Op.ALTER)))


def test_zookeeper_names_are_kafkas():
    assert T.TRANSACTIONAL_ID.zk_name == "TransactionalId" and T.from_zk_name("Topic") is T.TOPIC
    assert Op.CLUSTER_ACTION.zk_name == "ClusterAction" and Op.from_zk_name("DescribeConfigs") is Op.DESCRIBE_CONFIGS
    assert Perm.from_zk_name("Deny") is Perm.DENY
    with pytest.raises(ValueError):
        Op.from_zk_name("Fly")


def test_authorizer_class_names():
    for name in ("", "kafka.security.authorizer.AclAuthorizer", "kafka.security.auth.SimpleAclAuthorizer",
                 "broker.security.authorizer.AclAuthorizer"):
        check_authorizer_class_name(name)
    with pytest.raises(ValueError):
        check_authorizer_class_name("org.example.Other")


def test_requester_judges_the_requests_principal_and_host():
    """What a handler asks (broker.server.authz): the principal and host the connection set while
    dispatching, judged against the API's requirement (api_acls.REQUIRED)."""
    from types import SimpleNamespace

    from broker.protocol.api_keys import ApiKey
    from broker.protocol.errors import GroupAuthorizationFailedError
    from broker.security.api_acls import ANY_TOPIC_WRITE, INTER_BROKER, REQUIRED
    from broker.server.authz import requester
    from broker.server.request_context import RequestContext

    a = authorizer({
        topic("t"): [allow(ALICE, Op.WRITE, host="10.0.0.1")],
        ResourcePattern(T.GROUP, "g"): [allow(BOB, Op.READ)],
        ResourcePattern(T.CLUSTER, "kafka-cluster"): [allow("User:broker", Op.CLUSTER_ACTION)],
    })

    def who(principal: str, host: str = "10.0.0.1"):
        return requester(SimpleNamespace(authorizer=a, request=RequestContext(principal, None, host)))

    assert who(ALICE).may_api(ApiKey.PRODUCE, "t") and who(ALICE).may_api(ApiKey.METADATA, "t")
    assert not who(ALICE, "10.0.0.2").may_api(ApiKey.PRODUCE, "t")
    assert not who(ALICE).may_api(ApiKey.FETCH, "t")
    assert who(BOB).may_api(ApiKey.JOIN_GROUP, "g") and who(BOB).may_api(ApiKey.FIND_COORDINATOR, "g")
    assert isinstance(who(ALICE).refusal(REQUIRED[ApiKey.JOIN_GROUP], "g"), GroupAuthorizationFailedError)
    assert who("User:broker").may(INTER_BROKER) and not who(ALICE).may(INTER_BROKER)
    assert who(ALICE).may_any(ANY_TOPIC_WRITE) and not who(BOB).may_any(ANY_TOPIC_WRITE)
    open_everything = requester(SimpleNamespace(authorizer=None, request=RequestContext(ALICE)))
    assert open_everything.may_api(ApiKey.DELETE_TOPICS, "t") and not open_everything.checks

