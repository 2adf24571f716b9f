"""The mirror-maker's Prometheus endpoint (--metrics.port): the shared text format parses back to
what was rendered (escapes, histograms, special values); the endpoint's server answers and
stops; and a real mirror between two clusters, scraped while records flow, counts every record
copied, its lag goes to 0, its commits move, and its samples name the source and the topic."""

from __future__ import annotations

import math
import socket
import time
import urllib.error
import urllib.request
import uuid
from types import SimpleNamespace

import pytest

from broker.cluster.net import free_port
from broker.config import ConfigError
from broker.metrics_text import Exposition, Histogram
from mirror.config import DEFAULT_METRICS_HOST, build_config
from mirror.metrics import MetricsServer, MirrorMetrics
from mirror.stats import AGE_BUCKETS, RecordAges
from tests.mirror.conftest import KeyedLoad, cluster_id, wait_until

Sample = tuple[str, frozenset]  # (name, frozenset of (label, value))


def _parse_labels(text: str, pos: int) -> tuple[dict[str, str], int]:
    """Labels from ``text[pos] == '{'``, unescaping values; returns them and the position after '}'."""
    labels: dict[str, str] = {}
    pos += 1
    while text[pos] != "}":
        eq = text.index("=", pos)
        name = text[pos:eq]
        assert name.isidentifier(), f"bad label name {name!r} in {text!r}"
        assert text[eq + 1] == '"', text
        pos, value = eq + 2, []
        while text[pos] != '"':
            if text[pos] == "\\":
                nxt = text[pos + 1]
                assert nxt in '\\n"', f"bad escape in {text!r}"
                value.append("\n" if nxt == "n" else nxt)
                pos += 2
            else:
                value.append(text[pos])
                pos += 1
        labels[name] = "".join(value)
        pos += 1
        if text[pos] == ",":
            pos += 1
    return labels, pos + 1


def parse(text: str) -> tuple[dict[Sample, float], dict[str, str]]:
    """Exposition text -> ({(name, labels): value}, {family: type}); asserts every line is well formed
    and every sample belongs to a family declared before it."""
    samples: dict[Sample, float] = {}
    types: dict[str, str] = {}
    assert text.endswith("\n")
    for line in text.splitlines():
        if line.startswith("# HELP "):
            continue
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split(" ")
            assert kind in ("counter", "gauge", "histogram") and name not in types, line
            types[name] = kind
            continue
        assert line and not line.startswith("#"), f"unexpected line {line!r}"
        end = next((i for i, ch in enumerate(line) if ch in "{ "), len(line))
        name = line[:end]
        labels: dict[str, str] = {}
        pos = end
        if line[pos] == "{":
            labels, pos = _parse_labels(line, pos)
        assert line[pos] == " ", line
        value = line[pos + 1:]
        family = name
        if name not in types:
            family = next((name[: -len(s)] for s in ("_bucket", "_sum", "_count") if name.endswith(s)), name)
            assert types.get(family) == "histogram", f"sample {name} of no declared family"
        key = (name, frozenset(labels.items()))
        assert key not in samples, f"duplicate sample {line!r}"
        samples[key] = float(value.replace("Inf", "inf"))
    return samples, types


def sample(samples: dict[Sample, float], name: str, **labels: str) -> float | None:
    return samples.get((name, frozenset(labels.items())))


# ------------------------------------------------------------------ the text format


def test_text_format_round_trips_escapes_values_and_histograms():
    odd = 'we"ird\\topic\nname}{,='
    out = Exposition()
    out.counter("t_total", 'help with "quotes", a \\ and a\nnewline', [([("topic", odd), ("n", 1)], 7)])
    out.gauge("g", "special values", [([("k", "a")], 1.5), ([("k", "b")], float("inf")),
                                      ([("k", "c")], float("nan")), ([("k", "d")], True), ((), 3)])
    h = Histogram((0.1, 1.0))
    for v in (0.05, 0.1, 0.5, 7.0):
        h.observe(v)
    out.histogram("lat_seconds", "a histogram", [([("api", "X")], h)])
    out.gauge("empty", "a family without samples", [])
    text = out.text()
    assert "# HELP t_total help with \"quotes\", a \\\\ and a\\nnewline\n" in text

    samples, types = parse(text)
    assert types == {"t_total": "counter", "g": "gauge", "lat_seconds": "histogram", "empty": "gauge"}
    assert sample(samples, "t_total", topic=odd, n="1") == 7
    assert sample(samples, "g", k="a") == 1.5 and sample(samples, "g", k="b") == math.inf
    assert math.isnan(sample(samples, "g", k="c")) and sample(samples, "g", k="d") == 1 and sample(samples, "g") == 3
    # buckets are cumulative, le inclusive; +Inf is the count
    assert [sample(samples, "lat_seconds_bucket", api="X", le=le) for le in ("0.1", "1.0", "+Inf")] == [2, 3, 4]
    assert sample(samples, "lat_seconds_count", api="X") == 4 and sample(samples, "lat_seconds_sum", api="X") == pytest.approx(7.65)
    with pytest.raises(ValueError):
        Exposition().gauge("bad name", "x", [])


