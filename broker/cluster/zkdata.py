"""Every znode logbus reads or writes: its path, its encoder and its decoder, in one place.

Paths and JSON are Apache Kafka's own (kafka.zk.ZkData), so zkCli, Burrow and kafka-manager read
them and Kafka's habits carry over. Each znode is one small class of static functions: ``path``
(the znode's path), ``encode`` (value -> bytes) and ``decode`` (bytes -> value). No ZooKeeper
calls here, only bytes: ``broker.cluster.zk`` and ``broker.cluster.offset_store`` do the I/O.
Nothing outside this module spells a znode path.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from broker.config import Listener

TopicPartition = tuple[str, int]


def _json(obj: Any) -> bytes:
    """Compact JSON, as Kafka's Json.encodeAsBytes writes it."""
    return json.dumps(obj, separators=(",", ":")).encode()


def _now_ms() -> str:
    return str(int(time.time() * 1000))


def _partition_list(raw: bytes) -> list[dict[str, Any]]:
    return list(json.loads(raw).get("partitions") or [])


def _forbidden_in_znode_name(c: str) -> bool:
    """ZooKeeper's PathUtils rule: NUL, C0/C1 controls, surrogates, private use and U+FFF0.. are refused."""
    o = ord(c)
    return o <= 0x1F or 0x7F <= o <= 0x9F or 0xD800 <= o <= 0xF8FF or o >= 0xFFF0 or c == "/"


def is_storable_name(name: str) -> bool:
    """Whether ``name`` can be one znode name (a group id, a topic, a user): not empty, not '.'
    or '..', no '/' (it would nest under another entity's node) and no character ZooKeeper refuses."""
    return bool(name) and name not in (".", "..") and not any(_forbidden_in_znode_name(c) for c in name)


# ---------------------------------------------------------------------- values the decoders return


@dataclass(frozen=True)
class BrokerInfo:
    """A registered broker as read from /brokers/ids/<id>."""

    id: int
    host: str | None
    port: int
    rack: str | None
    endpoints: list[Listener]
    protocols: Mapping[str, str] = field(default_factory=dict)  # listener name -> security protocol

    def endpoint(self, name: str = "PLAINTEXT") -> Listener | None:
        """The endpoint for listener ``name``, if the broker has one."""
        return next((e for e in self.endpoints if e.name == name), None)

    def endpoint_for(self, protocol: str) -> Listener | None:
        """The first endpoint speaking security ``protocol`` (PLAINTEXT, SSL, SASL_PLAINTEXT,
        SASL_SSL): how a client that finds brokers in ZooKeeper picks the listener to use."""
        return next((e for e in self.endpoints if self.protocols.get(e.name, e.name) == protocol), None)


@dataclass(frozen=True)
class PartitionState:
    """Leader and ISR of one partition; ``zk_version`` is for conditional updates."""

    leader: int
    leader_epoch: int
    isr: list[int]
    controller_epoch: int
    zk_version: int


@dataclass(frozen=True)
class ProducerIdBlock:
    """The last block of producer ids claimed, and by which broker."""

    broker: int
    start: int
    end: int


@dataclass(frozen=True)
class AclEntry:
    """One access rule of a resource, under Kafka's JSON key names."""

    principal: str
    permission_type: str
    operation: str
    host: str = "*"


# ---------------------------------------------------------------------- brokers


class BrokersZNode:
    @staticmethod
    def path() -> str:
        return "/brokers"


class BrokerIdsZNode:
    """Parent of the live brokers' ephemeral registrations."""

    @staticmethod
    def path() -> str:
        return f"{BrokersZNode.path()}/ids"


