"""A blocking admin client: create, delete, list and describe topics over the Kafka protocol.

Used by `logbus topics` and by the pipelines; it needs only a bootstrap address.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from broker.client.closeable import Closeable
from broker.client.connection import BrokerConnection, BrokerConnectionError
from broker.client.security import PLAINTEXT, ClientSecurity
from broker.protocol.errors import ErrorCode, error_for_code
from broker.protocol.messages import ApiKey

METADATA_VERSION = 8
CREATE_TOPICS_VERSION = 4
DELETE_TOPICS_VERSION = 3
DESCRIBE_CONFIGS_VERSION = 3
CREATE_PARTITIONS_VERSION = 1
INCREMENTAL_ALTER_CONFIGS_VERSION = 0
TOPIC_RESOURCE = 2
SET, DELETE = 0, 1  # IncrementalAlterConfigs operations


@dataclass
class PartitionDescription:
    partition: int
    leader: int
    replicas: list[int]
    isr: list[int]
    error_code: int = 0


@dataclass
class TopicDescription:
    name: str
    partitions: list[PartitionDescription] = field(default_factory=list)
    configs: dict[str, str] = field(default_factory=dict)

    @property
    def replication_factor(self) -> int:
        return len(self.partitions[0].replicas) if self.partitions else 0


@dataclass
class BrokerDescription:
    node_id: int
    host: str
    port: int
    rack: str | None = None

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"


@dataclass
class ClusterDescription:
    """One Metadata answer: the live brokers, the controller and every topic."""

    cluster_id: str | None
    controller: int
    brokers: list[BrokerDescription]
    topics: list[TopicDescription]


class AdminClient(Closeable):
    """Topic administration against the brokers named in ``bootstrap_servers``."""

    def __init__(self, bootstrap_servers: str, timeout: float = 30.0, security: ClientSecurity = PLAINTEXT) -> None:
        self.timeout = timeout
        errors = []
        for address in [a.strip() for a in bootstrap_servers.split(",") if a.strip()]:
            try:
                self._conn = BrokerConnection.from_address(address, client_id="logbus-admin", timeout=timeout,
                                                           security=security)
                break
            except (BrokerConnectionError, ValueError) as exc:
                errors.append(str(exc))
        else:
            raise BrokerConnectionError("; ".join(errors) or "no bootstrap servers given")

    def create_topic(
        self, name: str, partitions: int = -1, replication_factor: int = -1, configs: dict[str, str] | None = None
    ) -> None:
        response = self._conn.request(
            ApiKey.CREATE_TOPICS,
            CREATE_TOPICS_VERSION,
            {
                "topics": [
                    {
                        "name": name,
                        "num_partitions": partitions,
                        "replication_factor": replication_factor,
                        "configs": [{"name": k, "value": v} for k, v in (configs or {}).items()],
                    }
                ],
                "timeout_ms": int(self.timeout * 1000),
            },
        )
        result = response["topics"][0]
        _raise_for(result["error_code"], result.get("error_message"))

    def create_partitions(self, name: str, count: int) -> None:
        """Grow ``name`` to ``count`` partitions (CreatePartitions)."""
        response = self._conn.request(
            ApiKey.CREATE_PARTITIONS,
            CREATE_PARTITIONS_VERSION,
            {
                "topics": [{"name": name, "count": count, "assignments": None}],
                "timeout_ms": int(self.timeout * 1000),
                "validate_only": False,
            },
        )
        result = response["results"][0]
        _raise_for(result["error_code"], result.get("error_message"))

    def delete_topic(self, name: str) -> None:
        response = self._conn.request(
            ApiKey.DELETE_TOPICS, DELETE_TOPICS_VERSION, {"topic_names": [name], "timeout_ms": int(self.timeout * 1000)}
        )
        _raise_for(response["responses"][0]["error_code"], f"cannot delete topic {name}")

    def list_topics(self) -> list[str]:
        return sorted(t.name for t in self.describe_topics(None))

    def describe_topics(self, names: list[str] | None) -> list[TopicDescription]:
        """Partitions, leaders and replicas of ``names`` (all topics when None)."""
        response = self._metadata(names)
        for topic in response["topics"]:
            _raise_for(topic["error_code"], f"topic {topic['name']}")
        return _topics_of(response)

    def describe_cluster(self) -> ClusterDescription:
        """Brokers, controller and every topic from one Metadata request (a topic's error does not fail the rest)."""
        response = self._metadata(None)
        brokers = [BrokerDescription(b["node_id"], b["host"], b["port"], b.get("rack"))
                   for b in sorted(response["brokers"], key=lambda b: b["node_id"])]
        return ClusterDescription(response.get("cluster_id"), response.get("controller_id", -1), brokers,
                                  _topics_of(response))

    def _metadata(self, names: list[str] | None) -> dict:
        return self._conn.request(
            ApiKey.METADATA,
            METADATA_VERSION,
            {"topics": None if names is None else [{"name": n} for n in names], "allow_auto_topic_creation": False},
        )

    def topics_configs(self, names: Sequence[str], only_overrides: bool = True) -> dict[str, dict[str, str]]:
        """Every named topic's configs from one DescribeConfigs request; a topic that fails is left out."""
        if not names:
            return {}
        response = self._conn.request(
            ApiKey.DESCRIBE_CONFIGS,
            DESCRIBE_CONFIGS_VERSION,
            {"resources": [{"resource_type": TOPIC_RESOURCE, "resource_name": n, "configuration_keys": None}
                           for n in names]},
        )
        return {r["resource_name"]: _configs_of(r, only_overrides)
                for r in response["results"] if r["error_code"] == ErrorCode.NONE}

    def topic_configs(self, name: str, only_overrides: bool = True) -> dict[str, str]:
        response = self._conn.request(
            ApiKey.DESCRIBE_CONFIGS,
            DESCRIBE_CONFIGS_VERSION,
            {"resources": [{"resource_type": TOPIC_RESOURCE, "resource_name": name, "configuration_keys": None}]},
        )
        result = response["results"][0]
        _raise_for(result["error_code"], result.get("error_message"))
        return _configs_of(result, only_overrides)

    def alter_topic_configs(self, name: str, to_set: dict[str, str], to_delete: Sequence[str] = ()) -> None:
        """Set and delete per-topic config overrides (IncrementalAlterConfigs); others are kept."""
        ops = [{"name": k, "config_operation": SET, "value": v} for k, v in to_set.items()]
        ops += [{"name": k, "config_operation": DELETE, "value": None} for k in to_delete]
        response = self._conn.request(
            ApiKey.INCREMENTAL_ALTER_CONFIGS,
            INCREMENTAL_ALTER_CONFIGS_VERSION,
            {"resources": [{"resource_type": TOPIC_RESOURCE, "resource_name": name, "configs": ops}],
             "validate_only": False},
        )
        result = response["responses"][0]
        _raise_for(result["error_code"], result.get("error_message"))

    def close(self) -> None:
        self._conn.close()


def _topics_of(response: dict) -> list[TopicDescription]:
    return [
        TopicDescription(topic["name"], [
            PartitionDescription(p["partition_index"], p["leader_id"], p["replica_nodes"], p["isr_nodes"], p["error_code"])
            for p in sorted(topic["partitions"], key=lambda p: p["partition_index"])
        ])
        for topic in response["topics"]
    ]


def _configs_of(result: dict, only_overrides: bool) -> dict[str, str]:
    """One DescribeConfigs resource's configs; with ``only_overrides`` those not at their default."""
    return {
        c["name"]: c["value"]
        for c in result["configs"]
        if not only_overrides or not c.get("is_default", c.get("config_source") == 5)
    }


def _raise_for(code: int, message: str | None) -> None:
    if code != ErrorCode.NONE:
        raise error_for_code(code, message or "")