def _fake_maker(**overrides) -> SimpleNamespace:
    maker = SimpleNamespace(
        sources=[SimpleNamespace(name="dc1", cluster_id="AbC"), SimpleNamespace(name="dc2", cluster_id="XyZ")],
        record_counts=lambda: {("dc1", "events.a"): 10, ("dc2", "events.a"): 5},
        byte_counts=lambda: {("dc1", "events.a"): 1000},
        last_status={"sources": {"dc1": {"events.a": {"records": 10, "records_per_sec": 2.5, "lag": 3}},
                                 "dc2": {"events.a": {"records": 5, "records_per_sec": 0.0, "lag": None}}}},
        commits=4, last_commit_time=1700000000.25, send_failures=1, skipped_loop=2, raw_batches=3, raw_records=15,
        ages=RecordAges())
    age = Histogram(AGE_BUCKETS)
    age.observe(0.2)
    maker.ages.histograms["dc1"] = age
    for k, v in overrides.items():
        setattr(maker, k, v)
    return maker


def test_mirror_metrics_render_every_metric_labelled():
    samples, types = parse(MirrorMetrics(_fake_maker()).render())
    assert sample(samples, "logbus_mirror_up") == 1
    assert sample(samples, "logbus_mirror_source_info", source="dc2", cluster_id="XyZ") == 1
    assert sample(samples, "logbus_mirror_records_copied_total", source="dc1", topic="events.a") == 10
    assert sample(samples, "logbus_mirror_records_copied_total", source="dc2", topic="events.a") == 5
    assert sample(samples, "logbus_mirror_source_bytes_total", source="dc1", topic="events.a") == 1000
    assert sample(samples, "logbus_mirror_records_per_second", source="dc1", topic="events.a") == 2.5
    assert sample(samples, "logbus_mirror_lag_records", source="dc1", topic="events.a") == 3
    assert sample(samples, "logbus_mirror_lag_records", source="dc2", topic="events.a") is None  # unknown: absent
    assert sample(samples, "logbus_mirror_commits_total") == 4
    assert sample(samples, "logbus_mirror_last_commit_timestamp_seconds") == 1700000000.25
    assert sample(samples, "logbus_mirror_send_failures_total") == 1
    assert sample(samples, "logbus_mirror_records_skipped_loop_total") == 2
    assert (sample(samples, "logbus_mirror_raw_batches_total"), sample(samples, "logbus_mirror_raw_records_total")) == (3, 15)
    assert all(kind == "counter" for name, kind in types.items() if name.endswith("_total"))
    assert types["logbus_mirror_record_age_seconds"] == "histogram"
    assert sample(samples, "logbus_mirror_record_age_seconds_bucket", source="dc1", le="0.25") == 1
    assert sample(samples, "logbus_mirror_record_age_seconds_bucket", source="dc1", le="0.1") == 0
    # before the first stats interval and the first commit
    samples, _ = parse(MirrorMetrics(_fake_maker(last_status=None, last_commit_time=None)).render())
    assert sample(samples, "logbus_mirror_last_commit_timestamp_seconds") is None
    assert not any(name == "logbus_mirror_lag_records" for name, _ in samples)


def test_metrics_server_serves_and_stops():
    calls = []

    def render() -> str:
        calls.append(1)
        if len(calls) == 2:
            raise RuntimeError("boom")
        return "# HELP x x\n# TYPE x gauge\nx 1\n"

    server = MetricsServer(render, "127.0.0.1", 0)
    url = f"http://127.0.0.1:{server.port}"
    try:
        with urllib.request.urlopen(f"{url}/metrics", timeout=10) as resp:
            assert resp.headers["Content-Type"] == "text/plain; version=0.0.4; charset=utf-8"
            assert resp.read() == b"# HELP x x\n# TYPE x gauge\nx 1\n"
        with pytest.raises(urllib.error.HTTPError) as err:
            urllib.request.urlopen(f"{url}/metrics", timeout=10)
        assert err.value.code == 500  # a failing render answers 500, the server lives on
        with pytest.raises(urllib.error.HTTPError) as err:
            urllib.request.urlopen(f"{url}/nope", timeout=10)
        assert err.value.code == 404
        with urllib.request.urlopen(f"{url}/", timeout=10) as resp:
            assert resp.status == 200
        with pytest.raises(ConfigError, match="metrics.port"):
            MetricsServer(render, "127.0.0.1", server.port)  # taken
    finally:
        server.close()
    assert not server._thread.is_alive()
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", server.port), timeout=2).close()


