"""What one load task reports: ``TaskStats``, filled in by the task (in a Spark executor),
pickled back to the driver, saved as JSON between Airflow's load and commit steps, and read
by the manifest, the CLI, the DAG tasks and the benchmark."""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Any

LOADED, EMPTY, TOPIC_DELETED = "loaded", "empty", "topic_deleted"


@dataclass(frozen=True)
class TaskStats:
    """The stats of one range [start, end) of one topic-partition."""

    index: int                      # the task's position in its run (-1: rebuilt from committed files)
    topic: str
    partition: int
    start: int
    end: int
    count: int = 0                  # records written
    errors: int = 0                 # undecodable values (written to _errors/)
    bytes: int = 0                  # bytes of the data files
    files: tuple[dict, ...] = ()    # {"path", "rows", "bytes"} of each data file
    min_ts: int | None = None       # record timestamp bounds (ms)
    max_ts: int | None = None
    gaps: tuple[tuple[int, int], ...] = ()  # offsets skipped by retention (out_of_range: earliest)
    duplicates_dropped: int = 0     # records not written: their origin was written already (pipelines.origin_index)
    duplicate_offsets: tuple[tuple[int, int], ...] = ()  # their offsets, as runs [a, b)
    origins: dict | None = None     # the partition's origin index after this range (None: unchanged, or no deduplication)
    hours: dict[str, dict[str, int]] | None = None  # per event hour: read, rows, late, errors, duplicates (pipelines.hours)
    late_offsets: tuple[tuple[int, int], ...] = ()  # late records not in their hour (late_data separate/drop), as runs [a, b)
    late_files: tuple[dict, ...] = ()  # {"path", "rows", "bytes"} of the range's _late/ files (late_data separate)
    status: str = LOADED            # loaded, empty or topic_deleted
    fetch_s: float = 0.0            # time waiting for fetched chunks
    decode_s: float = 0.0           # time decoding them (and handing them to the writer)
    write_s: float = 0.0            # time committing the files
    seconds: float | None = None    # the whole task
    leader_changes: int = 0
    chunks_vectorised: int = 0      # chunks the columnar decoder took whole
    chunks_per_record: int = 0      # chunks decoded record by record
    attempt: int = 0                # Spark's attempt number of the task that reported
    rebuilt: bool = False           # taken from the footers of committed files, not loaded

    def to_json(self) -> dict[str, Any]:
        """A JSON-able dict (``from_json`` reads it back)."""
        return asdict(self)

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> TaskStats:
        known = {f.name for f in fields(cls)}
        values = {k: v for k, v in doc.items() if k in known}
        values["files"] = tuple(values.get("files", ()))
        values["gaps"] = tuple(tuple(g) for g in values.get("gaps", ()))
        values["duplicate_offsets"] = tuple(tuple(g) for g in values.get("duplicate_offsets", ()))
        values["late_offsets"] = tuple(tuple(g) for g in values.get("late_offsets", ()))
        values["late_files"] = tuple(values.get("late_files", ()))
        values.setdefault("index", -1)
        return cls(**values)

