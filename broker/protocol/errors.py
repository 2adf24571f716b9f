"""Kafka's error codes, and one exception class per code.

Codes and names are Kafka's own (org.apache.kafka.common.protocol.Errors), so clients print
the messages their users already know. Raise a ``KafkaError`` subclass anywhere below the
server and the handler turns it into the matching error code; clients turn a code back into
its class with ``error_for_code``. Each class says, as Kafka does, whether the error is
``retriable`` (the same request may succeed later) and ``invalid_metadata`` (retry after
refreshing metadata: the leader moved), so callers test those instead of keeping code sets.
"""

from __future__ import annotations

from enum import IntEnum
from typing import ClassVar


class ErrorCode(IntEnum):
    """Kafka's error codes, by Kafka's names (the protocol guide's table)."""

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
    NON_EMPTY_GROUP = 68
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
    ELIGIBLE_LEADERS_NOT_AVAILABLE = 83
    ELECTION_NOT_NEEDED = 84
    GROUP_SUBSCRIBED_TO_TOPIC = 86
    INVALID_RECORD = 87
    UNSTABLE_OFFSET_COMMIT = 88
    RESOURCE_NOT_FOUND = 91
    DUPLICATE_RESOURCE = 92
    UNACCEPTABLE_CREDENTIAL = 93


