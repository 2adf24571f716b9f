"""The admin APIs an operator's tools call to run a cluster (declared from Kafka's message JSON,
non-flexible versions only): DeleteRecords (21) v0-1, AlterConfigs (33) v0-1, DescribeLogDirs (35)
v0-1, DeleteGroups (42) v0-1, ElectLeaders (43) v0-1, IncrementalAlterConfigs (44) v0 and OffsetDelete (47) v0."""

from broker.protocol.api_keys import ApiKey
from broker.protocol.schema import F, MessageSchema, per_topic

# DeleteRecords: move each partition's log start offset up to ``offset`` (-1: the high watermark).
DELETE_RECORDS_REQUEST = MessageSchema("DeleteRecordsRequest", ApiKey.DELETE_RECORDS, "0-1", [
    per_topic([F("partition_index", "int32"), F("offset", "int64")]),
    F("timeout_ms", "int32"),
])

DELETE_RECORDS_RESPONSE = MessageSchema("DeleteRecordsResponse", ApiKey.DELETE_RECORDS, "0-1", [
    F("throttle_time_ms", "int32"),
    per_topic([F("partition_index", "int32"), F("low_watermark", "int64"), F("error_code", "int16")]),
])

# AlterConfigs replaces a resource's whole dynamic config; resource_type 2 = topic, 4 = broker.
ALTER_CONFIGS_REQUEST = MessageSchema("AlterConfigsRequest", ApiKey.ALTER_CONFIGS, "0-1", [
    F("resources", "[]", "0+", [
        F("resource_type", "int8"),
        F("resource_name", "string"),
        F("configs", "[]", "0+", [
            F("name", "string"),
            F("value", "string", nullable="0+"),
        ]),
    ]),
    F("validate_only", "bool"),
])

_ALTER_RESULTS = [
    F("throttle_time_ms", "int32"),
    F("responses", "[]", "0+", [
        F("error_code", "int16"),
        F("error_message", "string", nullable="0+"),
        F("resource_type", "int8"),
        F("resource_name", "string"),
    ]),
]

ALTER_CONFIGS_RESPONSE = MessageSchema("AlterConfigsResponse", ApiKey.ALTER_CONFIGS, "0-1", _ALTER_RESULTS)

# IncrementalAlterConfigs: config_operation 0 = SET, 1 = DELETE, 2 = APPEND, 3 = SUBTRACT.
INCREMENTAL_ALTER_CONFIGS_REQUEST = MessageSchema(
    "IncrementalAlterConfigsRequest", ApiKey.INCREMENTAL_ALTER_CONFIGS, "0", [
        F("resources", "[]", "0+", [
            F("resource_type", "int8"),
            F("resource_name", "string"),
            F("configs", "[]", "0+", [
                F("name", "string"),
                F("config_operation", "int8"),
                F("value", "string", nullable="0+"),
            ]),
        ]),
        F("validate_only", "bool"),
    ],
)

INCREMENTAL_ALTER_CONFIGS_RESPONSE = MessageSchema(
    "IncrementalAlterConfigsResponse", ApiKey.INCREMENTAL_ALTER_CONFIGS, "0", _ALTER_RESULTS
)

# DescribeLogDirs: a null topics asks for every partition in every log dir.
DESCRIBE_LOG_DIRS_REQUEST = MessageSchema("DescribeLogDirsRequest", ApiKey.DESCRIBE_LOG_DIRS, "0-1", [
    F("topics", "[]", "0+", [
        F("topic", "string"),
        F("partitions", "[]int32"),
    ], nullable="0+"),
])

DESCRIBE_LOG_DIRS_RESPONSE = MessageSchema("DescribeLogDirsResponse", ApiKey.DESCRIBE_LOG_DIRS, "0-1", [
    F("throttle_time_ms", "int32"),
    F("results", "[]", "0+", [
        F("error_code", "int16"),
        F("log_dir", "string"),
        per_topic([
            F("partition_index", "int32"),
            F("partition_size", "int64"),
            F("offset_lag", "int64"),
            F("is_future_key", "bool"),
        ]),
    ]),
])

DELETE_GROUPS_REQUEST = MessageSchema("DeleteGroupsRequest", ApiKey.DELETE_GROUPS, "0-1", [
    F("groups_names", "[]string"),
])

DELETE_GROUPS_RESPONSE = MessageSchema("DeleteGroupsResponse", ApiKey.DELETE_GROUPS, "0-1", [
    F("throttle_time_ms", "int32"),
    F("results", "[]", "0+", [
        F("group_id", "string"),
        F("error_code", "int16"),
    ]),
])

OFFSET_DELETE_REQUEST = MessageSchema("OffsetDeleteRequest", ApiKey.OFFSET_DELETE, "0", [
    F("group_id", "string"),
    per_topic([F("partition_index", "int32")]),
])

OFFSET_DELETE_RESPONSE = MessageSchema("OffsetDeleteResponse", ApiKey.OFFSET_DELETE, "0", [
    F("error_code", "int16"),
    F("throttle_time_ms", "int32"),
    per_topic([F("partition_index", "int32"), F("error_code", "int16")]),
])

# ElectLeaders: election_type 0 = preferred, 1 = unclean; null topic_partitions: every partition.
ELECT_LEADERS_REQUEST = MessageSchema("ElectLeadersRequest", ApiKey.ELECT_LEADERS, "0-1", [
    F("election_type", "int8", "1+"),
    F("topic_partitions", "[]", "0+", [
        F("topic", "string"),
        F("partitions", "[]int32"),
    ], nullable="0+"),
    F("timeout_ms", "int32", default=60000),
])

ELECT_LEADERS_RESPONSE = MessageSchema("ElectLeadersResponse", ApiKey.ELECT_LEADERS, "0-1", [
    F("throttle_time_ms", "int32"),
    F("error_code", "int16", "1+"),
    F("replica_election_results", "[]", "0+", [
        F("topic", "string"),
        F("partition_result", "[]", "0+", [
            F("partition_id", "int32"),
            F("error_code", "int16"),
            F("error_message", "string", nullable="0+"),
        ]),
    ]),
])
