"""Metadata: live brokers, and topics with their partition leaders and replicas.

Unknown topics are created first when ``auto.create.topics.enable`` is on and the client allows
it, so the answer already carries their leaders.

With an authorizer, as in Kafka: a listing of every topic leaves out those the principal may not
Describe; a named one it may not Describe is answered TOPIC_AUTHORIZATION_FAILED, and so is an
unknown one it may not Create (on the cluster or the topic) when it would be auto-created.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator
from typing import TYPE_CHECKING, Any

from twisted.internet import defer

from broker.protocol.errors import ErrorCode, KafkaError
from broker.protocol.header import RequestHeader
from broker.protocol.messages import RESPONSES, ApiKey
from broker.security.acl import ResourceType
from broker.security.api_acls import CLUSTER_CREATE, TOPIC_CREATE
from broker.server.authz import Requester, requester
from broker.server.dispatch import Handler
from broker.server.metadata import PartitionInfo
from broker.server.sliced_answers import encode_in_steps
from broker.server.topics import validate_topic_name

if TYPE_CHECKING:
    from broker.server.broker import Broker

UNKNOWN_AUTHORIZED_OPERATIONS = -(2**31)
#: an answer with more partitions than this is built and encoded this many per reactor turn (about
#: 1-2 ms of work on a slow machine), so the small requests of other connections go in between
SLICE_PARTITIONS = 250
METADATA_RESPONSE = RESPONSES[ApiKey.METADATA]


def handle(broker: Broker, header: RequestHeader, request: dict) -> Any:
    requested = request.get("topics")
    if requested is None or (header.api_version == 0 and not requested):
        names = None
    else:
        names = list(dict.fromkeys(t["name"] for t in requested))
    who = requester(broker)
    listener = broker.request.listener  # read now: an auto-create answers after the dispatch returned
    denied = {n: int(ErrorCode.TOPIC_AUTHORIZATION_FAILED) for n in names or () if not who.may_api(ApiKey.METADATA, n)}
    described = None if names is None else [n for n in names if n not in denied]
    to_create = _auto_creatable(broker, described, request.get("allow_auto_topic_creation", True))
    if to_create and not who.may(CLUSTER_CREATE):
        denied.update({n: ErrorCode.TOPIC_AUTHORIZATION_FAILED for n in to_create if not who.may(TOPIC_CREATE, n)})
        to_create = [n for n in to_create if n not in denied]
    ops = (bool(request.get("include_topic_authorized_operations")),
           bool(request.get("include_cluster_authorized_operations")))
    version = header.api_version
    if not to_create:
        return _build(broker, version, names, denied, who, listener, *ops)
    creations = [broker.topics.create(name) for name in to_create]
    d = defer.DeferredList(creations, consumeErrors=True)
    d.addCallback(lambda results: _build(broker, version, names, {**_creation_errors(to_create, results), **denied},
                                         who, listener, *ops))
    return d


def _auto_creatable(broker: Broker, names: list[str] | None, allowed: bool) -> list[str]:
    if not names or not allowed or not broker.config.auto_create_topics_enable:
        return []
    unknown = [n for n in names if n not in broker.metadata.topics]
    valid = []
    for name in unknown:
        try:
            validate_topic_name(name)
            valid.append(name)
        except KafkaError:
            pass
    return valid


def _creation_errors(names: list[str], results: list[tuple[bool, Any]]) -> dict[str, int]:
    errors = {}
    for name, (ok, value) in zip(names, results):
        if not ok:
            exc = value.value
            code = getattr(exc, "code", ErrorCode.UNKNOWN_SERVER_ERROR)
            if code != ErrorCode.TOPIC_ALREADY_EXISTS:
                errors[name] = code
    return errors


def _build(broker: Broker, version: int, names: list[str] | None, errors: dict[str, int], who: Requester,
           listener: str | None, include_topic_ops: bool = False, include_cluster_ops: bool = False) -> Any:
    """The response, or a Deferred of it when it holds more than SLICE_PARTITIONS partitions (their
    part then built and encoded a slice per reactor turn); ``errors``: topics answered with an
    error alone (refused, or not created)."""
    cache = broker.metadata
    if names is None:
        names = [t for t in sorted(cache.topics) if who.may_api(ApiKey.METADATA, t)]
    response = _response(broker, names, errors, who, listener, include_topic_ops, include_cluster_ops)
    topics = response["topics"]
    if sum(len(topic["partitions"]) for topic in topics) > SLICE_PARTITIONS:
        return broker.turns.run(_encode_partitions(broker, version, topics)).addCallback(lambda _: response)
    live = cache.brokers
    for topic in topics:
        topic["partitions"] = [_partition(info, live) for info in topic["partitions"]]
    return response


def _encode_partitions(broker: Broker, version: int, topics: list[dict]) -> Iterator[None]:
    """Each topic's partitions (PartitionInfos, as ``_response`` leaves them) built and encoded, about
    SLICE_PARTITIONS a step: a step is one reactor turn's work."""
    live = set(broker.metadata.brokers)  # the brokers alive when the answer began
    return encode_in_steps(METADATA_RESPONSE.items_encoder(version, ("topics", "partitions")), topics, "partitions",
                           lambda info: _partition(info, live), SLICE_PARTITIONS)


