"""Primitive codecs of the Kafka protocol: fixed-width integers, varints, strings, bytes, arrays.

``Reader`` walks a buffer and raises ``ProtocolDecodeError`` on anything that does not fit;
``Writer`` builds a response as a list of byte chunks, leaving large record sets (storage's
``FileSlice``) out of band so the server can send them with ``os.sendfile``. ``Type`` objects
describe each primitive once, for the schema engine.
"""

from __future__ import annotations

import builtins
import struct
import uuid as _uuid
from collections.abc import Callable, Iterable, Sized
from typing import Any, NamedTuple

from broker.protocol.errors import ProtocolDecodeError, ProtocolEncodeError

BytesLike = bytes | bytearray | memoryview

INT8 = struct.Struct(">b")
INT16 = struct.Struct(">h")
INT32 = struct.Struct(">i")
INT64 = struct.Struct(">q")
UINT32 = struct.Struct(">I")
FLOAT64 = struct.Struct(">d")
BOOL = struct.Struct(">?")

NULL_LENGTH = -1
MAX_STRING_LENGTH = 0x7FFF
# A bytes-like value at least this large is emitted as its own chunk instead of being copied
# into the running buffer (a produce request's records, a fetch response read into memory).
LARGE_CHUNK = 64 * 1024


# --- varints: unsigned LEB128 and Kafka's zigzag-signed varint/varlong --------------------

