"""A small schema engine: messages declared once, with per-field version ranges, compiled per version.

Declarations mirror Kafka's ``common/message/*.json``: a field has a type, the versions it
exists in and the versions it may be null in. ``MessageSchema`` compiles each version into
closures that read a dict from a ``Reader`` and write a dict to a ``Writer``; runs of fixed-width
fields are packed with a single ``struct`` call. A message's flexible versions (KIP-482) use
compact lengths for strings, bytes and arrays and end every struct with tagged fields; the engine
reads tagged fields past (none are defined here) and writes none.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from dataclasses import field as dc_field
from typing import Any, NamedTuple

from broker.protocol import codegen, compiled
from broker.protocol.errors import ProtocolDecodeError, ProtocolEncodeError, UnsupportedVersionError
from broker.protocol.types import COMPACT, PRIMITIVES, BytesLike, EncodedItems, Reader, Type, Writer

MISSING: Any = object()
_ENCODE_FAILURES = (struct.error, TypeError, AttributeError, ValueError, OverflowError)


class Versions(NamedTuple):
    """An inclusive version range; ``hi`` None means open-ended ("3+")."""

    lo: int
    hi: int | None

    @classmethod
    def parse(cls, spec: str) -> Versions:
        """Parse Kafka's notation: "3+", "0-4", "5" or "none"."""
        spec = spec.strip()
        if spec == "none":
            return cls(0, -1)
        if spec.endswith("+"):
            return cls(int(spec[:-1]), None)
        lo, _, hi = spec.partition("-")
        return cls(int(lo), int(hi or lo))

    def __contains__(self, version: object) -> bool:
        return isinstance(version, int) and self.lo <= version and (self.hi is None or version <= self.hi)


@dataclass(frozen=True)
class Field:
    """One declared field. ``type`` is a primitive name, "[]<primitive>", "[]" (array of the
    struct in ``fields``) or "struct"."""

    name: str
    type: str
    versions: Versions
    nullable: Versions
    default: Any = MISSING
    fields: tuple[Field, ...] = dc_field(default=())


def F(
    name: str,
    type: str,
    versions: str = "0+",
    fields: Sequence[Field] = (),
    *,
    nullable: str = "none",
    default: Any = MISSING,
) -> Field:
    """Declare a field: ``F("rack", "string", "1+", nullable="1+")``."""
    if type in ("[]", "struct") and not fields:
        raise ValueError(f"{name}: a struct type needs fields")
    if fields and type not in ("[]", "struct"):
        raise ValueError(f"{name}: only struct types take fields")
    base = type[2:] if type.startswith("[]") else type
    if base and base != "struct" and base not in PRIMITIVES:
        raise ValueError(f"{name}: unknown type {type!r}")
    return Field(name, type, Versions.parse(versions), Versions.parse(nullable), default, tuple(fields))


def per_topic(
    partition_fields: Sequence[Field], *, array: str = "topics", topic: str = "name", partitions: str = "partitions",
) -> Field:
    """Kafka's per-partition nesting, shared by every API that addresses partitions: an array of
    topics, each a topic name and an array of its partitions. The names differ by API (Kafka's
    JSON gives each its own), the structure does not."""
    return F(array, "[]", "0+", [F(topic, "string"), F(partitions, "[]", "0+", partition_fields)])


class Compiled(NamedTuple):
    """A struct compiled for one version."""

    read: Callable[[Reader], dict]
    write: Callable[[Writer, Mapping[str, Any]], None]
    min_size: int
    names: tuple[str, ...]


class _Part(NamedTuple):
    """One field of a compiled struct (before fixed-width runs are merged)."""

    name: str
    read: Callable[[Reader], Any]
    write: Callable[[Writer, Any], None]
    default: Any
    min_size: int
    fmt: str | None
    nested: bool


def _struct_array(item_read: Callable, item_write: Callable, min_size: int, nullable: bool,
                  flexible: bool) -> tuple[Callable, Callable]:
    """Read/write for an array whose items have their own codec (classic or compact length)."""
    if flexible:
        if nullable:
            return ((lambda r: r.compact_nullable_array(item_read, min_size)),
                    (lambda w, v: w.compact_nullable_array(v, item_write)))
        return (lambda r: r.compact_array(item_read, min_size)), (lambda w, v: w.compact_array(v, item_write))
    if nullable:
        return (lambda r: r.nullable_array(item_read, min_size)), (lambda w, v: w.nullable_array(v, item_write))
    return (lambda r: r.array(item_read, min_size)), (lambda w, v: w.array(v, item_write))


