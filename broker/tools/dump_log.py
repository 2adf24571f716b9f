"""`logbus dump-log --files FILE,...`: print a segment's batches (with --deep-iteration its records,
with --print-data-log their keys and values too) in the shape of Kafka's kafka-dump-log tool;
.index and .timeindex files too, or only their sanity check (--index-sanity-check)."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from broker.protocol.compression import codec_name
from broker.protocol.errors import CorruptRecordError, InvalidRecordError
from broker.protocol.records import decode_batches
from broker.protocol.records import layout as batch
from broker.protocol.records.codec import Record
from broker.storage.index import CorruptIndexError, OffsetIndex, TimeIndex, read_offset_index_entries, read_time_index_entries
from broker.tools import CommandError


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("paths", nargs="*", metavar="FILE", help=".log, .index or .timeindex files")
    parser.add_argument("--files", action="append", default=[], metavar="FILE[,FILE]",
                        help="Kafka's flag: a comma-separated list of files to dump")
    parser.add_argument("--print-data-log", action="store_true",
                        help="print each record's key, value and headers (implies --deep-iteration)")
    parser.add_argument("--deep-iteration", action="store_true", help="print every record, not only the batches")
    parser.add_argument("--index-sanity-check", action="store_true",
                        help="only check the indexes as a broker does at startup, without printing their entries")


@dataclass(frozen=True)
class Options:
    """What to print of each file."""

    deep: bool = False
    print_data: bool = False
    sanity_only: bool = False


def files_of(args: argparse.Namespace) -> list[Path]:
    """Positional files and --files lists, in order; at least one."""
    names = list(args.paths) + [n.strip() for item in args.files for n in item.split(",") if n.strip()]
    if not names:
        raise CommandError("Missing required argument \"[files]\"")
    return [Path(n) for n in names]


def run(args: argparse.Namespace) -> int:
    options = Options(deep=args.deep_iteration or args.print_data_log, print_data=args.print_data_log,
                      sanity_only=args.index_sanity_check)
    for path in files_of(args):
        dump = DUMPERS.get(path.suffix)
        if dump is None:
            raise CommandError(f"{path}: not a .log, .index or .timeindex file")
        if not path.is_file():
            raise CommandError(f"{path}: no such file")
        print(f"Dumping {path}")
        dump(path, options)
    return 0


def _base_offset(path: Path) -> int:
    try:
        return int(path.stem)
    except ValueError as exc:
        raise CommandError(f"{path}: a segment file is named by its 20-digit base offset") from exc


def dump_segment(path: Path, options: Options) -> None:
    data = path.read_bytes()
    print(f"Log starting offset: {_base_offset(path)}")
    position = 0
    expected = _base_offset(path)
    while position + batch.LOG_OVERHEAD <= len(data):
        _, length = batch.read_prefix(data, position)
        size = length + batch.LOG_OVERHEAD
        try:
            header = batch.check_batch(data, position)
            valid = True
        except (CorruptRecordError, InvalidRecordError) as exc:
            if position + batch.HEADER_SIZE > len(data) or length < batch.MIN_BATCH_LENGTH:
                print(f"Found {len(data) - position} trailing bytes at position {position} that are not a whole batch: {exc}")
                return
            header, valid = batch.read_header(data, position), False
        if header.base_offset > expected:  # a compacted log: whole batches removed
            print(f"gap: offsets {expected}..{header.base_offset - 1} hold no batch (removed by compaction)")
        expected = max(expected, header.next_offset)
        print(
            f"baseOffset: {header.base_offset} lastOffset: {header.last_offset} count: {header.records_count} "
            f"baseSequence: {header.base_sequence} lastSequence: {header.last_sequence} producerId: {header.producer_id} "
            f"producerEpoch: {header.producer_epoch} partitionLeaderEpoch: {header.partition_leader_epoch} "
            f"isTransactional: {str(header.is_transactional).lower()} isControl: {str(header.is_control).lower()} "
            f"position: {position} {'LogAppendTime' if header.attributes & batch.TIMESTAMP_TYPE_MASK else 'CreateTime'}: "
            f"{header.max_timestamp} size: {size} magic: {header.magic} compresscodec: {codec_name(header.compression)} "
            f"crc: {header.crc} isvalid: {str(valid).lower()}"
        )
        if valid and header.magic == batch.CURRENT_MAGIC and header.records_count < header.last_offset_delta + 1:
            kept = header.records_count
            print(f"gap: {header.last_offset_delta + 1 - kept} of the batch's {header.last_offset_delta + 1} offsets hold "
                  f"no record (removed by compaction)")
        if options.deep and valid:
            for decoded in decode_batches(data[position : position + size]):
                for record in decoded.records:
                    print(record_line(record, header.base_offset, header.base_sequence, options.print_data))
        position += size


def record_line(record: Record, base_offset: int, base_sequence: int, print_data: bool) -> str:
    """Kafka's deep-iteration line of one record; key and payload with --print-data-log."""
    sequence = -1 if base_sequence < 0 else (base_sequence + record.offset - base_offset) & 0x7FFFFFFF
    line = (
        f"| offset: {record.offset} CreateTime: {record.timestamp} "
        f"keySize: {-1 if record.key is None else len(record.key)} "
        f"valueSize: {-1 if record.value is None else len(record.value)} "
        f"sequence: {sequence} headerKeys: [{','.join(k for k, _ in record.headers)}]"
    )
    return line + (f" key: {_show(record.key)} payload: {_show(record.value)}" if print_data else "")


def _show(data: bytes | None) -> str:
    if data is None:
        return "null"
    return data.decode("utf-8", errors="backslashreplace")


def sanity_check(path: Path, index_class: type[OffsetIndex] | type[TimeIndex]) -> None:
    """The broker's own load-time check of an index (whole entries, increasing, positions within
    the segment); one line either way, like Kafka's."""
    segment = path.with_suffix(".log")
    log_size = segment.stat().st_size if segment.is_file() else 2**31 - 1
    try:
        index_class(str(path), _base_offset(path), max(path.stat().st_size, 12), on_disk=True).ensure_loaded(log_size)
    except CorruptIndexError as exc:
        raise CommandError(f"{path} failed sanity check: {exc}") from exc
    print(f"{path} passed sanity check.")


def dump_offset_index(path: Path, options: Options) -> None:
    if options.sanity_only:
        return sanity_check(path, OffsetIndex)
    base = _base_offset(path)
    for relative, position in read_offset_index_entries(path):
        print(f"offset: {base + relative} position: {position}")


def dump_time_index(path: Path, options: Options) -> None:
    if options.sanity_only:
        return sanity_check(path, TimeIndex)
    base = _base_offset(path)
    for timestamp, relative in read_time_index_entries(path):
        print(f"timestamp: {timestamp} offset: {base + relative}")


DUMPERS: dict[str, Callable[[Path, Options], None]] = {
    ".log": dump_segment,
    ".index": dump_offset_index,
    ".timeindex": dump_time_index,
}
