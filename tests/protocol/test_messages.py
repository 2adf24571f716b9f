"""Every request and response schema, every version: roundtrips, and cross-checks against
Apache Kafka's own message JSON (bundled with kafka-python) and kafka-python's two encoders."""

from __future__ import annotations

import importlib
import json
import pkgutil
import re
import struct
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from broker.protocol.messages import REQUESTS, RESPONSES, SCHEMA_VERSIONS, ApiKey
from broker.protocol.schema import MISSING, Field, MessageSchema
from tests.protocol.strategies import CASE_IDS, CASES, struct_strategy

kafka_protocol = pytest.importorskip("kafka.protocol")

EXPECTED_RANGES = {
    ApiKey.PRODUCE: (0, 7), ApiKey.FETCH: (0, 11), ApiKey.LIST_OFFSETS: (0, 5), ApiKey.METADATA: (0, 8),
    ApiKey.OFFSET_COMMIT: (0, 7), ApiKey.OFFSET_FETCH: (0, 5), ApiKey.FIND_COORDINATOR: (0, 2),
    ApiKey.JOIN_GROUP: (0, 5), ApiKey.HEARTBEAT: (0, 3), ApiKey.LEAVE_GROUP: (0, 3), ApiKey.SYNC_GROUP: (0, 3),
    ApiKey.DESCRIBE_GROUPS: (0, 4), ApiKey.LIST_GROUPS: (0, 2), ApiKey.SASL_HANDSHAKE: (0, 1),
    ApiKey.API_VERSIONS: (0, 2), ApiKey.CREATE_TOPICS: (0, 4), ApiKey.DELETE_TOPICS: (0, 3),
    ApiKey.INIT_PRODUCER_ID: (0, 1), ApiKey.OFFSET_FOR_LEADER_EPOCH: (0, 3), ApiKey.DESCRIBE_CONFIGS: (0, 3),
    ApiKey.SASL_AUTHENTICATE: (0, 1), ApiKey.CREATE_PARTITIONS: (0, 1),
    ApiKey.DELETE_RECORDS: (0, 1), ApiKey.ALTER_CONFIGS: (0, 1), ApiKey.DESCRIBE_LOG_DIRS: (0, 1),
    ApiKey.DELETE_GROUPS: (0, 1), ApiKey.INCREMENTAL_ALTER_CONFIGS: (0, 0), ApiKey.OFFSET_DELETE: (0, 0),
    ApiKey.ELECT_LEADERS: (0, 1), ApiKey.DESCRIBE_ACLS: (0, 1), ApiKey.CREATE_ACLS: (0, 1), ApiKey.DELETE_ACLS: (0, 1),
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: (0, 0), ApiKey.ALTER_USER_SCRAM_CREDENTIALS: (0, 0),
}


def test_tables_cover_every_api():
    assert set(REQUESTS) == set(RESPONSES) == set(ApiKey) == set(EXPECTED_RANGES)
    assert SCHEMA_VERSIONS == EXPECTED_RANGES
    for key in ApiKey:
        assert REQUESTS[key].api_key == RESPONSES[key].api_key == key
        assert (RESPONSES[key].min_version, RESPONSES[key].max_version) == EXPECTED_RANGES[key]


# --- kafka-python's two encoders: JSON-driven classes, and the older hand-written structs ----

def _their_classes() -> dict[str, type]:
    """kafka.protocol's ApiMessage classes by message name (built from Kafka's JSON)."""
    from kafka.protocol.api_message import ApiMessage

    for mod in pkgutil.walk_packages(kafka_protocol.__path__, "kafka.protocol."):
        if ".old" not in mod.name:
            importlib.import_module(mod.name)
    found, todo = {}, [ApiMessage]
    while todo:
        for sub in todo.pop().__subclasses__():
            todo.append(sub)
            if getattr(sub, "_class_version", None) is None:
                found.setdefault(sub.__name__, sub)
    return found


def _old_classes() -> dict[str, type]:
    """kafka.protocol.old's per-version structs by name ("ProduceRequest_v0")."""
    found = {}
    old = importlib.import_module("kafka.protocol.old")
    for mod in pkgutil.iter_modules(old.__path__, "kafka.protocol.old."):
        for name, value in vars(importlib.import_module(mod.name)).items():
            if re.fullmatch(r"\w+_v\d+", name) and isinstance(value, type) and hasattr(value, "SCHEMA"):
                found[name] = value
    return found