def _primitive_array(item: Type, nullable: bool, flexible: bool = False) -> tuple[Callable, Callable]:
    """Read/write for an array of primitives; fixed-width items use one struct call."""
    fmt = item.fmt
    if fmt is not None and not flexible:
        size = item.min_size

        def read(r: Reader) -> list | None:
            count = r.array_length(size, nullable)
            if count < 0:
                return None
            pos = r.pos
            r.pos += count * size
            return list(struct.unpack_from(f">{count}{fmt}", r.buf, pos))

        def write(w: Writer, items: Any) -> None:
            if items is None:
                if not nullable:
                    raise ProtocolEncodeError("null for a non-nullable array")
                w.int32(-1)
                return
            items = list(items)
            w.buf += struct.pack(f">i{len(items)}{fmt}", len(items), *items)

        return read, write
    return _struct_array(item.read, item.write, item.min_size, nullable, flexible)


def _compile_field(f: Field, version: int, flexible: bool) -> _Part:
    nullable = version in f.nullable
    read: Callable[[Reader], Any]
    write: Callable[[Writer, Any], None]
    types = {**PRIMITIVES, **COMPACT} if flexible else PRIMITIVES
    if f.type in ("[]", "struct"):
        sub = compile_struct(f.fields, version, flexible)
        if f.type == "struct":
            read, write, min_size = sub.read, sub.write, sub.min_size
            default: Any = None if nullable else {}
        else:
            read, write = _struct_array(sub.read, sub.write, sub.min_size, nullable, flexible)
            default, min_size = [], 1 if flexible else 4
        return _Part(f.name, read, write, default if f.default is MISSING else f.default, min_size, None, True)
    if f.type.startswith("[]"):
        item, _ = types[f.type[2:]]
        read, write = _primitive_array(item, nullable, flexible)
        return _Part(f.name, read, write, [] if f.default is MISSING else f.default, 1 if flexible else 4, None, False)
    t, with_null = types[f.type]
    if nullable:
        if with_null is None:
            raise ValueError(f"{f.name}: type {f.type} cannot be nullable")
        t = with_null
    default = t.default if f.default is MISSING else f.default
    return _Part(f.name, t.read, t.write, default, t.min_size, t.fmt, False)


def _merge_fixed(parts: list[_Part]) -> list[tuple]:
    """Steps (key, struct | None, default, read, write, nested): runs of fixed fields merged."""
    steps: list[tuple] = []
    run: list[_Part] = []

    def flush() -> None:
        if len(run) == 1:
            p = run[0]
            steps.append((p.name, None, p.default, p.read, p.write, False))
        elif run:
            st = struct.Struct(">" + "".join(p.fmt or "" for p in run))  # a run holds fixed-width parts only
            steps.append((tuple(p.name for p in run), st, tuple(p.default for p in run), None, None, False))
        run.clear()

    for p in parts:
        if p.fmt is not None:
            run.append(p)
            continue
        flush()
        steps.append((p.name, None, p.default, p.read, p.write, p.nested))
    flush()
    return steps


def compile_struct(fields: Sequence[Field], version: int, flexible: bool = False) -> Compiled:
    """Compile the fields that exist in ``version`` into read/write closures (``flexible``: KIP-482 encoding)."""
    parts = [_compile_field(f, version, flexible) for f in fields if version in f.versions]
    names = tuple(p.name for p in parts)
    if len(set(names)) != len(names):
        raise ValueError(f"duplicate field names in version {version}: {names}")
    steps = _merge_fixed(parts)
    read_plan = tuple((key, st, rd) for key, st, _, rd, _, _ in steps)

    def read(r: Reader) -> dict:
        out: dict[str, Any] = {}
        for key, st, rd in read_plan:
            if st is None:
                out[key] = rd(r)
            else:
                out.update(zip(key, r.unpack(st)))
        return out

    def write(w: Writer, obj: Mapping[str, Any]) -> None:
        for key, st, default, _, wr, nested in steps:
            try:
                if st is None:
                    wr(w, obj.get(key, default))
                else:
                    w.buf += st.pack(*[obj.get(k, d) for k, d in zip(key, default)])
            except ProtocolEncodeError as exc:
                raise ProtocolEncodeError(f"{_label(key)}{'.' if nested else ': '}{exc}") from None
            except _ENCODE_FAILURES as exc:
                if not hasattr(obj, "get"):
                    raise ProtocolEncodeError(f"expected a dict, got {type(obj).__name__}") from None
                raise ProtocolEncodeError(f"{_label(key)}: {exc}") from None

    if flexible:  # each struct ends with its tagged fields: read past, written empty
        return Compiled(_then_skip_tags(read), _then_no_tags(write), sum(p.min_size for p in parts) + 1, names)
    return Compiled(read, write, sum(p.min_size for p in parts), names)


