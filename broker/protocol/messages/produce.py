"""Produce (0) v0-7 and InitProducerId (22) v0-1: the write path."""

from broker.protocol.api_keys import ApiKey
from broker.protocol.schema import F, MessageSchema, per_topic

# v1 adds throttle_time_ms to the response, v2 log_append_time_ms, v3 transactional_id (and
# record batch v2), v5 log_start_offset; v4, v6 and v7 change only semantics.
PRODUCE_REQUEST = MessageSchema("ProduceRequest", ApiKey.PRODUCE, "0-7", [
    F("transactional_id", "string", "3+", nullable="3+"),
    F("acks", "int16"),
    F("timeout_ms", "int32"),
    per_topic([
        F("index", "int32"),
        F("records", "records", nullable="0+"),
    ], array="topic_data", partitions="partition_data"),
])

PRODUCE_RESPONSE = MessageSchema("ProduceResponse", ApiKey.PRODUCE, "0-7", [
    per_topic([
        F("index", "int32"),
        F("error_code", "int16"),
        F("base_offset", "int64"),
        F("log_append_time_ms", "int64", "2+", default=-1),
        F("log_start_offset", "int64", "5+", default=-1),
    ], array="responses", partitions="partition_responses"),
    F("throttle_time_ms", "int32", "1+"),
])

INIT_PRODUCER_ID_REQUEST = MessageSchema("InitProducerIdRequest", ApiKey.INIT_PRODUCER_ID, "0-1", [
    F("transactional_id", "string", nullable="0+"),
    F("transaction_timeout_ms", "int32"),
])

INIT_PRODUCER_ID_RESPONSE = MessageSchema("InitProducerIdResponse", ApiKey.INIT_PRODUCER_ID, "0-1", [
    F("throttle_time_ms", "int32"),
    F("error_code", "int16"),
    F("producer_id", "int64", default=-1),
    F("producer_epoch", "int16"),
])
