"""The "consumer" protocol type of Kafka's group protocol: subscription and assignment bytes,
read by our group consumer and by the coordinator (OffsetDelete checks which topics a group
subscribes to). The assignors that use them are ``broker/client/assignors.py``.

The layouts are Kafka's ConsumerProtocolSubscription and ConsumerProtocolAssignment
(``clients/src/main/resources/common/message/``), so a logbus member can share a group with
librdkafka, kafka-python and Java consumers: whichever member is leader, the others read its
assignment. We write version 0 (eager rebalancing has no use for the later fields) and read
every version, ignoring fields added after the ones we know.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from typing import NamedTuple

from broker.protocol.errors import ProtocolDecodeError
from broker.protocol.schema import F, compile_struct
from broker.protocol.types import Reader, Writer

PROTOCOL_TYPE = "consumer"

_TOPIC_PARTITIONS = [F("topic", "string"), F("partitions", "[]int32")]
_SUBSCRIPTION = [
    F("topics", "[]string"),
    F("user_data", "bytes", nullable="0+"),
    F("owned_partitions", "[]", "1+", _TOPIC_PARTITIONS),
    F("generation_id", "int32", "2+", default=-1),
    F("rack_id", "string", "3+", nullable="3+"),
]
_ASSIGNMENT = [
    F("assigned_partitions", "[]", "0+", _TOPIC_PARTITIONS),
    F("user_data", "bytes", nullable="0+"),
]
_SUBSCRIPTION_CODECS = {v: compile_struct(_SUBSCRIPTION, v) for v in range(4)}
_ASSIGNMENT_CODECS = {v: compile_struct(_ASSIGNMENT, v) for v in range(4)}
_VERSION = struct.Struct(">h")


class Subscription(NamedTuple):
    """One member's JoinGroup metadata: the topics it wants (and its opaque user data)."""

    topics: list[str]
    user_data: bytes | None = None


def _decode(codecs: dict, data: bytes, what: str) -> dict:
    if len(data) < 2:
        raise ProtocolDecodeError(f"consumer protocol {what} of {len(data)} bytes has no version")
    (version,) = _VERSION.unpack_from(data, 0)
    if version < 0:
        raise ProtocolDecodeError(f"consumer protocol {what} has version {version}")
    # A newer version only adds fields at the end: read the ones we know, ignore the rest.
    return codecs[min(version, max(codecs))].read(Reader(data, 2))


def _encode(codecs: dict, obj: dict) -> bytes:
    w = Writer()
    w.buf += _VERSION.pack(0)
    codecs[0].write(w, obj)
    return b"".join(w.chunks())


def encode_subscription(topics: Iterable[str], user_data: bytes | None = None) -> bytes:
    """JoinGroup metadata for ``topics`` (ConsumerProtocolSubscription v0)."""
    return _encode(_SUBSCRIPTION_CODECS, {"topics": sorted(set(topics)), "user_data": user_data})


def decode_subscription(data: bytes) -> Subscription:
    """A member's subscription, from any version; ProtocolDecodeError when it does not parse."""
    obj = _decode(_SUBSCRIPTION_CODECS, bytes(data), "subscription")
    return Subscription(list(obj["topics"]), obj["user_data"])


def encode_assignment(partitions: Iterable[tuple[str, int]], user_data: bytes | None = None) -> bytes:
    """SyncGroup assignment bytes for (topic, partition) pairs (ConsumerProtocolAssignment v0)."""
    by_topic: dict[str, list[int]] = {}
    for topic, partition in sorted(set(partitions)):
        by_topic.setdefault(topic, []).append(partition)
    assigned = [{"topic": t, "partitions": ps} for t, ps in by_topic.items()]
    return _encode(_ASSIGNMENT_CODECS, {"assigned_partitions": assigned, "user_data": user_data})


def decode_assignment(data: bytes) -> list[tuple[str, int]]:
    """The (topic, partition) pairs of an assignment; empty bytes mean no partitions."""
    if not data:
        return []
    obj = _decode(_ASSIGNMENT_CODECS, bytes(data), "assignment")
    return sorted((a["topic"], p) for a in obj["assigned_partitions"] for p in a["partitions"])