def _then_skip_tags(read: Callable[[Reader], dict]) -> Callable[[Reader], dict]:
    def read_flexible(r: Reader) -> dict:
        out = read(r)
        r.skip_tagged_fields()
        return out
    return read_flexible


def _then_no_tags(write: Callable[[Writer, Mapping[str, Any]], None]) -> Callable[[Writer, Mapping[str, Any]], None]:
    def write_flexible(w: Writer, obj: Mapping[str, Any]) -> None:
        write(w, obj)
        w.empty_tagged_fields()
    return write_flexible


def _label(key: str | tuple[str, ...]) -> str:
    return key if isinstance(key, str) else "(" + ", ".join(key) + ")"


def _struct_size(fields: Sequence[Field], version: int, flexible: bool) -> int:
    return compile_struct(fields, version, flexible).min_size


_REFERENCE = codegen.Reference(_compile_field, _struct_size)


def _write_either(fast: codegen.FastWrite, reference: Callable[[Writer, Mapping[str, Any]], None], w: Writer,
                  obj: Mapping[str, Any], where: Callable[[], str]) -> None:
    """``obj`` written by the generated writer; what it refuses is written by the reference
    instead (``w`` rewound first), whose error, prefixed with ``where()``, says why."""
    mark = w.checkpoint()
    try:
        fast(w, obj)
        return
    except Exception:  # refused by the generated code
        w.rewind(mark)
    try:
        reference(w, obj)
    except ProtocolEncodeError as exc:
        raise ProtocolEncodeError(f"{where()}{exc}") from None


