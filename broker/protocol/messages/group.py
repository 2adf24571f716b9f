"""The classic consumer-group APIs: FindCoordinator (10), JoinGroup (11), Heartbeat (12),
LeaveGroup (13), SyncGroup (14), DescribeGroups (15), ListGroups (16), OffsetCommit (8) and
OffsetFetch (9)."""

from broker.protocol.api_keys import ApiKey
from broker.protocol.schema import F, MessageSchema, per_topic

NO_AUTHORIZED_OPERATIONS = -2147483648

# key_type (v1+): 0 = group, 1 = transaction.
FIND_COORDINATOR_REQUEST = MessageSchema("FindCoordinatorRequest", ApiKey.FIND_COORDINATOR, "0-2", [
    F("key", "string"),
    F("key_type", "int8", "1+"),
])

FIND_COORDINATOR_RESPONSE = MessageSchema("FindCoordinatorResponse", ApiKey.FIND_COORDINATOR, "0-2", [
    F("throttle_time_ms", "int32", "1+"),
    F("error_code", "int16"),
    F("error_message", "string", "1+", nullable="1+"),
    F("node_id", "int32"),
    F("host", "string"),
    F("port", "int32"),
])

# v1 rebalance_timeout_ms, v2 throttle, v5 static membership (group_instance_id).
JOIN_GROUP_REQUEST = MessageSchema("JoinGroupRequest", ApiKey.JOIN_GROUP, "0-5", [
    F("group_id", "string"),
    F("session_timeout_ms", "int32"),
    F("rebalance_timeout_ms", "int32", "1+", default=-1),
    F("member_id", "string"),
    F("group_instance_id", "string", "5+", nullable="5+"),
    F("protocol_type", "string"),
    F("protocols", "[]", "0+", [
        F("name", "string"),
        F("metadata", "bytes"),
    ]),
])

JOIN_GROUP_RESPONSE = MessageSchema("JoinGroupResponse", ApiKey.JOIN_GROUP, "0-5", [
    F("throttle_time_ms", "int32", "2+"),
    F("error_code", "int16"),
    F("generation_id", "int32", default=-1),
    F("protocol_name", "string"),
    F("leader", "string"),
    F("member_id", "string"),
    F("members", "[]", "0+", [
        F("member_id", "string"),
        F("group_instance_id", "string", "5+", nullable="5+"),
        F("metadata", "bytes"),
    ]),
])

HEARTBEAT_REQUEST = MessageSchema("HeartbeatRequest", ApiKey.HEARTBEAT, "0-3", [
    F("group_id", "string"),
    F("generation_id", "int32"),
    F("member_id", "string"),
    F("group_instance_id", "string", "3+", nullable="3+"),
])

HEARTBEAT_RESPONSE = MessageSchema("HeartbeatResponse", ApiKey.HEARTBEAT, "0-3", [
    F("throttle_time_ms", "int32", "1+"),
    F("error_code", "int16"),
])

# v3 replaces the single member_id with a batch of members.
LEAVE_GROUP_REQUEST = MessageSchema("LeaveGroupRequest", ApiKey.LEAVE_GROUP, "0-3", [
    F("group_id", "string"),
    F("member_id", "string", "0-2"),
    F("members", "[]", "3+", [
        F("member_id", "string"),
        F("group_instance_id", "string", nullable="3+"),
    ]),
])

LEAVE_GROUP_RESPONSE = MessageSchema("LeaveGroupResponse", ApiKey.LEAVE_GROUP, "0-3", [
    F("throttle_time_ms", "int32", "1+"),
    F("error_code", "int16"),
    F("members", "[]", "3+", [
        F("member_id", "string"),
        F("group_instance_id", "string", nullable="3+"),
        F("error_code", "int16"),
    ]),
])

SYNC_GROUP_REQUEST = MessageSchema("SyncGroupRequest", ApiKey.SYNC_GROUP, "0-3", [
    F("group_id", "string"),
    F("generation_id", "int32"),
    F("member_id", "string"),
    F("group_instance_id", "string", "3+", nullable="3+"),
    F("assignments", "[]", "0+", [
        F("member_id", "string"),
        F("assignment", "bytes"),
    ]),
])

