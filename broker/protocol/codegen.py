"""Straight-line codecs generated from the schema declarations, one function per message version.

``broker.protocol.schema`` compiles each field into a closure; that engine is the reference. For
the requests and responses a broker handles thousands of times a second, a closure call per
field and a ``Reader`` method call per primitive cost more than the bytes themselves. Here the
same declarations become Python source: one function reads a whole message (nested arrays as
loops, fixed-width runs as one ``struct`` call, strings and record sets sliced in place) and one
writes it. Generated code handles well-formed input and raises on anything the reference
refuses (bounds, negative or null lengths, arrays that cannot fit, bad UTF-8, long varints);
``MessageSchema`` then runs the reference, whose error is the one reported. Arrays of
primitives, and on the write side bytes and record sets, are delegated to the reference's own
parts. ``tests/protocol/test_codegen.py`` checks that both agree on every version.
"""

from __future__ import annotations

import struct
import uuid as _uuid
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

from broker.protocol.types import (
    INT16,
    INT32,
    MAX_STRING_LENGTH,
    PRIMITIVES,
    EncodedItems,
    Reader,
    Writer,
    decode_uvarint,
    encode_uvarint,
)

FastRead = Callable[[Any, int, int], tuple[dict, int]]
"""(buffer, position, end) -> (the message, the position after it)."""
FastWrite = Callable[[Writer, Any], None]

_MAKE = {"string": "str({}, 'utf-8')", "bytes": "bytes({})", "records": "bytearray({})"}  # length-prefixed types
_NULL = {(False, True): b"\xff\xff\xff\xff", (False, False): b"\xff\xff", (True, True): b"\x00", (True, False): b"\x00"}


class Reference(NamedTuple):
    """What the generator takes from the reference engine, so that both agree by construction:
    a field's compiled part (its default; the read or write of a type delegated to it) and a
    struct's smallest encoding (to refuse the same impossible array counts)."""

    part: Callable[[Any, int, bool], Any]
    struct_size: Callable[[Sequence[Any], int, bool], int]


class _Invalid(Exception):
    """Raised by generated readers on input the reference refuses (the reference then says why)."""


class _Source:
    """The source of one generated function for one version: its lines, the constants they
    name, fresh local names."""

    def __init__(self, version: int, flexible: bool, reference: Reference) -> None:
        self.version, self.flexible, self.reference = version, flexible, reference
        self.lines: list[str] = []
        self.names: dict[str, Any] = {
            "_Invalid": _Invalid, "_I16": INT16, "_I32": INT32, "_uvarint": decode_uvarint,
            "_uvarint_bytes": encode_uvarint, "_Reader": Reader, "_UUID": _uuid.UUID,
            "_MAX_STRING": MAX_STRING_LENGTH, "_Encoded": EncodedItems,
        }
        self._count = 0

    def fresh(self, prefix: str) -> str:
        self._count += 1
        return f"{prefix}{self._count}"

    def const(self, value: Any, prefix: str = "_k") -> str:
        """An expression for ``value`` in the generated code (literals stay literals)."""
        if value is None or isinstance(value, (bool, int, float, str, bytes)):
            return repr(value)
        name = self.fresh(prefix)
        self.names[name] = value
        return name

    def emit(self, depth: int, line: str) -> None:
        self.lines.append("    " * depth + line)

    def present(self, fields: Sequence[Any]) -> list[Any]:
        return [f for f in fields if self.version in f.versions]

    def nullable(self, f: Any) -> bool:
        return self.version in f.nullable

    def part(self, f: Any) -> Any:
        return self.reference.part(f, self.version, self.flexible)

    def runs(self, fields: list[Any]) -> list[list[Any]]:
        """Fields grouped so that consecutive fixed-width ones share one struct call."""
        groups: list[list[Any]] = []
        for f in fields:
            if _fmt(f) is not None and groups and _fmt(groups[-1][-1]) is not None:
                groups[-1].append(f)
            else:
                groups.append([f])
        return groups

    def function(self, label: str) -> Any:
        namespace = dict(self.names)
        exec(compile("\n".join(self.lines) + "\n", f"<codec {label}>", "exec"), namespace)  # noqa: S102 - generated here
        return namespace["codec"]


def _fmt(f: Any) -> str | None:
    """The struct format character of a fixed-width field, else None."""
    if f.type in PRIMITIVES and PRIMITIVES[f.type][0].fmt is not None:
        return PRIMITIVES[f.type][0].fmt
    return None


