"""CreateTopics (19) v0-4, DeleteTopics (20) v0-3, DescribeConfigs (32) v0-3 and
CreatePartitions (37) v0-1: admin APIs."""

from broker.protocol.api_keys import ApiKey
from broker.protocol.schema import F, MessageSchema

CREATE_TOPICS_REQUEST = MessageSchema("CreateTopicsRequest", ApiKey.CREATE_TOPICS, "0-4", [
    F("topics", "[]", "0+", [
        F("name", "string"),
        F("num_partitions", "int32"),
        F("replication_factor", "int16"),
        F("assignments", "[]", "0+", [
            F("partition_index", "int32"),
            F("broker_ids", "[]int32"),
        ]),
        F("configs", "[]", "0+", [
            F("name", "string"),
            F("value", "string", nullable="0+"),
        ]),
    ]),
    F("timeout_ms", "int32", default=60000),
    F("validate_only", "bool", "1+"),
])

CREATE_TOPICS_RESPONSE = MessageSchema("CreateTopicsResponse", ApiKey.CREATE_TOPICS, "0-4", [
    F("throttle_time_ms", "int32", "2+"),
    F("topics", "[]", "0+", [
        F("name", "string"),
        F("error_code", "int16"),
        F("error_message", "string", "1+", nullable="0+"),
    ]),
])

DELETE_TOPICS_REQUEST = MessageSchema("DeleteTopicsRequest", ApiKey.DELETE_TOPICS, "0-3", [
    F("topic_names", "[]string"),
    F("timeout_ms", "int32"),
])

DELETE_TOPICS_RESPONSE = MessageSchema("DeleteTopicsResponse", ApiKey.DELETE_TOPICS, "0-3", [
    F("throttle_time_ms", "int32", "1+"),
    F("responses", "[]", "0+", [
        F("name", "string"),
        F("error_code", "int16"),
    ]),
])

# DescribeConfigs: resource_type 2 = topic, 4 = broker. A null configuration_keys asks for all.
DESCRIBE_CONFIGS_REQUEST = MessageSchema("DescribeConfigsRequest", ApiKey.DESCRIBE_CONFIGS, "0-3", [
    F("resources", "[]", "0+", [
        F("resource_type", "int8"),
        F("resource_name", "string"),
        F("configuration_keys", "[]string", nullable="0+", default=None),
    ]),
    F("include_synonyms", "bool", "1+"),
    F("include_documentation", "bool", "3+"),
])

DESCRIBE_CONFIGS_RESPONSE = MessageSchema("DescribeConfigsResponse", ApiKey.DESCRIBE_CONFIGS, "0-3", [
    F("throttle_time_ms", "int32"),
    F("results", "[]", "0+", [
        F("error_code", "int16"),
        F("error_message", "string", nullable="0+"),
        F("resource_type", "int8"),
        F("resource_name", "string"),
        F("configs", "[]", "0+", [
            F("name", "string"),
            F("value", "string", nullable="0+"),
            F("read_only", "bool"),
            F("config_source", "int8", "1+", default=-1),
            F("is_default", "bool", "0"),
            F("is_sensitive", "bool"),
            F("synonyms", "[]", "1+", [
                F("name", "string"),
                F("value", "string", nullable="0+"),
                F("source", "int8"),
            ]),
            F("config_type", "int8", "3+"),
            F("documentation", "string", "3+", nullable="0+"),
        ]),
    ]),
])

# CreatePartitions: grow topics to ``count`` partitions; v1 only changes semantics.
CREATE_PARTITIONS_REQUEST = MessageSchema("CreatePartitionsRequest", ApiKey.CREATE_PARTITIONS, "0-1", [
    F("topics", "[]", "0+", [
        F("name", "string"),
        F("count", "int32"),
        F("assignments", "[]", "0+", [
            F("broker_ids", "[]int32"),
        ], nullable="0+"),
    ]),
    F("timeout_ms", "int32"),
    F("validate_only", "bool"),
])

CREATE_PARTITIONS_RESPONSE = MessageSchema("CreatePartitionsResponse", ApiKey.CREATE_PARTITIONS, "0-1", [
    F("throttle_time_ms", "int32"),
    F("results", "[]", "0+", [
        F("name", "string"),
        F("error_code", "int16"),
        F("error_message", "string", nullable="0+"),
    ]),
])
