#!/usr/bin/env python3
"""logbus's Python Producer against kafka-python's (and librdkafka's, for scale), one broker.

    .venv/bin/python bench/clients_producer.py [--records N] [--acks 1] [--repeat 2] [--profile]

Starts an embedded ZooKeeper and one broker on free ports (everything stopped on exit),
creates one topic per run (1 partition), and for each client sends N 100-byte records
without keys as fast as it can (async, default batching: batch.size 16384, linger.ms 5 for
every client), then flushes. records/s = N / (time of the sends + the flush), measured in the
same process run for every client, alternating the clients ``--repeat`` times. With
``--profile`` our producer's run is sampled with py-spy into bench/results/producer.svg.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from broker.client.admin import AdminClient  # noqa: E402
from broker.client.producer import Producer  # noqa: E402
from broker.cluster.embedded_zk import EmbeddedZooKeeper  # noqa: E402
from broker.cluster.local import BrokerProcess  # noqa: E402
from broker.cluster.net import free_port  # noqa: E402

VALUE = b"x" * 100


def _topic(bootstrap: str, name: str) -> str:
    topic = f"{name}-{uuid.uuid4().hex[:6]}"
    with AdminClient(bootstrap) as admin:
        admin.create_topic(topic, 1, 1)
    return topic


def _send_rate(producer, topic: str, n: int) -> float:
    """Records per second of ``n`` sends and a flush, after one warm-up send (our and kafka-python's
    producers share the ``send(topic, value).get()`` / ``flush()`` / ``close()`` interface)."""
    producer.send(topic, b"warm-up").get(10)
    send = producer.send
    start = time.perf_counter()
    for _ in range(n):
        send(topic, VALUE)
    producer.flush()
    elapsed = time.perf_counter() - start
    producer.close()
    return n / elapsed


def run_logbus(bootstrap: str, n: int, acks: str) -> float:
    topic = _topic(bootstrap, "logbus")
    return _send_rate(Producer({"bootstrap.servers": bootstrap, "acks": acks, "linger.ms": 5}), topic, n)


def run_kafka_python(bootstrap: str, n: int, acks: str) -> float:
    from kafka import KafkaProducer

    topic = _topic(bootstrap, "kafkapy")
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks=int(acks) if acks != "all" else "all", linger_ms=5)
    return _send_rate(producer, topic, n)


def run_librdkafka(bootstrap: str, n: int, acks: str) -> float:
    from confluent_kafka import Producer as RdProducer

    topic = _topic(bootstrap, "rdkafka")
    producer = RdProducer({"bootstrap.servers": bootstrap, "acks": acks, "linger.ms": 5, "queue.buffering.max.messages": 1_000_000})
    producer.produce(topic, b"warm-up")
    producer.flush(10)
    produce, poll = producer.produce, producer.poll
    start = time.perf_counter()
    for i in range(n):
        while True:
            try:
                produce(topic, VALUE)
                break
            except BufferError:
                poll(0.001)
        if i % 10000 == 0:
            poll(0)
    producer.flush()
    return n / (time.perf_counter() - start)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=300_000)
    parser.add_argument("--acks", default="1")
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args()
    home = Path(tempfile.mkdtemp(prefix="logbus-bench-producer-"))
    zk = EmbeddedZooKeeper(home / "zk")
    zk.start()
    broker = None
    try:
        props = {
            "broker.id": "1",
            "listeners": f"PLAINTEXT://127.0.0.1:{free_port()}",
            "log.dirs": str(home / "data"),
            "zookeeper.connect": zk.connect_string + "/bench",
        }
        broker = BrokerProcess(props, home / "broker")
        broker.start()
        results: dict[str, list[float]] = {"logbus": [], "kafka-python": [], "librdkafka": []}
        runners = {"logbus": run_logbus, "kafka-python": run_kafka_python, "librdkafka": run_librdkafka}
        for round_ in range(args.repeat):
            for name, runner in runners.items():
                spy = None
                if args.profile and name == "logbus" and round_ == 0:
                    out = REPO / "bench" / "results" / "producer.svg"
                    out.parent.mkdir(parents=True, exist_ok=True)
                    spy = subprocess.Popen(
                        [str(Path(sys.executable).with_name("py-spy")), "record", "-o", str(out), "-p", str(os.getpid()), "--threads", "-r", "200"],
                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                    )
                    time.sleep(1)
                rate = runner(broker.bootstrap, args.records, args.acks)
                if spy is not None:
                    spy.terminate()
                    spy.wait(30)
                results[name].append(rate)
                print(f"round {round_ + 1}: {name:<13} {rate:>10,.0f} records/s", file=sys.stderr, flush=True)
        print(f"\n{args.records:,} records of 100 bytes, acks={args.acks}, one broker, 1 partition (best of {args.repeat})")
        best = {k: max(v) for k, v in results.items()}
        for name, rate in best.items():
            print(f"  {name:<13} {rate:>10,.0f} records/s  {rate * 100 / 1e6:6.2f} MB/s")
        print(f"  logbus / kafka-python = {best['logbus'] / best['kafka-python']:.2f}x")
        return 0
    finally:
        if broker is not None:
            broker.stop()
        zk.stop()


if __name__ == "__main__":
    sys.exit(main())
