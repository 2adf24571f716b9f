"""Planning: for each topic-partition, start = the saved offset (or the reset policy), end =
the high watermark now. The plan pins the ranges, so a rerun reads exactly the same records."""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from broker.client.admin import AdminClient
from broker.client.connection import BrokerConnectionError
from broker.client.simple_consumer import EARLIEST_TIME, LATEST_TIME, SimpleConsumer
from broker.protocol.errors import KafkaError, LeaderNotAvailableError
from pipelines.config import LatePolicy, LoaderConfig, ResetPolicy, TopicSpec
from pipelines.errors import LoadError, OutOfRangeError
from pipelines.manifest import OffsetStore, new_run_id, now_ms, split_range
from pipelines.origin_index import OriginIndex
from pipelines.task import RangeTask
from pipelines.writer import HOUR_MS


class Cluster:
    """What the planner needs from the brokers: topics, partitions, leaders, offsets."""

    def __init__(self, config: LoaderConfig) -> None:
        self.config = config
        self.timeout = config.request_timeout_ms / 1000
        self.brokers = self._find_brokers()
        self._consumers: dict[tuple[str, int], SimpleConsumer] = {}

    def _find_brokers(self) -> tuple[str, ...]:
        if self.config.bootstrap_servers:
            return tuple(a.strip() for a in self.config.bootstrap_servers.split(",") if a.strip())
        from broker.client.metadata import ClusterMetadata

        md = ClusterMetadata(zookeeper_connect=self.config.zookeeper_connect, client_id="logbus-loader")
        try:
            deadline = time.monotonic() + self.timeout
            while time.monotonic() < deadline:
                md.maybe_update(timeout=self.timeout)
                brokers = md.brokers()
                if brokers:
                    return tuple(f"{h}:{p}" for _, (h, p) in sorted(brokers.items()))
                time.sleep(0.2)
        finally:
            md.close()
        raise LoadError(f"no live brokers registered in ZooKeeper at {self.config.zookeeper_connect}")

    def admin(self) -> AdminClient:
        try:
            return AdminClient(",".join(self.brokers), timeout=self.timeout, security=self.config.security)
        except BrokerConnectionError as exc:
            raise LoadError(f"cannot reach the cluster ({', '.join(self.brokers)}): {exc}") from None

    def describe(self) -> dict[str, dict[int, int]]:
        """{topic: {partition: leader id}} for every topic."""
        with self.admin() as admin:
            return {t.name: {p.partition: p.leader for p in t.partitions} for t in admin.describe_topics(None)}

    def broker_addresses(self) -> dict[int, tuple[str, int]]:
        with SimpleConsumer.from_address(self.brokers[0], timeout=self.timeout, security=self.config.security) as c:
            md = c.topic_metadata([])
        return {b["node_id"]: (b["host"], b["port"]) for b in md["brokers"]}

    def consumer(self, topic: str, partition: int) -> SimpleConsumer:
        last: Exception | None = None
        for address in self.brokers:
            try:
                with SimpleConsumer.from_address(address, timeout=self.timeout, security=self.config.security) as probe:
                    _, host, port = probe.find_leader(topic, partition)
                break
            except (BrokerConnectionError, OSError) as exc:
                last = exc
        else:
            raise LoadError(f"cannot reach any broker of {', '.join(self.brokers)}: {last}")
        key = (host, port)
        if key not in self._consumers:
            self._consumers[key] = SimpleConsumer(host, port, timeout=self.timeout, client_id="logbus-loader",
                                                  security=self.config.security)
        return self._consumers[key]

    def bounds(self, topic: str, partition: int) -> tuple[int, int]:
        c = self.consumer(topic, partition)
        return (c.get_offsets_before(topic, partition, EARLIEST_TIME)[0],
                c.get_offsets_before(topic, partition, LATEST_TIME)[0])

    def offset_for_time(self, topic: str, partition: int, ts_ms: int) -> int | None:
        found = self.consumer(topic, partition).get_offsets_before(topic, partition, ts_ms)
        return found[0] if found else None

    def resolve(self, topic: str, partition: int, policy: ResetPolicy, earliest: int, latest: int) -> int:
        if policy.kind == "earliest":
            return earliest
        if policy.kind == "latest":
            return latest
        found = self.offset_for_time(topic, partition, policy.timestamp_ms or 0)
        return latest if found is None else found

    def close(self) -> None:
        for c in self._consumers.values():
            c.close()
        self._consumers.clear()


