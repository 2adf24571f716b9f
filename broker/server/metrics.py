"""Prometheus metrics of one broker, served on ``metrics.port`` (0, the default: off).

No client library: the text exposition format (version 0.0.4) is written with
broker.metrics_text (shared with the mirror-maker) and served with twisted.web on the broker's
reactor. Counters and histograms are updated on the reactor thread
by the dispatcher (requests and their latency), the replica manager (bytes and records in, as a
leader appends them: Kafka's BytesInPerSec and MessagesInPerSec) and the fetch handler (bytes
and records out); gauges (purgatory sizes,
under-replicated partitions, log sizes, the active controller) are read from the broker at
scrape time.

Bytes and records out are counted by the fetch handler on the response it sends, without
reading the data sent zero-copy: bytes are the file slices' sizes, records are offsets, from
each fetch offset to the end of the last whole batch (found from the log's index and batch
headers). Follower fetches are counted apart, as Kafka's ReplicationBytesOutPerSec. ISR
shrinks and expansions are counted by the leader when its ISR change is recorded.
"""

from __future__ import annotations

import time
from collections import defaultdict
from typing import TYPE_CHECKING, Any

from twisted.internet import defer
from twisted.web import resource, server

from broker.metrics_text import CONTENT_TYPE as _CONTENT_TYPE
from broker.metrics_text import LATENCY_BUCKETS, Exposition, Histogram
from broker.protocol.messages import ApiKey
from broker.storage.cleaner_manager import LogCleanerManager

if TYPE_CHECKING:
    from broker.server.broker import Broker

__all__ = ["LATENCY_BUCKETS", "CONTENT_TYPE", "BrokerMetrics", "Histogram", "listen_metrics"]

CONTENT_TYPE = _CONTENT_TYPE.encode()



class BrokerMetrics:
    """The broker's counters and histograms, and the text rendering of all its metrics."""

    def __init__(self, broker: Broker | None = None) -> None:
        self.broker = broker
        self.requests: dict[str, int] = defaultdict(int)
        self.latency: dict[str, Histogram] = defaultdict(Histogram)
        self.bytes_in: dict[str, int] = defaultdict(int)
        self.records_in: dict[str, int] = defaultdict(int)
        self.bytes_out: dict[str, int] = defaultdict(int)
        self.records_out: dict[str, int] = defaultdict(int)
        self.replication_bytes_out: dict[str, int] = defaultdict(int)
        self.isr_shrinks = 0
        self.isr_expands = 0
        # message format conversions for old clients (Kafka's Produce/FetchMessageConversionsPerSec)
        self.produce_conversions: dict[str, int] = defaultdict(int)
        self.fetch_conversions: dict[str, int] = defaultdict(int)
        self.conversion_seconds: dict[str, float] = defaultdict(float)

    # -- updates (reactor thread) -----------------------------------------------------------

    def request_started(self) -> float:
        """The start of a request's latency, for request_answered."""
        return time.monotonic()

    def appended(self, topic: str, size: int, records: int) -> None:
        """A leader appended ``records`` records (``size`` bytes) of a produce request to ``topic``."""
        self.bytes_in[topic] += size
        self.records_in[topic] += records

    def request_done(self, api_key: int, started: float, response: Any) -> None:
        name = _API_NAMES.get(api_key) or str(api_key)
        self.requests[name] += 1
        self.latency[name].observe(time.monotonic() - started)

    def fetched(self, topic: str, size: int, records: int, follower: bool) -> None:
        """A fetch response carries ``size`` bytes of ``topic`` (``records`` past the fetch offset)."""
        if follower:
            self.replication_bytes_out[topic] += size
        else:
            self.bytes_out[topic] += size
            self.records_out[topic] += records

    def converted(self, topic: str, records: int, seconds: float, produce: bool) -> None:
        """``records`` of ``topic`` were converted between message formats for an old client:
        up to v2 on produce, down to v0/v1 on fetch, taking ``seconds``."""
        (self.produce_conversions if produce else self.fetch_conversions)[topic] += records
        self.conversion_seconds["produce" if produce else "fetch"] += seconds

    def isr_changed(self, old: list[int], new: list[int]) -> None:
        """A leader recorded a new ISR: one shrink or one expansion, whatever the count of replicas."""
        if len(new) < len(old):
            self.isr_shrinks += 1
        elif len(new) > len(old):
            self.isr_expands += 1

    def request_answered(self, api_key: int, started: float, result: Any) -> Any:
        """Count one handled request (``started`` from request_started); ``result`` may be a
        Deferred (answered later: long-poll fetch, acks=all produce). Returns ``result``."""
        if type(result) is not dict and isinstance(result, defer.Deferred):  # an ABC's isinstance costs more

            def done(response: Any) -> Any:
                self.request_done(api_key, started, response)
                return response

            return result.addCallback(done)
        self.request_done(api_key, started, result)
        return result

    # -- rendering --------------------------------------------------------------------------

    def render(self) -> str:
        out = Exposition()
        out.counter("logbus_requests_total", "Requests answered, per API.",
                    (([("api", api)], n) for api, n in sorted(self.requests.items())))
        out.histogram("logbus_request_latency_seconds",
                      "Time from a decoded request to its response being ready, per API.",
                      (([("api", api)], h) for api, h in sorted(self.latency.items())))
        for name, table, help_text in (
            ("logbus_topic_bytes_in_total", self.bytes_in, "Record bytes appended from produce requests, per topic."),
            ("logbus_topic_records_in_total", self.records_in, "Records appended from produce requests, per topic."),
            ("logbus_topic_bytes_out_total", self.bytes_out,
             "Record bytes sent in fetch responses to consumers (not followers), per topic."),
            ("logbus_topic_records_out_total", self.records_out,
             "Records sent to consumers, per topic, counted by offsets: from each fetch offset to the end of the last "
             "whole batch in the response (found from the log index, the data is not read)."),
            ("logbus_topic_replication_bytes_out_total", self.replication_bytes_out,
             "Record bytes sent in fetch responses to follower replicas, per topic."),
            ("logbus_topic_produce_message_conversions_total", self.produce_conversions,
             "Records of Produce v0-2 (message format v0/v1) converted up to record batch v2, per topic."),
            ("logbus_topic_fetch_message_conversions_total", self.fetch_conversions,
             "Records converted down to message format v0/v1 for Fetch v0-3, per topic."),
        ):
            out.counter(name, help_text, (([("topic", t)], n) for t, n in sorted(table.items())))
        out.counter("logbus_message_conversion_seconds_total", "Time spent converting message formats, per request type.",
                    (([("request", r)], n) for r, n in sorted(self.conversion_seconds.items())))
        out.counter("logbus_isr_shrinks_total", "ISR shrinks recorded by this broker as leader (one per change).",
                    [((), self.isr_shrinks)])
        out.counter("logbus_isr_expands_total", "ISR expansions recorded by this broker as leader (one per change).",
                    [((), self.isr_expands)])
        broker = self.broker
        if broker is not None:
            self._render_broker(broker, out)
        return out.text()

    @staticmethod
    def _render_broker(broker: Broker, out: Exposition) -> None:
        replicas = broker.replicas if broker.has_replicas else None
        parked = {"fetch": 0, "replica_fetch": 0, "produce": 0}
        if replicas is not None:
            parked = {
                "fetch": len(replicas.fetches),
                "replica_fetch": len(replicas.replica_fetches),
                "produce": len(replicas.produces),
            }
        out.gauge("logbus_purgatory_size", "Requests parked until they can be answered.",
                  [([("purgatory", name)], n) for name, n in parked.items()])
        partitions = list(replicas.partitions.items()) if replicas is not None else []
        led = [p for _, p in partitions if p.is_leader]
        out.gauge("logbus_under_replicated_partitions", "Partitions led here whose ISR is smaller than their replica list.",
                  [((), sum(1 for p in led if len(p.isr) < len(p.replicas)))])
        out.gauge("logbus_leader_partitions", "Partitions led by this broker.", [((), len(led))])
        controller = broker.controller
        out.gauge("logbus_active_controller", "1 when this broker is the controller.",
                  [((), 1 if controller is not None and controller.active else 0)])
        sizes = []
        for (topic, partition), p in sorted(partitions):
            log = getattr(p, "log", None)
            if log is not None:
                sizes.append(([("topic", topic), ("partition", partition)], log.size_bytes))
        out.gauge("logbus_log_size_bytes", "Bytes of each partition log on disk.", sizes)
        if broker.log_cleaner is not None:
            _render_cleaner(broker.log_cleaner.manager, out)


