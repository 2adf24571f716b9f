"""Kafka's error codes, and the exceptions that carry them.

Codes and names are Kafka's own (org.apache.kafka.common.protocol.Errors), so clients print
the messages their users already know. Raise a ``KafkaError`` subclass anywhere below the
server and the handler turns it into the matching error code.
"""

from __future__ import annotations

from enum import IntEnum


class ErrorCode(IntEnum):
    UNKNOWN_SERVER_ERROR = -1
    NONE = 0
    OFFSET_OUT_OF_RANGE = 1
    CORRUPT_MESSAGE = 2
    UNKNOWN_TOPIC_OR_PARTITION = 3
    INVALID_FETCH_SIZE = 4
    LEADER_NOT_AVAILABLE = 5
    NOT_LEADER_OR_FOLLOWER = 6
    REQUEST_TIMED_OUT = 7
    BROKER_NOT_AVAILABLE = 8
    REPLICA_NOT_AVAILABLE = 9
    MESSAGE_TOO_LARGE = 10
    STALE_CONTROLLER_EPOCH = 11
    OFFSET_METADATA_TOO_LARGE = 12
    NETWORK_EXCEPTION = 13
    COORDINATOR_LOAD_IN_PROGRESS = 14
    COORDINATOR_NOT_AVAILABLE = 15
    NOT_COORDINATOR = 16
    INVALID_TOPIC_EXCEPTION = 17
    RECORD_LIST_TOO_LARGE = 18
    NOT_ENOUGH_REPLICAS = 19
    NOT_ENOUGH_REPLICAS_AFTER_APPEND = 20
    INVALID_REQUIRED_ACKS = 21
    ILLEGAL_GENERATION = 22
    INCONSISTENT_GROUP_PROTOCOL = 23
    INVALID_GROUP_ID = 24
    UNKNOWN_MEMBER_ID = 25
    INVALID_SESSION_TIMEOUT = 26
    REBALANCE_IN_PROGRESS = 27
    INVALID_COMMIT_OFFSET_SIZE = 28
    TOPIC_AUTHORIZATION_FAILED = 29
    GROUP_AUTHORIZATION_FAILED = 30
    CLUSTER_AUTHORIZATION_FAILED = 31
    INVALID_TIMESTAMP = 32
    UNSUPPORTED_SASL_MECHANISM = 33
    ILLEGAL_SASL_STATE = 34
    UNSUPPORTED_VERSION = 35
    TOPIC_ALREADY_EXISTS = 36
    INVALID_PARTITIONS = 37
    INVALID_REPLICATION_FACTOR = 38
    INVALID_REPLICA_ASSIGNMENT = 39
    INVALID_CONFIG = 40
    NOT_CONTROLLER = 41
    INVALID_REQUEST = 42
    UNSUPPORTED_FOR_MESSAGE_FORMAT = 43
    POLICY_VIOLATION = 44
    OUT_OF_ORDER_SEQUENCE_NUMBER = 45
    DUPLICATE_SEQUENCE_NUMBER = 46
    INVALID_PRODUCER_EPOCH = 47
    INVALID_TXN_STATE = 48
    INVALID_PRODUCER_ID_MAPPING = 49
    INVALID_TRANSACTION_TIMEOUT = 50
    CONCURRENT_TRANSACTIONS = 51
    TRANSACTION_COORDINATOR_FENCED = 52
    TRANSACTIONAL_ID_AUTHORIZATION_FAILED = 53
    SECURITY_DISABLED = 54
    OPERATION_NOT_ATTEMPTED = 55
    KAFKA_STORAGE_ERROR = 56
    LOG_DIR_NOT_FOUND = 57
    SASL_AUTHENTICATION_FAILED = 58
    UNKNOWN_PRODUCER_ID = 59
    REASSIGNMENT_IN_PROGRESS = 60
    GROUP_ID_NOT_FOUND = 69
    FETCH_SESSION_ID_NOT_FOUND = 70
    INVALID_FETCH_SESSION_EPOCH = 71
    LISTENER_NOT_FOUND = 72
    TOPIC_DELETION_DISABLED = 73
    FENCED_LEADER_EPOCH = 74
    UNKNOWN_LEADER_EPOCH = 75
    UNSUPPORTED_COMPRESSION_TYPE = 76
    STALE_BROKER_EPOCH = 77
    OFFSET_NOT_AVAILABLE = 78
    MEMBER_ID_REQUIRED = 79
    PREFERRED_LEADER_NOT_AVAILABLE = 80
    GROUP_MAX_SIZE_REACHED = 81
    FENCED_INSTANCE_ID = 82
    INVALID_RECORD = 87
    UNSTABLE_OFFSET_COMMIT = 88


class KafkaError(Exception):
    """An error with a Kafka error code; handlers answer it with that code."""

    code: ErrorCode = ErrorCode.UNKNOWN_SERVER_ERROR

    def __init__(self, message: str = "") -> None:
        super().__init__(message or self.code.name)


def _error(name: str, code: ErrorCode) -> type[KafkaError]:
    return type(name, (KafkaError,), {"code": code, "__doc__": f"Kafka error {code.name} ({int(code)})."})


