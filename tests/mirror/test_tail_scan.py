"""Exact resume's tail scan (mirror.resume.TailScanner) against a real broker: the highest copy
of a source partition among copies of other sources, the key-placed case's skip set, the bound,
a tail written by someone else and origin headers that do not parse."""

from __future__ import annotations

import logging
import uuid

import pytest

from broker.client.admin import AdminClient
from broker.client.producer import Producer
from mirror.origin import HEADER, Origin
from mirror.resume import Resume, TailScanner
from tests.waiting import wait_until

pytestmark = pytest.mark.integration


@pytest.fixture
def broker(module_broker):
    """The module's one broker (tests/conftest.py): every test here creates topics and groups of
    its own on it, and none stops or reconfigures it."""
    return module_broker


def _topic(broker, partitions: int) -> str:
    name = f"agg-{uuid.uuid4().hex[:8]}"
    with AdminClient(broker.bootstrap) as admin:
        admin.create_topic(name, partitions, 1, {})

    def ready() -> bool:
        with AdminClient(broker.bootstrap) as admin:
            d = admin.describe_topics([name])[0]
        return len(d.partitions) == partitions and all(p.leader >= 0 for p in d.partitions)

    wait_until(ready, 20, what=f"{name} ready")
    return name


def _write(broker, topic: str, records: list[tuple[int, list]]) -> None:
    """(target partition, headers) per record, in order."""
    producer = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all", "linger.ms": "1"})
    try:
        for i, (partition, headers) in enumerate(records):
            producer.send(topic, b"v%d" % i, b"k%d" % (i % 7), partition, headers)
        producer.flush(30)
    finally:
        producer.close()


def _copy(cluster: str, topic: str, partition: int, offset: int) -> list:
    return [(HEADER, Origin(cluster, topic, partition, offset).encode())]


def test_kept_partition_resumes_after_the_highest_copy_among_other_sources(broker) -> None:
    target = _topic(broker, 2)
    records = []
    for i in range(3000):  # dc1-0 up to 1499 interleaved with dc2-0; then 2500 records of dc2 only
        records.append((0, _copy("dc1", "events", 0, 100 + i)) if i < 1500 else (0, _copy("dc2", "events", 0, i)))
    records += [(0, _copy("dc2", "events", 0, 5000 + i)) for i in range(2500)]
    _write(broker, target, records)
    scanner = TailScanner(broker.bootstrap)
    try:
        assert scanner.resume("dc1", "events", 0, 700, target, [0, 1], kept=True) == Resume(1600, found=True)
        # a committed offset past the copies wins (it is never moved back)
        assert scanner.resume("dc1", "events", 0, 2000, target, [0, 1], kept=True).start == 2000
        # nothing of dc3 within the bound: the committed offset
        assert scanner.resume("dc3", "events", 0, 42, target, [0, 1], kept=True) == Resume(42)
        assert scanner.resume("dc1", "events", 0, None, target, [0, 1], kept=True).start == 1600
        # another partition of the same source has no copies here
        assert scanner.resume("dc1", "events", 1, 7, target, [0, 1], kept=True) == Resume(7)
    finally:
        scanner.close()
    bounded = TailScanner(broker.bootstrap, max_records=2000)
    try:  # dc1's copies lie 2500+ records back: beyond a 2000-record bound
        assert bounded.resume("dc1", "events", 0, 700, target, [0, 1], kept=True) == Resume(700)
        assert bounded.records_read == 2000
    finally:
        bounded.close()
    off = TailScanner(broker.bootstrap, max_records=0)
    assert off.resume("dc1", "events", 0, 700, target, [0, 1], kept=True) == Resume(700)


def test_key_placed_copies_give_the_offsets_to_skip(broker) -> None:
    target = _topic(broker, 3)
    # source offsets 0..59 spread over three partitions; partition 2 got only up to 40 (its later
    # batches were lost in a crash), partition 1 up to 59
    records = [(o % 3, _copy("dc1", "clicks", 4, o)) for o in range(60) if not (o % 3 == 2 and o > 40)]
    _write(broker, target, records)
    scanner = TailScanner(broker.bootstrap)
    try:
        resume = scanner.resume("dc1", "clicks", 4, 30, target, [0, 1, 2], kept=False)
    finally:
        scanner.close()
    expected = {o for o in range(30, 60) if not (o % 3 == 2 and o > 40)}
    assert resume == Resume(30, frozenset(expected), found=True)
    assert 44 not in resume.skip  # lost: copied again


def test_a_tail_without_origin_headers_and_bad_headers_fall_back_to_the_committed_offset(broker, caplog) -> None:
    target = _topic(broker, 1)
    records = [(0, [("trace", b"x")]) for _ in range(50)]
    records += [(0, [(HEADER, b"not-an-origin")]), (0, [(HEADER, b"dc1:events:0:notanumber")])]
    _write(broker, target, records)
    scanner = TailScanner(broker.bootstrap)
    caplog.set_level(logging.WARNING, logger="mirror.resume")
    try:
        for _ in range(2):
            assert scanner.resume("dc1", "events", 0, 11, target, [0], kept=True) == Resume(11)
    finally:
        scanner.close()
    warnings = [r.getMessage() for r in caplog.records]
    assert len([w for w in warnings if "does not parse" in w]) == 1, warnings  # said once
    assert any(f"{target}-0 offset 50" in w for w in warnings), warnings
    assert len([w for w in warnings if "has a logbus.origin header" in w]) == 1, warnings
    # an unknown target topic: the committed offset, no exception
    scanner = TailScanner(broker.bootstrap)
    try:
        assert scanner.resume("dc1", "events", 0, 5, f"missing-{uuid.uuid4().hex[:6]}", [0], kept=True) == Resume(5)
    finally:
        scanner.close()
