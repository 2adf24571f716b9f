"""`logbus console` in Debian's headless chromium (selenium + chromium-driver) against a real
3-broker cluster with a librdkafka group and a ZooKeeper (offset-only) group, a load completed
by the loader and a mirror copying another cluster in: every page loads with no request leaving
the console's own 127.0.0.1 address, shows the numbers the brokers (the warehouse, the mirror)
give, and a lagging group turns WARN, then OK once it catches up."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from broker.client.zk_consumer import ZookeeperConsumerConnector
from broker.tools import log_dirs
from pipelines.config import load_config
from pipelines.loader import Loader
from tests.producing import produce
from tests.starting import start_together
from tests.teardown import terminate
from tests.waiting import wait_until

pytestmark = pytest.mark.integration  # Debian's chromium and chromium-driver: installed by make setup

ROOT = Path(__file__).resolve().parents[2]
TOPIC, PARTITIONS = "events", 6
CLICKS = 200  # records in the mirrored cluster's topic
PAGES = {"cluster": "/", "topics": "/topics", "topic": f"/topics/{TOPIC}", "groups": "/groups", "group": "/groups/rdk",
         "loads": "/loads", "mirrors": "/mirrors"}


@pytest.fixture
def console_url(broker_factory, zk_chroot, tmp_path) -> Iterator[tuple[str, str, Path]]:
    """Three brokers and a topic; a one-broker cluster "dc1" whose topic a mirror copies in; a
    loader config for the topic; `logbus console` sampling every 0.5 s with the loads and the
    mirror's status. Yields (console URL, bootstrap, loader config)."""
    from tests.mirror.conftest import MirrorProcess

    dc1 = broker_factory(broker_id=1, overrides={"zookeeper.connect": f"{zk_chroot}/dc1"}, start=False)
    dc1.start(wait=False)
    brokers = start_together([broker_factory(broker_id=i + 1, start=False) for i in range(3)])
    dc1.wait_ready()
    bootstrap = ",".join(b.bootstrap for b in brokers)
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(TOPIC, PARTITIONS, 3)], operation_timeout=20)[TOPIC].result(30)
    produce(dc1.bootstrap, "clicks", [{"value": f"c{i}".encode()} for i in range(CLICKS)])
    mirror = MirrorProcess(tmp_path / "mirror", [{"bootstrap.servers": dc1.bootstrap, "group.id": "mirror",
                                                  "mirror.source.name": "dc1", "metadata.max.age.ms": "1000"}],
                           {"bootstrap.servers": bootstrap}, "--whitelist", "clicks", "--stats.interval.ms", "300",
                           prefixes=["dc1."]).start()
    loader = tmp_path / "loader.yaml"
    loader.write_text(json.dumps({"cluster": {"bootstrap.servers": bootstrap}, "warehouse": f"file://{tmp_path / 'wh'}",
                                  "topics": [{"name": TOPIC, "format": "raw"}], "spark": {"master": "local[2]"}}))
    proc = subprocess.Popen([sys.executable, "-m", "broker.cli", "console", "--bootstrap-server", bootstrap,
                             "--zookeeper", zk_chroot, "--port", "0", "--interval", "0.5", "--window", "3",
                             "--loader-config", str(loader), "--mirror-status", str(mirror.status_file)],
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline() if proc.stdout else ""
        found = re.search(r"(http://127\.0\.0\.1:\d+)/", line)
        assert found, f"no URL from the console: {line!r} {proc.stderr.read() if proc.poll() is not None and proc.stderr else ''}"
        port = found.group(1).rsplit(":", 1)[1]
        taken = subprocess.run([sys.executable, "-m", "broker.cli", "console", "--bootstrap-server", bootstrap, "--port", port],
                               cwd=ROOT, capture_output=True, text=True, timeout=60)
        assert taken.returncode == 1 and taken.stderr.count("\n") == 1, taken.stderr
        assert f"logbus console: error: cannot listen on 127.0.0.1:{port}" in taken.stderr
        yield found.group(1), bootstrap, loader
    finally:
        terminate(proc)
        mirror.stop()


@pytest.fixture
def browser() -> Iterator[object]:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which("chromium") or "chromium"
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1200,900",
                "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync"):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"performance": "ALL"})
    driver = webdriver.Chrome(service=Service(shutil.which("chromedriver")), options=options)
    driver.set_page_load_timeout(20)
    try:
        yield driver
    finally:
        driver.quit()