class KafkaError(Exception):
    """An error with a Kafka error code; handlers answer it with that code.

    ``message`` is Kafka's name of the code, the text of an error raised without one.
    """

    errno: int = ErrorCode.UNKNOWN_SERVER_ERROR
    message: ClassVar[str] = ErrorCode.UNKNOWN_SERVER_ERROR.name
    retriable: ClassVar[bool] = False
    invalid_metadata: ClassVar[bool] = False

    def __init_subclass__(cls, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        if "errno" in cls.__dict__:
            cls.message = ErrorCode(cls.errno).name

    def __init__(self, message: str = "") -> None:
        super().__init__(message or self.message)

    @property
    def code(self) -> int:
        """The error code (``errno``), the name handlers and callers have long used."""
        return self.errno


class UnknownServerError(KafkaError):
    """An unexpected error on the broker."""

    errno = ErrorCode.UNKNOWN_SERVER_ERROR


class OffsetOutOfRangeError(KafkaError):
    """The offset asked for is outside the partition's log."""

    errno = ErrorCode.OFFSET_OUT_OF_RANGE


class CorruptRecordError(KafkaError):
    """A record or batch failed its checksum or does not parse."""

    errno = ErrorCode.CORRUPT_MESSAGE
    retriable = True


class UnknownTopicOrPartitionError(KafkaError):
    """The broker does not serve this topic or partition."""

    errno = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    retriable = True
    invalid_metadata = True


class InvalidFetchSizeError(KafkaError):
    """A fetch asked for a negative size."""

    errno = ErrorCode.INVALID_FETCH_SIZE


class LeaderNotAvailableError(KafkaError):
    """The partition has no leader right now (an election is under way, or every replica is down)."""

    errno = ErrorCode.LEADER_NOT_AVAILABLE
    retriable = True
    invalid_metadata = True


class NotLeaderOrFollowerError(KafkaError):
    """This broker is not the partition's leader (or a replica of it): the client's metadata is stale."""

    errno = ErrorCode.NOT_LEADER_OR_FOLLOWER
    retriable = True
    invalid_metadata = True


class RequestTimedOutError(KafkaError):
    """The request did not complete within its timeout."""

    errno = ErrorCode.REQUEST_TIMED_OUT
    retriable = True


class BrokerNotAvailableError(KafkaError):
    """The broker is not alive."""

    errno = ErrorCode.BROKER_NOT_AVAILABLE


class ReplicaNotAvailableError(KafkaError):
    """The replica is not on the broker that answered."""

    errno = ErrorCode.REPLICA_NOT_AVAILABLE
    retriable = True
    invalid_metadata = True


class MessageTooLargeError(KafkaError):
    """A record batch is larger than the broker or topic accepts."""

    errno = ErrorCode.MESSAGE_TOO_LARGE


class StaleControllerEpochError(KafkaError):
    """A controller request from an older controller epoch."""

    errno = ErrorCode.STALE_CONTROLLER_EPOCH


class OffsetMetadataTooLargeError(KafkaError):
    """Offset commit metadata longer than the broker allows."""

    errno = ErrorCode.OFFSET_METADATA_TOO_LARGE


class NetworkError(KafkaError):
    """The connection was lost before the broker answered."""

    errno = ErrorCode.NETWORK_EXCEPTION
    retriable = True
    invalid_metadata = True


class CoordinatorLoadInProgressError(KafkaError):
    """The coordinator is still loading its state."""

    errno = ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
    retriable = True


class CoordinatorNotAvailableError(KafkaError):
    """No coordinator is available for the group."""

    errno = ErrorCode.COORDINATOR_NOT_AVAILABLE
    retriable = True


class NotCoordinatorError(KafkaError):
    """This broker is not the group's coordinator."""

    errno = ErrorCode.NOT_COORDINATOR
    retriable = True


class InvalidTopicError(KafkaError):
    """The topic name is not legal, or the topic may not be written."""

    errno = ErrorCode.INVALID_TOPIC_EXCEPTION


class RecordListTooLargeError(KafkaError):
    """The records of a produce request are larger than a segment."""

    errno = ErrorCode.RECORD_LIST_TOO_LARGE


class NotEnoughReplicasError(KafkaError):
    """Fewer in-sync replicas than min.insync.replicas: the append was refused."""

    errno = ErrorCode.NOT_ENOUGH_REPLICAS
    retriable = True


class NotEnoughReplicasAfterAppendError(KafkaError):
    """The records were appended, but fewer in-sync replicas than required have them."""

    errno = ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND
    retriable = True


class InvalidRequiredAcksError(KafkaError):
    """acks is not -1, 0 or 1."""

    errno = ErrorCode.INVALID_REQUIRED_ACKS


class IllegalGenerationError(KafkaError):
    """The group generation in the request is not the current one."""

    errno = ErrorCode.ILLEGAL_GENERATION


class InconsistentGroupProtocolError(KafkaError):
    """The member's protocols do not match the group's."""

    errno = ErrorCode.INCONSISTENT_GROUP_PROTOCOL


class InvalidGroupIdError(KafkaError):
    """The group id is empty or null."""

    errno = ErrorCode.INVALID_GROUP_ID


class UnknownMemberIdError(KafkaError):
    """The member id is not in the group's current generation."""

    errno = ErrorCode.UNKNOWN_MEMBER_ID


class InvalidSessionTimeoutError(KafkaError):
    """The session timeout is outside the range the broker allows."""

    errno = ErrorCode.INVALID_SESSION_TIMEOUT


class RebalanceInProgressError(KafkaError):
    """The group is rebalancing: the member must rejoin."""

    errno = ErrorCode.REBALANCE_IN_PROGRESS


class InvalidCommitOffsetSizeError(KafkaError):
    """The offset commit was refused because its metadata is too large."""

    errno = ErrorCode.INVALID_COMMIT_OFFSET_SIZE


class TopicAuthorizationFailedError(KafkaError):
    """The client may not access the topic."""

    errno = ErrorCode.TOPIC_AUTHORIZATION_FAILED


class GroupAuthorizationFailedError(KafkaError):
    """The client may not access the group."""

    errno = ErrorCode.GROUP_AUTHORIZATION_FAILED


class ClusterAuthorizationFailedError(KafkaError):
    """The client may not use this inter-broker or administrative API."""

    errno = ErrorCode.CLUSTER_AUTHORIZATION_FAILED


class InvalidTimestampError(KafkaError):
    """A record timestamp is outside the accepted range."""

    errno = ErrorCode.INVALID_TIMESTAMP


class UnsupportedSaslMechanismError(KafkaError):
    """The broker does not offer the SASL mechanism asked for."""

    errno = ErrorCode.UNSUPPORTED_SASL_MECHANISM


class IllegalSaslStateError(KafkaError):
    """The request does not fit the SASL exchange's state."""

    errno = ErrorCode.ILLEGAL_SASL_STATE


class UnsupportedVersionError(KafkaError):
    """The broker does not serve this API version."""

    errno = ErrorCode.UNSUPPORTED_VERSION


class TopicAlreadyExistsError(KafkaError):
    """A topic of that name exists."""

    errno = ErrorCode.TOPIC_ALREADY_EXISTS


class InvalidPartitionsError(KafkaError):
    """The partition count is not valid."""

    errno = ErrorCode.INVALID_PARTITIONS


class InvalidReplicationFactorError(KafkaError):
    """The replication factor is not valid (or larger than the live brokers)."""

    errno = ErrorCode.INVALID_REPLICATION_FACTOR


class InvalidReplicaAssignmentError(KafkaError):
    """The replica assignment is not valid."""

    errno = ErrorCode.INVALID_REPLICA_ASSIGNMENT


class InvalidConfigError(KafkaError):
    """A topic configuration value is not valid."""

    errno = ErrorCode.INVALID_CONFIG


class NotControllerError(KafkaError):
    """This broker is not the controller."""

    errno = ErrorCode.NOT_CONTROLLER
    retriable = True


class InvalidRequestError(KafkaError):
    """The request is malformed or not allowed."""

    errno = ErrorCode.INVALID_REQUEST


class UnsupportedForMessageFormatError(KafkaError):
    """The topic's message format version does not support the request."""

    errno = ErrorCode.UNSUPPORTED_FOR_MESSAGE_FORMAT


class PolicyViolationError(KafkaError):
    """The request breaks a broker policy."""

    errno = ErrorCode.POLICY_VIOLATION


class OutOfOrderSequenceError(KafkaError):
    """The producer's sequence number is not the next one expected."""

    errno = ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER


class DuplicateSequenceError(KafkaError):
    """The producer's batch was already appended."""

    errno = ErrorCode.DUPLICATE_SEQUENCE_NUMBER


class InvalidProducerEpochError(KafkaError):
    """The producer's epoch is older than the current one."""

    errno = ErrorCode.INVALID_PRODUCER_EPOCH


class InvalidTxnStateError(KafkaError):
    """The transaction is not in a state that allows the request."""

    errno = ErrorCode.INVALID_TXN_STATE


class InvalidProducerIdMappingError(KafkaError):
    """The producer id is not the one mapped to the transactional id."""

    errno = ErrorCode.INVALID_PRODUCER_ID_MAPPING


class InvalidTransactionTimeoutError(KafkaError):
    """The transaction timeout is larger than the broker allows."""

    errno = ErrorCode.INVALID_TRANSACTION_TIMEOUT


class ConcurrentTransactionsError(KafkaError):
    """Another transaction on the same transactional id is still completing."""

    errno = ErrorCode.CONCURRENT_TRANSACTIONS
    retriable = True


class TransactionCoordinatorFencedError(KafkaError):
    """A newer transaction coordinator has taken over."""

    errno = ErrorCode.TRANSACTION_COORDINATOR_FENCED


class TransactionalIdAuthorizationFailedError(KafkaError):
    """The client may not use the transactional id."""

    errno = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED


class SecurityDisabledError(KafkaError):
    """Security features are disabled on the broker."""

    errno = ErrorCode.SECURITY_DISABLED


class OperationNotAttemptedError(KafkaError):
    """The broker did not attempt the operation (another part of the request failed)."""

    errno = ErrorCode.OPERATION_NOT_ATTEMPTED


class KafkaStorageError(KafkaError):
    """The log directory holding the partition is offline."""

    errno = ErrorCode.KAFKA_STORAGE_ERROR
    retriable = True
    invalid_metadata = True


class LogDirNotFoundError(KafkaError):
    """The log directory named does not exist."""

    errno = ErrorCode.LOG_DIR_NOT_FOUND


class SaslAuthenticationFailedError(KafkaError):
    """SASL authentication failed."""

    errno = ErrorCode.SASL_AUTHENTICATION_FAILED


class UnknownProducerIdError(KafkaError):
    """The broker has no state for the producer id (its records were deleted)."""

    errno = ErrorCode.UNKNOWN_PRODUCER_ID


class ReassignmentInProgressError(KafkaError):
    """A partition reassignment is under way."""

    errno = ErrorCode.REASSIGNMENT_IN_PROGRESS


class EligibleLeadersNotAvailableError(KafkaError):
    """No replica may lead: none in the ISR is live (or, unclean, none is live at all)."""

    errno = ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE
    retriable = True


class ElectionNotNeededError(KafkaError):
    """The partition already has the leader the election would choose."""

    errno = ErrorCode.ELECTION_NOT_NEEDED


class NonEmptyGroupError(KafkaError):
    """The group has members: it cannot be deleted."""

    errno = ErrorCode.NON_EMPTY_GROUP


class GroupSubscribedToTopicError(KafkaError):
    """The group's members consume the topic: its offsets cannot be deleted."""

    errno = ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC


class GroupIdNotFoundError(KafkaError):
    """The group does not exist."""

    errno = ErrorCode.GROUP_ID_NOT_FOUND


class FetchSessionIdNotFoundError(KafkaError):
    """The fetch session is unknown to the broker."""

    errno = ErrorCode.FETCH_SESSION_ID_NOT_FOUND
    retriable = True


class InvalidFetchSessionEpochError(KafkaError):
    """The fetch session epoch is not the expected one."""

    errno = ErrorCode.INVALID_FETCH_SESSION_EPOCH
    retriable = True


class ListenerNotFoundError(KafkaError):
    """The leader has no listener of the name the request came in on."""

    errno = ErrorCode.LISTENER_NOT_FOUND
    retriable = True
    invalid_metadata = True


class TopicDeletionDisabledError(KafkaError):
    """Topic deletion is disabled (delete.topic.enable=false)."""

    errno = ErrorCode.TOPIC_DELETION_DISABLED


class FencedLeaderEpochError(KafkaError):
    """The leader epoch in the request is older than the broker's."""

    errno = ErrorCode.FENCED_LEADER_EPOCH
    retriable = True
    invalid_metadata = True


class UnknownLeaderEpochError(KafkaError):
    """The leader epoch in the request is newer than the broker's."""

    errno = ErrorCode.UNKNOWN_LEADER_EPOCH
    retriable = True


class UnsupportedCompressionTypeError(KafkaError):
    """The compression codec is not supported."""

    errno = ErrorCode.UNSUPPORTED_COMPRESSION_TYPE


class StaleBrokerEpochError(KafkaError):
    """A request from a broker epoch that has been replaced."""

    errno = ErrorCode.STALE_BROKER_EPOCH


class OffsetNotAvailableError(KafkaError):
    """The leader's high watermark has not caught up yet: the offset cannot be served."""

    errno = ErrorCode.OFFSET_NOT_AVAILABLE
    retriable = True


class MemberIdRequiredError(KafkaError):
    """The member must rejoin with the member id the coordinator assigned."""

    errno = ErrorCode.MEMBER_ID_REQUIRED


class PreferredLeaderNotAvailableError(KafkaError):
    """The preferred leader is not available."""

    errno = ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE
    retriable = True
    invalid_metadata = True


class GroupMaxSizeReachedError(KafkaError):
    """The group has as many members as the broker allows."""

    errno = ErrorCode.GROUP_MAX_SIZE_REACHED


class FencedInstanceIdError(KafkaError):
    """Another member with the same group.instance.id has joined."""

    errno = ErrorCode.FENCED_INSTANCE_ID


class InvalidRecordError(KafkaError):
    """A record breaks a broker rule (for example, a compacted topic's record without a key)."""

    errno = ErrorCode.INVALID_RECORD


class UnstableOffsetCommitError(KafkaError):
    """Offsets for the partition are being committed in a transaction not yet complete."""

    errno = ErrorCode.UNSTABLE_OFFSET_COMMIT
    retriable = True


class ResourceNotFoundError(KafkaError):
    """The resource (for example, a user's SCRAM credential) does not exist."""

    errno = ErrorCode.RESOURCE_NOT_FOUND


class DuplicateResourceError(KafkaError):
    """A request names the same resource twice."""

    errno = ErrorCode.DUPLICATE_RESOURCE


class UnacceptableCredentialError(KafkaError):
    """A SCRAM credential the broker refuses (empty user name, iterations out of bounds)."""

    errno = ErrorCode.UNACCEPTABLE_CREDENTIAL


class UnrecognizedErrorCode(KafkaError):
    """A code this module does not know (a newer broker's): ``errno`` is the code as answered."""

    def __init__(self, errno: int, message: str = "") -> None:
        self.errno = errno
        super().__init__(message or f"error code {errno}")


class ProtocolDecodeError(ValueError):
    """A request whose bytes do not fit its schema; the server closes the connection."""


class ProtocolEncodeError(ValueError):
    """A value that cannot be encoded by its schema (wrong type, out of range, null where not allowed)."""


#: Every error class of this module by its code: built from the classes, so there is one table.
ERRORS_BY_CODE: dict[int, type[KafkaError]] = {
    cls.errno: cls for cls in KafkaError.__subclasses__() if cls is not UnrecognizedErrorCode
}
if len(ERRORS_BY_CODE) != len(KafkaError.__subclasses__()) - 1:
    raise ImportError("two error classes share a code")


def error_class(code: int) -> type[KafkaError]:
    """The class of a Kafka error code; ``UnrecognizedErrorCode`` for NONE and for codes this module does not know."""
    return ERRORS_BY_CODE.get(code, UnrecognizedErrorCode)


def error_for_code(code: int, message: str = "") -> KafkaError:
    """The exception for an error code a broker answered, for clients to raise.

    Always an instance of the code's one class, so ``except LeaderNotAvailableError`` catches
    ``error_for_code(5)``; an unknown code gives an ``UnrecognizedErrorCode`` carrying it.
    """
    cls = ERRORS_BY_CODE.get(code)
    if cls is None:
        return UnrecognizedErrorCode(code, message)
    return cls(message)
