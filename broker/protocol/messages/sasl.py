"""SaslHandshake (17) v0-1, SaslAuthenticate (36) v0-1, DescribeUserScramCredentials (50) v0 and
AlterUserScramCredentials (51) v0."""

from broker.protocol.api_keys import ApiKey
from broker.protocol.schema import F, MessageSchema

SASL_HANDSHAKE_REQUEST = MessageSchema("SaslHandshakeRequest", ApiKey.SASL_HANDSHAKE, "0-1", [
    F("mechanism", "string"),
])

SASL_HANDSHAKE_RESPONSE = MessageSchema("SaslHandshakeResponse", ApiKey.SASL_HANDSHAKE, "0-1", [
    F("error_code", "int16"),
    F("mechanisms", "[]string"),
])

SASL_AUTHENTICATE_REQUEST = MessageSchema("SaslAuthenticateRequest", ApiKey.SASL_AUTHENTICATE, "0-1", [
    F("auth_bytes", "bytes"),
])

SASL_AUTHENTICATE_RESPONSE = MessageSchema("SaslAuthenticateResponse", ApiKey.SASL_AUTHENTICATE, "0-1", [
    F("error_code", "int16"),
    F("error_message", "string", nullable="0+"),
    F("auth_bytes", "bytes"),
    F("session_lifetime_ms", "int64", "1+"),
])

# SCRAM credentials managed over the protocol (KIP-554); flexible from their first version.
# ``mechanism`` is the type byte of broker.security.scram.MECHANISM_IDS.

DESCRIBE_USER_SCRAM_CREDENTIALS_REQUEST = MessageSchema(
    "DescribeUserScramCredentialsRequest", ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, "0-0", [
        F("users", "[]", "0+", [F("name", "string")], nullable="0+"),
    ], flexible="0+")

DESCRIBE_USER_SCRAM_CREDENTIALS_RESPONSE = MessageSchema(
    "DescribeUserScramCredentialsResponse", ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, "0-0", [
        F("throttle_time_ms", "int32"),
        F("error_code", "int16"),
        F("error_message", "string", nullable="0+"),
        F("results", "[]", "0+", [
            F("user", "string"),
            F("error_code", "int16"),
            F("error_message", "string", nullable="0+"),
            F("credential_infos", "[]", "0+", [F("mechanism", "int8"), F("iterations", "int32")]),
        ]),
    ], flexible="0+")

ALTER_USER_SCRAM_CREDENTIALS_REQUEST = MessageSchema(
    "AlterUserScramCredentialsRequest", ApiKey.ALTER_USER_SCRAM_CREDENTIALS, "0-0", [
        F("deletions", "[]", "0+", [F("name", "string"), F("mechanism", "int8")]),
        F("upsertions", "[]", "0+", [
            F("name", "string"),
            F("mechanism", "int8"),
            F("iterations", "int32"),
            F("salt", "bytes"),
            F("salted_password", "bytes"),
        ]),
    ], flexible="0+")

ALTER_USER_SCRAM_CREDENTIALS_RESPONSE = MessageSchema(
    "AlterUserScramCredentialsResponse", ApiKey.ALTER_USER_SCRAM_CREDENTIALS, "0-0", [
        F("throttle_time_ms", "int32"),
        F("results", "[]", "0+", [
            F("user", "string"),
            F("error_code", "int16"),
            F("error_message", "string", nullable="0+"),
        ]),
    ], flexible="0+")
