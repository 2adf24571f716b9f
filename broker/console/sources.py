"""What the console shows beyond the cluster, given by whoever starts it (``broker/tools/console.py``
builds them from ``pipelines`` and ``mirror``, so this package imports neither): the loader's runs
and the mirrors' status. Plain dicts, read anew for each page."""

from __future__ import annotations

from typing import Any, Protocol


class LoadsSource(Protocol):
    """The loader's warehouse (``pipelines.console_loads.WarehouseLoads``)."""

    warehouse: str

    def runs(self) -> list[dict[str, Any]]:
        """Every run, newest first: run_id, topic, kind, status, partitions, ranges, records, errors,
        duplicates, validation (None, or success/evaluated/failed/rows)."""
        ...

    def docs_page(self, topic: str, run_id: str) -> bytes | None:
        """The run's Data Docs page (a self-contained HTML file), None when there is none."""
        ...


class MirrorsSource(Protocol):
    """Running mirrors' status files (``mirror.stats.MirrorStatusFiles``)."""

    def statuses(self) -> list[dict[str, Any]]:
        """One per file: pid, state, age_s, target, topics (source, topic, records, records_per_sec,
        lag), ages (source, p50, p99, batches), totals; or file and error."""
        ...