class BrokerIdZNode:
    """/brokers/ids/<id>: ephemeral registration in Kafka's v4 JSON."""

    VERSION = 4

    @staticmethod
    def path(broker_id: int) -> str:
        return f"{BrokerIdsZNode.path()}/{broker_id}"

    @staticmethod
    def encode(
        endpoints: Sequence[Listener],
        rack: str | None = None,
        jmx_port: int = -1,
        security_protocol_map: Mapping[str, str] | None = None,
        timestamp_ms: str | None = None,
    ) -> bytes:
        """The top-level host and port are the PLAINTEXT endpoint's (for old clients), else null/-1;
        ``security_protocol_map`` maps listener names to protocols (a name maps to itself by default)."""
        plain = next((e for e in endpoints if e.name == "PLAINTEXT"), None)
        return _json({
            "listener_security_protocol_map": {e.name: (security_protocol_map or {}).get(e.name, e.name) for e in endpoints},
            "endpoints": [str(e) for e in endpoints],
            "jmx_port": jmx_port,
            "host": plain.host if plain else None,
            "timestamp": timestamp_ms or _now_ms(),
            "port": plain.port if plain else -1,
            "version": BrokerIdZNode.VERSION,
            "rack": rack,
        })

    @staticmethod
    def decode(broker_id: int, raw: bytes | None) -> BrokerInfo:
        d = json.loads(raw or b"{}")
        return BrokerInfo(
            id=broker_id,
            host=d.get("host"),
            port=int(d.get("port", -1)),
            rack=d.get("rack"),
            endpoints=[BrokerIdZNode.parse_endpoint(e) for e in d.get("endpoints") or []],
            protocols=dict(d.get("listener_security_protocol_map") or {}),
        )

    @staticmethod
    def parse_endpoint(text: str) -> Listener:
        """``NAME://host:port`` (an IPv6 host in brackets) as a Listener."""
        name, _, rest = text.partition("://")
        host, _, port = rest.rpartition(":")
        return Listener(name, host.strip("[]"), int(port))


class TopicsZNode:
    """Parent of every topic's assignment; the node the controller and brokers watch."""

    @staticmethod
    def path() -> str:
        return f"{BrokersZNode.path()}/topics"


class TopicZNode:
    """/brokers/topics/<t>: {"version":1,"partitions":{"0":[1,2],...}}."""

    @staticmethod
    def path(topic: str) -> str:
        return f"{TopicsZNode.path()}/{topic}"

    @staticmethod
    def encode(assignment: Mapping[int, Sequence[int]]) -> bytes:
        partitions = {str(p): [int(b) for b in replicas] for p, replicas in sorted(assignment.items())}
        return _json({"version": 1, "partitions": partitions})

    @staticmethod
    def decode(raw: bytes) -> dict[int, list[int]]:
        """Partition -> replicas, in partition order."""
        parts = json.loads(raw).get("partitions") or {}
        return {int(p): [int(b) for b in r] for p, r in sorted(parts.items(), key=lambda kv: int(kv[0]))}


class TopicPartitionStateZNode:
    """/brokers/topics/<t>/partitions/<p>/state: leader, epochs and ISR, written by the controller."""

    @staticmethod
    def path(topic: str, partition: int) -> str:
        return f"{TopicZNode.path(topic)}/partitions/{partition}/state"

    @staticmethod
    def encode(leader: int, leader_epoch: int, isr: Iterable[int], controller_epoch: int) -> bytes:
        return _json({
            "controller_epoch": controller_epoch,
            "leader": leader,
            "version": 1,
            "leader_epoch": leader_epoch,
            "isr": [int(b) for b in isr],
        })

    @staticmethod
    def decode(raw: bytes, zk_version: int) -> PartitionState:
        d = json.loads(raw)
        return PartitionState(
            leader=int(d["leader"]),
            leader_epoch=int(d["leader_epoch"]),
            isr=[int(b) for b in d["isr"]],
            controller_epoch=int(d.get("controller_epoch", 0)),
            zk_version=zk_version,
        )


# ---------------------------------------------------------------------- the controller


class ControllerZNode:
    """/controller: ephemeral, held by the elected controller."""

    @staticmethod
    def path() -> str:
        return "/controller"

    @staticmethod
    def encode(broker_id: int, timestamp_ms: str | None = None) -> bytes:
        return _json({"version": 1, "brokerid": broker_id, "timestamp": timestamp_ms or _now_ms()})

    @staticmethod
    def decode(raw: bytes) -> int:
        """The controller's broker id."""
        return int(json.loads(raw)["brokerid"])


class ControllerEpochZNode:
    """/controller_epoch: a bare decimal, bumped by each new controller."""

    @staticmethod
    def path() -> str:
        return "/controller_epoch"

    @staticmethod
    def encode(epoch: int) -> bytes:
        return str(epoch).encode()

    @staticmethod
    def decode(raw: bytes | None) -> int:
        return int(raw or b"0")