class MessageSchema:
    """A request or response body, declared once and compiled for each of its versions: the
    closures of ``compile_struct`` are the reference; ``decode`` and ``encode`` run straight-line
    code generated from the same declarations (``broker.protocol.codegen``) on first use of a
    version, or a compiled codec of the message where one is built (``broker.protocol.compiled``),
    and fall back to the reference for its error on input the generated code refuses."""

    def __init__(self, name: str, api_key: int, versions: str, fields: Sequence[Field], flexible: str = "none") -> None:
        self.name = name
        self.api_key = api_key
        rng = Versions.parse(versions)
        if rng.hi is None:
            raise ValueError(f"{name}: give a closed version range")
        self.min_version, self.max_version = rng.lo, rng.hi
        self.flexible_versions = Versions.parse(flexible)
        self.fields = tuple(fields)
        self._compiled = {v: compile_struct(self.fields, v, v in self.flexible_versions) for v in range(rng.lo, rng.hi + 1)}
        self._readers: dict[int, codegen.FastRead] = {}
        self._writers: dict[int, codegen.FastWrite] = {}
        self._framers: dict[int, Callable[[bytes, Mapping[str, Any]], bytes] | None] = {}
        self._item_encoders: dict[tuple[int, tuple[str, ...]], Callable[[Iterable[Mapping[str, Any]]], EncodedItems]] = {}

    def is_flexible(self, version: int) -> bool:
        """Whether ``version`` uses KIP-482's encoding (and request header v2 / response header v1)."""
        return version in self.flexible_versions

    def __repr__(self) -> str:
        return f"<MessageSchema {self.name} v{self.min_version}-{self.max_version}>"

    def supports(self, version: int) -> bool:
        return version in self._compiled

    def compiled(self, version: int) -> Compiled:
        """The codec for one version; UnsupportedVersionError outside the declared range."""
        try:
            return self._compiled[version]
        except KeyError:
            raise UnsupportedVersionError(
                f"{self.name} v{version} is not supported (v{self.min_version}-{self.max_version})"
            ) from None

    def reader(self, version: int) -> codegen.FastRead:
        """The generated reader of ``version`` (made on first use)."""
        read = self._readers.get(version)
        if read is None:
            self.compiled(version)  # UnsupportedVersionError outside the declared range
            read = self._readers[version] = compiled.reader(self.name, version) or codegen.generate_reader(
                self.name, self.fields, version, version in self.flexible_versions, _REFERENCE)
        return read

    def writer(self, version: int) -> codegen.FastWrite:
        """The generated writer of ``version`` (made on first use)."""
        write = self._writers.get(version)
        if write is None:
            self.compiled(version)
            write = self._writers[version] = compiled.writer(self.name, version) or codegen.generate_writer(
                self.name, self.fields, version, version in self.flexible_versions, _REFERENCE)
        return write

    def items_encoder(self, version: int, path: Sequence[str]) -> Callable[[Iterable[Mapping[str, Any]]], EncodedItems]:
        """A function writing items of the array of structs at ``path`` (field names from the top,
        e.g. ("topics", "partitions")) for ``version``: the value to give that field
        (``EncodedItems``) when a large message is encoded in slices. Generated like ``writer``;
        items it refuses are written again by the reference, which says why."""
        key = (version, tuple(path))
        encode = self._item_encoders.get(key)
        if encode is not None:
            return encode
        self.compiled(version)
        flexible = version in self.flexible_versions
        fields: Sequence[Field] = self.fields
        for name in path:
            found = [f for f in fields if f.name == name and version in f.versions and f.type == "[]"]
            if not found:
                raise ValueError(f"{self.name} v{version} has no array of structs at {'.'.join(path)}")
            fields = found[0].fields
        fast = codegen.generate_writer(f"{self.name}.{'.'.join(path)}", fields, version, flexible, _REFERENCE)
        reference = compile_struct(fields, version, flexible).write

        def encode_items(items: Iterable[Mapping[str, Any]]) -> EncodedItems:
            w, count = Writer(), 0
            for item in items:
                _write_either(fast, reference, w, item, lambda: f"{self.name} v{version}: {'.'.join(path)}.")
                count += 1
            chunks = w.chunks()
            if not all(isinstance(c, bytes) for c in chunks):
                raise ProtocolEncodeError(f"{self.name} v{version}: out-of-band records in {'.'.join(path)}")
            return EncodedItems(count, b"".join(chunks))

        self._item_encoders[key] = encode_items
        return encode_items

    def decode(self, version: int, data: BytesLike, offset: int = 0) -> dict:
        """Decode a whole body from ``data[offset:]``; ProtocolDecodeError if it does not fit exactly."""
        read = self.reader(version)
        buf = data if not isinstance(data, memoryview) or (data.format == "B" and data.ndim == 1) else data.cast("B")
        end = len(buf)
        try:
            obj, pos = read(buf, offset, end)
        except Exception:  # refused by the generated code: the reference says why
            r = Reader(buf, offset)
            obj = self.compiled(version).read(r)
            pos = r.pos
        trailing = end - pos
        if trailing and not (version in self.flexible_versions and not any(buf[pos:end])):
            # empty tagged-field sections repeated after the body are let through, as Kafka (which
            # never checks for trailing bytes) lets them: librdkafka sends some requests' twice
            raise ProtocolDecodeError(f"{self.name} v{version}: {trailing} trailing bytes")
        return obj

    def encode(self, version: int, obj: Mapping[str, Any]) -> list[Any]:
        """Encode ``obj`` as a list of byte chunks and out-of-band record objects (FileSlice)."""
        w = Writer()
        self._write(version, w, obj)
        return w.chunks()

    def encode_frame(self, version: int, obj: Mapping[str, Any], header: bytes) -> list[Any]:
        """A whole frame as chunks: its int32 size, ``header`` (a response header), then ``obj``.
        A compiled writer writes the whole frame in one call; what it refuses is written here."""
        frame = self._framers.get(version)
        if frame is None and version not in self._framers:
            frame = self._framers[version] = getattr(self.writer(version), "frame", None)
        if frame is not None:
            try:
                return [frame(header, obj)]
            except Exception:  # refused by the compiled writer: the generated or reference one says why
                pass
        w = Writer()
        w.buf += bytes(4) + header
        self._write(version, w, obj)
        return w.size_prefixed_chunks()

    def _write(self, version: int, w: Writer, obj: Mapping[str, Any]) -> None:
        _write_either(self.writer(version), self.compiled(version).write, w, obj, lambda: f"{self.name} v{version}: ")

    def encode_bytes(self, version: int, obj: Mapping[str, Any]) -> bytes:
        """Encode to one ``bytes``; ProtocolEncodeError if a value would go out of band."""
        chunks = self.encode(version, obj)
        for chunk in chunks:
            if not isinstance(chunk, bytes):
                raise ProtocolEncodeError(f"{self.name} v{version}: out-of-band {type(chunk).__name__} in encode_bytes")
        return b"".join(chunks)