OffsetOutOfRangeError = _error("OffsetOutOfRangeError", ErrorCode.OFFSET_OUT_OF_RANGE)
CorruptRecordError = _error("CorruptRecordError", ErrorCode.CORRUPT_MESSAGE)
UnknownTopicOrPartitionError = _error("UnknownTopicOrPartitionError", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
NotLeaderOrFollowerError = _error("NotLeaderOrFollowerError", ErrorCode.NOT_LEADER_OR_FOLLOWER)
RequestTimedOutError = _error("RequestTimedOutError", ErrorCode.REQUEST_TIMED_OUT)
MessageTooLargeError = _error("MessageTooLargeError", ErrorCode.MESSAGE_TOO_LARGE)
InvalidTopicError = _error("InvalidTopicError", ErrorCode.INVALID_TOPIC_EXCEPTION)
RecordListTooLargeError = _error("RecordListTooLargeError", ErrorCode.RECORD_LIST_TOO_LARGE)
NotEnoughReplicasError = _error("NotEnoughReplicasError", ErrorCode.NOT_ENOUGH_REPLICAS)
InvalidRequiredAcksError = _error("InvalidRequiredAcksError", ErrorCode.INVALID_REQUIRED_ACKS)
UnsupportedVersionError = _error("UnsupportedVersionError", ErrorCode.UNSUPPORTED_VERSION)
TopicAlreadyExistsError = _error("TopicAlreadyExistsError", ErrorCode.TOPIC_ALREADY_EXISTS)
InvalidPartitionsError = _error("InvalidPartitionsError", ErrorCode.INVALID_PARTITIONS)
InvalidReplicationFactorError = _error("InvalidReplicationFactorError", ErrorCode.INVALID_REPLICATION_FACTOR)
InvalidConfigError = _error("InvalidConfigError", ErrorCode.INVALID_CONFIG)
InvalidRequestError = _error("InvalidRequestError", ErrorCode.INVALID_REQUEST)
OutOfOrderSequenceError = _error("OutOfOrderSequenceError", ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER)
DuplicateSequenceError = _error("DuplicateSequenceError", ErrorCode.DUPLICATE_SEQUENCE_NUMBER)
InvalidProducerEpochError = _error("InvalidProducerEpochError", ErrorCode.INVALID_PRODUCER_EPOCH)
KafkaStorageError = _error("KafkaStorageError", ErrorCode.KAFKA_STORAGE_ERROR)
UnknownProducerIdError = _error("UnknownProducerIdError", ErrorCode.UNKNOWN_PRODUCER_ID)
TopicDeletionDisabledError = _error("TopicDeletionDisabledError", ErrorCode.TOPIC_DELETION_DISABLED)
UnsupportedCompressionTypeError = _error("UnsupportedCompressionTypeError", ErrorCode.UNSUPPORTED_COMPRESSION_TYPE)
InvalidRecordError = _error("InvalidRecordError", ErrorCode.INVALID_RECORD)
InvalidTimestampError = _error("InvalidTimestampError", ErrorCode.INVALID_TIMESTAMP)
# consumer groups (the classic group protocol)
CoordinatorLoadInProgressError = _error("CoordinatorLoadInProgressError", ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)
CoordinatorNotAvailableError = _error("CoordinatorNotAvailableError", ErrorCode.COORDINATOR_NOT_AVAILABLE)
NotCoordinatorError = _error("NotCoordinatorError", ErrorCode.NOT_COORDINATOR)
IllegalGenerationError = _error("IllegalGenerationError", ErrorCode.ILLEGAL_GENERATION)
InconsistentGroupProtocolError = _error("InconsistentGroupProtocolError", ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
InvalidGroupIdError = _error("InvalidGroupIdError", ErrorCode.INVALID_GROUP_ID)
UnknownMemberIdError = _error("UnknownMemberIdError", ErrorCode.UNKNOWN_MEMBER_ID)
InvalidSessionTimeoutError = _error("InvalidSessionTimeoutError", ErrorCode.INVALID_SESSION_TIMEOUT)
RebalanceInProgressError = _error("RebalanceInProgressError", ErrorCode.REBALANCE_IN_PROGRESS)
GroupAuthorizationFailedError = _error("GroupAuthorizationFailedError", ErrorCode.GROUP_AUTHORIZATION_FAILED)
GroupMaxSizeReachedError = _error("GroupMaxSizeReachedError", ErrorCode.GROUP_MAX_SIZE_REACHED)


class ProtocolDecodeError(ValueError):
    """A request whose bytes do not fit its schema; the server closes the connection."""


class ProtocolEncodeError(ValueError):
    """A value that cannot be encoded by its schema (wrong type, out of range, null where not allowed)."""


def error_for_code(code: int, message: str = "") -> KafkaError:
    """The exception for an error code a broker answered, for clients to raise."""
    cls = _BY_CODE.get(code)
    if cls is None:
        try:
            name = ErrorCode(code).name
        except ValueError:
            name = f"error code {code}"
        cls = type(f"KafkaError{code}", (KafkaError,), {"code": code})
        return cls(message or name)
    return cls(message or cls.code.name)


_BY_CODE: dict[int, type[KafkaError]] = {
    cls.code: cls for cls in list(globals().values()) if isinstance(cls, type) and issubclass(cls, KafkaError) and cls is not KafkaError
}