def _render_cleaner(manager: LogCleanerManager, out: Exposition) -> None:
    """The log cleaner's numbers: totals, and per compacted log its dirty ratio and cleaner lag."""
    totals = manager.totals
    out.counter("logbus_log_cleaner_bytes_read_total", "Bytes of log read by cleaner passes.", [((), totals.bytes_read)])
    out.counter("logbus_log_cleaner_bytes_written_total", "Bytes of cleaned segments written.", [((), totals.bytes_written)])
    out.counter("logbus_log_cleaner_records_removed_total", "Records compaction removed.", [((), totals.records_removed)])
    out.counter("logbus_log_cleaner_passes_total", "Cleaner passes finished.", [((), totals.passes)])
    out.counter("logbus_log_cleaner_failures_total", "Logs the cleaner gave up on (left alone until restart).",
                [((), totals.failures)])
    out.gauge("logbus_log_cleaner_last_run_timestamp_ms", "Wall-clock end of the last cleaner pass (-1: none yet).",
              [((), totals.last_run_ms)])
    out.gauge("logbus_log_cleaner_last_pass_seconds", "Duration of the last cleaner pass.", [((), totals.last_pass_seconds)])
    ratios, lags = [], []
    for plog, ratio, lag in manager.log_gauges():
        labels = [("topic", plog.topic), ("partition", plog.partition)]
        ratios.append((labels, ratio))
        lags.append((labels, lag))
    out.gauge("logbus_log_cleaner_dirty_ratio", "Dirty share of each compacted log's cleanable bytes.", ratios)
    out.gauge("logbus_log_cleaner_lag_ms", "Age of the oldest uncleaned record of each compacted log "
              "(0 when all its inactive segments are clean).", lags)


_API_NAMES = {int(key): key.name for key in ApiKey}


class MetricsResource(resource.Resource):
    """GET /metrics (and /) -> the text exposition."""

    isLeaf = True

    def __init__(self, metrics: BrokerMetrics) -> None:
        super().__init__()
        self.metrics = metrics

    def render_GET(self, request: server.Request) -> bytes:
        if request.path not in (b"/", b"/metrics"):
            request.setResponseCode(404)
            return b"not found: try /metrics\n"
        request.setHeader(b"Content-Type", CONTENT_TYPE)
        return self.metrics.render().encode("utf-8")


def listen_metrics(reactor: Any, metrics: BrokerMetrics, port: int, interface: str = "") -> Any:
    """Serve ``metrics`` on ``port``; returns the listening port."""
    site = server.Site(MetricsResource(metrics))
    site.noisy = False
    site.displayTracebacks = False
    return reactor.listenTCP(port, site, interface=interface)
