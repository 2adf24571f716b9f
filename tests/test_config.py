"""Properties parsing and the typed broker config."""

from __future__ import annotations

from pathlib import Path

import pytest

from broker.config import (
    KNOWN_KEYS,
    BrokerConfig,
    ConfigError,
    Listener,
    load_broker_config,
    load_properties,
    parse_listeners,
    parse_overrides,
    parse_properties,
)

REPO = Path(__file__).resolve().parent.parent
MINIMAL = {"broker.id": "1", "zookeeper.connect": "127.0.0.1:2181/logbus"}


def cfg(**extra: str) -> BrokerConfig:
    props = dict(MINIMAL)
    props.update({k.replace("_", "."): v for k, v in extra.items()})
    return BrokerConfig.from_properties(props)


# ---------------------------------------------------------------- .properties syntax


def test_separators_comments_and_blanks() -> None:
    text = "# comment\n! also a comment\n\n  a=1\nb:2\nc 3\nd = 4 \ne\t:\t5\nempty=\nbare\n"
    assert parse_properties(text) == {"a": "1", "b": "2", "c": "3", "d": "4", "e": "5", "empty": "", "bare": ""}


def test_continuation_lines_drop_leading_blanks() -> None:
    text = "list = a,\\\n       b,\\\n       c\nnext=x\n"
    assert parse_properties(text) == {"list": "a,b,c", "next": "x"}


def test_even_backslashes_do_not_continue() -> None:
    assert parse_properties("path=C:\\\\\nother=1") == {"path": "C:\\", "other": "1"}


def test_continuation_line_starting_with_hash_is_not_a_comment() -> None:
    assert parse_properties("k=a\\\n  #b\n") == {"k": "a#b"}


def test_escapes() -> None:
    text = r"k\ ey\=x\:y = tab\there\nnl \u0041\u00e9 \\ end\ " + "\n"
    assert parse_properties(text) == {"k ey=x:y": "tab\there\nnl A\u00e9 \\ end "}


def test_surrogate_pair_escape_makes_one_character() -> None:
    assert parse_properties(r"smile=\uD83D\uDE00") == {"smile": "\U0001F600"}


def test_crlf_and_cr_line_endings() -> None:
    assert parse_properties("a=1\r\nb=2\rc=3") == {"a": "1", "b": "2", "c": "3"}


def test_later_key_wins_and_keys_are_trimmed() -> None:
    assert parse_properties("  x = 1\nx=2\n") == {"x": "2"}


def test_malformed_unicode_escape_names_the_line(tmp_path: Path) -> None:
    path = tmp_path / "bad.properties"
    path.write_text("ok=1\nbad=\\u12G4\n")
    with pytest.raises(ConfigError, match=r"bad\.properties:2: malformed"):
        load_properties(path)


def test_missing_file_is_one_line_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read config file") as e:
        load_properties(tmp_path / "nope.properties")
    assert "\n" not in str(e.value)


def test_shipped_conf_files_parse() -> None:
    for name in ("server", "zookeeper", "producer", "consumer"):
        props = load_properties(REPO / "conf" / f"{name}.properties")
        assert props, name
    server = load_broker_config(REPO / "conf" / "server.properties")
    assert server.listeners == [Listener("PLAINTEXT", "127.0.0.1", 9092)]
    assert server.unknown_keys() == []


# ---------------------------------------------------------------- overrides


def test_parse_overrides() -> None:
    assert parse_overrides(["broker.id=2", " log.dirs = /a,/b ", "x=y=z"]) == {
        "broker.id": "2", "log.dirs": "/a,/b", "x": "y=z"
    }


@pytest.mark.parametrize("bad", ["novalue", "=1", ""])
def test_bad_override(bad: str) -> None:
    with pytest.raises(ConfigError, match="key=value"):
        parse_overrides([bad])


def test_load_broker_config_applies_overrides(tmp_path: Path) -> None:
    path = tmp_path / "server.properties"
    path.write_text("broker.id=0\nzookeeper.connect=zk:2181\nnum.partitions=3\n")
    c = load_broker_config(path, {"broker.id": "7"})
    assert (c.broker_id, c.num_partitions) == (7, 3)


# ---------------------------------------------------------------- typed config