def requested_urls(driver) -> list[str]:
    """Every URL the page asked for, from chromium's performance (DevTools network) log."""
    import json

    urls = []
    for entry in driver.get_log("performance"):
        message = json.loads(entry["message"])["message"]
        if message["method"] == "Network.requestWillBeSent":
            urls.append(message["params"]["request"]["url"])
    return urls


def cell(driver, css: str) -> str:
    from selenium.webdriver.common.by import By

    return driver.find_element(By.CSS_SELECTOR, css).text


def group_status(driver, url: str) -> str:
    driver.get(url + "/groups/rdk")
    return cell(driver, "#group-status")


def test_every_page_in_chromium_shows_the_brokers_numbers_and_a_lagging_group_turns_warn_then_ok(
        console_url, browser, zk_chroot, tmp_path, spark):
    url, bootstrap, loader_config = console_url
    produce(bootstrap, TOPIC, [{"value": f"v{i}".encode(), "partition": i % PARTITIONS} for i in range(300)])
    with Loader(load_config(loader_config), spark=spark) as loader:
        [load] = loader.run(validate=True)
    assert load.records == 300
    zk_readers = _zookeeper_group(zk_chroot)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "rdk", "enable.auto.commit": False,
                         "auto.offset.reset": "earliest"})
    try:
        consumer.subscribe([TOPIC])
        read = 0
        while read < 300:
            read += len([m for m in consumer.consume(300, 1.0) if not m.error()])
        consumer.commit(asynchronous=False)
        wait_until(lambda: "rdk" in (browser.get(url + "/groups") or browser.page_source)
                   and cell(browser, '[data-group="rdk"] .lag') == "0", 20, what="the group in the console")

        for name, path in PAGES.items():
            browser.get(url + path)
            assert "logbus console" in browser.title, name
            browser.save_screenshot(str(tmp_path / f"console-{name}.png"))
        outside = [u for u in requested_urls(browser) if not u.startswith(url + "/")]
        assert outside == [], f"requests leaving the console: {outside}"

        _the_numbers_are_the_brokers(browser, url, bootstrap, consumer)
        _the_load_and_the_mirror(browser, url, bootstrap, load.run_id)

        # Lagging: each round produces 10 records per partition, and the group commits 3 more of each.
        position = {p: 50 for p in range(PARTITIONS)}

        def lag_grows() -> bool:
            produce(bootstrap, TOPIC, [{"value": b"x", "partition": i % PARTITIONS} for i in range(10 * PARTITIONS)])
            position.update((p, o + 3) for p, o in position.items())
            consumer.commit(offsets=[TopicPartition(TOPIC, p, o) for p, o in position.items()], asynchronous=False)
            return group_status(browser, url) == "WARN"

        wait_until(lag_grows, 20, interval=0.2, what="WARN while the group falls behind")
        browser.save_screenshot(str(tmp_path / "console-group-warn.png"))

        def caught_up() -> bool:
            ends = [consumer.get_watermark_offsets(TopicPartition(TOPIC, p), timeout=10)[1] for p in range(PARTITIONS)]
            consumer.commit(offsets=[TopicPartition(TOPIC, p, end) for p, end in enumerate(ends)], asynchronous=False)
            return group_status(browser, url) == "OK"

        wait_until(caught_up, 20, interval=0.2, what="OK once the group caught up")
        assert cell(browser, "#total-lag") == "0"
        browser.save_screenshot(str(tmp_path / "console-group-ok.png"))
        browser.get(url + "/metrics")
        assert 'logbus_consumer_group_status{group="rdk",status="OK"} 1' in browser.page_source
    finally:
        consumer.close()
        zk_readers.shutdown()


def _the_load_and_the_mirror(browser, url: str, bootstrap: str, run_id: str) -> None:
    """The Loads page's run against what the loader committed, its Data Docs page served by the
    console; the Mirrors page's copied count against the aggregate's topic."""
    browser.get(url + "/loads")
    row = f'[data-run="{run_id}"][data-topic="{TOPIC}"]'
    cells = [c.text for c in browser.find_elements("css selector", f"{row} td")]
    assert cells[3] == "committed" and cells[6] == "300" and cells[9] == "passed", cells
    browser.find_element("css selector", f"{row} a").click()
    assert f"{TOPIC}" in browser.page_source and run_id in browser.page_source  # the run's own page, offline
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "count"})
    try:
        wait_until(lambda: sum(consumer.get_watermark_offsets(TopicPartition("dc1.clicks", p), timeout=10)[1]
                               for p in range(len(consumer.list_topics("dc1.clicks", timeout=10).topics["dc1.clicks"].partitions)))
                   == CLICKS, 30, 0.3, what="the mirror's copies in the aggregate")
    finally:
        consumer.close()

    def copied() -> str:
        browser.get(url + "/mirrors")
        return cell(browser, '[data-source="dc1"][data-topic="clicks"] td:nth-child(3)')

    wait_until(lambda: copied() == str(CLICKS), 20, 0.3, what="the Mirrors page to count every copy")
    assert "running" in browser.page_source


