"""The ACL APIs (declared from Kafka's message JSON, non-flexible versions): DescribeAcls (29)
v0-1, CreateAcls (30) v0-1 and DeleteAcls (31) v0-1. v1 adds the pattern type (3 = LITERAL,
4 = PREFIXED; filters also 1 = ANY, 2 = MATCH); codes are broker.security.acl's."""

from broker.protocol.api_keys import ApiKey
from broker.protocol.schema import F, MessageSchema

LITERAL = 3


def _filter_fields() -> list:
    return [
        F("resource_type_filter", "int8"),
        F("resource_name_filter", "string", nullable="0+"),
        F("pattern_type_filter", "int8", "1+", default=LITERAL),
        F("principal_filter", "string", nullable="0+"),
        F("host_filter", "string", nullable="0+"),
        F("operation", "int8"),
        F("permission_type", "int8"),
    ]


DESCRIBE_ACLS_REQUEST = MessageSchema("DescribeAclsRequest", ApiKey.DESCRIBE_ACLS, "0-1", _filter_fields())

DESCRIBE_ACLS_RESPONSE = MessageSchema("DescribeAclsResponse", ApiKey.DESCRIBE_ACLS, "0-1", [
    F("throttle_time_ms", "int32"),
    F("error_code", "int16"),
    F("error_message", "string", nullable="0+"),
    F("resources", "[]", "0+", [
        F("resource_type", "int8"),
        F("resource_name", "string"),
        F("pattern_type", "int8", "1+", default=LITERAL),
        F("acls", "[]", "0+", [
            F("principal", "string"),
            F("host", "string"),
            F("operation", "int8"),
            F("permission_type", "int8"),
        ]),
    ]),
])

CREATE_ACLS_REQUEST = MessageSchema("CreateAclsRequest", ApiKey.CREATE_ACLS, "0-1", [
    F("creations", "[]", "0+", [
        F("resource_type", "int8"),
        F("resource_name", "string"),
        F("resource_pattern_type", "int8", "1+", default=LITERAL),
        F("principal", "string"),
        F("host", "string"),
        F("operation", "int8"),
        F("permission_type", "int8"),
    ]),
])

CREATE_ACLS_RESPONSE = MessageSchema("CreateAclsResponse", ApiKey.CREATE_ACLS, "0-1", [
    F("throttle_time_ms", "int32"),
    F("results", "[]", "0+", [
        F("error_code", "int16"),
        F("error_message", "string", nullable="0+"),
    ]),
])

DELETE_ACLS_REQUEST = MessageSchema("DeleteAclsRequest", ApiKey.DELETE_ACLS, "0-1", [
    F("filters", "[]", "0+", _filter_fields()),
])

DELETE_ACLS_RESPONSE = MessageSchema("DeleteAclsResponse", ApiKey.DELETE_ACLS, "0-1", [
    F("throttle_time_ms", "int32"),
    F("filter_results", "[]", "0+", [
        F("error_code", "int16"),
        F("error_message", "string", nullable="0+"),
        F("matching_acls", "[]", "0+", [
            F("error_code", "int16"),
            F("error_message", "string", nullable="0+"),
            F("resource_type", "int8"),
            F("resource_name", "string"),
            F("pattern_type", "int8", "1+", default=LITERAL),
            F("principal", "string"),
            F("host", "string"),
            F("operation", "int8"),
            F("permission_type", "int8"),
        ]),
    ]),
])
