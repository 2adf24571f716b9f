"""ApiVersions (18) v0-2 and Metadata (3) v0-8: what a client asks first."""

from broker.protocol.api_keys import ApiKey
from broker.protocol.schema import F, MessageSchema

NO_AUTHORIZED_OPERATIONS = -2147483648  # Kafka's "not requested" bitfield

# ApiVersions: a request at a version the broker does not know is answered in v0 form,
# which is why v0 of the response stands on its own.
API_VERSIONS_REQUEST = MessageSchema("ApiVersionsRequest", ApiKey.API_VERSIONS, "0-2", [])

API_VERSIONS_RESPONSE = MessageSchema("ApiVersionsResponse", ApiKey.API_VERSIONS, "0-2", [
    F("error_code", "int16"),
    F("api_keys", "[]", "0+", [
        F("api_key", "int16"),
        F("min_version", "int16"),
        F("max_version", "int16"),
    ]),
    F("throttle_time_ms", "int32", "1+"),
])

# Metadata: v1 adds rack, controller and is_internal, and a null topic list means "all";
# v2 cluster_id; v3 throttle; v4 allow_auto_topic_creation; v5 offline replicas;
# v7 leader epoch; v8 authorized operations.
METADATA_REQUEST = MessageSchema("MetadataRequest", ApiKey.METADATA, "0-8", [
    F("topics", "[]", "0+", [
        F("name", "string"),
    ], nullable="1+"),
    F("allow_auto_topic_creation", "bool", "4+", default=True),
    F("include_cluster_authorized_operations", "bool", "8-10"),
    F("include_topic_authorized_operations", "bool", "8+"),
])

METADATA_RESPONSE = MessageSchema("MetadataResponse", ApiKey.METADATA, "0-8", [
    F("throttle_time_ms", "int32", "3+"),
    F("brokers", "[]", "0+", [
        F("node_id", "int32"),
        F("host", "string"),
        F("port", "int32"),
        F("rack", "string", "1+", nullable="1+"),
    ]),
    F("cluster_id", "string", "2+", nullable="2+"),
    F("controller_id", "int32", "1+", default=-1),
    F("topics", "[]", "0+", [
        F("error_code", "int16"),
        F("name", "string"),
        F("is_internal", "bool", "1+"),
        F("partitions", "[]", "0+", [
            F("error_code", "int16"),
            F("partition_index", "int32"),
            F("leader_id", "int32"),
            F("leader_epoch", "int32", "7+", default=-1),
            F("replica_nodes", "[]int32"),
            F("isr_nodes", "[]int32"),
            F("offline_replicas", "[]int32", "5+"),
        ]),
        F("topic_authorized_operations", "int32", "8+", default=NO_AUTHORIZED_OPERATIONS),
    ]),
    F("cluster_authorized_operations", "int32", "8-10", default=NO_AUTHORIZED_OPERATIONS),
])
