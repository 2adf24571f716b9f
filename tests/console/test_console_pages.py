"""The console's pages, metrics and pictures from a made-up sample: no server, no cluster."""

from __future__ import annotations

import re

from twisted.internet import defer, task

from broker.console import views
from broker.console.charts import bar_chart, line_chart
from broker.console.collector import Collector
from broker.console.lag_history import LagHistory
from broker.console.web import Console
from tests.console.samples import sample


class FakeReader:
    def log_starts(self, s, topic):
        return {(topic, 0): 3, (topic, 1): 0}

    def partition_sizes(self, s, topic):
        return {(topic, 0): 4096}

    def config_overrides(self, topic):
        return {"retention.ms": "1000"}


def console(rounds: list) -> tuple[Console, task.Clock]:
    clock = task.Clock()
    feed = iter(rounds)
    collector = Collector(lambda: next(feed), LagHistory(keep=10, window=2, stop_after=300), clock, 1.0,
                          run=lambda f: defer.succeed(f()))
    collector.start()
    for _ in rounds[1:]:
        clock.advance(1.0)
    return Console(collector, FakeReader(), bootstrap="127.0.0.1:9091"), clock  # type: ignore[arg-type]


def test_the_collector_samples_every_interval_and_keeps_the_last_good_sample():
    rounds = [sample(), sample(ends={("events", 0): 120, ("events", 1): 50, ("logs", 0): 7})]
    c, clock = console(rounds + [RuntimeError("boom")])  # type: ignore[list-item]
    assert c.collector.rounds == 2
    latest = c.collector.latest
    assert latest is not None and latest.sample is rounds[1] and latest.time == 1.0
    assert {tp: p.lag for tp, p in latest.view.group("readers").partitions.items()} == {("events", 0): 30, ("events", 1): 0}


def test_a_failed_round_is_shown_and_the_loop_goes_on():
    def failing():
        raise OSError("broker gone")

    clock = task.Clock()
    collector = Collector(failing, LagHistory(), clock, 1.0, run=lambda f: defer.maybeDeferred(f))
    collector.start(sample())
    clock.advance(1.0)
    assert collector.error and "broker gone" in collector.error and collector.latest is not None
    assert collector.latest.time == 0.0, "the last good round stays"
    clock.advance(1.0)
    assert collector._loop.running


def test_cluster_page_counts_partitions_leaders_and_trouble():
    page = views.cluster_page(sample())
    assert [(b["id"], b["partitions"], b["leaders"], b["controller"]) for b in page["brokers"]] == [
        (1, 3, 1, False), (2, 3, 1, True), (3, 4, 1, False)]
    assert [r["partition"] for r in page["offline"]] == [2]
    assert [(r["topic"], r["partition"]) for r in page["under_replicated"]] == [("events", 1), ("events", 2)]
    assert [(r["topic"], r["partition"]) for r in page["under_min_isr"]] == [("events", 1), ("events", 2)]
    assert page["chart"].top == 4 and len(page["chart"].groups) == 3 and page["live"] == 3


def test_a_broker_that_holds_replicas_but_is_not_live_is_listed_as_such():
    s = sample()
    s.cluster.brokers.pop()  # broker 3 gone from Metadata, its replicas still assigned
    page = views.cluster_page(s)
    assert page["live"] == 2 and [(b["id"], b["address"]) for b in page["brokers"]][-1] == (3, "(not live)")


def test_every_page_renders_with_its_numbers_and_nothing_external():
    c, _ = console([sample(), sample(ends={("events", 0): 130, ("events", 1): 50, ("logs", 0): 7})])
    pages = {path: c.answer(path) for path in ("/", "/topics", "/groups", "/groups/readers", "/groups/zk-old")}
    latest = c.collector.latest
    assert latest is not None
    pages["/topics/events"] = c._topic(latest.sample, "events")
    for path, (code, kind, body) in pages.items():
        html = body.decode()
        assert code == 200 and kind.startswith("text/html"), path
        assert not re.search(r"(src|href)=\"(https?:)?//", html), f"{path} links outside the console"
    group = pages["/groups/readers"][2].decode()
    assert 'id="total-lag">40<' in group and "<polyline" in group and "rdkafka" in group
    topic = pages["/topics/events"][2].decode()
    assert "retention.ms" in topic and '<td class="num start">3</td>' in topic
    assert '<td class="num size">4096</td>' in topic and 'id="topic-size">4096<' in topic
    assert '<td class="num">3</td><td class="num">1</td>' in pages["/"][2].decode()  # broker 1: 3 replicas, 1 leader


def test_unknown_pages_topics_and_groups_are_404_and_static_files_are_served():
    c, _ = console([sample()])
    assert c.answer("/nope")[0] == 404
    assert c.answer("/groups/nobody")[0] == 404
    assert c.collector.latest is not None and c._topic(c.collector.latest.sample, "nobody")[0] == 404
    code, kind, body = c.answer("/static/console.css")
    assert code == 200 and kind.startswith("text/css") and b"font" in body
    assert c.answer("/static/../web.py")[0] == 404


def test_metrics_give_lag_per_partition_and_one_status_per_group():
    moved = {"readers": {("events", 0): 95, ("events", 1): 55}, "zk-old": {("logs", 0): 7}}
    c, _ = console([sample(), sample(ends={("events", 0): 130, ("events", 1): 60, ("logs", 0): 7}, committed=moved)])
    code, kind, body = c.answer("/metrics")
    text = body.decode()
    assert code == 200 and kind.startswith("text/plain; version=0.0.4")
    assert 'logbus_consumer_group_lag{group="readers",topic="events",partition="0"} 35' in text
    assert 'logbus_consumer_group_status{group="readers",status="WARN"} 1' in text
    assert 'logbus_consumer_group_status{group="readers",status="OK"} 0' in text
    assert 'logbus_consumer_group_status{group="zk-old",status="OK"} 1' in text


def test_bar_and_line_geometry():
    chart = bar_chart([("1", (4, 2)), ("2", (2, 0))], width=200, height=100, gap=0)
    first, second = chart.groups
    assert [(b.height, b.y) for b in first.bars] == [(100.0, 0.0), (50.0, 50.0)]
    assert second.bars[1].height == 0 and second.x == 150.0
    line = line_chart([(10.0, 0), (20.0, 5), (30.0, 10)], width=100, height=50)
    assert line.points == "0.0,50.0 50.0,25.0 100.0,0.0" and line.span == 20 and line.last == 10
    assert line_chart([]).points == ""


def test_a_zookeeper_group_shows_its_owners_and_members_even_where_nothing_is_committed():
    c, _ = console([sample()])
    latest = c.collector.latest
    assert latest is not None
    page = views.group_page(latest.sample, latest.view, "zk-old", ["zk-old_h-1"],
                            {("logs", 0): "zk-old_h-1-0", ("logs", 1): "zk-old_h-1-0"})
    assert page is not None and page["zk_members"] == ["zk-old_h-1"]
    assert [(r["partition"], r["committed"], r["lag"], r["owner"]) for r in page["partitions"]] == [
        (0, 7, 0, "zk-old_h-1-0"), (1, "-", "-", "zk-old_h-1-0")]


def test_a_group_whose_offsets_could_not_be_read_keeps_its_history_until_it_is_gone():
    without = sample()
    del without.committed["readers"]
    c, clock = console([sample(), without])
    assert c.collector.history.partitions("readers"), "still listed by its coordinator: history kept"
    gone = sample()
    del gone.committed["readers"], gone.groups["readers"]
    c.collector.apply(gone)
    assert not c.collector.history.partitions("readers")
