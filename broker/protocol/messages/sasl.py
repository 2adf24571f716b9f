"""SaslHandshake (17) v0-1 and SaslAuthenticate (36) v0-1."""

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