@dataclass
class Plan:
    run_id: str
    planned_ms: int
    topics: dict[str, dict] = field(default_factory=dict)   # topic -> plan document (as written)
    skipped: dict[str, str] = field(default_factory=dict)   # topic -> why it is not in this run
    resumed: bool = False

    @property
    def unavailable(self) -> dict[str, list[int]]:
        """Partitions left out of this run because they had no leader: the run is incomplete."""
        return unavailable_of(self.topics.values())

    def tasks(self) -> list[RangeTask]:
        out: list[RangeTask] = []
        for topic in sorted(self.topics):
            doc = self.topics[topic]
            for p in doc["partitions"]:
                origins = p.get("origins")
                late = late_of(doc, p)
                for s, e in p["ranges"]:
                    if e > s:
                        # a later piece of a split partition first reads the origins the pieces before it write
                        lookback = max(p["start"], s - origins["window"]) if origins and s > p["start"] else None
                        out.append(RangeTask(len(out), self.run_id, topic, p["partition"], s, e, doc["spec"],
                                             origins=origins, lookback=lookback, late=late))
        return out

    def rows(self) -> list[dict]:
        rows = []
        for topic in sorted(self.topics):
            for p in self.topics[topic]["partitions"]:
                rows.append({"topic": topic, **p})
        return rows

    @property
    def offsets(self) -> int:
        return sum(p["end"] - p["start"] for d in self.topics.values() for p in d["partitions"])