# ---------------------------------------------------------------------- configs and their change notifications


class ConfigType:
    """Entity types under /config (Kafka's ConfigType)."""

    TOPIC = "topics"
    USER = "users"
    BROKER = "brokers"
    #: /config/brokers/<default>: the cluster-wide default of dynamic broker configs
    DEFAULT_BROKER = "<default>"


class ConfigEntityTypeZNode:
    @staticmethod
    def path(entity_type: str) -> str:
        return f"/config/{entity_type}"


class ConfigEntityZNode:
    """/config/<type>/<name>: {"version":1,"config":{key: value}} (values are strings)."""

    @staticmethod
    def path(entity_type: str, name: str) -> str:
        return f"{ConfigEntityTypeZNode.path(entity_type)}/{name}"

    @staticmethod
    def encode(config: Mapping[str, Any]) -> bytes:
        return _json({"version": 1, "config": {str(k): str(v) for k, v in config.items()}})

    @staticmethod
    def decode(raw: bytes | None) -> dict[str, str]:
        if not raw:
            return {}
        return {str(k): str(v) for k, v in (json.loads(raw).get("config") or {}).items()}


class ConfigChangeNotificationZNode:
    """/config/changes: persistent sequential children every broker watches."""

    PREFIX = "config_change_"

    @staticmethod
    def path() -> str:
        return "/config/changes"

    @staticmethod
    def create_path() -> str:
        """The path to create a sequential notification under (ZooKeeper appends the number)."""
        return f"{ConfigChangeNotificationZNode.path()}/{ConfigChangeNotificationZNode.PREFIX}"

    @staticmethod
    def encode(entity_type: str, name: str) -> bytes:
        return _json({"version": 2, "entity_path": f"{entity_type}/{name}"})

    @staticmethod
    def decode(raw: bytes) -> tuple[str, str]:
        """(entity type, entity name) of the changed config."""
        entity_type, _, name = str(json.loads(raw)["entity_path"]).partition("/")
        return entity_type, name


# ---------------------------------------------------------------------- admin requests


class DeleteTopicsZNode:
    """/admin/delete_topics/<t>: a deletion request the controller carries out."""

    @staticmethod
    def path(topic: str | None = None) -> str:
        base = "/admin/delete_topics"
        return base if topic is None else f"{base}/{topic}"


class ControlledShutdownZNode:
    """/admin/controlled_shutdown/<id> (logbus's own): ephemeral; asks the controller to move
    leadership off a broker that is stopping."""

    @staticmethod
    def path(broker_id: int | None = None) -> str:
        base = "/admin/controlled_shutdown"
        return base if broker_id is None else f"{base}/{broker_id}"


class ReassignPartitionsZNode:
    """/admin/reassign_partitions: {"version":1,"partitions":[{"topic","partition","replicas"}]}."""

    @staticmethod
    def path() -> str:
        return "/admin/reassign_partitions"

    @staticmethod
    def encode(reassignment: Mapping[TopicPartition, Sequence[int]]) -> bytes:
        partitions = [
            {"topic": t, "partition": p, "replicas": [int(b) for b in replicas]}
            for (t, p), replicas in sorted(reassignment.items())
        ]
        return _json({"version": 1, "partitions": partitions})

    @staticmethod
    def decode(raw: bytes) -> dict[TopicPartition, list[int]]:
        return {(str(e["topic"]), int(e["partition"])): [int(b) for b in e["replicas"]] for e in _partition_list(raw)}


class PreferredReplicaElectionZNode:
    """/admin/preferred_replica_election: {"version":1,"partitions":[{"topic","partition"}]}."""

    @staticmethod
    def path() -> str:
        return "/admin/preferred_replica_election"

    @staticmethod
    def encode(partitions: Iterable[TopicPartition]) -> bytes:
        return _json({"version": 1, "partitions": [{"topic": t, "partition": p} for t, p in sorted(set(partitions))]})

    @staticmethod
    def decode(raw: bytes) -> set[TopicPartition]:
        return {(str(e["topic"]), int(e["partition"])) for e in _partition_list(raw)}


# ---------------------------------------------------------------------- cluster-wide ids


