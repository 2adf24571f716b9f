"""metrics.pushgateway: after a run's manifests are committed its counts are pushed to a real
Prometheus Pushgateway (Debian's prometheus-pushgateway, started here on a free port) and equal
the manifests'; the next run replaces them; a dead pushgateway only logs a warning."""

from __future__ import annotations

import json
import logging
import re
import shutil
import subprocess
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from broker.cluster.net import free_port
from pipelines.config import ConfigError, parse_config
from pipelines.fs import LocalFS
from pipelines.loader import Loader
from pipelines.manifest import OffsetStore
from pipelines.metrics_push import push_url
from tests.pipelines.helpers import create_topics, json_topic, loader_config, new_topic, produce, produce_events
from tests.teardown import terminate
from tests.waiting import wait_until

PUSHGATEWAY = "/usr/bin/prometheus-pushgateway"
_SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{([^}]*)\})? (\S+)$")


@pytest.fixture
def broker(module_broker):
    """The module's one broker (tests/conftest.py): every test here creates topics of its own on it,
    and none stops or reconfigures it."""
    return module_broker


@pytest.fixture
def pushgateway(tmp_path: Path) -> Iterator[str]:
    """A real pushgateway on a free port, in memory only (no persistence file); stopped after."""
    if not shutil.which(PUSHGATEWAY):
        pytest.skip("prometheus-pushgateway is not installed (make setup installs it)")
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    with open(tmp_path / "pushgateway.out", "wb") as out:
        proc = subprocess.Popen([PUSHGATEWAY, f"--web.listen-address=127.0.0.1:{port}", "--persistence.file="],
                                stdout=out, stderr=subprocess.STDOUT)
    try:
        wait_until(lambda: proc.poll() is not None or _ready(url), 30, what="the pushgateway to be ready")
        assert proc.poll() is None, (tmp_path / "pushgateway.out").read_text()
        yield url
    finally:
        terminate(proc, 10)