def late_of(doc: Mapping, partition: Mapping) -> dict | None:
    """What a range task needs of the topic's late_data policy: None until an hour of the partition has closed."""
    if partition.get("closed_below") is None:
        return None
    policy = LatePolicy.from_dict(doc["spec"].get("late_data")).policy
    return {"closed_below": int(partition["closed_below"]), "policy": policy,
            "arrival_hour": int(doc.get("planned_ms") or 0) // HOUR_MS}


def unavailable_of(docs: Iterable[Mapping]) -> dict[str, list[int]]:
    """{topic: partitions without a leader} of plan or manifest documents."""
    return {d["topic"]: list(d["unavailable_partitions"]) for d in sorted(docs, key=lambda d: d["topic"])
            if d.get("unavailable_partitions")}


def incomplete_line(run_id: str, unavailable: Mapping[str, list[int]]) -> str:
    """The one line that says a run left partitions out."""
    parts = ", ".join(f"{t}-{p}" for t, ps in unavailable.items() for p in ps)
    return f"run {run_id} is incomplete: no leader for {parts} (loaded by a later run once they have one)"


def _matched_spec(config: LoaderConfig, topic: str) -> TopicSpec:
    """``config.spec_for(topic)`` for a topic one of the configured specs matches (so never None)."""
    spec = config.spec_for(topic)
    if spec is None:  # unreachable: the callers pass a name a spec matched
        raise LoadError(f"{topic!r} matches no configured topic")
    return spec


def select_topics(config: LoaderConfig, cluster_topics: set[str],
                  store: OffsetStore) -> tuple[dict[str, TopicSpec], dict[str, str]]:
    """Topics of this run ({name: spec}) and the ones skipped ({name: reason})."""
    chosen: dict[str, TopicSpec] = {}
    skipped: dict[str, str] = {}
    known = set(store.topics())
    for i, spec in enumerate(config.topics):
        if spec.name is not None:
            if spec.name in cluster_topics:
                chosen.setdefault(spec.name, _matched_spec(config, spec.name))
            elif spec.name in known and store.has_history(spec.name):
                skipped[spec.name] = "deleted from the cluster (its loaded data and offsets are kept)"
            else:
                raise LoadError(f"topics[{i}].name: topic {spec.name!r} does not exist in the cluster")
        else:
            matched = [n for n in sorted(cluster_topics) if spec.matches(n) and not n.startswith("__")]
            for name in matched:
                chosen.setdefault(name, _matched_spec(config, name))
            for name in sorted(known - cluster_topics):
                if spec.matches(name) and store.has_history(name):
                    skipped.setdefault(name, "deleted from the cluster (its loaded data and offsets are kept)")
            if not matched:
                if spec.require_match:
                    raise LoadError(f"topics[{i}].pattern: {spec.pattern!r} matches no topic (require_match: true)")
                skipped.setdefault(f"pattern {spec.pattern!r}", "WARN: matches no topic of the cluster")
    return chosen, skipped


def make_plan(config: LoaderConfig, cluster: Cluster, store: OffsetStore, run_id: str | None = None) -> Plan:
    """Compute the next run's ranges (nothing is written)."""
    layout = cluster.describe()
    chosen, skipped = select_topics(config, set(layout), store)
    existing = [r for t in chosen for r in store.all_run_ids(t)]
    plan = Plan(run_id or new_run_id(existing), now_ms(), skipped=skipped)
    for topic, spec in sorted(chosen.items()):
        committed = store.committed_offsets(topic)
        history = store.has_history(topic)
        origins = store.committed_origins(topic) if config.dedup_window else {}
        closed = store.closed_below(topic, spec.late_data.allowed_lateness_ms)
        partitions = []
        unavailable = []
        for partition in sorted(layout[topic]):
            if layout[topic][partition] < 0:
                unavailable.append(partition)  # loaded by a later run, from its saved offset
                continue
            try:
                earliest, latest = cluster.bounds(topic, partition)
            except (LeaderNotAvailableError, BrokerConnectionError):  # its leader died since describe()
                unavailable.append(partition)
                continue
            except KafkaError as exc:
                raise LoadError(f"{topic}-{partition}: cannot read its offsets: {exc}") from None
            if partition in committed:
                start, reason = committed[partition], "saved offset"
            elif history:
                start, reason = earliest, "new partition: earliest"
            else:
                start = cluster.resolve(topic, partition, config.reset, earliest, latest)
                reason = f"no saved offset: reset {config.reset}"
            gap = None
            if start < earliest or start > latest:
                if start < earliest and config.out_of_range == "earliest":
                    gap = [start, earliest]
                    reason += f"; out of range, moved to earliest (gap {start}..{earliest})"
                    start = earliest
                else:
                    raise OutOfRangeError(topic, partition, start, earliest, latest)
            partitions.append({
                "partition": partition, "start": start, "end": latest, "earliest": earliest, "latest": latest,
                "leader": layout[topic][partition], "reason": reason, "gap": gap,
                "ranges": [list(r) for r in split_range(start, latest, config.max_range_records)],
                # hours below this one had closed when the run was planned: their records are late (late_data)
                "closed_below": closed.get(partition),
            })
            if config.dedup_window:  # the origin index the run starts from (pipelines.origin_index)
                partitions[-1]["origins"] = OriginIndex.from_json(origins.get(partition), config.dedup_window).to_json()
        plan.topics[topic] = {
            "version": 1, "run_id": plan.run_id, "topic": topic, "planned_ms": plan.planned_ms,
            "spec": spec.to_dict(), "max_range_records": config.max_range_records, "partitions": partitions,
            "out_of_range": config.out_of_range, "unavailable_partitions": unavailable,
        }
    return plan


def plan_from_docs(run_id: str, docs: dict[str, dict], resumed: bool = False) -> Plan:
    planned = min((d.get("planned_ms") or 0 for d in docs.values()), default=0)
    return Plan(run_id, planned, topics=dict(docs), resumed=resumed)
