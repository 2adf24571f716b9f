"""A mirror consumer config -> GroupConsumer settings, for sources given only ``bootstrap.servers``.

A mirror's consumer config speaks the ZooKeeper consumer's keys (``mirror.config`` adds some as
defaults), which ``GroupConsumer`` rejects as unknown. ``ZK_KEYS`` says, in one table, what
becomes of each: renamed to its group-protocol equivalent, or dropped (meaningless without
ZooKeeper). Group-protocol keys given in the file win over renamed ones; a key unknown to both
consumers is an error naming it.
"""

from __future__ import annotations

from collections.abc import Mapping

from broker.client.group_config import GroupConsumerConfig
from broker.config import ConfigError

DROP = None
#: ZooKeeper-consumer key -> GroupConsumer key (DROP: no meaning for a group member).
ZK_KEYS: dict[str, str | None] = {
    "fetch.message.max.bytes": "max.partition.fetch.bytes",
    "socket.timeout.ms": "request.timeout.ms",
    "refresh.leader.backoff.ms": "retry.backoff.ms",
    "auto.commit.enable": "enable.auto.commit",  # forced false below
    "zookeeper.connect": DROP,
    "zookeeper.session.timeout.ms": DROP,
    "zookeeper.connection.timeout.ms": DROP,
    "zookeeper.sync.time.ms": DROP,
    "rebalance.backoff.ms": DROP,  # the coordinator runs rebalances
    "rebalance.max.retries": DROP,
    "queued.max.message.chunks": DROP,  # no fetcher queue: poll fetches on the copying thread
    "num.consumer.fetchers": DROP,
    "consumer.id": DROP,
    "socket.receive.buffer.bytes": DROP,
    "consumer.timeout.ms": DROP,  # read by the stream: how long one poll waits (see poll_timeout)
}
#: auto.offset.reset values of the ZooKeeper consumer -> the group protocol's.
RESET_VALUES = {"smallest": "earliest", "largest": "latest"}
#: Defaults for group sources that the file may override: a new matching topic is noticed at the
#: next metadata refresh, and a crashed mirror's members leave the group after the session timeout.
GROUP_DEFAULTS = {
    "metadata.max.age.ms": "10000",
    "session.timeout.ms": "10000",
    "heartbeat.interval.ms": "3000",
    "max.poll.records": "20000",
    "client.id": "logbus-mirror-maker",
}
#: Set whatever the file says: the mirror commits only what the producer has flushed.
GROUP_FORCED = {"enable.auto.commit": "false"}


def group_consumer_props(props: Mapping[str, str]) -> dict[str, str]:
    """GroupConsumer settings for a source consumer config (see the module docstring)."""
    renamed: dict[str, str] = {}
    native: dict[str, str] = {}
    for key, value in props.items():
        if key in ZK_KEYS:
            if ZK_KEYS[key] is not DROP:
                renamed[ZK_KEYS[key]] = value  # type: ignore[index]
        else:
            native[key] = value
    out = {**GROUP_DEFAULTS, **renamed, **native, **GROUP_FORCED}
    reset = out.get("auto.offset.reset", "").strip().lower()
    out["auto.offset.reset"] = RESET_VALUES.get(reset, reset or "earliest")
    return out


def poll_timeout(props: Mapping[str, str]) -> float:
    """Seconds one poll waits for records before the copying thread looks for a stop."""
    raw = props.get("consumer.timeout.ms", "1000")
    try:
        ms = int(raw)
    except ValueError:
        raise ConfigError(f"Invalid value {raw!r} for configuration consumer.timeout.ms: not an integer",
                          "consumer.timeout.ms") from None
    return 1.0 if ms <= 0 else ms / 1000.0


def check_group_props(path: str, props: Mapping[str, str]) -> None:
    """Raise ConfigError (prefixed with the file) when the group consumer would refuse ``props``."""
    try:
        GroupConsumerConfig.from_props(group_consumer_props(props))
        poll_timeout(props)
    except ConfigError as exc:
        raise ConfigError(f"{path}: {exc} (a bootstrap.servers source uses the group protocol)",
                          getattr(exc, "key", None)) from None
