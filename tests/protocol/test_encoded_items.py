"""An array of structs given as ``EncodedItems`` (written ahead by ``MessageSchema.items_encoder``,
in slices) encodes to the same bytes as the items themselves, through the generated writer and
through the reference, for every top-level and nested array of structs of every message version."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from broker.protocol.errors import ProtocolEncodeError
from broker.protocol.messages import RESPONSES, ApiKey
from broker.protocol.schema import Field, MessageSchema
from broker.protocol.types import EncodedItems, Writer
from tests.protocol.strategies import CASES, struct_strategy


def _struct_arrays(fields: tuple[Field, ...], version: int, path: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """The path of every array of structs present in ``version``."""
    found = []
    for f in fields:
        if version in f.versions and f.type == "[]":
            found.append((*path, f.name))
            found += _struct_arrays(f.fields, version, (*path, f.name))
    return found


ARRAY_CASES = [(schema, version, path) for schema, version in CASES for path in _struct_arrays(schema.fields, version)]


def _pre_encode(schema: MessageSchema, version: int, obj: dict, path: tuple[str, ...]) -> dict:
    """``obj`` with every array at ``path`` replaced by its EncodedItems."""
    def walk(value: dict, rest: tuple[str, ...]) -> dict:
        name, *more = rest
        items = value.get(name)
        if items is None:
            return value
        if not more:
            return {**value, name: schema.items_encoder(version, path)(items)}
        return {**value, name: [walk(item, tuple(more)) for item in items]}
    return walk(obj, path)


@pytest.mark.parametrize(("schema", "version", "path"), ARRAY_CASES,
                         ids=[f"{s.name}-v{v}-{'.'.join(p)}" for s, v, p in ARRAY_CASES])
@settings(max_examples=2, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=st.data())
def test_pre_encoded_items_give_the_same_bytes(schema: MessageSchema, version: int, path: tuple[str, ...],
                                               data: st.DataObject) -> None:
    obj = data.draw(struct_strategy(schema.fields, version))
    expected = schema.encode_bytes(version, obj)
    sliced = _pre_encode(schema, version, obj, path)
    assert schema.encode_bytes(version, sliced) == expected
    w = Writer()
    schema.compiled(version).write(w, sliced)  # the reference takes them too
    assert b"".join(w.chunks()) == expected


def test_items_encoded_in_slices_join() -> None:
    encode = RESPONSES[ApiKey.METADATA].items_encoder(8, ("topics", "partitions"))
    parts = [{"partition_index": i, "leader_id": 1, "replica_nodes": [1, 2], "isr_nodes": [1]} for i in range(10)]
    whole, first, second = encode(parts), encode(parts[:4]), encode(parts[4:])
    assert whole == EncodedItems(10, first.data + second.data)


def test_items_the_writer_refuses_get_the_references_error() -> None:
    encode = RESPONSES[ApiKey.METADATA].items_encoder(8, ("topics",))
    with pytest.raises(ProtocolEncodeError, match=r"^MetadataResponse v8: topics\.name: null for a non-nullable string$"):
        encode([{"name": None, "partitions": []}])
    with pytest.raises(ValueError, match="no array of structs at brokers.host"):
        RESPONSES[ApiKey.METADATA].items_encoder(8, ("brokers", "host"))