def _zookeeper_group(zk_chroot: str) -> ZookeeperConsumerConnector:
    """A ZooKeeper consumer group (Kafka 0.8's high-level consumer) that has read 30 records of
    partition 0's 50 and committed them; it stays registered, owning every partition."""
    connector = ZookeeperConsumerConnector({"zookeeper.connect": zk_chroot, "group.id": "zk-readers",
                                            "auto.offset.reset": "smallest", "auto.commit.enable": "false",
                                            "rebalance.backoff.ms": "200", "consumer.timeout.ms": "10000"})
    stream = connector.create_message_streams({TOPIC: 1})[TOPIC][0]
    read = 0
    for message in stream:
        read += message.partition == 0
        if read == 30:
            break
    connector.commit_offsets()
    return connector


def _the_numbers_are_the_brokers(browser, url: str, bootstrap: str, consumer: Consumer) -> None:
    """The console's counts and offsets against what librdkafka asks the brokers."""
    from selenium.webdriver.common.by import By

    metadata = AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=10)
    replicas: dict[int, int] = {}
    leaders: dict[int, int] = {}
    for t in metadata.topics.values():  # the mirror's target topic counts too
        for p in t.partitions.values():
            leaders[p.leader] = leaders.get(p.leader, 0) + 1
            for r in p.replicas:
                replicas[r] = replicas.get(r, 0) + 1
    browser.get(url + "/")
    assert cell(browser, "#controller") == str(metadata.controller_id)
    for broker_id in metadata.brokers:
        row = browser.find_element(By.CSS_SELECTOR, f'[data-broker="{broker_id}"]').find_elements(By.TAG_NAME, "td")
        assert (row[4].text, row[5].text) == (str(replicas.get(broker_id, 0)), str(leaders.get(broker_id, 0)))
    browser.get(url + f"/topics/{TOPIC}")
    committed = {tp.partition: tp.offset for tp in consumer.committed([TopicPartition(TOPIC, p) for p in range(PARTITIONS)])}
    for p in range(PARTITIONS):
        low, high = consumer.get_watermark_offsets(TopicPartition(TOPIC, p), timeout=10)
        assert cell(browser, f'[data-partition="{p}"] .start') == str(low)
        assert cell(browser, f'[data-partition="{p}"] .end') == str(high)
        assert cell(browser, f'[data-partition="{p}"] .leader') == str(metadata.topics[TOPIC].partitions[p].leader)
    sized = set()
    for broker in log_dirs.describe(bootstrap, None, [TOPIC])["brokers"]:  # DescribeLogDirs, asked of each broker
        for d in broker["logDirs"]:
            for found in d["partitions"]:
                p = int(found["partition"].rsplit("-", 1)[1])
                if metadata.topics[TOPIC].partitions[p].leader == broker["broker"]:
                    assert cell(browser, f'[data-partition="{p}"] .size') == str(found["size"]) != "0"
                    sized.add(p)
    assert sized == set(range(PARTITIONS))
    browser.get(url + "/groups/rdk")
    for p in range(PARTITIONS):
        assert cell(browser, f'[data-topic="{TOPIC}"][data-partition="{p}"] .committed') == str(committed[p])
    browser.get(url + "/groups/zk-readers")
    high0 = consumer.get_watermark_offsets(TopicPartition(TOPIC, 0), timeout=10)[1]
    committed0 = cell(browser, f'[data-topic="{TOPIC}"][data-partition="0"] .committed')
    assert int(committed0) >= 30 and cell(browser, f'[data-topic="{TOPIC}"][data-partition="0"] .lag') == str(high0 - int(committed0))
    owners = {cell(browser, f'[data-topic="{TOPIC}"][data-partition="{p}"] .owner') for p in range(PARTITIONS)}
    assert len(owners) == 1 and owners.pop().startswith("zk-readers_"), "one registered ZooKeeper consumer owns them all"
    assert "zk-readers_" in cell(browser, "#members")
