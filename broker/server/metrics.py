"""Prometheus metrics of one broker, served on ``metrics.port`` (0, the default: off).

No client library: the text exposition format (version 0.0.4) is written here and served with
twisted.web on the broker's reactor. Counters and histograms are updated on the reactor thread
by the dispatcher (requests, bytes and records in and out); gauges (purgatory sizes,
under-replicated partitions, log sizes, the active controller) are read from the broker at
scrape time.
"""

from __future__ import annotations

import bisect
import struct
import time
from collections import defaultdict
from typing import TYPE_CHECKING, Any, Iterable

from twisted.internet import defer
from twisted.web import resource, server

from broker.protocol.messages import ApiKey

if TYPE_CHECKING:
    from broker.server.broker import Broker

#: Request latency buckets (seconds), Prometheus' usual spread from 0.5 ms to 10 s.
LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
CONTENT_TYPE = b"text/plain; version=0.0.4; charset=utf-8"

_BATCH_HEADER = struct.Struct(">qiib")  # base offset, batch length, leader epoch, magic
_V2_RECORD_COUNT_AT = 57


def count_records(data: Any) -> int:
    """Records in a produce payload: v2 batches by their header count, a legacy message set
    by its entries (a compressed wrapper counts as one)."""
    if not data:
        return 0
    view = memoryview(data)
    n, pos, total = 0, 0, len(view)
    while pos + 17 <= total:
        _, length, _, magic = _BATCH_HEADER.unpack_from(view, pos)
        if length <= 0:
            break
        if magic >= 2 and pos + _V2_RECORD_COUNT_AT + 4 <= total:
            n += struct.unpack_from(">i", view, pos + _V2_RECORD_COUNT_AT)[0]
        else:
            n += 1
        pos += 12 + length
    return n


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _labels(pairs: Iterable[tuple[str, Any]]) -> str:
    text = ",".join(f'{k}="{_escape(str(v))}"' for k, v in pairs)
    return "{" + text + "}" if text else ""


def _number(v: float) -> str:
    if isinstance(v, float):
        return repr(v) if v == v and abs(v) != float("inf") else ("+Inf" if v > 0 else "-Inf" if v < 0 else "NaN")
    return str(v)


class Histogram:
    """Cumulative buckets, sum and count of one labelled series."""

    __slots__ = ("counts", "sum", "count")

    def __init__(self) -> None:
        self.counts = [0] * len(LATENCY_BUCKETS)
        self.sum = 0.0
        self.count = 0

    def observe(self, value: float) -> None:
        i = bisect.bisect_left(LATENCY_BUCKETS, value)
        if i < len(self.counts):
            self.counts[i] += 1
        self.sum += value
        self.count += 1


