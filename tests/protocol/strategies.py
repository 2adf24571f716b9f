"""Every declared message version, and Hypothesis strategies drawing valid messages from the
declarations themselves (shared by the schema and codec tests)."""

from __future__ import annotations

from hypothesis import strategies as st

from broker.protocol.messages import REQUESTS, RESPONSES
from broker.protocol.schema import Field

CASES = [
    (schema, version)
    for table in (REQUESTS, RESPONSES)
    for schema in table.values()
    for version in range(schema.min_version, schema.max_version + 1)
]
CASE_IDS = [f"{schema.name}-v{version}" for schema, version in CASES]


_INTS = {"int8": 7, "int16": 15, "int32": 31, "int64": 63}
_TEXT = st.text(st.characters(blacklist_categories=("Cs",)), max_size=12)


def _primitive(type_name: str, nullable: bool):
    if type_name in _INTS:
        bits = _INTS[type_name]
        base = st.integers(-(2**bits), 2**bits - 1)
    else:
        base = {
            "bool": st.booleans(),
            "string": _TEXT,
            "bytes": st.binary(max_size=16),
            "records": st.binary(max_size=40),
            "uuid": st.uuids(),
        }[type_name]
    return st.one_of(st.none(), base) if nullable else base


def struct_strategy(fields: tuple[Field, ...], version: int):
    parts = {}
    for f in fields:
        if version not in f.versions:
            continue
        nullable = version in f.nullable
        if f.type in ("[]", "struct"):
            inner = struct_strategy(f.fields, version)
            value = st.lists(inner, max_size=3) if f.type == "[]" else inner
            parts[f.name] = st.one_of(st.none(), value) if nullable else value
        elif f.type.startswith("[]"):
            value = st.lists(_primitive(f.type[2:], False), max_size=4)
            parts[f.name] = st.one_of(st.none(), value) if nullable else value
        else:
            parts[f.name] = _primitive(f.type, nullable)
    return st.fixed_dictionaries(parts)