def test_defaults_are_kafkas() -> None:
    c = cfg()
    assert c.broker_id == 1
    assert c.zookeeper_connect == "127.0.0.1:2181/logbus"
    assert c.zookeeper_session_timeout_ms == 18000
    assert c.zookeeper_connection_timeout_ms == 18000
    assert c.num_partitions == 1
    assert c.auto_create_topics_enable is True
    assert c.delete_topic_enable is True
    assert c.default_replication_factor == 1
    assert c.message_max_bytes == 1048588
    assert c.socket_request_max_bytes == 104857600
    assert c.log_segment_bytes == 1073741824
    assert c.log_retention_check_interval_ms == 300000
    assert c.log_flush_offset_checkpoint_interval_ms == 60000
    assert c.replica_lag_time_max_ms == 30000
    assert c.min_insync_replicas == 1
    assert c.unclean_leader_election_enable is False
    assert c.log_dirs == ["/tmp/kafka-logs"]
    assert c.log_retention_time_ms == 168 * 3_600_000
    assert c.log_flush_interval_time_ms == c.log_flush_scheduler_interval_ms


def test_typed_values_are_parsed() -> None:
    c = cfg(**{
        "num.partitions": " 8 ", "auto.create.topics.enable": "FALSE", "log.retention.bytes": "5000000000",
        "zookeeper.connection.timeout.ms": "2500", "broker.rack": "r1",
    })
    assert c.num_partitions == 8
    assert c.auto_create_topics_enable is False
    assert c.log_retention_bytes == 5_000_000_000
    assert c.zookeeper_connection_timeout_ms == 2500
    assert c.broker_rack == "r1"


def test_retention_precedence_ms_minutes_hours() -> None:
    assert cfg(**{"log.retention.hours": "1"}).log_retention_time_ms == 3_600_000
    assert cfg(**{"log.retention.hours": "1", "log.retention.minutes": "2"}).log_retention_time_ms == 120_000
    assert cfg(**{"log.retention.minutes": "2", "log.retention.ms": "5"}).log_retention_time_ms == 5


@pytest.mark.parametrize(
    "key,value,reason",
    [
        ("log.segment.bytes", "abc", "not an integer"),
        ("log.segment.bytes", "3000000000", "out of range"),
        ("num.partitions", "0", "at least 1"),
        ("auto.create.topics.enable", "yes", "true or false"),
        ("broker.id", "-1", "at least 0"),
        ("listener.security.protocol.map", "PLAINTEXT", "NAME:PROTOCOL"),
    ],
)
def test_bad_values_name_key_and_value(key: str, value: str, reason: str) -> None:
    with pytest.raises(ConfigError) as e:
        cfg(**{key: value})
    msg = str(e.value)
    assert key in msg and repr(value) in msg and reason in msg
    assert "\n" not in msg
    assert e.value.key == key


@pytest.mark.parametrize("missing", ["broker.id", "zookeeper.connect"])
def test_required_keys(missing: str) -> None:
    props = dict(MINIMAL)
    del props[missing]
    with pytest.raises(ConfigError, match=f"Missing required configuration {missing}"):
        BrokerConfig.from_properties(props)


def test_unknown_keys_are_kept_and_listed() -> None:
    c = cfg(**{"some.future.key": "1", "log.dirs": "/x"})
    assert c.unknown_keys() == ["some.future.key"]
    assert c.props["some.future.key"] == "1"


def test_raw_props_kept_for_storage() -> None:
    c = cfg(**{"log.segment.bytes": "1024"})
    assert c.props["log.segment.bytes"] == "1024"
    assert c.log_segment_bytes == 1024


def test_every_known_key_has_an_attribute() -> None:
    c = cfg()
    for key in KNOWN_KEYS:
        assert hasattr(c, key.replace(".", "_")), key


def test_log_dirs_and_log_dir_fallback() -> None:
    assert cfg(**{"log.dirs": "/a, /b,"}).log_dirs == ["/a", "/b"]
    assert cfg(**{"log.dir": "/c"}).log_dirs == ["/c"]
    assert cfg(**{"log.dirs": "/a", "log.dir": "/c"}).log_dirs == ["/a"]


# ---------------------------------------------------------------- listeners


def test_parse_listeners() -> None:
    assert parse_listeners("PLAINTEXT://127.0.0.1:9092, SSL://host.example:9093") == [
        Listener("PLAINTEXT", "127.0.0.1", 9092),
        Listener("SSL", "host.example", 9093),
    ]
    assert parse_listeners("plaintext://:9092") == [Listener("PLAINTEXT", "0.0.0.0", 9092)]
    assert parse_listeners("PLAINTEXT://[::1]:9092") == [Listener("PLAINTEXT", "::1", 9092)]
    assert str(Listener("PLAINTEXT", "::1", 9092)) == "PLAINTEXT://[::1]:9092"


@pytest.mark.parametrize(
    "value", ["127.0.0.1:9092", "PLAINTEXT://host", "PLAINTEXT://h:99999", "PLAINTEXT://h:1,PLAINTEXT://h:2", " , "]
)
def test_bad_listeners(value: str) -> None:
    with pytest.raises(ConfigError, match="listeners"):
        cfg(listeners=value)