# ------------------------------------------------------------------ reading


def _read_length(src: _Source, d: int, wide: bool) -> str:
    """Emit reading a length (array count, string size; -1 is null); returns its local name."""
    n = src.fresh("n")
    if src.flexible:
        src.emit(d, "if pos < end and buf[pos] < 128:")
        src.emit(d + 1, f"{n} = buf[pos] - 1")
        src.emit(d + 1, "pos += 1")
        src.emit(d, "else:")
        src.emit(d + 1, f"{n}, pos = _uvarint(buf, pos, end, 5)")
        src.emit(d + 1, f"{n} -= 1")
    else:
        size, st = (4, "_I32") if wide else (2, "_I16")
        src.emit(d, f"if pos + {size} > end: raise _Invalid")
        src.emit(d, f"{n} = {st}.unpack_from(buf, pos)[0]")
        src.emit(d, f"pos += {size}")
    return n


def _read_sized(src: _Source, d: int, f: Any, target: str) -> None:
    """A string, bytes or record set: a length, then that many bytes (a record set is always nullable)."""
    n = _read_length(src, d, wide=f.type != "string")
    src.emit(d, f"if {n} < 0:")
    if src.nullable(f) or f.type == "records":
        src.emit(d + 1, f"if {n} != -1: raise _Invalid")
        src.emit(d + 1, f"{target} = None")
    else:
        src.emit(d + 1, "raise _Invalid")
    src.emit(d, "else:")
    src.emit(d + 1, f"if pos + {n} > end: raise _Invalid")
    src.emit(d + 1, f"{target} = " + _MAKE[f.type].format(f"buf[pos:pos + {n}]"))
    src.emit(d + 1, f"pos += {n}")


def _read_tags(src: _Source, d: int) -> None:
    """A flexible struct's tagged fields: read past (the broker defines none)."""
    src.emit(d, "if pos < end and buf[pos] == 0:")
    src.emit(d + 1, "pos += 1")
    src.emit(d, "else:")
    src.emit(d + 1, "_r = _Reader(buf, pos, end)")
    src.emit(d + 1, "_r.skip_tagged_fields()")
    src.emit(d + 1, "pos = _r.pos")


def _read_struct(src: _Source, d: int, fields: Sequence[Any]) -> str:
    """Emit reading a struct's fields into locals; returns the dict expression holding them."""
    present = src.present(fields)
    targets = {f.name: src.fresh("v") for f in present}
    for group in src.runs(present):
        if _fmt(group[0]) is not None:
            st = struct.Struct(">" + "".join(_fmt(f) or "" for f in group))
            src.emit(d, f"if pos + {st.size} > end: raise _Invalid")
            lhs = ", ".join(targets[f.name] for f in group) + ("," if len(group) == 1 else "")
            src.emit(d, f"{lhs} = {src.const(st, '_s')}.unpack_from(buf, pos)")
            src.emit(d, f"pos += {st.size}")
        else:
            _read_field(src, d, group[0], targets[group[0].name])
    if src.flexible:
        _read_tags(src, d)
    return "{" + ", ".join(f"{f.name!r}: {targets[f.name]}" for f in present) + "}"


def _read_field(src: _Source, d: int, f: Any, target: str) -> None:
    if f.type == "struct":
        src.emit(d, f"{target} = {_read_struct(src, d, f.fields)}")
    elif f.type == "[]":
        n = _read_length(src, d, wide=True)
        src.emit(d, f"if {n} < {-1 if src.nullable(f) else 0}: raise _Invalid")
        item_size = max(src.reference.struct_size(f.fields, src.version, src.flexible), 1)
        src.emit(d, f"if {n} * {item_size} > end - pos: raise _Invalid")
        src.emit(d, f"{target} = None if {n} < 0 else []")
        src.emit(d, f"for _ in range({n}):")
        src.emit(d + 1, f"{target}.append({_read_struct(src, d + 1, f.fields)})")
    elif f.type in _MAKE:
        _read_sized(src, d, f, target)
    elif f.type == "uuid":
        src.emit(d, "if pos + 16 > end: raise _Invalid")
        src.emit(d, f"{target} = _UUID(bytes=bytes(buf[pos:pos + 16]))")
        src.emit(d, "pos += 16")
    else:  # an array of primitives: the reference's part, on a Reader over the same bytes
        src.emit(d, "_r = _Reader(buf, pos, end)")
        src.emit(d, f"{target} = {src.const(src.part(f).read, '_rd')}(_r)")
        src.emit(d, "pos = _r.pos")