class ClusterIdZNode:
    """/cluster/id: {"version":"1","id":<url-safe base64 UUID>} (the version is a string, as Kafka writes it)."""

    @staticmethod
    def path() -> str:
        return "/cluster/id"

    @staticmethod
    def encode(cluster_id: str) -> bytes:
        return _json({"version": "1", "id": cluster_id})

    @staticmethod
    def decode(raw: bytes) -> str:
        return str(json.loads(raw)["id"])


class ProducerIdBlockZNode:
    """/latest_producer_id_block: the last block claimed; start and end are strings, as Kafka writes them."""

    @staticmethod
    def path() -> str:
        return "/latest_producer_id_block"

    @staticmethod
    def encode(block: ProducerIdBlock) -> bytes:
        return _json({"version": 1, "broker": block.broker, "block_start": str(block.start), "block_end": str(block.end)})

    @staticmethod
    def decode(raw: bytes) -> ProducerIdBlock:
        d = json.loads(raw)
        return ProducerIdBlock(int(d["broker"]), int(d["block_start"]), int(d["block_end"]))


# ---------------------------------------------------------------------- ACLs


class AclZNode:
    """/kafka-acl/<ResourceType>/<name> (literal) or /kafka-acl-extended/<pattern>/<ResourceType>/<name>:
    {"version":1,"acls":[{"principal","permissionType","operation","host"}]}."""

    LITERAL = "literal"

    @staticmethod
    def root(pattern_type: str = LITERAL) -> str:
        """The parent of the resource types' nodes of one pattern type."""
        if pattern_type.lower() == AclZNode.LITERAL:
            return "/kafka-acl"
        return f"/kafka-acl-extended/{pattern_type.lower()}"

    @staticmethod
    def path(resource_type: str, name: str, pattern_type: str = LITERAL) -> str:
        return f"{AclZNode.root(pattern_type)}/{resource_type}/{name}"

    @staticmethod
    def encode(acls: Iterable[AclEntry]) -> bytes:
        entries = [
            {"principal": a.principal, "permissionType": a.permission_type, "operation": a.operation, "host": a.host}
            for a in acls
        ]
        return _json({"version": 1, "acls": entries})

    @staticmethod
    def decode(raw: bytes | None) -> list[AclEntry]:
        if not raw:
            return []
        return [
            AclEntry(str(e["principal"]), str(e["permissionType"]), str(e["operation"]), str(e.get("host", "*")))
            for e in json.loads(raw).get("acls") or []
        ]


class AclChangeZNode:
    """Sequential notifications of changed ACLs: /kafka-acl-changes/acl_changes_<n> holds
    "<ResourceType>:<name>" (literal); /kafka-acl-extended-changes/acl_changes_<n> holds
    {"version":1,"resourceType","name","patternType"}."""

    PREFIX = "acl_changes_"

    @staticmethod
    def path(pattern_type: str = AclZNode.LITERAL) -> str:
        return "/kafka-acl-changes" if pattern_type.lower() == AclZNode.LITERAL else "/kafka-acl-extended-changes"

    @staticmethod
    def create_path(pattern_type: str = AclZNode.LITERAL) -> str:
        return f"{AclChangeZNode.path(pattern_type)}/{AclChangeZNode.PREFIX}"

    @staticmethod
    def encode(resource_type: str, name: str, pattern_type: str = AclZNode.LITERAL) -> bytes:
        if pattern_type.lower() == AclZNode.LITERAL:
            return f"{resource_type}:{name}".encode()
        return _json({"version": 1, "resourceType": resource_type, "name": name, "patternType": pattern_type.upper()})

    @staticmethod
    def decode(raw: bytes) -> tuple[str, str, str]:
        """(resource type, name, pattern type) of the changed resource."""
        if raw.startswith(b"{"):
            d = json.loads(raw)
            return str(d["resourceType"]), str(d["name"]), str(d["patternType"]).lower()
        resource_type, sep, name = raw.decode().partition(":")
        if not sep:
            raise ValueError(f"expected <ResourceType>:<name>, got {raw!r}")
        return resource_type, name, AclZNode.LITERAL


# ---------------------------------------------------------------------- consumer groups (Kafka 0.8's layout)


class ConsumersZNode:
    """/consumers: one child per group, ZooKeeper consumers and coordinator groups alike."""

    @staticmethod
    def path() -> str:
        return "/consumers"