THEIRS = _their_classes()
# kafka.protocol.old declares DescribeLogDirsRequest v0's partitions as one int32, not Kafka's []int32.
OLD = {name: cls for name, cls in _old_classes().items() if name != "DescribeLogDirsRequest_v0"}
_BITFIELDS = {"cluster_authorized_operations", "authorized_operations", "topic_authorized_operations"}
THEIR_RENAMES = {"OffsetCommitRequest": {"generation_id_or_member_epoch": "generation_id"}}


def their_class(schema: MessageSchema, version: int):
    # kafka-python decodes below Kafka 4's validVersions too, from the fields' own version ranges.
    cls = THEIRS.get(schema.name)
    return cls if cls is not None and version <= cls.max_version else None


def _comparable(value, renames=None):
    """A decoded message with kafka-python's names mapped to ours, bitfields dropped (kafka-python
    turns them into sets; the bytes are still compared) and byte buffers as bytes."""
    renames = renames or {}
    if isinstance(value, dict):
        return {renames.get(k, k): _comparable(v, renames) for k, v in value.items() if k not in _BITFIELDS}
    if isinstance(value, list):
        return [_comparable(v, renames) for v in value]
    if isinstance(value, (bytearray, memoryview)):
        return bytes(value)
    return value


def check_kafka_python(schema: MessageSchema, version: int, obj: dict, raw: bytes) -> None:
    """kafka-python decodes our bytes to the same values and re-encodes them byte for byte."""
    cls = their_class(schema, version)
    if cls is not None:
        theirs = cls.decode(raw, version=version)
        if not hasattr(theirs, "_header"):
            theirs._header = None  # unset on decoded messages, and encode() trips over it
        assert bytes(theirs.encode()) == raw
        assert _comparable(theirs.to_dict(json=False), THEIR_RENAMES.get(schema.name)) == _comparable(obj)
    old = OLD.get(f"{schema.name}_v{version}")
    if old is not None:
        assert bytes(old.decode(raw).encode()) == raw


def test_kafka_python_covers_every_case():
    assert [(s.name, v) for s, v in CASES if their_class(s, v) is None] == []
    # The hand-written structs cover most of them, including Produce v0-2 and OffsetForLeaderEpoch v0-1.
    old = {(s.name, v) for s, v in CASES if f"{s.name}_v{v}" in OLD}
    assert len(old) > len(CASES) * 3 // 4
    assert {("ProduceRequest", 0), ("ProduceResponse", 2), ("OffsetForLeaderEpochRequest", 0)} <= old


# --- every message, every version -------------------------------------------------------------

FAST = settings(max_examples=8, deadline=None, suppress_health_check=list(HealthCheck))


@pytest.mark.parametrize("schema, version", CASES, ids=CASE_IDS)
@FAST
@given(data=st.data())
def test_roundtrip_and_kafka_python_agree(schema: MessageSchema, version: int, data):
    obj = data.draw(struct_strategy(schema.fields, version))
    if schema.name == "ApiVersionsResponse":
        obj["error_code"] = 0  # clients read an errored ApiVersions response as v0 (see below)
    raw = schema.encode_bytes(version, obj)
    assert schema.decode(version, raw) == obj
    assert b"".join(schema.encode(version, obj)) == raw
    if raw:
        with pytest.raises(Exception):  # noqa: B017 - any failure will do, as long as it fails
            schema.decode(version, raw[:-1])  # every byte is needed
    check_kafka_python(schema, version, obj, raw)


@pytest.mark.parametrize("schema, version", CASES, ids=CASE_IDS)
def test_empty_dict_encodes_to_defaults(schema: MessageSchema, version: int):
    raw = schema.encode_bytes(version, {})
    obj = schema.decode(version, raw)
    assert schema.encode_bytes(version, obj) == raw


# --- Kafka's JSON schemas, as bundled with kafka-python ----------------------------------------

JSON_DIR = Path(kafka_protocol.__file__).parent / "schemas" / "resources"
# Where logbus deliberately keeps an older Kafka field name.
JSON_RENAMES = {("OffsetCommitRequest", "GenerationIdOrMemberEpoch"): "generation_id"}


