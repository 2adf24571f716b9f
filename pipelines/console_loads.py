"""What `logbus console --loader-config` shows of the loader: every run of the configured topics
(committed or pending) with its ranges and counts, its validation result, and its Data Docs page
read from the warehouse. Read-only: nothing here plans, loads or commits."""

from __future__ import annotations

from pipelines.config import load_config
from pipelines.loader import Loader
from pipelines.validation.runner import stored_docs_page, stored_validation


class WarehouseLoads:
    """The console's view of one loader config's warehouse (``broker/console`` calls these)."""

    def __init__(self, config_path: str) -> None:
        self.config = load_config(config_path)

    def runs(self) -> list[dict]:
        """``logbus load history``'s rows, newest first, each with ``validation`` (None: not validated)."""
        with Loader(self.config) as loader:
            rows = loader.history()
            for row in rows:
                row["validation"] = stored_validation(loader.fs, row["topic"], row["run_id"])
        return sorted(rows, key=lambda r: (r["run_id"], r["topic"]), reverse=True)

    def docs_page(self, topic: str, run_id: str) -> bytes | None:
        """The run's Data Docs page, None when it has none (or names are not a run's)."""
        if "/" in topic or "/" in run_id or topic.startswith(".") or run_id.startswith("."):
            return None
        with Loader(self.config) as loader:
            return stored_docs_page(loader.fs, topic, run_id)

    @property
    def warehouse(self) -> str:
        return self.config.warehouse