def encode_uvarint(value: int) -> bytes:
    """Unsigned LEB128, 7 bits a byte, low bits first."""
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def decode_uvarint(buf: BytesLike, pos: int, end: int | None = None, max_bytes: int = 10) -> tuple[int, int]:
    """Read an unsigned varint at ``pos``; return (value, next position)."""
    end = len(buf) if end is None else end
    value = shift = 0
    for _ in range(max_bytes):
        if pos >= end:
            raise ProtocolDecodeError("varint runs past the end of the buffer")
        byte = buf[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, pos
        shift += 7
    raise ProtocolDecodeError(f"varint longer than {max_bytes} bytes")


def encode_varint(value: int) -> bytes:
    """Zigzag-encoded signed varint (works for both Kafka's varint and varlong)."""
    return encode_uvarint((value << 1) ^ (value >> 63))


def decode_varint(buf: BytesLike, pos: int, end: int | None = None) -> tuple[int, int]:
    """A zigzag varint (int32 range); return (value, next position)."""
    raw, pos = decode_uvarint(buf, pos, end, 5)
    if raw > 0xFFFFFFFF:
        raise ProtocolDecodeError("varint out of int32 range")
    return (raw >> 1) ^ -(raw & 1), pos


def decode_varlong(buf: BytesLike, pos: int, end: int | None = None) -> tuple[int, int]:
    """A zigzag varlong (int64 range); return (value, next position)."""
    raw, pos = decode_uvarint(buf, pos, end, 10)
    if raw > 0xFFFFFFFFFFFFFFFF:
        raise ProtocolDecodeError("varlong out of int64 range")
    return (raw >> 1) ^ -(raw & 1), pos


def varint_size(value: int) -> int:
    """Bytes the zigzag varint of ``value`` takes."""
    raw = (value << 1) ^ (value >> 63)
    size = 1
    while raw > 0x7F:
        raw >>= 7
        size += 1
    return size


# --- reading ------------------------------------------------------------------------------

class Reader:
    """A cursor over a bytes-like buffer; every read checks bounds and advances ``pos``."""

    __slots__ = ("buf", "pos", "end")

    def __init__(self, data: BytesLike, pos: int = 0, end: int | None = None) -> None:
        view = data if isinstance(data, memoryview) else memoryview(data)
        self.buf = view if view.format == "B" and view.ndim == 1 else view.cast("B")
        self.pos = pos
        self.end = len(self.buf) if end is None else end

    @property
    def remaining(self) -> int:
        return self.end - self.pos

    def _short(self, need: int) -> ProtocolDecodeError:
        return ProtocolDecodeError(f"need {need} bytes at position {self.pos}, only {self.end - self.pos} left")

    def unpack(self, st: struct.Struct) -> tuple:
        """Unpack a fixed-size struct at the cursor."""
        pos = self.pos
        new = pos + st.size
        if new > self.end:
            raise self._short(st.size)
        self.pos = new
        return st.unpack_from(self.buf, pos)

    def _one(self, st: struct.Struct) -> Any:
        pos = self.pos
        new = pos + st.size
        if new > self.end:
            raise self._short(st.size)
        self.pos = new
        return st.unpack_from(self.buf, pos)[0]

    def int8(self) -> int:
        return self._one(INT8)

    def int16(self) -> int:
        return self._one(INT16)

    def int32(self) -> int:
        return self._one(INT32)

    def int64(self) -> int:
        return self._one(INT64)

    def uint32(self) -> int:
        return self._one(UINT32)

    def float64(self) -> float:
        return self._one(FLOAT64)

    def boolean(self) -> bool:
        return self._one(BOOL)

    def uuid(self) -> _uuid.UUID:
        return _uuid.UUID(bytes=bytes(self.raw(16)))

    def varint(self) -> int:
        value, self.pos = decode_varint(self.buf, self.pos, self.end)
        return value

    def varlong(self) -> int:
        value, self.pos = decode_varlong(self.buf, self.pos, self.end)
        return value

    def raw(self, size: int) -> memoryview:
        """The next ``size`` bytes as a view (no copy)."""
        pos = self.pos
        new = pos + size
        if size < 0 or new > self.end:
            raise self._short(size)
        self.pos = new
        return self.buf[pos:new]

    def _length(self, st: struct.Struct, what: str, nullable: bool) -> int:
        size = self._one(st)
        if size < 0 and not (nullable and size == NULL_LENGTH):
            raise ProtocolDecodeError(f"negative {what} length {size} at position {self.pos - st.size}")
        return size

    def _text(self, size: int) -> str:
        try:
            return str(self.raw(size), "utf-8")
        except UnicodeDecodeError as exc:
            raise ProtocolDecodeError(f"string is not valid UTF-8: {exc}") from None

    def string(self) -> str:
        return self._text(self._length(INT16, "string", False))

    def nullable_string(self) -> str | None:
        size = self._length(INT16, "string", True)
        return None if size < 0 else self._text(size)

    def bytes(self) -> bytes:
        return bytes(self.raw(self._length(INT32, "bytes", False)))

    def nullable_bytes(self) -> builtins.bytes | None:  # plain ``bytes`` here would name the method above
        size = self._length(INT32, "bytes", True)
        return None if size < 0 else bytes(self.raw(size))

    def records(self) -> bytearray | None:
        """A record set: nullable bytes, returned mutable so storage can stamp offsets in place."""
        size = self._length(INT32, "records", True)
        return None if size < 0 else bytearray(self.raw(size))

    # Flexible versions (KIP-482): lengths are unsigned varints of length + 1 (0: null), and
    # every struct ends with tagged fields, which the broker reads past (it defines none).

    def uvarint(self) -> int:
        value, self.pos = decode_uvarint(self.buf, self.pos, self.end, max_bytes=5)
        return value

    def _compact_length(self, what: str, nullable: bool) -> int:
        size = self.uvarint() - 1
        if size < 0 and not nullable:
            raise ProtocolDecodeError(f"null {what} where it may not be null, at position {self.pos - 1}")
        return size

    def compact_string(self) -> str:
        return self._text(self._compact_length("string", False))

    def compact_nullable_string(self) -> str | None:
        size = self._compact_length("string", True)
        return None if size < 0 else self._text(size)

    def compact_bytes(self) -> builtins.bytes:
        return bytes(self.raw(self._compact_length("bytes", False)))

    def compact_nullable_bytes(self) -> builtins.bytes | None:
        size = self._compact_length("bytes", True)
        return None if size < 0 else bytes(self.raw(size))

    def compact_records(self) -> bytearray | None:
        size = self._compact_length("records", True)
        return None if size < 0 else bytearray(self.raw(size))

    def compact_array_length(self, min_item_size: int, nullable: bool) -> int:
        count = self._compact_length("array", nullable)
        if count > 0 and count * max(min_item_size, 1) > self.end - self.pos:
            raise ProtocolDecodeError(f"array of {count} items cannot fit in {self.end - self.pos} bytes")
        return count

    def compact_array(self, read_item: Callable[[Reader], Any], min_item_size: int = 1) -> list:
        return [read_item(self) for _ in range(self.compact_array_length(min_item_size, False))]

    def compact_nullable_array(self, read_item: Callable[[Reader], Any], min_item_size: int = 1) -> list | None:
        count = self.compact_array_length(min_item_size, True)
        return None if count < 0 else [read_item(self) for _ in range(count)]

    def skip_tagged_fields(self) -> None:
        """Read past a tagged-fields section: a count, then (tag, size, data) each."""
        for _ in range(self.uvarint()):
            self.uvarint()
            self.raw(self.uvarint())

    def array_length(self, min_item_size: int, nullable: bool) -> int:
        """Read an array count and reject one that cannot fit in what is left (-1: null)."""
        count = self._length(INT32, "array", nullable)
        if count > 0 and count * max(min_item_size, 1) > self.end - self.pos:
            raise ProtocolDecodeError(f"array of {count} items cannot fit in {self.end - self.pos} bytes")
        return count

    def array(self, read_item: Callable[[Reader], Any], min_item_size: int = 1) -> list:
        count = self.array_length(min_item_size, False)
        return [read_item(self) for _ in range(count)]

    def nullable_array(self, read_item: Callable[[Reader], Any], min_item_size: int = 1) -> list | None:
        count = self.array_length(min_item_size, True)
        return None if count < 0 else [read_item(self) for _ in range(count)]


# --- writing ------------------------------------------------------------------------------

class EncodedItems(NamedTuple):
    """The items of an array of structs, written already by ``MessageSchema.items_encoder`` for
    the same message, field and version: how many there are and their bytes. Given as that field's
    value, the array is written as its length and these bytes, so a large answer can be encoded
    in slices."""

    length: int
    data: bytes


class Writer:
    """Accumulates an encoding; ``chunks()`` returns ``list[bytes | out-of-band object]``."""

    __slots__ = ("buf", "_chunks")

    def __init__(self) -> None:
        self.buf = bytearray()
        self._chunks: list[Any] = []

    def _close_chunk(self) -> None:
        if self.buf:
            self._chunks.append(bytes(self.buf))
            self.buf = bytearray()

    def append_chunk(self, obj: Any) -> None:
        """End the current byte chunk and add ``obj`` (bytes or a FileSlice-like) as is."""
        self._close_chunk()
        self._chunks.append(obj)

    def chunks(self) -> list[Any]:
        """The encoding so far as a list of bytes and out-of-band objects."""
        self._close_chunk()
        return list(self._chunks)

    def size_prefixed_chunks(self) -> list[Any]:
        """``chunks()``, its first four bytes (reserved by the caller) set to the int32 size of the rest."""
        if not self._chunks:  # all in buf (the common case): one chunk
            buf = self.buf
            INT32.pack_into(buf, 0, len(buf) - 4)
            self.buf = bytearray()
            return [bytes(buf)]
        size = len(self.buf) - 4 + sum(
            c.nbytes if isinstance(c, memoryview) else len(c) if isinstance(c, (bytes, bytearray)) else c.size
            for c in self._chunks)
        if self._chunks:
            self._chunks[0] = INT32.pack(size) + self._chunks[0][4:]
        else:
            INT32.pack_into(self.buf, 0, size)
        return self.chunks()

    def checkpoint(self) -> tuple[bytearray, int, int]:
        """Where the encoding is now, for ``rewind``."""
        return self.buf, len(self.buf), len(self._chunks)

    def rewind(self, mark: tuple[bytearray, int, int]) -> None:
        """Drop everything written since ``checkpoint`` returned ``mark``."""
        buf, size, chunks = mark
        del buf[size:]
        del self._chunks[chunks:]
        self.buf = buf

    def pack(self, st: struct.Struct, *values: Any) -> None:
        self.buf += st.pack(*values)

    def int8(self, v: int) -> None:
        self.buf += INT8.pack(v)

    def int16(self, v: int) -> None:
        self.buf += INT16.pack(v)

    def int32(self, v: int) -> None:
        self.buf += INT32.pack(v)

    def int64(self, v: int) -> None:
        self.buf += INT64.pack(v)

    def uint32(self, v: int) -> None:
        self.buf += UINT32.pack(v)

    def float64(self, v: float) -> None:
        self.buf += FLOAT64.pack(v)

    def boolean(self, v: bool) -> None:
        self.buf += BOOL.pack(bool(v))

    def uuid(self, v: _uuid.UUID) -> None:
        self.buf += v.bytes

    def varint(self, v: int) -> None:
        self.buf += encode_varint(v)

    varlong = varint

    def raw(self, data: BytesLike) -> None:
        self.buf += data

    def string(self, v: str) -> None:
        if v is None:
            raise ProtocolEncodeError("null for a non-nullable string")
        data = v.encode("utf-8")
        if len(data) > MAX_STRING_LENGTH:
            raise ProtocolEncodeError(f"string of {len(data)} bytes exceeds {MAX_STRING_LENGTH}")
        self.buf += INT16.pack(len(data))
        self.buf += data

    def nullable_string(self, v: str | None) -> None:
        if v is None:
            self.buf += INT16.pack(NULL_LENGTH)
        else:
            self.string(v)

    def bytes(self, v: BytesLike) -> None:
        if v is None:
            raise ProtocolEncodeError("null for non-nullable bytes")
        self.buf += INT32.pack(v.nbytes if isinstance(v, memoryview) else len(v))
        self.buf += v

    def nullable_bytes(self, v: BytesLike | None) -> None:
        if v is None:
            self.buf += INT32.pack(NULL_LENGTH)
        else:
            self.bytes(v)

    def records(self, v: Any) -> None:
        """Nullable bytes, or an out-of-band object with an int ``size`` sent after its length."""
        if v is None:
            self.buf += INT32.pack(NULL_LENGTH)
        elif isinstance(v, (bytes, bytearray, memoryview)):
            size = v.nbytes if isinstance(v, memoryview) else len(v)
            self.buf += INT32.pack(size)
            if size >= LARGE_CHUNK and isinstance(v, bytes):
                self.append_chunk(v)
            else:
                self.buf += v
        else:
            chunk_size = getattr(v, "size", None)
            if not isinstance(chunk_size, int) or chunk_size < 0:
                raise ProtocolEncodeError(f"records value {type(v).__name__} is neither bytes-like nor sized")
            self.buf += INT32.pack(chunk_size)
            self.append_chunk(v)

    def uvarint(self, v: int) -> None:
        self.buf += encode_uvarint(v)

    def compact_string(self, v: str) -> None:
        if v is None:
            raise ProtocolEncodeError("null for a non-nullable string")
        data = v.encode("utf-8")
        if len(data) > MAX_STRING_LENGTH:
            raise ProtocolEncodeError(f"string of {len(data)} bytes exceeds {MAX_STRING_LENGTH}")
        self.buf += encode_uvarint(len(data) + 1)
        self.buf += data

    def compact_nullable_string(self, v: str | None) -> None:
        if v is None:
            self.buf.append(0)
        else:
            self.compact_string(v)

    def compact_bytes(self, v: BytesLike) -> None:
        if v is None:
            raise ProtocolEncodeError("null for non-nullable bytes")
        self.buf += encode_uvarint((v.nbytes if isinstance(v, memoryview) else len(v)) + 1)
        self.buf += v

    def compact_nullable_bytes(self, v: BytesLike | None) -> None:
        if v is None:
            self.buf.append(0)
        else:
            self.compact_bytes(v)

    def compact_records(self, v: Any) -> None:
        """Records in a flexible version: in this buffer (no out-of-band slices there)."""
        if v is not None and not isinstance(v, (bytes, bytearray, memoryview)):
            raise ProtocolEncodeError(f"records value {type(v).__name__} cannot be sent in a flexible version")
        self.compact_nullable_bytes(v)

    def compact_array(self, items: Iterable[Any] | None, write_item: Callable[[Writer, Any], None]) -> None:
        if items is None:
            raise ProtocolEncodeError("null for a non-nullable array")
        self.compact_nullable_array(items, write_item)

    def compact_nullable_array(self, items: Iterable[Any] | None, write_item: Callable[[Writer, Any], None]) -> None:
        if items is None:
            self.buf.append(0)
            return
        if type(items) is EncodedItems:
            self.buf += encode_uvarint(items.length + 1)
            self.buf += items.data
            return
        if not isinstance(items, Sized):
            items = list(items)
        self.buf += encode_uvarint(len(items) + 1)
        for item in items:
            write_item(self, item)

    def empty_tagged_fields(self) -> None:
        self.buf.append(0)

    def array(self, items: Iterable[Any] | None, write_item: Callable[[Writer, Any], None]) -> None:
        if items is None:
            raise ProtocolEncodeError("null for a non-nullable array")
        self.nullable_array(items, write_item)

    def nullable_array(self, items: Iterable[Any] | None, write_item: Callable[[Writer, Any], None]) -> None:
        if items is None:
            self.buf += INT32.pack(NULL_LENGTH)
            return
        if type(items) is EncodedItems:
            self.buf += INT32.pack(items.length)
            self.buf += items.data
            return
        if not isinstance(items, Sized):
            items = list(items)
        self.buf += INT32.pack(len(items))
        for item in items:
            write_item(self, item)


# --- type descriptors for the schema engine ------------------------------------------------

class Type(NamedTuple):
    """One primitive: how to read and write it, its default and smallest encoding.

    ``fmt`` is its struct format character when fixed-width, so runs of fixed fields can be
    packed with one struct call.
    """

    name: str
    read: Callable[[Reader], Any]
    write: Callable[[Writer, Any], None]
    default: Any
    min_size: int
    fmt: str | None = None


def _fixed(name: str, st: struct.Struct, read: Callable, write: Callable, default: Any) -> Type:
    return Type(name, read, write, default, st.size, st.format[-1])


INT8_T = _fixed("int8", INT8, Reader.int8, Writer.int8, 0)
INT16_T = _fixed("int16", INT16, Reader.int16, Writer.int16, 0)
INT32_T = _fixed("int32", INT32, Reader.int32, Writer.int32, 0)
INT64_T = _fixed("int64", INT64, Reader.int64, Writer.int64, 0)
UINT32_T = _fixed("uint32", UINT32, Reader.uint32, Writer.uint32, 0)
FLOAT64_T = _fixed("float64", FLOAT64, Reader.float64, Writer.float64, 0.0)
BOOL_T = _fixed("bool", BOOL, Reader.boolean, Writer.boolean, False)
UUID_T = Type("uuid", Reader.uuid, Writer.uuid, _uuid.UUID(int=0), 16)
STRING_T = Type("string", Reader.string, Writer.string, "", 2)
NULLABLE_STRING_T = Type("nullable_string", Reader.nullable_string, Writer.nullable_string, None, 2)
BYTES_T = Type("bytes", Reader.bytes, Writer.bytes, b"", 4)
NULLABLE_BYTES_T = Type("nullable_bytes", Reader.nullable_bytes, Writer.nullable_bytes, None, 4)
RECORDS_T = Type("records", Reader.records, Writer.records, None, 4)

COMPACT_STRING_T = Type("compact_string", Reader.compact_string, Writer.compact_string, "", 1)
COMPACT_NULLABLE_STRING_T = Type("compact_nullable_string", Reader.compact_nullable_string,
                                 Writer.compact_nullable_string, None, 1)
COMPACT_BYTES_T = Type("compact_bytes", Reader.compact_bytes, Writer.compact_bytes, b"", 1)
COMPACT_NULLABLE_BYTES_T = Type("compact_nullable_bytes", Reader.compact_nullable_bytes,
                                Writer.compact_nullable_bytes, None, 1)
COMPACT_RECORDS_T = Type("compact_records", Reader.compact_records, Writer.compact_records, None, 1)

#: The types a flexible version encodes differently (compact lengths); the others are shared.
COMPACT: dict[str, tuple[Type, Type | None]] = {
    "string": (COMPACT_STRING_T, COMPACT_NULLABLE_STRING_T),
    "bytes": (COMPACT_BYTES_T, COMPACT_NULLABLE_BYTES_T),
    "records": (COMPACT_RECORDS_T, COMPACT_RECORDS_T),
}

# Schema type names (as in Kafka's JSON) -> (type, its nullable variant or None).
PRIMITIVES: dict[str, tuple[Type, Type | None]] = {
    "int8": (INT8_T, None),
    "int16": (INT16_T, None),
    "int32": (INT32_T, None),
    "int64": (INT64_T, None),
    "uint32": (UINT32_T, None),
    "float64": (FLOAT64_T, None),
    "bool": (BOOL_T, None),
    "uuid": (UUID_T, None),
    "string": (STRING_T, NULLABLE_STRING_T),
    "bytes": (BYTES_T, NULLABLE_BYTES_T),
    "records": (RECORDS_T, RECORDS_T),
}
