"""Request and response schemas of every API logbus speaks, keyed by ApiKey.

``REQUESTS[key].decode(version, body)`` and ``RESPONSES[key].encode(version, dict)`` are what
the server and the clients use; the declarations live in one module per area.
"""

from broker.protocol.api_keys import ApiKey
from broker.protocol.messages import acls, admin, fetch, group, metadata, operations, produce, sasl
from broker.protocol.schema import MessageSchema

# ApiKey -> (request, response), in ApiKey order.
_PAIRS: dict[ApiKey, tuple[MessageSchema, MessageSchema]] = {
    ApiKey.PRODUCE: (produce.PRODUCE_REQUEST, produce.PRODUCE_RESPONSE),
    ApiKey.FETCH: (fetch.FETCH_REQUEST, fetch.FETCH_RESPONSE),
    ApiKey.LIST_OFFSETS: (fetch.LIST_OFFSETS_REQUEST, fetch.LIST_OFFSETS_RESPONSE),
    ApiKey.METADATA: (metadata.METADATA_REQUEST, metadata.METADATA_RESPONSE),
    ApiKey.OFFSET_COMMIT: (group.OFFSET_COMMIT_REQUEST, group.OFFSET_COMMIT_RESPONSE),
    ApiKey.OFFSET_FETCH: (group.OFFSET_FETCH_REQUEST, group.OFFSET_FETCH_RESPONSE),
    ApiKey.FIND_COORDINATOR: (group.FIND_COORDINATOR_REQUEST, group.FIND_COORDINATOR_RESPONSE),
    ApiKey.JOIN_GROUP: (group.JOIN_GROUP_REQUEST, group.JOIN_GROUP_RESPONSE),
    ApiKey.HEARTBEAT: (group.HEARTBEAT_REQUEST, group.HEARTBEAT_RESPONSE),
    ApiKey.LEAVE_GROUP: (group.LEAVE_GROUP_REQUEST, group.LEAVE_GROUP_RESPONSE),
    ApiKey.SYNC_GROUP: (group.SYNC_GROUP_REQUEST, group.SYNC_GROUP_RESPONSE),
    ApiKey.DESCRIBE_GROUPS: (group.DESCRIBE_GROUPS_REQUEST, group.DESCRIBE_GROUPS_RESPONSE),
    ApiKey.LIST_GROUPS: (group.LIST_GROUPS_REQUEST, group.LIST_GROUPS_RESPONSE),
    ApiKey.SASL_HANDSHAKE: (sasl.SASL_HANDSHAKE_REQUEST, sasl.SASL_HANDSHAKE_RESPONSE),
    ApiKey.API_VERSIONS: (metadata.API_VERSIONS_REQUEST, metadata.API_VERSIONS_RESPONSE),
    ApiKey.CREATE_TOPICS: (admin.CREATE_TOPICS_REQUEST, admin.CREATE_TOPICS_RESPONSE),
    ApiKey.DELETE_TOPICS: (admin.DELETE_TOPICS_REQUEST, admin.DELETE_TOPICS_RESPONSE),
    ApiKey.INIT_PRODUCER_ID: (produce.INIT_PRODUCER_ID_REQUEST, produce.INIT_PRODUCER_ID_RESPONSE),
    ApiKey.OFFSET_FOR_LEADER_EPOCH: (fetch.OFFSET_FOR_LEADER_EPOCH_REQUEST, fetch.OFFSET_FOR_LEADER_EPOCH_RESPONSE),
    ApiKey.DESCRIBE_ACLS: (acls.DESCRIBE_ACLS_REQUEST, acls.DESCRIBE_ACLS_RESPONSE),
    ApiKey.CREATE_ACLS: (acls.CREATE_ACLS_REQUEST, acls.CREATE_ACLS_RESPONSE),
    ApiKey.DELETE_ACLS: (acls.DELETE_ACLS_REQUEST, acls.DELETE_ACLS_RESPONSE),
    ApiKey.DESCRIBE_CONFIGS: (admin.DESCRIBE_CONFIGS_REQUEST, admin.DESCRIBE_CONFIGS_RESPONSE),
    ApiKey.SASL_AUTHENTICATE: (sasl.SASL_AUTHENTICATE_REQUEST, sasl.SASL_AUTHENTICATE_RESPONSE),
    ApiKey.CREATE_PARTITIONS: (admin.CREATE_PARTITIONS_REQUEST, admin.CREATE_PARTITIONS_RESPONSE),
    ApiKey.DELETE_RECORDS: (operations.DELETE_RECORDS_REQUEST, operations.DELETE_RECORDS_RESPONSE),
    ApiKey.ALTER_CONFIGS: (operations.ALTER_CONFIGS_REQUEST, operations.ALTER_CONFIGS_RESPONSE),
    ApiKey.DESCRIBE_LOG_DIRS: (operations.DESCRIBE_LOG_DIRS_REQUEST, operations.DESCRIBE_LOG_DIRS_RESPONSE),
    ApiKey.DELETE_GROUPS: (operations.DELETE_GROUPS_REQUEST, operations.DELETE_GROUPS_RESPONSE),
    ApiKey.INCREMENTAL_ALTER_CONFIGS: (
        operations.INCREMENTAL_ALTER_CONFIGS_REQUEST, operations.INCREMENTAL_ALTER_CONFIGS_RESPONSE,
    ),
    ApiKey.OFFSET_DELETE: (operations.OFFSET_DELETE_REQUEST, operations.OFFSET_DELETE_RESPONSE),
    ApiKey.ELECT_LEADERS: (operations.ELECT_LEADERS_REQUEST, operations.ELECT_LEADERS_RESPONSE),
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: (
        sasl.DESCRIBE_USER_SCRAM_CREDENTIALS_REQUEST, sasl.DESCRIBE_USER_SCRAM_CREDENTIALS_RESPONSE,
    ),
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: (
        sasl.ALTER_USER_SCRAM_CREDENTIALS_REQUEST, sasl.ALTER_USER_SCRAM_CREDENTIALS_RESPONSE,
    ),
}

REQUESTS: dict[ApiKey, MessageSchema] = {key: pair[0] for key, pair in _PAIRS.items()}
RESPONSES: dict[ApiKey, MessageSchema] = {key: pair[1] for key, pair in _PAIRS.items()}
# The version range each schema is declared for (the server may serve a narrower one).
SCHEMA_VERSIONS: dict[ApiKey, tuple[int, int]] = {
    key: (req.min_version, req.max_version) for key, req in REQUESTS.items()
}

__all__ = ["ApiKey", "MessageSchema", "REQUESTS", "RESPONSES", "SCHEMA_VERSIONS"]