class ConsumerGroupZNode:
    @staticmethod
    def path(group: str) -> str:
        return f"{ConsumersZNode.path()}/{group}"


class ConsumerIdsZNode:
    """/consumers/<g>/ids: the group's live members."""

    @staticmethod
    def path(group: str) -> str:
        return f"{ConsumerGroupZNode.path(group)}/ids"


class ConsumerIdZNode:
    """/consumers/<g>/ids/<consumer id>: ephemeral; {"version":1,"subscription":{topic or regex: streams},
    "pattern":"static"|"white_list"|"black_list","timestamp":"<ms>"}."""

    @staticmethod
    def path(group: str, consumer_id: str) -> str:
        return f"{ConsumerIdsZNode.path(group)}/{consumer_id}"

    @staticmethod
    def encode(subscription: Mapping[str, int] | None, pattern: str, timestamp_ms: str | None = None) -> bytes:
        return _json({
            "version": 1,
            "subscription": None if subscription is None else dict(subscription),
            "pattern": pattern,
            "timestamp": timestamp_ms or _now_ms(),
        })

    @staticmethod
    def decode(raw: bytes) -> dict[str, Any]:
        """The registration as a dict (``broker.client.rebalance`` reads subscription and pattern)."""
        d = json.loads(raw)
        if not isinstance(d, dict):
            raise ValueError(f"a consumer registration is a JSON object, not {raw!r}")
        return d


class ConsumerOwnersZNode:
    """/consumers/<g>/owners[/<t>]: which consumer thread owns each partition."""

    @staticmethod
    def path(group: str, topic: str | None = None) -> str:
        base = f"{ConsumerGroupZNode.path(group)}/owners"
        return base if topic is None else f"{base}/{topic}"


class ConsumerOwnerZNode:
    """/consumers/<g>/owners/<t>/<p>: ephemeral; the owning consumer thread id as plain text."""

    @staticmethod
    def path(group: str, topic: str, partition: int) -> str:
        return f"{ConsumerOwnersZNode.path(group, topic)}/{partition}"

    @staticmethod
    def encode(thread_id: str) -> bytes:
        return thread_id.encode()

    @staticmethod
    def decode(raw: bytes | None) -> str:
        return (raw or b"").decode().strip()


class ConsumerOffsetsZNode:
    """/consumers/<g>/offsets[/<t>]: the group's committed offsets."""

    @staticmethod
    def path(group: str, topic: str | None = None) -> str:
        base = f"{ConsumerGroupZNode.path(group)}/offsets"
        return base if topic is None else f"{base}/{topic}"


class ConsumerOffsetZNode:
    """/consumers/<g>/offsets/<t>/<p>: the committed offset as a bare decimal, as Kafka 0.8 writes it."""

    @staticmethod
    def path(group: str, topic: str, partition: int) -> str:
        return f"{ConsumerOffsetsZNode.path(group, topic)}/{partition}"

    @staticmethod
    def encode(offset: int) -> bytes:
        return str(offset).encode()

    @staticmethod
    def decode(raw: bytes | None) -> int | None:
        """The offset; None when absent or unreadable (whitespace is tolerated)."""
        if raw is None:
            return None
        try:
            return int(raw.decode().strip())
        except (UnicodeDecodeError, ValueError):
            return None


class ConsumerOffsetMetadataZNode:
    """/consumers/<g>/offsets/<t>/<p>/metadata (logbus's own): a commit's metadata string, present only
    when not empty; tools that read the offset znode never see it."""

    @staticmethod
    def path(group: str, topic: str, partition: int) -> str:
        return f"{ConsumerOffsetZNode.path(group, topic, partition)}/metadata"

    @staticmethod
    def encode(metadata: str) -> bytes:
        return metadata.encode()

    @staticmethod
    def decode(raw: bytes | None) -> str:
        return (raw or b"").decode("utf-8", "replace")


#: Persistent paths every broker creates at start (ZkClient.ensure_paths).
BASE_PATHS = (
    BrokerIdsZNode.path(),
    TopicsZNode.path(),
    ConfigEntityTypeZNode.path(ConfigType.TOPIC),
    DeleteTopicsZNode.path(),
    ConsumersZNode.path(),
)
