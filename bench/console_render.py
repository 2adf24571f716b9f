#!/usr/bin/env python3
"""Time to render each `logbus console` page for a large cluster: --partitions partitions over
--topics topics on --brokers brokers, --groups groups each committed on one topic's partitions,
and a full lag history (--history samples) behind every group.

    .venv/bin/python bench/console_render.py [--partitions 1000] [--topics 50] [--groups 50] [--history 60] [--repeat 30]

It also times what the collector does off the reactor each round after its requests: record
the offsets, evaluate every group's status and render the ``/metrics`` text. Two numbers per page, median and worst of --repeat: the page built from the sample in process
(``Console.answer``: views, charts, Jinja2), and the same page fetched over loopback HTTP from
the twisted.web site in a reactor thread. The sample is made up (no cluster), so the topic page
leaves out the ListOffsets and DescribeLogDirs per leader broker and the DescribeConfigs it asks a
real cluster.
"""

from __future__ import annotations

import statistics
import sys
import threading
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.options import int_options  # noqa: E402
from broker.client.admin import BrokerDescription, ClusterDescription, PartitionDescription, TopicDescription  # noqa: E402
from broker.console.collector import Collector  # noqa: E402
from broker.console.lag_history import LagHistory  # noqa: E402
from broker.console.reader import ClusterSample, GroupInfo  # noqa: E402
from broker.console.web import Console, site  # noqa: E402
from broker.tools.coordinator_groups import Member  # noqa: E402


class NoNetwork:
    """The reader's topic-page calls, answered without a cluster."""

    def log_starts(self, sample: ClusterSample, topic: str) -> dict:
        return {(t, p): 0 for (t, p) in sample.ends if t == topic}

    def partition_sizes(self, sample: ClusterSample, topic: str) -> dict:
        return {(t, p): 1 << 20 for (t, p) in sample.ends if t == topic}

    def config_overrides(self, topic: str) -> dict:
        return {"retention.ms": "86400000"}


def make_sample(brokers: int, topics: int, partitions: int, groups: int, round_: int) -> ClusterSample:
    per_topic = partitions // topics
    nodes = list(range(1, brokers + 1))
    described = [TopicDescription(f"topic-{t:03d}", [
        PartitionDescription(p, nodes[(t + p) % brokers], [nodes[(t + p + r) % brokers] for r in range(min(3, brokers))],
                             [nodes[(t + p + r) % brokers] for r in range(min(3, brokers))]) for p in range(per_topic)])
        for t in range(topics)]
    ends = {(d.name, p.partition): 1000 * round_ + 10 * p.partition for d in described for p in d.partitions}
    infos, committed = {}, {}
    for g in range(groups):
        topic = described[g % topics]
        name = f"group-{g:03d}"
        infos[name] = GroupInfo(name, nodes[g % brokers], "consumer", "Stable", "range",
                                [Member(f"{name}-m{i}", "rdkafka", "/10.0.0.1", [(topic.name, p.partition)
                                 for p in topic.partitions if p.partition % 4 == i]) for i in range(4)])
        committed[name] = {(topic.name, p.partition): max(ends[(topic.name, p.partition)] - 50 - g, 0) for p in topic.partitions}
    cluster = ClusterDescription("bench", 1, [BrokerDescription(n, "10.0.0.1", 9090 + n) for n in nodes], described)
    configs = {d.name: {"min.insync.replicas": "2"} for d in described}
    return ClusterSample(cluster, configs, ends, infos, committed)


class ManualClock:
    def __init__(self) -> None:
        self.now = 0.0

    def seconds(self) -> float:
        return self.now

    def callLater(self, *args, **kwargs):  # noqa: N802  (the reactor's name); the loop is never started here
        raise AssertionError("not scheduled in the benchmark")


def main() -> None:
    args = int_options(brokers=3, partitions=1000, topics=50, groups=50, history=60, repeat=30).parse_args()
    clock = ManualClock()
    history = LagHistory(keep=args.history, window=10, stop_after=600)
    collector = Collector(lambda: None, history, clock, 10.0)  # type: ignore[arg-type,return-value]
    applied = []
    for r in range(args.history):
        clock.now = 10.0 * r
        made = make_sample(args.brokers, args.topics, args.partitions, args.groups, r)
        t0 = time.perf_counter()
        collector.apply(made)
        applied.append(1000 * (time.perf_counter() - t0))
    console = Console(collector, NoNetwork(), bootstrap="bench")  # type: ignore[arg-type]
    assert collector.latest is not None
    sample = collector.latest.sample
    pages = {"cluster": "/", "topics": "/topics", "topic": "/topics/topic-000", "groups": "/groups",
             "group": "/groups/group-000", "metrics": "/metrics"}

    def render(path: str) -> bytes:
        if path.startswith("/topics/"):
            return console._topic(sample, path.rsplit("/", 1)[1])[2]
        answer = console.answer(path)
        assert isinstance(answer, tuple)
        return answer[2]

    from twisted.internet import reactor

    port = reactor.listenTCP(0, site(console), interface="127.0.0.1")  # type: ignore[attr-defined]
    thread = threading.Thread(target=reactor.run, kwargs={"installSignalHandlers": False}, daemon=True)  # type: ignore[attr-defined]
    thread.start()
    base = f"http://127.0.0.1:{port.getHost().port}"
    print(f"{args.partitions} partitions in {args.topics} topics on {args.brokers} brokers, {args.groups} groups, "
          f"{args.history} samples of history; median and worst of {args.repeat}")
    print(f"one round recorded, evaluated and its /metrics text rendered (the collector's thread): median {statistics.median(applied):.1f} ms, "
          f"worst {max(applied):.1f} ms")
    print(f"{'page':<8} {'bytes':>8} {'render ms':>16} {'HTTP GET ms':>16}")
    try:
        for name, path in pages.items():
            size = len(render(path))
            rendered, fetched = [], []
            for _ in range(args.repeat):
                t0 = time.perf_counter()
                render(path)
                rendered.append(1000 * (time.perf_counter() - t0))
                t0 = time.perf_counter()
                with urllib.request.urlopen(base + path, timeout=30) as answer:
                    answer.read()
                fetched.append(1000 * (time.perf_counter() - t0))
            print(f"{name:<8} {size:>8} {statistics.median(rendered):>8.1f} {max(rendered):>7.1f} "
                  f"{statistics.median(fetched):>8.1f} {max(fetched):>7.1f}")
    finally:
        reactor.callFromThread(reactor.stop)  # type: ignore[attr-defined]
        thread.join(10)


if __name__ == "__main__":
    main()
