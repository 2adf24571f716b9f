"""Rate and lag per source and topic: a log line per interval and a JSON status file.

``logbus mirror-maker --status [--status.file F]`` prints the file a running mirror writes
(atomically, every ``stats.interval.ms``). Lag is the source partition's log end offset (asked
of its leader with ListOffsets; the leader found in the source's ZooKeeper, or by Metadata for a
``bootstrap.servers`` source) minus the next offset the mirror will copy, summed per topic.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import time
from collections.abc import Callable
from typing import Any

from broker.client.security import PLAINTEXT, ClientSecurity
from broker.client.simple_consumer import SimpleConsumer
from broker.metrics_text import Histogram

log = logging.getLogger("mirror.stats")


class LagProbe:
    """Log end offsets of a source's partitions, from their leaders (found in the source's ZooKeeper)."""

    def __init__(self, zk, security: ClientSecurity = PLAINTEXT) -> None:
        self.zk = zk
        self.security = security
        self._consumers: dict[tuple[str, int], SimpleConsumer] = {}

    def end_offsets(self, partitions: list[tuple[str, int]]) -> dict[tuple[str, int], int]:
        result: dict[tuple[str, int], int] = {}
        try:
            leaders = self._leaders(partitions)
        except Exception:  # noqa: BLE001 - a source that is away has unknown lag
            self._drop_all()
            return result
        for (topic, partition), address in leaders.items():
            try:
                consumer = self._consumers.get(address)
                if consumer is None:
                    consumer = self._consumers[address] = SimpleConsumer(address[0], address[1], timeout=5.0,
                                                                                         security=self.security)
                result[(topic, partition)] = consumer.latest_offset(topic, partition)
            except Exception:  # noqa: BLE001 - a leader that is away: unknown lag
                self._drop_all()
        return result

    def _leaders(self, partitions: list[tuple[str, int]]) -> dict[tuple[str, int], tuple[str, int]]:
        """(host, port) of each partition's leader; partitions without one are left out."""
        out: dict[tuple[str, int], tuple[str, int]] = {}
        for topic, partition in partitions:
            try:
                state = self.zk.partition_state(topic, partition)
                if state is None or state.leader < 0:
                    continue
                info = self.zk.broker_info(state.leader)
                endpoint = info.endpoint_for(self.security.protocol) if info else None
                if endpoint is not None:
                    out[(topic, partition)] = (endpoint.host or "127.0.0.1", endpoint.port)
            except Exception:  # noqa: BLE001 - ZooKeeper away: unknown lag
                continue
        return out

    def _drop_all(self) -> None:
        for consumer in self._consumers.values():
            with contextlib.suppress(Exception):
                consumer.close()
        self._consumers.clear()

    def close(self) -> None:
        self._drop_all()


class MetadataLagProbe(LagProbe):
    """LagProbe for a source reached by ``bootstrap.servers``: leaders from a Metadata request."""

    def __init__(self, bootstrap: str, security: ClientSecurity = PLAINTEXT) -> None:
        super().__init__(None, security)
        self.bootstrap = [SimpleConsumer.from_address(a, timeout=5.0, security=security)
                          for a in bootstrap.split(",") if a.strip()]

    def _leaders(self, partitions: list[tuple[str, int]]) -> dict[tuple[str, int], tuple[str, int]]:
        topics = sorted({t for t, _ in partitions})
        if not topics:
            return {}
        answer = None
        for client in self.bootstrap:
            try:
                answer = client.topic_metadata(topics)
                break
            except Exception:  # noqa: BLE001 - try the next bootstrap broker
                client.close()
        if answer is None:
            return {}
        brokers = {b["node_id"]: (b["host"], b["port"]) for b in answer["brokers"]}
        leaders = {(t["name"], p["partition_index"]): brokers.get(p["leader_id"])
                   for t in answer["topics"] for p in t["partitions"]}
        return {tp: leaders[tp] for tp in partitions if leaders.get(tp) is not None}  # type: ignore[misc]

    def close(self) -> None:
        super().close()
        for client in self.bootstrap:
            client.close()


#: Record age buckets (s): from a fast local copy to a source that was down for a day.
AGE_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0, 900.0, 3600.0, 21600.0,
               86400.0)


class RecordAges:
    """Per source, how old copies are when the aggregate cluster acknowledges them: record
    timestamp -> produce acknowledgement, once per target batch (its first record's timestamp),
    so the hot path pays nothing per record. Observed on the producer's I/O thread."""

    def __init__(self) -> None:
        self.histograms: dict[str, Histogram] = {}

    def callback(self, source: str, on_send: Callable[[Any, BaseException | None], None]):
        """A producer callback for ``source``'s sends: observes the age, then calls ``on_send``."""
        histogram = self.histograms.setdefault(source, Histogram(AGE_BUCKETS))

        def done(metadata: Any, exc: BaseException | None) -> None:
            if exc is None and metadata is not None and metadata.timestamp >= 0:
                histogram.observe(max(time.time() - metadata.timestamp / 1000.0, 0.0))
            on_send(metadata, exc)

        return done

    def summary(self) -> dict[str, dict[str, Any]]:
        """Per source: batches observed and the bucket bounds holding the median and the 99th
        percentile (``"> <last bound>"`` past the last bucket)."""
        return {source: {"batches": h.count, "p50_s": quantile(h, 0.5), "p99_s": quantile(h, 0.99)}
                for source, h in sorted(self.histograms.items())}


