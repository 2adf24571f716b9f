"""Shared fixtures: a real ZooKeeper per session, a private chroot per test, broker processes."""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

import pytest
from hypothesis import settings

from broker.cluster.embedded_zk import EmbeddedZooKeeper
from broker.cluster.local import BrokerProcess
from broker.cluster.net import free_port
from broker.cluster.zk import ZkClient
from tests.jvm import finish_spark_archive_build, start_spark_archive_build, use_short_lived_jvms
from tests.ordering import slowest_files_first
from tests.teardown import delete_znodes, stopping

# CI machines are slow and shared: judge hypothesis tests by their properties, not their speed.
settings.register_profile("logbus", deadline=None)
settings.load_profile("logbus")

use_short_lived_jvms()


# Fixtures that start a process or a service (directly or through the fixtures they use): a test
# using any of them is an integration test. `make test-fast` (pytest -m "not integration") runs
# the rest: unit and property tests, no ZooKeeper, broker, Spark, JVM or Airflow.
INTEGRATION_FIXTURES = frozenset({
    "zookeeper", "zk_chroot", "zk_client", "broker_factory", "broker", "module_broker", "group_broker", "cluster", "clusters",
    "mirrors", "spark", "airflow_db", "pushgateway", "compose",
})


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark every test that uses a process-starting fixture as ``integration`` (modules that start
    processes themselves say so with ``pytestmark = pytest.mark.integration``), and hand the
    slowest files to the workers first (tests/ordering.py)."""
    for item in items:
        if INTEGRATION_FIXTURES.intersection(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.integration)
    slowest_files_first(items)


def pytest_configure(config: pytest.Config) -> None:
    """Reap what killed sessions left running, then mark this session's children (tests/reaper.py)."""
    from tests.reaper import mark_session, reap_orphans

    reaped = reap_orphans()
    if reaped:
        print(f"reaped {len(reaped)} processes left by killed test sessions: {reaped}")
    mark_session()


@pytest.fixture(scope="session", autouse=True)
def spark_archive(request: pytest.FixtureRequest) -> Iterator[None]:
    """A session with integration tests builds the Spark JVMs' class-data archive (tests/jvm.py)
    beside its first tests, once per machine; the JVMs started after it start seconds faster."""
    wanted = any(item.get_closest_marker("integration") for item in request.session.items)
    builder = start_spark_archive_build() if wanted else None
    yield
    finish_spark_archive_build(builder)


@pytest.fixture(scope="session")
def zookeeper(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedZooKeeper]:
    """One real ZooKeeper server (Debian's jar) on a free port for the whole run."""
    zk = EmbeddedZooKeeper(tmp_path_factory.mktemp("zookeeper"))
    zk.start()
    try:
        yield zk
    finally:
        zk.stop()


@pytest.fixture
def zk_chroot(zookeeper: EmbeddedZooKeeper) -> Iterator[str]:
    """A connect string with a chroot of its own, so tests never see each other's nodes."""
    chroot = f"/t-{uuid.uuid4().hex[:12]}"
    yield f"{zookeeper.connect_string}{chroot}"
    delete_znodes(zookeeper.connect_string, [chroot])


@pytest.fixture
def zk_client(zk_chroot: str) -> Iterator[ZkClient]:
    """A started ZkClient on the test's chroot."""
    client = ZkClient(zk_chroot, session_timeout_ms=6000)
    client.start(timeout=10)
    try:
        yield client
    finally:
        client.stop()


BrokerFactory = Callable[..., BrokerProcess]


def broker_props(broker_id: int, home: Path, zk_connect: str) -> dict[str, str]:
    """A test broker's server.properties: a free port, log dirs under ``home``, short ZooKeeper sessions."""
    return {
        "broker.id": str(broker_id),
        "listeners": f"PLAINTEXT://127.0.0.1:{free_port()}",
        "log.dirs": str(home / "data"),
        "zookeeper.connect": zk_connect,
        # short sessions: a kill -9'd broker's registration expires quickly
        "zookeeper.session.timeout.ms": "6000",
    }


@pytest.fixture
def broker_factory(zk_chroot: str, tmp_path: Path) -> Iterator[BrokerFactory]:
    """``broker_factory(overrides=None, broker_id=None, start=True)`` starts a broker process
    on a free port with its own log dirs, in the test's chroot; all are stopped at teardown.
    Brokers of one test form one cluster. ``overrides`` are passed as ``--override k=v``."""
    ids = itertools.count(1)
    used: set[int] = set()
    seq = itertools.count(1)

    def make(
        overrides: Mapping[str, object] | None = None, broker_id: int | None = None, start: bool = True
    ) -> BrokerProcess:
        bid = broker_id if broker_id is not None else next(i for i in ids if i not in used)
        used.add(bid)
        home = tmp_path / f"broker-{next(seq)}"
        proc = keep(BrokerProcess(broker_props(bid, home, zk_chroot), home, {k: str(v) for k, v in (overrides or {}).items()}))
        if start:
            proc.start()
        return proc

    with stopping(BrokerProcess.stop) as keep:
        yield make


@pytest.fixture
def broker(broker_factory: BrokerFactory) -> BrokerProcess:
    """One running broker with default settings."""
    return broker_factory()


@pytest.fixture(scope="module")
def module_broker(
    request: pytest.FixtureRequest, zookeeper: EmbeddedZooKeeper, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[BrokerProcess]:
    """One running broker with default settings (those of ``broker``), in a chroot of its own,
    for every test of a module: one start instead of one per test. A module whose tests only
    create topics of their own on the broker (none stops, restarts or reconfigures it, nor
    needs its ZooKeeper chroot) opts in by overriding ``broker`` with it::

        @pytest.fixture
        def broker(module_broker):
            return module_broker

    and its tests that do need a broker of their own take ``broker_factory``. The module's
    ``MODULE_BROKER_OVERRIDES`` (a dict), when it has one, are the broker's ``--override``s."""
    chroot = f"/m-{uuid.uuid4().hex[:12]}"
    home = tmp_path_factory.mktemp("module-broker")
    overrides = {k: str(v) for k, v in getattr(request.module, "MODULE_BROKER_OVERRIDES", {}).items()}
    try:
        with stopping(BrokerProcess.stop) as keep:
            yield keep(BrokerProcess(broker_props(1, home, f"{zookeeper.connect_string}{chroot}"), home, overrides)).start()
    finally:
        delete_znodes(zookeeper.connect_string, [chroot])


@pytest.fixture(scope="session")
def spark() -> Iterator[object]:
    """One SparkSession for all the loader and DAG tests of the run (a new SparkContext and its
    Python workers for each module cost seconds each): local[2,4] (two cores, and a failed task
    is retried up to 4 times); the inline load step uses the active session. Stopped at the end."""
    import os

    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pipelines.config import parse_config
    from pipelines.job import make_spark

    cfg = parse_config({"cluster": {"bootstrap.servers": "127.0.0.1:1"}, "warehouse": "file:///tmp",
                        "topics": ["x"], "spark": {"master": "local[2,4]", "conf": {
                            "spark.sql.shuffle.partitions": "2", "spark.driver.memory": "1g"}}})
    session = make_spark(cfg)
    try:
        yield session
    finally:
        session.stop()