def test_listener_name_must_be_mapped() -> None:
    with pytest.raises(ConfigError, match="INTERNAL is not in listener.security.protocol.map"):
        cfg(listeners="INTERNAL://127.0.0.1:9093")
    c = cfg(**{"listeners": "INTERNAL://127.0.0.1:9093", "listener.security.protocol.map": "INTERNAL:PLAINTEXT"})
    assert c.listener_security_protocol_map == {"INTERNAL": "PLAINTEXT"}


def test_host_name_port_fallback() -> None:
    c = cfg(**{"host.name": "10.0.0.5", "port": "9099"})
    assert c.listeners == [Listener("PLAINTEXT", "10.0.0.5", 9099)]
    assert c.advertised_listeners == c.listeners


def test_default_listener_is_wildcard_9092_and_advertises_a_real_host() -> None:
    c = cfg()
    assert c.listeners == [Listener("PLAINTEXT", "0.0.0.0", 9092)]
    (adv,) = c.advertised_listeners
    assert adv.port == 9092 and adv.host not in ("0.0.0.0", "")


def test_advertised_listeners_default_to_listeners() -> None:
    c = cfg(listeners="PLAINTEXT://127.0.0.1:9101")
    assert c.advertised_listeners == [Listener("PLAINTEXT", "127.0.0.1", 9101)]


def test_explicit_advertised_listeners() -> None:
    c = cfg(**{"listeners": "PLAINTEXT://0.0.0.0:9101", "advertised.listeners": "PLAINTEXT://broker1.example:9101"})
    assert c.listeners[0].host == "0.0.0.0"
    assert c.advertised_listeners == [Listener("PLAINTEXT", "broker1.example", 9101)]
    with pytest.raises(ConfigError, match="wildcard"):
        cfg(**{"advertised.listeners": "PLAINTEXT://0.0.0.0:9101"})


def test_legacy_advertised_host_and_port() -> None:
    c = cfg(**{"port": "9100", "advertised.host.name": "public.example", "advertised.port": "19100"})
    assert c.listeners == [Listener("PLAINTEXT", "0.0.0.0", 9100)]
    assert c.advertised_listeners == [Listener("PLAINTEXT", "public.example", 19100)]


# ---------------------------------------------------------------- one mechanism, one error line


def _one_line(exc: BaseException, key: str, value: str) -> None:
    msg = str(exc)
    assert msg.startswith(f"Invalid value {value!r} for configuration {key}: "), msg
    assert "\n" not in msg and isinstance(exc, ConfigError) and exc.key == key


def test_one_config_error_class_everywhere() -> None:
    from broker import configdef
    from broker.client import group_config, producer_config
    from mirror import config as mirror_config
    from pipelines import config as loader_config

    for module in (group_config, producer_config, mirror_config, loader_config):
        assert module.ConfigError is configdef.ConfigError is ConfigError


def test_bad_cleanup_policy_is_one_line_for_broker_and_topic() -> None:
    from broker.storage.config import LogConfig

    with pytest.raises(ConfigError) as e:
        cfg(**{"log.cleanup.policy": "shred"})
    _one_line(e.value, "log.cleanup.policy", "shred")
    with pytest.raises(ConfigError) as e:
        LogConfig().with_overrides({"cleanup.policy": "shred"})
    _one_line(e.value, "cleanup.policy", "shred")


@pytest.mark.parametrize("key, value", [
    ("log.message.timestamp.type", "Whenever"), ("compression.type", "brotli"), ("producer.id.expiration.ms", "0"),
])
def test_bad_log_values_stop_the_broker_config(key: str, value: str) -> None:
    with pytest.raises(ConfigError) as e:
        cfg(**{key: value})
    _one_line(e.value, key, value)


@pytest.mark.parametrize("key, value", [
    ("acks", "some"), ("batch.size", "big"), ("linger.ms", "-1"), ("producer.type", "later"),
    ("enable.idempotence", "perhaps"), ("security.protocol", "KERBEROS"),
])
def test_bad_producer_value_is_one_line(key: str, value: str) -> None:
    from broker.client.producer_config import ProducerConfig

    with pytest.raises(ConfigError) as e:
        ProducerConfig.from_props({"bootstrap.servers": "127.0.0.1:1", key: value})
    _one_line(e.value, key, value)


@pytest.mark.parametrize("key, value", [
    ("auto.offset.reset", "never"), ("session.timeout.ms", "soon"), ("enable.auto.commit", "yes"),
    ("partition.assignment.strategy", "sticky"),
])
def test_bad_consumer_value_is_one_line(key: str, value: str) -> None:
    from broker.client.group_config import GroupConsumerConfig

    with pytest.raises(ConfigError) as e:
        GroupConsumerConfig.from_props({"bootstrap.servers": "127.0.0.1:1", "group.id": "g", key: value})
    _one_line(e.value, key, value)