class BrokerMetrics:
    """The broker's counters and histograms, and the text rendering of all its metrics."""

    def __init__(self, broker: "Broker | None" = None) -> None:
        self.broker = broker
        self.requests: dict[str, int] = defaultdict(int)
        self.latency: dict[str, Histogram] = defaultdict(Histogram)
        self.bytes_in: dict[str, int] = defaultdict(int)
        self.records_in: dict[str, int] = defaultdict(int)
        self.bytes_out: dict[str, int] = defaultdict(int)

    # -- updates (reactor thread) -----------------------------------------------------------

    def request_started(self, api_key: int, request: dict) -> float:
        if api_key == ApiKey.PRODUCE:
            for topic in request.get("topic_data", ()):
                for part in topic.get("partition_data", ()):
                    records = part.get("records")
                    self.bytes_in[topic["name"]] += len(records) if records else 0
                    self.records_in[topic["name"]] += count_records(records)
        return time.monotonic()

    def request_done(self, api_key: int, started: float, response: Any) -> None:
        name = _api_name(api_key)
        self.requests[name] += 1
        self.latency[name].observe(time.monotonic() - started)
        if api_key == ApiKey.FETCH and isinstance(response, dict):
            for topic in response.get("responses", ()):
                for part in topic.get("partitions", ()):
                    records = part.get("records")
                    if records:
                        size = records.size if hasattr(records, "size") else len(records)
                        self.bytes_out[topic["topic"]] += size

    def request_answered(self, api_key: int, started: float, result: Any) -> Any:
        """Count one handled request (``started`` from request_started); ``result`` may be a
        Deferred (answered later: long-poll fetch, acks=all produce). Returns ``result``."""
        if isinstance(result, defer.Deferred):

            def done(response: Any) -> Any:
                self.request_done(api_key, started, response)
                return response

            return result.addCallback(done)
        self.request_done(api_key, started, result)
        return result

    # -- rendering --------------------------------------------------------------------------

    def render(self) -> str:
        out: list[str] = []

        def family(name: str, kind: str, help_text: str, samples: Iterable[tuple[str, str, Any]]) -> None:
            out.append(f"# HELP {name} {help_text}")
            out.append(f"# TYPE {name} {kind}")
            for suffix, labels, value in samples:
                out.append(f"{name}{suffix}{labels} {_number(value)}")

        family("logbus_requests_total", "counter", "Requests answered, per API.",
               (("", _labels([("api", api)]), n) for api, n in sorted(self.requests.items())))
        hist: list[tuple[str, str, Any]] = []
        for api, h in sorted(self.latency.items()):
            cumulative = 0
            for bound, c in zip(LATENCY_BUCKETS, h.counts):
                cumulative += c
                hist.append(("_bucket", _labels([("api", api), ("le", repr(bound))]), cumulative))
            hist.append(("_bucket", _labels([("api", api), ("le", "+Inf")]), h.count))
            hist.append(("_sum", _labels([("api", api)]), h.sum))
            hist.append(("_count", _labels([("api", api)]), h.count))
        family("logbus_request_latency_seconds", "histogram",
               "Time from a decoded request to its response being ready, per API.", hist)
        for name, table, help_text in (
            ("logbus_topic_bytes_in_total", self.bytes_in, "Record bytes received in produce requests, per topic."),
            ("logbus_topic_records_in_total", self.records_in, "Records received in produce requests, per topic."),
            ("logbus_topic_bytes_out_total", self.bytes_out, "Record bytes sent in fetch responses (consumers and followers), per topic."),
        ):
            family(name, "counter", help_text, (("", _labels([("topic", t)]), n) for t, n in sorted(table.items())))
        broker = self.broker
        if broker is not None:
            self._render_broker(broker, family)
        return "\n".join(out) + "\n"

    @staticmethod
    def _render_broker(broker: "Broker", family: Any) -> None:
        family("logbus_purgatory_size", "gauge", "Requests parked until they can be answered.", [
            ("", _labels([("purgatory", "fetch")]), len(broker.fetches)),
            ("", _labels([("purgatory", "replica_fetch")]), len(broker.replica_fetches)),
            ("", _labels([("purgatory", "produce")]), len(broker.produces)),
        ])
        partitions = list(broker.replicas.partitions.items()) if broker.replicas is not None else []
        led = [p for _, p in partitions if p.is_leader]
        family("logbus_under_replicated_partitions", "gauge",
               "Partitions led here whose ISR is smaller than their replica list.",
               [("", "", sum(1 for p in led if len(p.isr) < len(p.replicas)))])
        family("logbus_leader_partitions", "gauge", "Partitions led by this broker.", [("", "", len(led))])
        controller = broker.controller
        family("logbus_active_controller", "gauge", "1 when this broker is the controller.",
               [("", "", 1 if controller is not None and controller.active else 0)])
        sizes = []
        for (topic, partition), p in sorted(partitions):
            log = getattr(p, "log", None)
            if log is not None:
                sizes.append(("", _labels([("topic", topic), ("partition", partition)]), log.size_bytes))
        family("logbus_log_size_bytes", "gauge", "Bytes of each partition log on disk.", sizes)


def _api_name(api_key: int) -> str:
    try:
        return ApiKey(api_key).name
    except ValueError:
        return str(api_key)


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