def _ready(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/-/ready", timeout=2) as resp:
            return resp.status == 200
    except OSError:
        return False


def scrape(url: str, job: str) -> dict[tuple[str, frozenset], float]:
    """(name, labels) -> value of the pushgateway's samples of ``job``."""
    with urllib.request.urlopen(f"{url}/metrics", timeout=10) as resp:
        text = resp.read().decode()
    out = {}
    for line in text.splitlines():
        m = _SAMPLE.match(line)
        if not m:
            continue
        labels = frozenset(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', m.group(2) or ""))
        if ("job", job) in labels:
            out[(m.group(1), labels - {("job", job)})] = float(m.group(3))
    return out


def _expected(manifests: list[dict], instance: str) -> dict[tuple[str, frozenset], float]:
    inst = ("instance", instance)
    out = {}
    for m in manifests:
        for name, key in (("records", "records"), ("bytes", "bytes"), ("errors", "errors"), ("task_seconds", "seconds"),
                          ("duplicates_dropped", "duplicates_dropped"), ("late_records", "late")):
            out[(f"logbus_loader_{name}", frozenset({inst, ("topic", m["topic"])}))] = float(m["totals"][key])
    out[("logbus_loader_run_duration_seconds", frozenset({inst}))] = max(m["duration_ms"] for m in manifests) / 1000
    out[("logbus_loader_last_success_timestamp_seconds", frozenset({inst}))] = max(m["committed_ms"] for m in manifests) / 1000
    return out


def _pushed(url: str, job: str) -> dict[tuple[str, frozenset], float]:
    return {k: v for k, v in scrape(url, job).items() if k[0].startswith("logbus_loader_")}


def test_a_committed_run_is_pushed_and_the_next_run_replaces_it(broker, spark, pushgateway, tmp_path):
    views, bad = new_topic("views"), new_topic("bad")
    create_topics(broker.bootstrap, [views, bad], 2)
    produce_events(broker.bootstrap, views, 2, 40)
    good = json.dumps({"member_id": 1, "page": "p", "ts": 1_767_225_600_000}).encode()
    produce(broker.bootstrap, [(bad, 0, None, v, None) for v in [good] * 7 + [b"{not json"] * 3], headers=False)
    warehouse = tmp_path / "wh"
    raw = loader_config(broker.bootstrap, warehouse, [json_topic(views), json_topic(bad)], max_error_ratio=0.5,
                        metrics={"pushgateway": pushgateway, "job": "loader_test"}, groups={"activity": [views, bad]})
    cfg = parse_config(raw)
    assert push_url(cfg) == f"{pushgateway}/metrics/job/loader_test/instance/activity"
    store = OffsetStore(LocalFS(f"file://{warehouse}"))

    with Loader(cfg, spark=spark) as loader:
        [first] = loader.run()
    manifests = [store.manifest(t, first.run_id) for t in (views, bad)]
    assert [m["totals"]["records"] for m in manifests] == [80, 7] and manifests[1]["totals"]["errors"] == 3
    assert all(m["totals"]["seconds"] > 0 and m["duration_ms"] > 0 for m in manifests)
    assert _pushed(pushgateway, "loader_test") == _expected(manifests, "activity")

    produce_events(broker.bootstrap, views, 2, 5, start=40)
    with Loader(cfg, spark=spark) as loader:
        [second] = loader.run()
    manifests = [store.manifest(t, second.run_id) for t in (views, bad)]
    assert [m["totals"]["records"] for m in manifests] == [10, 0]
    pushed = _pushed(pushgateway, "loader_test")
    assert pushed == _expected(manifests, "activity")  # PUT: the first run's values are gone
    assert pushed[("logbus_loader_records", frozenset({("instance", "activity"), ("topic", views)}))] == 10


def test_a_dead_pushgateway_only_warns_and_the_load_commits(broker, spark, tmp_path, caplog):
    topic = new_topic("views")
    create_topics(broker.bootstrap, [topic], 1)
    produce_events(broker.bootstrap, topic, 1, 20)
    warehouse = tmp_path / "wh"
    dead = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    cfg = parse_config(loader_config(broker.bootstrap, warehouse, [json_topic(topic)], metrics={"pushgateway": dead}))
    with caplog.at_level(logging.WARNING, logger="logbus.loader.metrics"):
        with Loader(cfg, spark=spark) as loader:
            [result] = loader.run()
    assert result.records == 20
    [manifest] = OffsetStore(LocalFS(f"file://{warehouse}")).manifests(topic)
    assert manifest["status"] == "committed" and manifest["totals"]["records"] == 20
    [warning] = [r for r in caplog.records if r.name == "logbus.loader.metrics"]
    assert warning.levelno == logging.WARNING
    assert f"{dead}/metrics/job/logbus_loader/instance/all" in warning.getMessage()
    assert result.run_id in warning.getMessage()


@pytest.mark.parametrize("bad, key", [
    ({"pushgateway": "127.0.0.1:9091"}, "metrics.pushgateway"),
    ({"pushgateway": "ftp://host:9091"}, "metrics.pushgateway"),
    ({"pushgateway": "http://host:notaport"}, "metrics.pushgateway"),
    ({"pushgateway": "http://host:9091?x=1"}, "metrics.pushgateway"),
    ({"job": "a/b"}, "metrics.job"),
    ({"instance": ""}, "metrics.instance"),
    ({"push": "http://host:9091"}, "metrics.push"),
])
def test_a_bad_metrics_key_is_a_clear_error(bad, key):
    raw = {"cluster": {"bootstrap.servers": "127.0.0.1:9092"}, "warehouse": "file:///tmp/wh", "topics": ["t"],
           "metrics": bad}
    with pytest.raises(ConfigError) as err:
        parse_config(raw)
    assert err.value.key == key and str(err.value).startswith(f"{key}: ")


def test_no_pushgateway_means_no_push():
    cfg = parse_config({"cluster": {"bootstrap.servers": "127.0.0.1:9092"}, "warehouse": "file:///tmp/wh",
                        "topics": ["t"]})
    assert cfg.metrics.pushgateway is None and cfg.metrics.job == "logbus_loader"