def test_metrics_config_defaults_and_validation(tmp_path):
    src = tmp_path / "src.properties"
    src.write_text("zookeeper.connect=127.0.0.1:1/a\n")
    dst = tmp_path / "dst.properties"
    dst.write_text("bootstrap.servers=127.0.0.1:1\n")
    cfg = build_config([str(src)], str(dst), whitelist=".*")
    assert (cfg.metrics_port, cfg.metrics_host) == (0, DEFAULT_METRICS_HOST) == (0, "0.0.0.0")
    cfg = build_config([str(src)], str(dst), whitelist=".*", metrics_port=9404, metrics_host="127.0.0.1")
    assert (cfg.metrics_port, cfg.metrics_host) == (9404, "127.0.0.1")
    with pytest.raises(ConfigError, match="metrics.port"):
        build_config([str(src)], str(dst), whitelist=".*", metrics_port=70000)


# ------------------------------------------------------------------ a real mirror


def _scrape(port: int) -> dict[Sample, float] | None:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as resp:
            assert resp.headers["Content-Type"].startswith("text/plain; version=0.0.4")
            return parse(resp.read().decode())[0]
    except (urllib.error.URLError, ConnectionError):
        return None


def test_scraped_while_mirroring(clusters, mirrors):
    src, agg = clusters("src"), clusters("agg")
    topic = f"mm.{uuid.uuid4().hex[:6]}"
    src.create_topic(topic, 2)
    port = free_port()
    load = KeyedLoad(src, topic, rate=1000)
    load.start()
    m = mirrors([src.consumer_props()], {"bootstrap.servers": agg.bootstrap}, "--whitelist", r"mm\..*",
                "--offset.commit.interval.ms", "500", "--stats.interval.ms", "300",
                "--metrics.port", str(port), "--metrics.host", "127.0.0.1")
    try:
        labels = {"source": "src", "topic": topic}
        copied = lambda s: sample(s, "logbus_mirror_records_copied_total", **labels) or 0  # noqa: E731
        first = wait_until(lambda: (s := _scrape(port)) and copied(s) > 0 and s, 60, 0.3, what="records copied")
        assert sample(first, "logbus_mirror_up") == 1
        assert sample(first, "logbus_mirror_source_info", source="src", cluster_id=cluster_id(src)) == 1
        rates, commits = [], []
        deadline = time.monotonic() + 3
        while time.monotonic() < deadline:  # records still flowing
            s = _scrape(port)
            rates.append(sample(s, "logbus_mirror_records_per_second", **labels) or 0)
            commits.append(sample(s, "logbus_mirror_commits_total"))
            time.sleep(0.3)
        assert max(rates) > 0, rates
        assert commits[-1] > commits[0], commits
    finally:
        load.stop()
    assert not load.errors
    produced = len(load.acked)

    def caught_up():
        s = _scrape(port)
        return s if s and copied(s) >= produced and sample(s, "logbus_mirror_lag_records", **labels) == 0 else None

    s = wait_until(caught_up, 60, 0.3, what="every record copied and lag 0")
    assert copied(s) == produced  # no restart, no rebalance: exactly once
    assert sample(s, "logbus_mirror_raw_records_total") == produced and sample(s, "logbus_mirror_raw_batches_total") > 0
    assert sample(s, "logbus_mirror_source_bytes_total", **labels) > produced * 10
    assert sample(s, "logbus_mirror_send_failures_total") == 0
    assert sample(s, "logbus_mirror_records_skipped_loop_total") == 0
    assert abs(sample(s, "logbus_mirror_last_commit_timestamp_seconds") - time.time()) < 30
    # a live load copied as it comes: every batch acknowledged within a minute of its first record
    batches = sample(s, "logbus_mirror_record_age_seconds_count", source="src")
    assert batches > 0 and sample(s, "logbus_mirror_record_age_seconds_bucket", source="src", le="60.0") == batches
    assert m.stop() == 0, m.output()[-3000:]
    with pytest.raises(OSError):  # the endpoint closed with the mirror
        socket.create_connection(("127.0.0.1", port), timeout=2).close()
