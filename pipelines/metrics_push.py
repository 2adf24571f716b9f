"""Push a committed run's counts to a Prometheus Pushgateway (``metrics.pushgateway``).

Batch loads are not scraped: after a run's manifests are written, its per-topic counts
(records, Parquet bytes, undecodable values, task-seconds), its duration and the time of
success are PUT in the text format (0.0.4) to ``/metrics/job/<job>/instance/<instance>``,
replacing the previous run's. A push that fails only logs a warning: the load is committed.
"""

from __future__ import annotations

import logging
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterable

from broker.metrics_text import CONTENT_TYPE, Exposition
from pipelines.config import LoaderConfig

log = logging.getLogger("logbus.loader.metrics")

TIMEOUT_S = 10.0

#: Per-topic gauges: (name, the manifest's totals key, help text).
TOPIC_METRICS = (
    ("logbus_loader_records", "records", "Records written to the warehouse by the last committed run, per topic."),
    ("logbus_loader_bytes", "bytes", "Parquet bytes written by the last committed run, per topic."),
    ("logbus_loader_errors", "errors", "Undecodable values (sent to _errors/) in the last committed run, per topic."),
    ("logbus_loader_duplicates_dropped", "duplicates_dropped",
     "Copies not written because their origin was written already (deduplication by origin), per topic."),
    ("logbus_loader_late_records", "late",
     "Records of an already closed event hour (late_data: reopened, separated or dropped as configured), per topic."),
    ("logbus_loader_task_seconds", "seconds", "Seconds the last committed run's tasks took, summed per topic."),
)


def instance_of(config: LoaderConfig) -> str:
    """``metrics.instance``, else the topic group the run loads (``all`` for several or none)."""
    if config.metrics.instance:
        return config.metrics.instance
    groups = config.topic_groups()
    return groups[0].name if len(groups) == 1 else "all"


def render(manifests: Iterable[dict]) -> str:
    """The text exposition of one committed run, from its manifests (one per topic)."""
    docs = sorted(manifests, key=lambda m: m["topic"])
    out = Exposition()
    for name, key, help_text in TOPIC_METRICS:
        out.gauge(name, help_text, [([("topic", m["topic"])], m["totals"].get(key, 0)) for m in docs])
    durations = [m["duration_ms"] for m in docs if m.get("duration_ms") is not None]
    committed = max((m["committed_ms"] for m in docs), default=0)
    if durations:
        out.gauge("logbus_loader_run_duration_seconds", "Seconds from the last committed run's plan to its commit.",
                  [((), max(durations) / 1000)])
    out.gauge("logbus_loader_last_success_timestamp_seconds", "Unix time the last run was committed.",
              [((), committed / 1000)])
    return out.text()


def push_url(config: LoaderConfig) -> str:
    """``<pushgateway>/metrics/job/<job>/instance/<instance>``."""
    quote = lambda v: urllib.parse.quote(v, safe="")  # noqa: E731
    return f"{config.metrics.pushgateway}/metrics/job/{quote(config.metrics.job)}/instance/{quote(instance_of(config))}"


def push_run(config: LoaderConfig, manifests: list[dict]) -> bool:
    """PUT the run's metrics when a pushgateway is configured; True if pushed. Never raises."""
    if not config.metrics.pushgateway or not manifests:
        return False
    url = push_url(config)
    request = urllib.request.Request(url, data=render(manifests).encode(), method="PUT",
                                     headers={"Content-Type": CONTENT_TYPE})
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT_S) as response:
            response.read()
    except urllib.error.HTTPError as exc:
        detail = exc.read().decode(errors="replace").strip()
        log.warning("run %s: metrics not pushed to %s: HTTP %s %s", manifests[0]["run_id"], url, exc.code, detail)
        return False
    except (OSError, ValueError) as exc:
        log.warning("run %s: metrics not pushed to %s: %s", manifests[0]["run_id"], url, exc)
        return False
    return True