def generate_reader(label: str, fields: Sequence[Any], version: int, flexible: bool, reference: Reference) -> FastRead:
    """A function reading one whole message of ``version``: (buffer, position, end) -> (dict, position)."""
    src = _Source(version, flexible, reference)
    src.emit(0, "def codec(buf, pos, end):")
    src.emit(1, f"return {_read_struct(src, 1, fields)}, pos")
    return src.function(f"{label} v{version} read")


# ------------------------------------------------------------------ writing


def _write_length(src: _Source, d: int, n: str, wide: bool) -> None:
    """Emit writing length ``n`` (a local, >= 0)."""
    if src.flexible:
        src.emit(d, f"if {n} < 127: buf.append({n} + 1)")
        src.emit(d, f"else: buf += _uvarint_bytes({n} + 1)")
    else:
        src.emit(d, f"buf += {'_I32' if wide else '_I16'}.pack({n})")


def _write_null_or(src: _Source, d: int, f: Any, value: str, wide: bool) -> int:
    """Emit the null case of a nullable field (a non-nullable None is refused); returns the depth
    of its non-null branch."""
    src.emit(d, f"if {value} is None:")
    src.emit(d + 1, f"buf += {_NULL[src.flexible, wide]!r}" if src.nullable(f) else "raise _Invalid")
    src.emit(d, "else:")
    return d + 1


def _write_struct(src: _Source, d: int, fields: Sequence[Any], obj: str) -> None:
    get = src.fresh("get")
    src.emit(d, f"{get} = {obj}.get")
    for group in src.runs(src.present(fields)):
        if _fmt(group[0]) is not None:
            st = src.const(struct.Struct(">" + "".join(_fmt(f) or "" for f in group)), "_s")
            values = ", ".join(f"{get}({f.name!r}, {src.const(src.part(f).default)})" for f in group)
            src.emit(d, f"buf += {st}.pack({values})")
        else:
            f = group[0]
            value = src.fresh("v")
            src.emit(d, f"{value} = {get}({f.name!r}, {src.const(src.part(f).default)})")
            _write_field(src, d, f, value)
    if src.flexible:
        src.emit(d, "buf.append(0)")


def _write_field(src: _Source, d: int, f: Any, value: str) -> None:
    if f.type == "struct":
        _write_struct(src, d, f.fields, value)
    elif f.type == "[]":
        d = _write_null_or(src, d, f, value, wide=True)
        n, item = src.fresh("n"), src.fresh("item")
        src.emit(d, f"if type({value}) is _Encoded:")  # items written already, in slices
        src.emit(d + 1, f"{n} = {value}.length")
        _write_length(src, d + 1, n, wide=True)
        src.emit(d + 1, f"buf += {value}.data")
        src.emit(d, "else:")
        d += 1
        src.emit(d, f"if type({value}) is not list: {value} = list({value})")  # any iterable, once
        src.emit(d, f"{n} = len({value})")
        _write_length(src, d, n, wide=True)
        src.emit(d, f"for {item} in {value}:")
        _write_struct(src, d + 1, f.fields, item)
    elif f.type == "string":
        d = _write_null_or(src, d, f, value, wide=False) if src.nullable(f) else d
        data, n = src.fresh("b"), src.fresh("n")
        src.emit(d, f"{data} = {value}.encode('utf-8')")
        src.emit(d, f"{n} = len({data})")
        src.emit(d, f"if {n} > _MAX_STRING: raise _Invalid")
        _write_length(src, d, n, wide=False)
        src.emit(d, f"buf += {data}")
    elif f.type == "uuid":
        src.emit(d, f"buf += {value}.bytes")
    else:  # bytes, record sets, arrays of primitives: the reference's part, on the same Writer
        src.emit(d, f"{src.const(src.part(f).write, '_wr')}(w, {value})")
        src.emit(d, "buf = w.buf")  # a large record set ends the running chunk


def generate_writer(label: str, fields: Sequence[Any], version: int, flexible: bool, reference: Reference) -> FastWrite:
    """A function writing one whole message of ``version`` to a ``Writer``."""
    src = _Source(version, flexible, reference)
    src.emit(0, "def codec(w, obj):")
    src.emit(1, "buf = w.buf")
    _write_struct(src, 1, fields, "obj")
    return src.function(f"{label} v{version} write")
