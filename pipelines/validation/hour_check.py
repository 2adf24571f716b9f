"""The Great Expectations check of one event hour before it is declared complete: the rows of the
hour's directory against the audit's count of the hour, at the cluster, and exactly once.

Expected rows = what the audit counted of the hour, less the undecodable records (``_errors/``),
the duplicate copies deduplication dropped, and the late records the policy kept out of the hour
(``separate``, ``drop``). The result goes next to the declaration:
``<topic>/_completeness/<hour>.validation.json``.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from pipelines.errors import LoadError
from pipelines.fs import read_parquet
from pipelines.validation.runner import run_checks

if TYPE_CHECKING:
    from pipelines.completeness import Completeness, HourStatus
    from pipelines.fs import WarehouseFS

COLUMNS = ["topic", "partition", "offset"]


class HourValidationFailed(LoadError):
    """An hour's rows do not match its audit: it is not declared complete."""


def expected_rows(st: HourStatus, policy: str) -> int:
    """The rows the hour's directory must hold, by the audit's count."""
    moved = 0 if policy == "reopen" else st.late
    return int(st.audited if st.audited is not None else st.read) - st.errors - st.duplicates - moved


def hour_specs(st: HourStatus, policy: str) -> list[dict]:
    """The hour's expectations, as ``pipelines.validation.suite.build_suite`` takes them."""
    expected = expected_rows(st, policy)
    return [
        {"type": "expect_table_row_count_to_equal", "kwargs": {"value": expected},
         "check": f"the hour holds the audit's {st.audited} record(s) less {st.errors} undecodable, "
                  f"{st.duplicates} duplicate and {0 if policy == 'reopen' else st.late} late moved: {expected} rows"},
        {"type": "expect_compound_columns_to_be_unique", "kwargs": {"column_list": COLUMNS},
         "check": "every (topic, partition, offset) once: no record written twice"},
        {"type": "expect_column_values_to_be_in_set", "kwargs": {"column": "topic", "value_set": [st.topic]},
         "check": f"every row belongs to topic {st.topic}"},
    ] + [{"type": "expect_table_row_count_to_equal", "kwargs": {"value": n, "where": [("partition", p)]},
          "check": f"partition {p}: the manifests' {n} row(s) of the hour"} for p, n in sorted(st.partitions.items())]


def validate_hour(fs: WarehouseFS, comp: Completeness, st: HourStatus) -> dict:
    """Check the hour's rows; returns a summary (stored beside the declaration) or raises HourValidationFailed."""
    import pandas as pd
    import pyarrow as pa

    files = comp.hour_files(st.hour)
    tables = [read_parquet(fs, f).select(COLUMNS) for f in files]
    table = pa.concat_tables(tables) if tables else pa.table({c: pa.array([], t) for c, t in
                                                            zip(COLUMNS, (pa.string(), pa.int32(), pa.int64()))})
    frame = table.to_pandas(types_mapper=pd.ArrowDtype)
    _, checks = run_checks(f"logbus.{st.topic}.hours", st.topic, st.name, hour_specs(st, comp.spec.late_data.policy), frame)
    failed = [c for c in checks if not c["success"]]
    summary: dict = {"hour": st.name, "success": not failed, "rows": len(frame), "files": len(files), "evaluated": len(checks),
                     "failed_checks": [f"{c['check']} (observed {c['observed']})" for c in failed]}
    fs.write_bytes(f"{comp.topic}/_completeness/{st.name}.validation.json",
                   json.dumps(summary | {"checks": checks}, indent=1, sort_keys=True, default=str).encode())
    if failed:
        raise HourValidationFailed(f"{st.topic} hour {st.name} is not complete: " + "; ".join(summary["failed_checks"]))
    return summary


__all__ = ["validate_hour", "hour_specs", "expected_rows", "HourValidationFailed"]
