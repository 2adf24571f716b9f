"""`logbus dump-log FILE...`: print a segment's batches (and with --print-data-log, its
records) in the shape of Kafka's kafka-dump-log tool; .index and .timeindex files too."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path

from broker.protocol.compression import codec_name
from broker.protocol.errors import CorruptRecordError, InvalidRecordError
from broker.protocol.records import decode_batches
from broker.protocol.records import layout as batch
from broker.storage.index import read_offset_index_entries, read_time_index_entries
from broker.tools import CommandError


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("files", nargs="+", metavar="FILE", help=".log, .index or .timeindex files")
    parser.add_argument("--print-data-log", action="store_true", help="print each record's key, value and headers")


def run(args: argparse.Namespace) -> int:
    for name in args.files:
        path = Path(name)
        dump = DUMPERS.get(path.suffix)
        if dump is None:
            raise CommandError(f"{path}: not a .log, .index or .timeindex file")
        if not path.is_file():
            raise CommandError(f"{path}: no such file")
        print(f"Dumping {path}")
        dump(path, args.print_data_log)
    return 0


def _base_offset(path: Path) -> int:
    try:
        return int(path.stem)
    except ValueError as exc:
        raise CommandError(f"{path}: a segment file is named by its 20-digit base offset") from exc


def dump_segment(path: Path, print_data: bool) -> None:
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
        if print_data and valid:
            for decoded in decode_batches(data[position : position + size]):
                for record in decoded.records:
                    headers = ",".join(k for k, _ in record.headers)
                    print(
                        f"| offset: {record.offset} CreateTime: {record.timestamp} "
                        f"keySize: {-1 if record.key is None else len(record.key)} "
                        f"valueSize: {-1 if record.value is None else len(record.value)} "
                        f"headerKeys: [{headers}] key: {_show(record.key)} payload: {_show(record.value)}"
                    )
        position += size


def _show(data: bytes | None) -> str:
    if data is None:
        return "null"
    return data.decode("utf-8", errors="backslashreplace")


def dump_offset_index(path: Path, print_data: bool) -> None:
    base = _base_offset(path)
    for relative, position in read_offset_index_entries(path):
        print(f"offset: {base + relative} position: {position}")


def dump_time_index(path: Path, print_data: bool) -> None:
    base = _base_offset(path)
    for timestamp, relative in read_time_index_entries(path):
        print(f"timestamp: {timestamp} offset: {base + relative}")


DUMPERS: dict[str, Callable[[Path, bool], None]] = {
    ".log": dump_segment,
    ".index": dump_offset_index,
    ".timeindex": dump_time_index,
}