SYNC_GROUP_RESPONSE = MessageSchema("SyncGroupResponse", ApiKey.SYNC_GROUP, "0-3", [
    F("throttle_time_ms", "int32", "1+"),
    F("error_code", "int16"),
    F("assignment", "bytes"),
])

DESCRIBE_GROUPS_REQUEST = MessageSchema("DescribeGroupsRequest", ApiKey.DESCRIBE_GROUPS, "0-4", [
    F("groups", "[]string"),
    F("include_authorized_operations", "bool", "3+"),
])

DESCRIBE_GROUPS_RESPONSE = MessageSchema("DescribeGroupsResponse", ApiKey.DESCRIBE_GROUPS, "0-4", [
    F("throttle_time_ms", "int32", "1+"),
    F("groups", "[]", "0+", [
        F("error_code", "int16"),
        F("group_id", "string"),
        F("group_state", "string"),
        F("protocol_type", "string"),
        F("protocol_data", "string"),
        F("members", "[]", "0+", [
            F("member_id", "string"),
            F("group_instance_id", "string", "4+", nullable="4+"),
            F("client_id", "string"),
            F("client_host", "string"),
            F("member_metadata", "bytes"),
            F("member_assignment", "bytes"),
        ]),
        F("authorized_operations", "int32", "3+", default=NO_AUTHORIZED_OPERATIONS),
    ]),
])

LIST_GROUPS_REQUEST = MessageSchema("ListGroupsRequest", ApiKey.LIST_GROUPS, "0-2", [])

LIST_GROUPS_RESPONSE = MessageSchema("ListGroupsResponse", ApiKey.LIST_GROUPS, "0-2", [
    F("throttle_time_ms", "int32", "1+"),
    F("error_code", "int16"),
    F("groups", "[]", "0+", [
        F("group_id", "string"),
        F("protocol_type", "string"),
    ]),
])

# OffsetCommit: v0 (0.8.1) offsets only, v1 generation, member and a per-partition
# commit_timestamp (v1 only), retention_time_ms in v2-4 only, v3 throttle, v6
# committed_leader_epoch, v7 group_instance_id. Kafka's JSON now names generation_id "GenerationIdOrMemberEpoch"; the
# classic protocol served here only has generations, so it keeps the older name.
OFFSET_COMMIT_REQUEST = MessageSchema("OffsetCommitRequest", ApiKey.OFFSET_COMMIT, "0-7", [
    F("group_id", "string"),
    F("generation_id", "int32", "1+", default=-1),
    F("member_id", "string", "1+"),
    F("group_instance_id", "string", "7+", nullable="7+"),
    F("retention_time_ms", "int64", "2-4", default=-1),
    per_topic([
        F("partition_index", "int32"),
        F("committed_offset", "int64"),
        F("committed_leader_epoch", "int32", "6+", default=-1),
        F("commit_timestamp", "int64", "1", default=-1),
        F("committed_metadata", "string", nullable="0+"),
    ]),
])

OFFSET_COMMIT_RESPONSE = MessageSchema("OffsetCommitResponse", ApiKey.OFFSET_COMMIT, "0-7", [
    F("throttle_time_ms", "int32", "3+"),
    per_topic([
        F("partition_index", "int32"),
        F("error_code", "int16"),
    ]),
])

# OffsetFetch: v0 (offsets in ZooKeeper) reads as v1 does, v2 a null topic list means "all" and a top-level error_code, v3
# throttle, v5 committed_leader_epoch.
OFFSET_FETCH_REQUEST = MessageSchema("OffsetFetchRequest", ApiKey.OFFSET_FETCH, "0-5", [
    F("group_id", "string"),
    F("topics", "[]", "0+", [
        F("name", "string"),
        F("partition_indexes", "[]int32"),
    ], nullable="2+"),
])

OFFSET_FETCH_RESPONSE = MessageSchema("OffsetFetchResponse", ApiKey.OFFSET_FETCH, "0-5", [
    F("throttle_time_ms", "int32", "3+"),
    per_topic([
        F("partition_index", "int32"),
        F("committed_offset", "int64"),
        F("committed_leader_epoch", "int32", "5+", default=-1),
        F("metadata", "string", nullable="0+"),
        F("error_code", "int16"),
    ]),
    F("error_code", "int16", "2+"),
])
