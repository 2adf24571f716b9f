"""Fetch (1) v0-11, ListOffsets (2) v0-5 and OffsetForLeaderEpoch (23) v0-3: the read path."""

from broker.protocol.api_keys import ApiKey
from broker.protocol.schema import F, MessageSchema, per_topic

# Fetch: v0-1 answer message format v0 and v2-3 v1 (down-converted), v1 throttle_time_ms, v3
# max_bytes, v4 isolation level and aborted transactions (record batch v2), v5
# log_start_offset, v7 fetch sessions and forgotten topics, v9 current_leader_epoch, v11
# rack_id / preferred read replica.
FETCH_REQUEST = MessageSchema("FetchRequest", ApiKey.FETCH, "0-11", [
    F("replica_id", "int32", default=-1),
    F("max_wait_ms", "int32"),
    F("min_bytes", "int32"),
    F("max_bytes", "int32", "3+", default=0x7FFFFFFF),
    F("isolation_level", "int8", "4+"),
    F("session_id", "int32", "7+"),
    F("session_epoch", "int32", "7+", default=-1),
    per_topic([
        F("partition", "int32"),
        F("current_leader_epoch", "int32", "9+", default=-1),
        F("fetch_offset", "int64"),
        F("log_start_offset", "int64", "5+", default=-1),
        F("partition_max_bytes", "int32"),
    ], topic="topic"),
    F("forgotten_topics_data", "[]", "7+", [
        F("topic", "string"),
        F("partitions", "[]int32"),
    ]),
    F("rack_id", "string", "11+"),
])

FETCH_RESPONSE = MessageSchema("FetchResponse", ApiKey.FETCH, "0-11", [
    F("throttle_time_ms", "int32", "1+"),
    F("error_code", "int16", "7+"),
    F("session_id", "int32", "7+"),
    per_topic([
        F("partition_index", "int32"),
        F("error_code", "int16"),
        F("high_watermark", "int64"),
        F("last_stable_offset", "int64", "4+", default=-1),
        F("log_start_offset", "int64", "5+", default=-1),
        F("aborted_transactions", "[]", "4+", [
            F("producer_id", "int64"),
            F("first_offset", "int64"),
        ], nullable="4+"),
        F("preferred_read_replica", "int32", "11+", default=-1),
        F("records", "records", nullable="0+"),
    ], array="responses", topic="topic"),
])

# ListOffsets: v0 answers up to max_num_offsets offsets (old_style_offsets), v1 one offset and
# its timestamp, v2 isolation_level and throttle, v4
# current_leader_epoch / leader_epoch; v3 and v5 change only semantics.
LIST_OFFSETS_REQUEST = MessageSchema("ListOffsetsRequest", ApiKey.LIST_OFFSETS, "0-5", [
    F("replica_id", "int32", default=-1),
    F("isolation_level", "int8", "2+"),
    per_topic([
        F("partition_index", "int32"),
        F("current_leader_epoch", "int32", "4+", default=-1),
        F("timestamp", "int64"),
        F("max_num_offsets", "int32", "0", default=1),
    ]),
])

LIST_OFFSETS_RESPONSE = MessageSchema("ListOffsetsResponse", ApiKey.LIST_OFFSETS, "0-5", [
    F("throttle_time_ms", "int32", "2+"),
    per_topic([
        F("partition_index", "int32"),
        F("error_code", "int16"),
        F("old_style_offsets", "[]int64", "0", default=[]),
        F("timestamp", "int64", "1+", default=-1),
        F("offset", "int64", "1+", default=-1),
        F("leader_epoch", "int32", "4+", default=-1),
    ]),
])

# OffsetForLeaderEpoch: v1 answers the leader epoch, v2 current_leader_epoch and throttle,
# v3 replica_id (-2 for a consumer, a broker id for a follower).
OFFSET_FOR_LEADER_EPOCH_REQUEST = MessageSchema("OffsetForLeaderEpochRequest", ApiKey.OFFSET_FOR_LEADER_EPOCH, "0-3", [
    F("replica_id", "int32", "3+", default=-2),
    per_topic([
        F("partition", "int32"),
        F("current_leader_epoch", "int32", "2+", default=-1),
        F("leader_epoch", "int32"),
    ], topic="topic"),
])

OFFSET_FOR_LEADER_EPOCH_RESPONSE = MessageSchema("OffsetForLeaderEpochResponse", ApiKey.OFFSET_FOR_LEADER_EPOCH, "0-3", [
    F("throttle_time_ms", "int32", "2+"),
    per_topic([
        F("error_code", "int16"),
        F("partition", "int32"),
        F("leader_epoch", "int32", "1+", default=-1),
        F("end_offset", "int64", default=-1),
    ], topic="topic"),
])
