"""The mirror-maker's Prometheus endpoint: ``GET /metrics`` on ``--metrics.port`` (0, the default: off).

Counters (records copied, source bytes, commits, send failures, loop drops, raw-path batches)
are read from the running MirrorMaker at scrape time. Records/s and lag are those of the last
stats interval (``--stats.interval.ms``), the numbers of the log line and the status file:
lag needs a ListOffsets round trip per partition, too dear for every scrape. The text comes
from broker.metrics_text (shared with the broker); the server is the standard library's
ThreadingHTTPServer in a daemon thread, as the mirror is thread-based and has no reactor.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any

from broker.config import ConfigError
from broker.metrics_text import CONTENT_TYPE, Exposition

if TYPE_CHECKING:
    from mirror.maker import MirrorMaker

log = logging.getLogger("mirror.metrics")


class MirrorMetrics:
    """Renders one MirrorMaker's numbers, labelled by source (name) and topic where they apply."""

    def __init__(self, maker: MirrorMaker) -> None:
        self.maker = maker

    def render(self) -> str:
        m = self.maker
        out = Exposition()

        def per_topic(table: dict[tuple[str, str], Any]) -> list:
            return [([("source", s), ("topic", t)], v) for (s, t), v in sorted(table.items())]

        out.gauge("logbus_mirror_up", "1 while the mirror-maker runs (the endpoint closes when it stops).", [((), 1)])
        out.gauge("logbus_mirror_source_info",
                  "1 per source cluster: the name used in the source label, and the cluster id.",
                  [([("source", s.name), ("cluster_id", s.cluster_id)], 1) for s in m.sources])
        out.counter("logbus_mirror_records_copied_total",
                    "Records sent to the aggregate cluster, per source and source topic.", per_topic(m.record_counts()))
        out.counter("logbus_mirror_source_bytes_total",
                    "Bytes of source record batches taken for copying, as fetched (compressed if the source "
                    "compressed them; records dropped by loop prevention included), per source and topic.",
                    per_topic(m.byte_counts()))
        rates: dict[tuple[str, str], float] = {}
        lags: dict[tuple[str, str], int] = {}
        for source, topics in ((m.last_status or {}).get("sources") or {}).items():
            for topic, row in topics.items():
                rates[(source, topic)] = float(row.get("records_per_sec") or 0.0)
                if row.get("lag") is not None:
                    lags[(source, topic)] = row["lag"]
        out.gauge("logbus_mirror_records_per_second",
                  "Records copied per second over the last stats interval, per source and topic.", per_topic(rates))
        out.gauge("logbus_mirror_lag_records",
                  "Records behind the source partitions' high watermarks at the last stats interval, summed per "
                  "source and topic (absent while unknown).", per_topic(lags))
        out.counter("logbus_mirror_commits_total",
                    "Flush-then-commit rounds done (each covers every source).", [((), m.commits)])
        if m.last_commit_time is not None:
            out.gauge("logbus_mirror_last_commit_timestamp_seconds", "Unix time of the last commit round.",
                      [((), m.last_commit_time)])
        out.counter("logbus_mirror_send_failures_total", "Sends that failed for good (after the producer's retries).",
                    [((), m.send_failures)])
        out.counter("logbus_mirror_records_skipped_loop_total",
                    "Records not copied because their origin chain names the aggregate cluster.", [((), m.skipped_loop)])
        out.counter("logbus_mirror_raw_batches_total",
                    "Target batches sent by the raw path (source batches rewritten without decoding).",
                    [((), m.raw_batches)])
        out.counter("logbus_mirror_raw_records_total", "Records sent by the raw path.", [((), m.raw_records)])
        out.histogram("logbus_mirror_record_age_seconds",
                      "Age of copies when the aggregate cluster acknowledges them (record timestamp to produce "
                      "ack), per source; one observation per target batch, its first record.",
                      [([("source", s)], h) for s, h in sorted(m.ages.histograms.items())])
        return out.text()


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        if self.path.split("?", 1)[0] not in ("/", "/metrics"):
            self._reply(404, "text/plain; charset=utf-8", b"not found: try /metrics\n")
            return
        try:
            body = self.server.render().encode("utf-8")
        except Exception as exc:  # noqa: BLE001 - a scrape must not kill the server thread
            log.warning("rendering metrics: %s", exc)
            self._reply(500, "text/plain; charset=utf-8", f"error: {exc}\n".encode())
            return
        self._reply(200, CONTENT_TYPE, body)

    def _reply(self, code: int, content_type: str, body: bytes) -> None:
        self.send_response(code)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - http.server's signature
        log.debug("%s %s", self.address_string(), format % args)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    render: Callable[[], str]


class MetricsServer:
    """``render()`` served at ``http://host:port/metrics`` from a daemon thread until ``close()``."""

    def __init__(self, render: Callable[[], str], host: str, port: int) -> None:
        try:
            self._server = _Server((host, port), _Handler)
        except OSError as exc:
            raise ConfigError(f"--metrics.port {port}: cannot listen on {host}: {exc}", "metrics.port") from None
        self._server.render = render
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.2},
                                        name="mirror-metrics", daemon=True)
        self._thread.start()
        log.info("metrics at http://%s:%d/metrics", host, self.port)

    @property
    def port(self) -> int:
        """The bound port."""
        return self._server.server_address[1]

    def close(self) -> None:
        """Stop serving and release the port (waits for the serving thread)."""
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)
