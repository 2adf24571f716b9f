"""Progress of a run: tasks send small UDP datagrams to the driver, which prints one line per
topic-partition as it moves, and a summary table at the end.

UDP because losing a progress message is harmless and a task must never wait on its
reporter; on a real cluster the executors reach the driver's host as Spark's own RPC does.
"""

from __future__ import annotations

import json
import socket
import sys
import threading
import time
from typing import TextIO

from pipelines.task import RangeTask


class ProgressServer:
    """Listens for task progress; ``render`` prints per-partition lines at most every ``interval`` s."""

    def __init__(self, tasks: list[RangeTask], out: TextIO | None = sys.stderr, host: str = "127.0.0.1",
                 interval: float = 2.0) -> None:
        self.tasks = {t.index: t for t in tasks}
        self.out = out
        self.interval = interval
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind((host, 0))
        self.sock.settimeout(0.2)
        self.address = self.sock.getsockname()
        self.state: dict[int, dict] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="logbus-load-progress", daemon=True)
        self._last_print = 0.0
        self._printed: dict[tuple[str, int], str] = {}

    def __enter__(self) -> ProgressServer:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(timeout=2)
        self.sock.close()
        self.render(force=True)

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                data, _ = self.sock.recvfrom(65536)
            except (TimeoutError, OSError):
                self.render()
                continue
            try:
                msg = json.loads(data)
                self.state[int(msg["i"])] = msg
            except (ValueError, KeyError, TypeError):
                continue
            self.render()

    def partition_lines(self) -> dict[tuple[str, int], str]:
        per: dict[tuple[str, int], list] = {}
        for t in self.tasks.values():
            per.setdefault((t.topic, t.partition), []).append(t)
        lines = {}
        for (topic, partition), ts in sorted(per.items()):
            total = sum(t.end - t.start for t in ts)
            done = 0
            rows = 0
            finished = 0
            for t in ts:
                st = self.state.get(t.index)
                if st:
                    done += max(0, min(st["o"], t.end) - t.start)
                    rows += st["n"]
                    finished += bool(st.get("done"))
            pct = 100.0 * done / total if total else 100.0
            tag = "done" if finished == len(ts) else f"{pct:5.1f}%"
            lines[(topic, partition)] = f"  {topic}[{partition}] {done:,}/{total:,} offsets, {rows:,} records {tag}"
        return lines

    def render(self, force: bool = False) -> None:
        if self.out is None:
            return
        now = time.monotonic()
        if not force and now - self._last_print < self.interval:
            return
        self._last_print = now
        for key, line in self.partition_lines().items():
            if self._printed.get(key) != line:
                self._printed[key] = line
                print(line, file=self.out, flush=True)


def format_table(rows: list[dict], columns: list[tuple[str, str]]) -> str:
    """A plain text table; ``columns`` are (key, header)."""
    cells = [[h for _, h in columns]] + [[_fmt(r.get(k)) for k, _ in columns] for r in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(columns))]
    lines = []
    for n, row in enumerate(cells):
        lines.append("  ".join(c.rjust(w) if n and _numeric(c) else c.ljust(w) for c, w in zip(row, widths)).rstrip())
        if n == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)


def _numeric(c: str) -> bool:
    return c.replace(",", "").replace(".", "").replace("-", "").isdigit()


def _fmt(v) -> str:
    if v is None:
        return "-"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, int):
        return f"{v:,}"
    if isinstance(v, float):
        return f"{v:,.1f}"
    return str(v)


def fmt_ts(ms: int | None) -> str:
    if ms is None:
        return "-"
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(ms / 1000))
