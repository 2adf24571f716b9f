"""How a tool reaches a cluster over the Kafka protocol: its bootstrap servers and the client
security of ``--command-config`` (TLS, SASL), in one object every tool connects through."""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from broker.client.connection import BrokerConnection, BrokerConnectionError
from broker.client.security import PLAINTEXT, ClientSecurity
from broker.config import ConfigError, load_properties
from broker.protocol.errors import ErrorCode
from broker.protocol.messages import ApiKey
from broker.tools import CommandError

TopicPartition = tuple[str, int]


@dataclass(frozen=True)
class ClusterAccess:
    """A cluster's bootstrap servers, the client security to use on every connection, and the
    per-request timeout; a bare bootstrap string means PLAINTEXT (see ``cluster_access``)."""

    bootstrap: str
    security: ClientSecurity = field(default=PLAINTEXT)
    timeout: float = 10.0

    @property
    def addresses(self) -> list[str]:
        return [a.strip() for a in self.bootstrap.split(",") if a.strip()]

    def connect(self, address: str, client_id: str = "logbus-tools", timeout: float | None = None) -> BrokerConnection:
        """A connection to one broker ``host:port``, TLS and SASL login done."""
        return BrokerConnection.from_address(address, client_id=client_id, timeout=timeout or self.timeout,
                                             security=self.security)

    def first_answering(self, client_id: str = "logbus-tools", timeout: float | None = None) -> BrokerConnection:
        """A connection to the first bootstrap server that answers; ConnectionError naming each failure."""
        errors = []
        for address in self.addresses:
            try:
                return self.connect(address, client_id, timeout)
            except (OSError, ValueError) as exc:
                errors.append(f"{address}: {exc}")
        raise BrokerConnectionError("no bootstrap server answered: " + ("; ".join(errors) or "none given"))

    def metadata(self) -> tuple[dict[int, str], dict[TopicPartition, int]]:
        """Live brokers {id: "host:port"} and every partition's leader id."""
        with self.first_answering() as conn:
            meta = conn.request(ApiKey.METADATA, 1, {"topics": None})
        assert meta is not None
        brokers = {b["node_id"]: f"{b['host']}:{b['port']}" for b in meta["brokers"]}
        leaders = {(t["name"], p["partition_index"]): p["leader_id"] for t in meta["topics"] for p in t["partitions"]}
        return brokers, leaders

    def coordinator(self, group: str, brokers: dict[int, str] | None = None) -> tuple[int, str]:
        """The group coordinator's broker id and ``host:port``."""
        address = next(iter(brokers.values())) if brokers else None
        with (self.connect(address) if address else self.first_answering()) as conn:
            found = conn.request(ApiKey.FIND_COORDINATOR, 2, {"key": group, "key_type": 0})
        assert found is not None
        if found["error_code"] != ErrorCode.NONE:
            raise ConnectionError(f"no coordinator for group '{group}': {ErrorCode(found['error_code']).name}")
        return found["node_id"], f"{found['host']}:{found['port']}"

    def list_offsets(self, brokers: dict[int, str], leaders: Mapping[TopicPartition, int],
                     timestamps: Mapping[TopicPartition, int]) -> dict[TopicPartition, tuple[int, int]]:
        """ListOffsets, one request per leader for all of its partitions: {tp: (error code, offset)};
        a partition without a live leader is LEADER_NOT_AVAILABLE, asked of nobody."""
        bodies, found = list_offsets_requests(brokers, leaders, timestamps)
        for leader, body in bodies.items():
            with self.connect(brokers[leader]) as conn:
                answer = conn.request(ApiKey.LIST_OFFSETS, 2, body)
            assert answer is not None
            found.update(offsets_of(answer))
        return found


def list_offsets_requests(brokers: Mapping[int, str], leaders: Mapping[TopicPartition, int],
                          timestamps: Mapping[TopicPartition, int]
                          ) -> tuple[dict[int, dict], dict[TopicPartition, tuple[int, int]]]:
    """ListOffsets v2 bodies, one per leader for all of its partitions, and LEADER_NOT_AVAILABLE for
    the partitions without a live leader (asked of nobody); for callers that keep their own connections."""
    unavailable: dict[TopicPartition, tuple[int, int]] = {}
    by_leader: dict[int, dict[str, list[dict]]] = {}
    for (topic, p), ts in timestamps.items():
        if leaders.get((topic, p), -1) not in brokers:
            unavailable[(topic, p)] = (ErrorCode.LEADER_NOT_AVAILABLE, -1)
            continue
        by_leader.setdefault(leaders[(topic, p)], {}).setdefault(topic, []).append(
            {"partition_index": p, "current_leader_epoch": -1, "timestamp": ts})
    bodies = {leader: {"replica_id": -1, "isolation_level": 0, "topics": [{"name": t, "partitions": ps}
                                                                          for t, ps in topics.items()]}
              for leader, topics in by_leader.items()}
    return bodies, unavailable


def offsets_of(answer: dict) -> dict[TopicPartition, tuple[int, int]]:
    """A ListOffsets answer as {tp: (error code, offset)}."""
    return {(t["name"], p["partition_index"]): (p["error_code"], p["offset"]) for t in answer["topics"] for p in t["partitions"]}


def cluster_access(cluster: ClusterAccess | str) -> ClusterAccess:
    """``cluster`` itself, or a PLAINTEXT access to the bootstrap list it names."""
    return cluster if isinstance(cluster, ClusterAccess) else ClusterAccess(cluster)


def access_of_props(props: Mapping[str, Any], timeout: float = 10.0) -> ClusterAccess:
    """The access a client config describes: bootstrap.servers (or metadata.broker.list) and its
    security keys; a bad security key is one line (CommandError)."""
    bootstrap = props.get("bootstrap.servers") or props.get("metadata.broker.list") or ""
    try:
        return ClusterAccess(str(bootstrap), ClientSecurity.from_props(props), timeout)
    except ConfigError as exc:
        raise CommandError(str(exc)) from None


def add_command_config(parser: argparse.ArgumentParser, flag: str = "--command-config") -> None:
    """Kafka's flag for a client .properties file: bootstrap.servers, security.protocol, ssl.*, sasl.*."""
    parser.add_argument(flag, metavar="FILE", dest="command_config",
                        help="a client .properties file: security.protocol, ssl.*, sasl.*, bootstrap.servers")


def command_properties(args: argparse.Namespace) -> dict[str, Any]:
    """The ``--command-config`` file's properties ({} without one); a bad file is one line."""
    path = getattr(args, "command_config", None)
    if not path:
        return {}
    try:
        return dict(load_properties(path))
    except (ConfigError, OSError) as exc:
        raise CommandError(f"--command-config {path}: {exc}") from None


def from_args(args: argparse.Namespace, timeout: float = 10.0) -> ClusterAccess:
    """``--bootstrap-server`` (else bootstrap.servers of ``--command-config``) with the file's security."""
    props = command_properties(args)
    if getattr(args, "bootstrap_server", None):
        props["bootstrap.servers"] = args.bootstrap_server
    if not (props.get("bootstrap.servers") or props.get("metadata.broker.list")):
        raise CommandError("--bootstrap-server (or bootstrap.servers in --command-config) is required")
    if "request.timeout.ms" in props:
        try:
            timeout = int(props["request.timeout.ms"]) / 1000
        except ValueError:
            raise CommandError(f"Invalid value {props['request.timeout.ms']!r} for configuration request.timeout.ms: "
                               "expected an integer (milliseconds)") from None
    return access_of_props(props, timeout)
