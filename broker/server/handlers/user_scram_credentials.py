"""DescribeUserScramCredentials and AlterUserScramCredentials (KIP-554): the SCRAM users of
/config/users, managed over the protocol as ``kafka-configs --bootstrap-server ... --entity-type
users`` and the AdminClients do. The client salts the password; the broker stores only the keys
derived from it. ZooKeeper is read and written off the reactor thread."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from twisted.internet import defer, threads

from broker.cluster.zkdata import ConfigEntityTypeZNode, ConfigType, is_storable_name
from broker.protocol.errors import ErrorCode
from broker.protocol.header import RequestHeader
from broker.protocol.messages import ApiKey
from broker.security.scram import MECHANISM_IDS, MECHANISMS, ScramCredential, ScramFormatError, credential_from_salted
from broker.server.authz import requester
from broker.server.dispatch import Handler

if TYPE_CHECKING:
    from broker.cluster.zk import ZkClient
    from broker.server.broker import Broker

MECHANISM_NAMES = {number: name for name, number in MECHANISM_IDS.items()}


def _result(user: str, code: int = ErrorCode.NONE, message: str | None = None, **more: Any) -> dict:
    return {"user": user, "error_code": code, "error_message": message, **more}


# ---------------------------------------------------------------------- describe

def describe(zk: ZkClient, users: list[str] | None) -> dict:
    """Each user's mechanisms and iterations (every user with a credential when ``users`` is None)."""
    listed = users is None
    names = sorted(zk.children(ConfigEntityTypeZNode.path(ConfigType.USER), retry=True)) if users is None else users
    results, seen = [], set()
    for name in names:
        if name in seen:
            results.append(_result(name, ErrorCode.DUPLICATE_RESOURCE, f"Cannot describe user {name} more than once"))
            continue
        seen.add(name)
        config = zk.entity_config(ConfigType.USER, name) if is_storable_name(name) else {}
        infos = []
        for mechanism, number in MECHANISM_IDS.items():
            if mechanism in config:
                try:
                    infos.append({"mechanism": number, "iterations": ScramCredential.from_config(config[mechanism]).iterations})
                except ScramFormatError:
                    continue
        if infos:
            results.append(_result(name, credential_infos=infos))
        elif not listed:
            results.append(_result(name, ErrorCode.RESOURCE_NOT_FOUND, f"Attempt to describe a user credential that does "
                                                                       f"not exist: {name}", credential_infos=[]))
    return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "error_message": None, "results": results}


def handle_describe(broker: Broker, header: RequestHeader, request: dict) -> dict | defer.Deferred[dict]:
    if not requester(broker).may_api(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS):
        return {"throttle_time_ms": 0, "error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                "error_message": None, "results": []}
    users = request["users"]  # null or empty: every user
    return threads.deferToThread(describe, broker.zk, [u["name"] for u in users] if users else None)


# ---------------------------------------------------------------------- alter

def _refusal(mechanism: str | None, iterations: int | None = None) -> tuple[int, str] | None:
    """Why an upsertion or deletion cannot be applied (None: it can)."""
    if mechanism is None:
        return ErrorCode.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism"
    if iterations is not None:
        _, low, high = MECHANISMS[mechanism]
        if not low <= iterations <= high:
            return ErrorCode.UNACCEPTABLE_CREDENTIAL, f"{mechanism} iterations must be between {low} and {high}"
    return None


def alter(zk: ZkClient, deletions: list[dict], upsertions: list[dict]) -> dict:
    """Apply every user's changes in one write of /config/users/<user>; one result per user."""
    changes: dict[str, list[tuple[str, dict | None]]] = {}
    order: list[str] = []
    refused: dict[str, tuple[int, str]] = {}
    for change, upsert in [(d, False) for d in deletions] + [(u, True) for u in upsertions]:
        name, mechanism = change["name"], MECHANISM_NAMES.get(change["mechanism"])
        if name not in changes:
            order.append(name)
            changes[name] = []
        if name in refused:
            continue
        why = ((ErrorCode.UNACCEPTABLE_CREDENTIAL, "Username must not be empty") if not is_storable_name(name) else
               _refusal(mechanism, change["iterations"] if upsert else None))
        if why is None and any(m == mechanism for m, _ in changes[name]):
            why = (ErrorCode.DUPLICATE_RESOURCE, f"A user credential cannot be altered twice in the same request: {name}")
        if why is not None:
            refused[name] = why
            continue
        assert mechanism is not None
        changes[name].append((mechanism, change if upsert else None))
    results = []
    for name in order:
        if name in refused:
            results.append(_result(name, *refused[name]))
            continue
        config = zk.entity_config(ConfigType.USER, name)
        for mechanism, fields in changes[name]:
            if fields is None:
                if mechanism not in config:
                    refused[name] = (ErrorCode.RESOURCE_NOT_FOUND,
                                     f"Attempt to delete a user credential that does not exist: {name} {mechanism}")
                    break
                del config[mechanism]
            else:
                credential = credential_from_salted(mechanism, bytes(fields["salted_password"]), bytes(fields["salt"]),
                                                    fields["iterations"])
                config[mechanism] = credential.to_config()
        if name in refused:
            results.append(_result(name, *refused[name]))
            continue
        zk.change_entity_config(ConfigType.USER, name, config)
        results.append(_result(name))
    return {"throttle_time_ms": 0, "results": results}


def handle_alter(broker: Broker, header: RequestHeader, request: dict) -> dict | defer.Deferred[dict]:
    if not requester(broker).may_api(ApiKey.ALTER_USER_SCRAM_CREDENTIALS):
        names = dict.fromkeys(c["name"] for c in request["deletions"] + request["upsertions"])
        return {"throttle_time_ms": 0, "results": [_result(n, ErrorCode.CLUSTER_AUTHORIZATION_FAILED) for n in names]}
    return threads.deferToThread(alter, broker.zk, request["deletions"], request["upsertions"])


DESCRIBE_HANDLER = Handler(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, 0, 0, handle_describe)
ALTER_HANDLER = Handler(ApiKey.ALTER_USER_SCRAM_CREDENTIALS, 0, 0, handle_alter)
