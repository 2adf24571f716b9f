"""The plan without a cluster: a named topic that does not exist fails with one line naming it,
a pattern matching nothing is a warning (an error with require_match: true), and a partition
without a leader is left out of the run and recorded, while the others are planned."""

from __future__ import annotations

import pytest

from broker.protocol.errors import LeaderNotAvailableError
from pipelines.config import ConfigError, parse_config
from pipelines.errors import LoadError
from pipelines.fs import LocalFS
from pipelines.manifest import OffsetStore, build_manifest
from pipelines.plan import incomplete_line, make_plan, select_topics

CLUSTER = {"cluster": {"bootstrap.servers": "127.0.0.1:9092"}, "warehouse": "file:///tmp/w"}


class FakeCluster:
    """Two topics; ``orders`` partition 1 has no leader, partition 2's leader died after describe()."""

    def describe(self) -> dict[str, dict[int, int]]:
        return {"orders": {0: 1, 1: -1, 2: 2}, "clicks": {0: 1}}

    def bounds(self, topic: str, partition: int) -> tuple[int, int]:
        if (topic, partition) == ("orders", 2):
            raise LeaderNotAvailableError("orders-2 has no leader right now")
        return 0, 10

    def resolve(self, topic, partition, policy, earliest, latest) -> int:
        return earliest


def _store(tmp_path) -> OffsetStore:
    return OffsetStore(LocalFS(f"file://{tmp_path}/w"))


def test_a_named_topic_that_does_not_exist_is_one_line_naming_it(tmp_path):
    cfg = parse_config({**CLUSTER, "topics": ["orders", "ordrs"]})
    with pytest.raises(LoadError, match=r"^topics\[1\]\.name: topic 'ordrs' does not exist in the cluster$"):
        select_topics(cfg, {"orders"}, _store(tmp_path))


def test_a_pattern_matching_nothing_warns_unless_required(tmp_path):
    cfg = parse_config({**CLUSTER, "topics": ["orders", {"pattern": "audit\\..*"}]})
    chosen, skipped = select_topics(cfg, {"orders"}, _store(tmp_path))
    assert list(chosen) == ["orders"] and skipped == {"pattern 'audit\\\\..*'": "WARN: matches no topic of the cluster"}
    cfg = parse_config({**CLUSTER, "topics": [{"pattern": "audit\\..*", "require_match": True}]})
    with pytest.raises(LoadError, match=r"topics\[0\]\.pattern: .* matches no topic \(require_match: true\)"):
        select_topics(cfg, {"orders"}, _store(tmp_path))
    with pytest.raises(ConfigError, match="require_match"):
        parse_config({**CLUSTER, "topics": [{"pattern": "a", "require_match": "yes"}]})


def test_partitions_without_a_leader_are_left_out_and_recorded(tmp_path):
    cfg = parse_config({**CLUSTER, "topics": ["orders", "clicks"]})
    plan = make_plan(cfg, FakeCluster(), _store(tmp_path), run_id="r1")  # type: ignore[arg-type]
    assert [p["partition"] for p in plan.topics["orders"]["partitions"]] == [0]
    assert plan.unavailable == {"orders": [1, 2]}
    assert [t.topic for t in plan.tasks()] == ["clicks", "orders"]
    manifest = build_manifest({**plan.topics["orders"], "partitions": []}, [])
    assert manifest["unavailable_partitions"] == [1, 2]
    assert incomplete_line("r1", plan.unavailable) == (
        "run r1 is incomplete: no leader for orders-1, orders-2 (loaded by a later run once they have one)")


def test_the_dags_last_step_fails_an_incomplete_run_after_reporting_it(tmp_path):
    from pipelines.airflow_tasks import report_step
    from pipelines.errors import IncompleteRunError

    config = tmp_path / "loader.yaml"
    config.write_text(f"cluster: {{bootstrap.servers: '127.0.0.1:9092'}}\nwarehouse: file://{tmp_path}/w\ntopics: [orders]\n")
    info = {"run_id": "r1", "mode": "load", "topics": None}
    assert report_step(str(config), "all", info)["run_id"] == "r1"
    with pytest.raises(IncompleteRunError, match="run r1 is incomplete: no leader for orders-1"):
        report_step(str(config), "all", {**info, "unavailable": {"orders": [1]}})


def test_broken_yaml_is_one_short_line_with_its_place(tmp_path):
    from pipelines.config import load_config

    bad = tmp_path / "loader.yaml"
    bad.write_text("cluster: {bootstrap.servers: '127.0.0.1:9092'\nwarehouse: file:///tmp/w\n")
    with pytest.raises(ConfigError) as info:
        load_config(bad)
    assert str(info.value) == f"{bad}: not valid YAML: line 2, column 1: expected ',' or '}}', but got '<scalar>'"