def snake(name: str) -> str:
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name).lower()


def _in(spec: str | None, version: int) -> bool:
    if not spec or spec == "none":
        return False
    if spec.endswith("+"):
        return version >= int(spec[:-1])
    lo, _, hi = spec.partition("-")
    return int(lo) <= version <= int(hi or lo)


def json_layout(message: str, fields: list[dict], version: int) -> list:
    out = []
    for f in fields:
        if not _in(f["versions"], version) or _in(f.get("taggedVersions"), version):
            continue
        name = JSON_RENAMES.get((message, f["name"]), snake(f["name"]))
        nullable = _in(f.get("nullableVersions"), version)
        t = f["type"]
        if "fields" in f:
            out.append((name, "[]" if t.startswith("[]") else "struct", nullable, json_layout(message, f["fields"], version)))
        else:
            out.append((name, t, nullable, None))
    return out


def my_layout(fields: tuple[Field, ...], version: int) -> list:
    return [
        (f.name, f.type, version in f.nullable, my_layout(f.fields, version) if f.fields else None)
        for f in fields
        if version in f.versions
    ]


def load_json(name: str) -> dict:
    text = (JSON_DIR / f"{name}.json").read_text()
    return json.loads(re.sub(r"^\s*//.*$", "", text, flags=re.M))


@pytest.mark.parametrize("schema, version", CASES, ids=CASE_IDS)
def test_layout_matches_kafka_json(schema: MessageSchema, version: int):
    spec = load_json(schema.name)
    assert spec["apiKey"] == schema.api_key
    assert schema.is_flexible(version) == _in(spec["flexibleVersions"], version)
    assert my_layout(schema.fields, version) == json_layout(schema.name, spec["fields"], version)


def _json_defaults(fields: list[dict], version: int, prefix=""):
    for f in fields:
        if not _in(f["versions"], version) or _in(f.get("taggedVersions"), version):
            continue
        yield from _json_defaults(f.get("fields", []), version, prefix + snake(f["name"]) + ".")
        if "default" in f and f["default"] not in ("", "null", "0", "false") and "fields" not in f:
            yield prefix + snake(f["name"]), f["default"]


def _my_defaults(fields, version, prefix=""):
    out = {}
    for f in fields:
        if version not in f.versions:
            continue
        out.update(_my_defaults(f.fields, version, prefix + f.name + "."))
        if f.default is not None and f.default is not MISSING and f.default not in (0, False, ""):
            out[prefix + f.name] = f.default
    return out


@pytest.mark.parametrize("schema, version", CASES, ids=CASE_IDS)
def test_declared_defaults_match_kafka_json(schema: MessageSchema, version: int):
    """Every non-trivial default Kafka declares is declared here too (logbus adds a few more)."""
    spec = load_json(schema.name)
    mine = _my_defaults(schema.fields, version)
    for name, value in _json_defaults(spec["fields"], version):
        name = {"generation_id_or_member_epoch": "generation_id"}.get(name, name)
        expected = True if value == "true" else value if isinstance(value, int) else int(value, 0)
        assert mine.get(name) == expected, name


# --- facts worth pinning by hand --------------------------------------------------------------

def test_api_versions_v0_response_bytes():
    """The v0 answer to a too-new ApiVersions request, byte for byte."""
    body = RESPONSES[ApiKey.API_VERSIONS].encode_bytes(
        0, {"error_code": 35, "api_keys": [{"api_key": 18, "min_version": 0, "max_version": 2}], "throttle_time_ms": 5}
    )
    assert body == struct.pack(">hi hhh".replace(" ", ""), 35, 1, 18, 0, 2)


def test_api_versions_error_is_read_as_v0_by_clients():
    """kafka-python (like the Java client) parses any ApiVersions response carrying an error
    as v0, so a broker answering with an error must encode it in v0 form."""
    from kafka.protocol.metadata import ApiVersionsResponse

    body = RESPONSES[ApiKey.API_VERSIONS].encode_bytes(
        0, {"error_code": 35, "api_keys": [{"api_key": 18, "min_version": 0, "max_version": 2}]}
    )
    theirs = ApiVersionsResponse.decode(body, version=3)
    assert theirs.error_code == 35 and theirs.api_keys[0].max_version == 2


