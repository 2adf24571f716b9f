"""Kafka's error codes and their classes: one static class per code, found again by its code."""

from __future__ import annotations

import inspect

import pytest

from broker.protocol import errors
from broker.protocol.errors import (
    ERRORS_BY_CODE,
    ErrorCode,
    KafkaError,
    LeaderNotAvailableError,
    UnrecognizedErrorCode,
    error_class,
    error_for_code,
)

MODULE_ERRORS = [
    cls for _, cls in inspect.getmembers(errors, inspect.isclass)
    if issubclass(cls, KafkaError) and cls.__module__ == errors.__name__ and cls not in (KafkaError, UnrecognizedErrorCode)
]


def test_every_error_code_has_exactly_one_class():
    by_code: dict[int, list[type[KafkaError]]] = {}
    for cls in MODULE_ERRORS:
        by_code.setdefault(cls.errno, []).append(cls)
    assert {code: len(classes) for code, classes in by_code.items() if len(classes) != 1} == {}
    assert set(by_code) == {code for code in ErrorCode if code != ErrorCode.NONE}


def test_the_map_is_the_classes_and_round_trips():
    assert sorted(ERRORS_BY_CODE.values(), key=lambda c: c.errno) == sorted(MODULE_ERRORS, key=lambda c: c.errno)
    for code, cls in ERRORS_BY_CODE.items():
        assert cls.errno == code
        assert error_class(code) is cls
        exc = error_for_code(code)
        assert type(exc) is cls and exc.code == exc.errno == code
        assert cls.message == ErrorCode(code).name == str(exc)
        assert str(error_for_code(code, "topic 'x'")) == "topic 'x'"


def test_error_for_code_gives_the_same_class_every_time():
    assert type(error_for_code(5)) is type(error_for_code(5)) is LeaderNotAvailableError
    with pytest.raises(LeaderNotAvailableError):
        raise error_for_code(ErrorCode.LEADER_NOT_AVAILABLE, "no leader yet")


def test_client_modules_share_the_class():
    from broker.client import LeaderNotAvailableError as from_client
    from broker.client.simple_consumer import LeaderNotAvailableError as from_simple_consumer

    assert from_client is from_simple_consumer is LeaderNotAvailableError


# (retriable, invalid_metadata) as Kafka's exceptions say: RetriableException, InvalidMetadataException.
KAFKA_VALUES = {
    ErrorCode.UNKNOWN_SERVER_ERROR: (False, False),
    ErrorCode.OFFSET_OUT_OF_RANGE: (False, False),
    ErrorCode.CORRUPT_MESSAGE: (True, False),
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION: (True, True),
    ErrorCode.LEADER_NOT_AVAILABLE: (True, True),
    ErrorCode.NOT_LEADER_OR_FOLLOWER: (True, True),
    ErrorCode.REQUEST_TIMED_OUT: (True, False),
    ErrorCode.BROKER_NOT_AVAILABLE: (False, False),
    ErrorCode.MESSAGE_TOO_LARGE: (False, False),
    ErrorCode.NETWORK_EXCEPTION: (True, True),
    ErrorCode.NOT_COORDINATOR: (True, False),
    ErrorCode.NOT_ENOUGH_REPLICAS: (True, False),
    ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND: (True, False),
    ErrorCode.REBALANCE_IN_PROGRESS: (False, False),
    ErrorCode.TOPIC_ALREADY_EXISTS: (False, False),
    ErrorCode.NOT_CONTROLLER: (True, False),
    ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER: (False, False),
    ErrorCode.KAFKA_STORAGE_ERROR: (True, True),
    ErrorCode.FENCED_LEADER_EPOCH: (True, True),
    ErrorCode.UNKNOWN_LEADER_EPOCH: (True, False),
    ErrorCode.OFFSET_NOT_AVAILABLE: (True, False),
    ErrorCode.INVALID_RECORD: (False, False),
}


@pytest.mark.parametrize("code", list(KAFKA_VALUES), ids=lambda c: c.name)
def test_retriable_and_invalid_metadata_are_kafkas(code):
    cls = error_class(code)
    assert (cls.retriable, cls.invalid_metadata) == KAFKA_VALUES[code]


def test_invalid_metadata_errors_are_retriable():
    assert [cls.__name__ for cls in MODULE_ERRORS if cls.invalid_metadata and not cls.retriable] == []


def test_an_unknown_code_gives_a_clear_generic_error():
    exc = error_for_code(999)
    assert type(exc) is UnrecognizedErrorCode and type(error_for_code(998)) is UnrecognizedErrorCode
    assert isinstance(exc, KafkaError) and exc.code == exc.errno == 999
    assert str(exc) == "error code 999"
    assert str(error_for_code(999, "metadata for topic 'x'")) == "metadata for topic 'x'"
    assert not exc.retriable and not exc.invalid_metadata
    assert error_class(999) is UnrecognizedErrorCode and error_class(ErrorCode.NONE) is UnrecognizedErrorCode


def test_subclasses_elsewhere_do_not_enter_the_map():
    class LocalError(KafkaError):
        """Like a client's own error (NoOffsetForPartitionError): the base class's code."""

    assert LocalError().code == ErrorCode.UNKNOWN_SERVER_ERROR
    assert error_class(ErrorCode.UNKNOWN_SERVER_ERROR) is errors.UnknownServerError
    assert str(KafkaError()) == "UNKNOWN_SERVER_ERROR"