@pytest.mark.parametrize("flag, value", [("num_streams", "0"), ("metrics_port", "70000"), ("abort_on_send_failure", "often")])
def test_bad_mirror_value_is_one_line(tmp_path: Path, flag: str, value: str) -> None:
    from mirror.config import build_config

    consumer, producer = tmp_path / "c.properties", tmp_path / "p.properties"
    consumer.write_text("zookeeper.connect=127.0.0.1:2181\n")
    producer.write_text("bootstrap.servers=127.0.0.1:9092\n")
    with pytest.raises(ConfigError) as e:
        build_config([str(consumer)], str(producer), whitelist=".*", **{flag: value})
    _one_line(e.value, flag.replace("_", "."), value)


@pytest.mark.parametrize("change, key, line", [
    ({"max_range_records": 0}, "max_range_records", "max_range_records: 0 must be at least 1"),
    ({"fetch": {"max.bytes": "lots"}}, "fetch.max.bytes", "fetch.max.bytes: 'lots': not an integer"),
    ({"out_of_range": "skip"}, "out_of_range", "out_of_range: 'skip' is not one of fail, earliest"),
])
def test_bad_loader_value_is_one_line_led_by_its_path(change: dict, key: str, line: str) -> None:
    from pipelines.config import parse_config

    base = {"cluster": {"bootstrap.servers": "127.0.0.1:9092"}, "warehouse": "file:///tmp/w", "topics": ["t"]}
    with pytest.raises(ConfigError) as e:
        parse_config({**base, **change})
    assert str(e.value) == line and e.value.key == key


def test_server_start_with_a_bad_value_says_one_line(tmp_path: Path) -> None:
    import os
    import subprocess
    import sys

    props = tmp_path / "server.properties"
    props.write_text("broker.id=0\nzookeeper.connect=127.0.0.1:1\nlog.dirs=" + str(tmp_path / "logs") + "\n")
    run = subprocess.run(
        [sys.executable, "-m", "broker.cli", "server-start", str(props), "--override", "log.cleanup.policy=shred"],
        capture_output=True, text=True, timeout=60, env=os.environ.copy(), cwd=REPO,
    )
    assert run.returncode != 0
    assert "Traceback" not in run.stderr + run.stdout
    assert run.stderr.strip().splitlines() == [
        "logbus server-start: error: Invalid value 'shred' for configuration log.cleanup.policy: "
        "expected delete, compact or compact,delete"
    ]


def test_key_table_parses_properties_strings_and_yaml_values() -> None:
    from broker.configdef import ConfigDef, Key, OneOf, Range, Scope, Type

    table = ConfigDef(Scope.LOADER, [
        Key("n", Type.INT, 5, Range(1)), Key("flag", Type.BOOLEAN, False), Key("names", Type.LIST, []),
        Key("mode", Type.STRING, "a", OneOf(("a", "b"))), Key("ratio", Type.DOUBLE, 0.5, Range(0, 1)),
    ], aliases={"count": "n"}, ignored={"old.key"})
    assert table.parse({"count": " 7 ", "flag": "TRUE", "names": "x, y,", "ratio": "0.25"}) == {
        "n": 7, "flag": True, "names": ["x", "y"], "mode": "a", "ratio": 0.25}
    assert table.parse({"n": 7, "flag": True, "names": ["x"], "mode": "b", "ratio": 1}) == {
        "n": 7, "flag": True, "names": ["x"], "mode": "b", "ratio": 1.0}
    for name, bad, reason in [("n", True, "not an integer"), ("n", "0", "must be at least 1"), ("n", 2**31, "out of range for a 32-bit integer"),
                              ("flag", "yes", "expected true or false"), ("mode", "c", "expected one of a, b"),
                              ("ratio", "2", "must be at most 1")]:
        with pytest.raises(ConfigError) as e:
            table.parse({name: bad})
        assert str(e.value) == f"Invalid value {bad!r} for configuration {name}: {reason}"
    assert table.unknown(["n", "count", "old.key", "typo"]) == ["typo"]
    with pytest.raises(ValueError, match="defined twice"):
        ConfigDef(Scope.LOADER, [Key("n", Type.INT), Key("n", Type.LONG)])


def test_log_segment_bytes_has_one_default() -> None:
    from broker.config import BROKER_CONFIG
    from broker.storage.config import TOPIC_CONFIG, LogConfig

    assert BROKER_CONFIG["log.segment.bytes"].default == TOPIC_CONFIG["segment.bytes"].default == 1073741824
    assert cfg().log_segment_bytes == LogConfig().segment_bytes == LogConfig.from_broker(MINIMAL).segment_bytes