def test_metadata_v0_vs_v1():
    resp = {
        "brokers": [{"node_id": 1, "host": "h", "port": 9092, "rack": "r"}],
        "controller_id": 1,
        "topics": [{"name": "t", "is_internal": True, "partitions": []}],
    }
    v0 = RESPONSES[ApiKey.METADATA].decode(0, RESPONSES[ApiKey.METADATA].encode_bytes(0, resp))
    v1 = RESPONSES[ApiKey.METADATA].decode(1, RESPONSES[ApiKey.METADATA].encode_bytes(1, resp))
    assert "rack" not in v0["brokers"][0] and "controller_id" not in v0 and "is_internal" not in v0["topics"][0]
    assert v1["brokers"][0]["rack"] == "r" and v1["controller_id"] == 1 and v1["topics"][0]["is_internal"]
    req = REQUESTS[ApiKey.METADATA]
    assert req.decode(1, req.encode_bytes(1, {"topics": None}))["topics"] is None  # all topics
    with pytest.raises(Exception):  # noqa: B017 - any failure will do, as long as it fails
        req.encode(0, {"topics": None})


def test_fetch_request_boundaries():
    req = REQUESTS[ApiKey.FETCH]
    full = {
        "max_wait_ms": 500, "min_bytes": 1, "session_id": 3, "rack_id": "r",
        "topics": [{"topic": "t", "partitions": [{"partition": 0, "fetch_offset": 10, "partition_max_bytes": 100}]}],
    }
    v6 = req.decode(6, req.encode_bytes(6, full))
    assert "session_id" not in v6 and "current_leader_epoch" not in v6["topics"][0]["partitions"][0]
    v7 = req.decode(7, req.encode_bytes(7, full))
    assert v7["session_id"] == 3 and v7["session_epoch"] == -1 and v7["forgotten_topics_data"] == []
    v9 = req.decode(9, req.encode_bytes(9, full))
    assert v9["topics"][0]["partitions"][0]["current_leader_epoch"] == -1 and "rack_id" not in v9
    v11 = req.decode(11, req.encode_bytes(11, full))
    assert v11["rack_id"] == "r" and v11["replica_id"] == -1 and v11["max_bytes"] == 0x7FFFFFFF


def test_list_offsets_and_produce_boundaries():
    lo = REQUESTS[ApiKey.LIST_OFFSETS]
    assert "isolation_level" not in lo.decode(1, lo.encode_bytes(1, {}))
    assert "isolation_level" in lo.decode(2, lo.encode_bytes(2, {}))
    pr = REQUESTS[ApiKey.PRODUCE]
    assert "transactional_id" not in pr.decode(2, pr.encode_bytes(2, {}))
    assert pr.decode(3, pr.encode_bytes(3, {}))["transactional_id"] is None


def test_fetch_response_with_file_slice():
    class Slice:
        size = 4

    fs = Slice()
    resp = {"responses": [{"topic": "t", "partitions": [{"partition_index": 0, "high_watermark": 5, "records": fs}]}]}
    chunks = RESPONSES[ApiKey.FETCH].encode(11, resp)
    assert chunks[1] is fs and len(chunks) == 2  # records is the last field
    decoded = RESPONSES[ApiKey.FETCH].decode(11, chunks[0] + b"DATA")
    part = decoded["responses"][0]["partitions"][0]
    assert part["records"] == b"DATA" and part["last_stable_offset"] == -1 and part["preferred_read_replica"] == -1


def test_per_topic_is_kafkas_topics_then_partitions_nesting():
    from broker.protocol.messages import produce
    from broker.protocol.schema import F, per_topic

    partition = [F("index", "int32"), F("records", "records", nullable="0+")]
    assert per_topic(partition, array="topic_data", partitions="partition_data") == F("topic_data", "[]", "0+", [
        F("name", "string"),
        F("partition_data", "[]", "0+", partition),
    ])
    assert produce.PRODUCE_REQUEST.fields[-1] == F("topic_data", "[]", "0+", [
        F("name", "string"),
        F("partition_data", "[]", "0+", partition),
    ])
    assert [f.name for f in per_topic(partition).fields] == ["name", "partitions"]