def quantile(histogram: Histogram, q: float) -> float | str | None:
    """The upper bound of the bucket holding quantile ``q``; None: nothing observed."""
    if not histogram.count:
        return None
    rank, seen = q * histogram.count, 0
    for bound, count in zip(histogram.bounds, histogram.counts):
        seen += count
        if seen >= rank:
            return bound
    return f"> {histogram.bounds[-1]:g}"


class Reporter:
    """Turns counters and positions into rates and lag; logs them and writes the status file."""

    def __init__(self, status_file: str | None) -> None:
        self.status_file = status_file
        self._last_counts: dict[tuple[str, str], int] = {}
        self._last_time = time.monotonic()
        self.started = time.time()

    def report(self, counts: dict[tuple[str, str], int], lags: dict[tuple[str, str], int | None],
               extra: dict[str, Any]) -> dict[str, Any]:
        now = time.monotonic()
        elapsed = max(now - self._last_time, 1e-6)
        sources: dict[str, dict[str, Any]] = {}
        parts = []
        for key in sorted(set(counts) | set(lags)):
            source, topic = key
            total = counts.get(key, 0)
            rate = (total - self._last_counts.get(key, 0)) / elapsed
            lag = lags.get(key)
            sources.setdefault(source, {})[topic] = {"records": total, "records_per_sec": round(rate, 1), "lag": lag}
            parts.append(f"{source}/{topic} {rate:.0f} rec/s lag {'?' if lag is None else lag}")
        self._last_counts = dict(counts)
        self._last_time = now
        log.info("mirror: %s", "; ".join(parts) if parts else "no topics yet")
        status = {"pid": os.getpid(), "time": time.time(), "started": self.started, "sources": sources, **extra}
        if self.status_file:
            try:
                tmp = f"{self.status_file}.tmp{os.getpid()}"
                with open(tmp, "w") as f:
                    json.dump(status, f, indent=1, sort_keys=True)
                os.replace(tmp, self.status_file)
            except OSError as exc:
                log.warning("cannot write the status file %s: %s", self.status_file, exc)
        return status


#: The status file's totals shown after its per-topic rows.
STATUS_TOTALS = ("records_copied", "records_skipped_loop", "commits", "last_commit_age_s", "error")


def status_view(status: dict[str, Any], now: float | None = None) -> dict[str, Any]:
    """The status file as plain rows: the header facts, one row per (source, topic), the record
    ages per source, the totals. What `--status` prints and `logbus console --mirror-status` shows."""
    return {
        "pid": status.get("pid"), "state": status.get("state", "?"),
        "age_s": round((time.time() if now is None else now) - status.get("time", 0)),
        "target": status.get("target_cluster_id", "?"),
        "topics": [{"source": source, "topic": topic, "records": row.get("records", 0),
                    "records_per_sec": row.get("records_per_sec", 0), "lag": row.get("lag")}
                   for source, topics in sorted(status.get("sources", {}).items()) for topic, row in sorted(topics.items())],
        "ages": [{"source": source, "p50": _bound(age["p50_s"]), "p99": _bound(age["p99_s"]), "batches": age["batches"]}
                 for source, age in sorted((status.get("record_age") or {}).items()) if age.get("batches")],
        "totals": {key: status[key] for key in STATUS_TOTALS if status.get(key) is not None},
    }


def read_status(path: str) -> dict[str, Any]:
    """A mirror's status file (``--status.file``); OSError or ValueError when it cannot be read."""
    with open(path) as f:
        status = json.load(f)
    if not isinstance(status, dict):
        raise ValueError(f"{path} is not a mirror-maker status file")
    return status


def format_status(status: dict[str, Any]) -> str:
    """The status file as a table for `--status`."""
    view = status_view(status)
    lines = [
        f"mirror-maker pid {view['pid']}: {view['state']}, status written {view['age_s']} s ago, "
        f"target cluster {view['target']}",
        f"{'SOURCE':<20} {'TOPIC':<30} {'RECORDS':>12} {'REC/S':>10} {'LAG':>10}",
    ]
    for row in view["topics"]:
        lag = row["lag"]
        lines.append(f"{row['source']:<20} {row['topic']:<30} {row['records']:>12} {row['records_per_sec']:>10} "
                     f"{'?' if lag is None else lag:>10}")
    for age in view["ages"]:
        lines.append(f"record age at the aggregate's ack, {age['source']}: p50 {age['p50']} s, "
                     f"p99 {age['p99']} s ({age['batches']} batches)")
    lines += [f"{key}: {value}" for key, value in view["totals"].items()]
    return "\n".join(lines)


class MirrorStatusFiles:
    """What `logbus console --mirror-status FILE ...` shows: each mirror's status file, read anew per page."""

    def __init__(self, paths: list[str]) -> None:
        self.paths = paths

    def statuses(self) -> list[dict[str, Any]]:
        """One ``status_view`` per file (with ``file``), or ``{"file", "error"}`` when it cannot be read."""
        out: list[dict[str, Any]] = []
        for path in self.paths:
            try:
                out.append({"file": path, **status_view(read_status(path))})
            except (OSError, ValueError) as exc:
                out.append({"file": path, "error": f"cannot read {path}: {exc}"})
        return out


def _bound(value: Any) -> str:
    return value if isinstance(value, str) else f"<= {value:g}"