def _response(broker: Broker, names: list[str], errors: dict[str, int], who: Requester, listener: str | None,
              include_topic_ops: bool, include_cluster_ops: bool) -> dict:
    """The response with each topic's partitions as PartitionInfos (``_build`` makes them answers)."""
    cache = broker.metadata
    return {
        "throttle_time_ms": 0,
        "brokers": [
            {"node_id": b.node_id, "host": b.host, "port": b.port, "rack": b.rack}
            for b in cache.brokers_on(listener)
        ],
        "cluster_id": cache.cluster_id,
        "controller_id": cache.controller_id,
        "topics": [_topic(broker, name, errors.get(name), who if include_topic_ops else None) for name in names],
        "cluster_authorized_operations": (who.authorized_operations(ResourceType.CLUSTER) if include_cluster_ops
                                          else UNKNOWN_AUTHORIZED_OPERATIONS),
    }


def _topic(broker: Broker, name: str, error: int | None, who: Requester | None) -> dict:
    """One topic's answer, its partitions as PartitionInfos; with ``who``, what it may do to the
    topic (include_topic_authorized_operations)."""
    partitions = broker.metadata.topics.get(name)
    operations = UNKNOWN_AUTHORIZED_OPERATIONS
    if who is not None and error != ErrorCode.TOPIC_AUTHORIZATION_FAILED:
        operations = who.authorized_operations(ResourceType.TOPIC, name)
    topic = {"name": name, "is_internal": False, "partitions": [], "topic_authorized_operations": operations}
    if error == ErrorCode.TOPIC_AUTHORIZATION_FAILED:
        topic["error_code"] = error
        return topic
    if partitions is None:
        if error is not None:
            topic["error_code"] = error
        else:
            try:
                validate_topic_name(name)
                topic["error_code"] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            except KafkaError as exc:
                topic["error_code"] = exc.code
        return topic
    topic["error_code"] = ErrorCode.NONE
    topic["partitions"] = [info for _, info in sorted(partitions.items())]
    return topic


def _partition(info: PartitionInfo, live: Collection[int]) -> dict:
    leader_live = info.leader in live
    return {
        "error_code": ErrorCode.NONE if leader_live else ErrorCode.LEADER_NOT_AVAILABLE,
        "partition_index": info.partition,
        "leader_id": info.leader if leader_live else -1,
        "leader_epoch": info.leader_epoch,
        "replica_nodes": info.replicas,
        "isr_nodes": info.isr,
        "offline_replicas": [r for r in info.replicas if r not in live],
    }


HANDLER = Handler(ApiKey.METADATA, 0, 8, handle)
