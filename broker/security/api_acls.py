"""What each Kafka API asks of the authorizer, as Kafka's KafkaApis does: one table, read by the
handlers (broker.server.authz) so no handler spells its own resource or operation.

``REQUIRED[api]`` is the check on each resource an API names (a topic, a group, or the cluster);
the named constants below are the second checks a few APIs make (OffsetCommit also reads its topics, Metadata
creates unknown topics only with Create...). A refusal is answered with the error of the
resource's type (``DENIED_ERROR``).
"""

from __future__ import annotations

from dataclasses import dataclass

from broker.protocol.api_keys import ApiKey
from broker.protocol.errors import ErrorCode
from broker.security.acl import AclOperation, ResourceType

#: The error answered when access to a resource of this type is refused.
DENIED_ERROR: dict[ResourceType, ErrorCode] = {
    ResourceType.TOPIC: ErrorCode.TOPIC_AUTHORIZATION_FAILED,
    ResourceType.GROUP: ErrorCode.GROUP_AUTHORIZATION_FAILED,
    ResourceType.CLUSTER: ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
    ResourceType.TRANSACTIONAL_ID: ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
}


@dataclass(frozen=True)
class Required:
    """An operation on a resource type; refused, the request (or its part) gets ``error``."""

    resource_type: ResourceType
    operation: AclOperation

    @property
    def error(self) -> ErrorCode:
        return DENIED_ERROR[self.resource_type]


TOPIC, GROUP, CLUSTER = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER
Op = AclOperation

REQUIRED: dict[ApiKey, Required] = {
    ApiKey.PRODUCE: Required(TOPIC, Op.WRITE),
    ApiKey.FETCH: Required(TOPIC, Op.READ),
    ApiKey.LIST_OFFSETS: Required(TOPIC, Op.DESCRIBE),
    ApiKey.METADATA: Required(TOPIC, Op.DESCRIBE),
    ApiKey.OFFSET_COMMIT: Required(GROUP, Op.READ),
    ApiKey.OFFSET_FETCH: Required(GROUP, Op.DESCRIBE),
    ApiKey.FIND_COORDINATOR: Required(GROUP, Op.DESCRIBE),
    ApiKey.JOIN_GROUP: Required(GROUP, Op.READ),
    ApiKey.HEARTBEAT: Required(GROUP, Op.READ),
    ApiKey.LEAVE_GROUP: Required(GROUP, Op.READ),
    ApiKey.SYNC_GROUP: Required(GROUP, Op.READ),
    ApiKey.DESCRIBE_GROUPS: Required(GROUP, Op.DESCRIBE),
    ApiKey.LIST_GROUPS: Required(GROUP, Op.DESCRIBE),
    ApiKey.CREATE_TOPICS: Required(TOPIC, Op.CREATE),
    ApiKey.DELETE_TOPICS: Required(TOPIC, Op.DELETE),
    ApiKey.DELETE_RECORDS: Required(TOPIC, Op.DELETE),
    ApiKey.INIT_PRODUCER_ID: Required(CLUSTER, Op.IDEMPOTENT_WRITE),
    ApiKey.OFFSET_FOR_LEADER_EPOCH: Required(TOPIC, Op.DESCRIBE),
    ApiKey.DESCRIBE_CONFIGS: Required(TOPIC, Op.DESCRIBE_CONFIGS),
    ApiKey.ALTER_CONFIGS: Required(TOPIC, Op.ALTER_CONFIGS),
    ApiKey.INCREMENTAL_ALTER_CONFIGS: Required(TOPIC, Op.ALTER_CONFIGS),
    ApiKey.DESCRIBE_LOG_DIRS: Required(CLUSTER, Op.DESCRIBE),
    ApiKey.CREATE_PARTITIONS: Required(TOPIC, Op.ALTER),
    ApiKey.DELETE_GROUPS: Required(GROUP, Op.DELETE),
    ApiKey.ELECT_LEADERS: Required(CLUSTER, Op.ALTER),
    ApiKey.OFFSET_DELETE: Required(GROUP, Op.DELETE),
    ApiKey.DESCRIBE_ACLS: Required(CLUSTER, Op.DESCRIBE),
    ApiKey.CREATE_ACLS: Required(CLUSTER, Op.ALTER),
    ApiKey.DELETE_ACLS: Required(CLUSTER, Op.ALTER),
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: Required(CLUSTER, Op.DESCRIBE),
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: Required(CLUSTER, Op.ALTER),
}

#: A follower's Fetch and OffsetForLeaderEpoch (replica_id >= 0) are inter-broker traffic.
INTER_BROKER = Required(CLUSTER, Op.CLUSTER_ACTION)
#: OffsetCommit and OffsetDelete touch only topics the group may read.
GROUP_TOPIC_READ = Required(TOPIC, Op.READ)
#: OffsetFetch answers only topics the principal may describe.
GROUP_TOPIC_DESCRIBE = Required(TOPIC, Op.DESCRIBE)
#: Creating a topic (CreateTopics, Metadata's auto-create): Create on the cluster, else on the topic.
CLUSTER_CREATE = Required(CLUSTER, Op.CREATE)
TOPIC_CREATE = Required(TOPIC, Op.CREATE)
#: ListGroups lists every group for Describe on the cluster, else the groups described one by one.
CLUSTER_DESCRIBE = Required(CLUSTER, Op.DESCRIBE)
#: DescribeConfigs / AlterConfigs resource types (2: a topic, 4: a broker, which is the cluster's
#: to configure) -> the ACL resource type their operation is checked on.
CONFIG_RESOURCE_TYPES: dict[int, ResourceType] = {2: TOPIC, 4: CLUSTER}
#: The operations each resource type has (Kafka's AclEntry.supportedOperations): what an
#: ``authorized_operations`` bitfield (Metadata, DescribeGroups) is made of.
SUPPORTED_OPERATIONS: dict[ResourceType, tuple[Op, ...]] = {
    TOPIC: (Op.READ, Op.WRITE, Op.CREATE, Op.DELETE, Op.ALTER, Op.DESCRIBE, Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS),
    GROUP: (Op.READ, Op.DESCRIBE, Op.DELETE),
    CLUSTER: (Op.CREATE, Op.CLUSTER_ACTION, Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS, Op.IDEMPOTENT_WRITE, Op.ALTER,
              Op.DESCRIBE),
}
#: InitProducerId without a transactional id: IdempotentWrite on the cluster, or Write on some topic.
ANY_TOPIC_WRITE = Required(TOPIC, Op.WRITE)
