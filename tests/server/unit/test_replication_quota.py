"""The replication throttle's arithmetic and its configs, on a fake clock."""

from __future__ import annotations

import pytest

from broker.configdef import ConfigError
from broker.server.dynamic_configs import throttle_rates, validate
from broker.server.replication_quota import FOLLOWER_REPLICAS, UNLIMITED, ReplicationQuota, is_throttled
from broker.storage.config import ALL_REPLICAS, LogConfig, parse_throttled_replicas


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_the_rate_is_over_the_kept_windows_and_recovers_as_they_pass() -> None:
    clock = Clock()
    quota = ReplicationQuota(1000, window_s=1.0, windows=3, clock=clock)
    quota.record(900)
    assert not quota.exceeded()  # a first burst is judged over one whole window: 900 B/s
    quota.record(200)
    assert quota.exceeded()
    clock.now += 1.0
    quota.record(100)  # 1,200 bytes over 1 s
    assert quota.exceeded()
    clock.now += 1.0
    assert quota.observed_rate() == pytest.approx(1200 / 2) and not quota.exceeded()
    clock.now += 5.0  # every window expired
    assert quota.observed_rate() == 0 and quota.throttled_bytes == 1200


def test_an_unlimited_quota_is_never_exceeded() -> None:
    quota = ReplicationQuota(clock=Clock())
    quota.record(10**12)
    assert quota.rate == UNLIMITED and not quota.limited and not quota.exceeded()


def test_throttled_replicas_lists() -> None:
    assert parse_throttled_replicas("0:1, 1:2,1:3") == {(0, 1), (1, 2), (1, 3)}
    assert parse_throttled_replicas(" * ") == ALL_REPLICAS and parse_throttled_replicas("") == frozenset()
    with pytest.raises(ValueError, match="'0-1' is not partition:broker"):
        parse_throttled_replicas("0:1,0-1")
    config = LogConfig().with_overrides({FOLLOWER_REPLICAS: "0:2,1:3"})
    assert is_throttled(config, FOLLOWER_REPLICAS, 0, 2) and not is_throttled(config, FOLLOWER_REPLICAS, 0, 3)
    assert is_throttled(LogConfig().with_overrides({FOLLOWER_REPLICAS: "*"}), FOLLOWER_REPLICAS, 7, 9)
    with pytest.raises(ConfigError, match="follower.replication.throttled.replicas"):
        LogConfig().with_overrides({FOLLOWER_REPLICAS: "zero:one"})


def test_the_rates_are_dynamic_broker_keys() -> None:
    validate("brokers", {"follower.replication.throttled.rate": "1048576", "leader.replication.throttled.rate": "1"})
    assert throttle_rates({"follower.replication.throttled.rate": "1048576"}) == {
        "leader.replication.throttled.rate": UNLIMITED, "follower.replication.throttled.rate": 1048576}
    with pytest.raises(Exception, match="follower.replication.throttled.rate"):
        validate("brokers", {"follower.replication.throttled.rate": "-1"})
