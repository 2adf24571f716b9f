"""`logbus consumer-perf-test`: Kafka's kafka-consumer-perf-test — read N messages, report the rate.

``--bootstrap-server`` reads every partition with SimpleConsumer; ``--zookeeper`` uses a
ZookeeperConsumerConnector with ``--threads`` streams (one reader thread each). The summary
is Kafka's line: start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg,
nMsg.sec, rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec.
"""

from __future__ import annotations

import argparse
import threading
import time
import uuid
from collections.abc import Callable
from datetime import datetime

from broker.client.connection import BrokerConnectionError
from broker.cluster.zk import ZkError
from broker.config import ConfigError, load_with_overrides
from broker.protocol.errors import KafkaError
from broker.tools import CommandError
from broker.tools.access import access_of_props
from broker.tools.console_consumer import bootstrap_messages

HEADER = ("start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec, "
          "rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--bootstrap-server", metavar="HOST:PORT")
    where.add_argument("--zookeeper", metavar="HOST:PORT[/CHROOT]")
    parser.add_argument("--topic", required=True)
    parser.add_argument("--messages", type=int, required=True, help="how many messages to read")
    parser.add_argument("--fetch-size", type=int, default=1024 * 1024, help="bytes per partition per fetch")
    parser.add_argument("--threads", type=int, default=1, help="streams (--zookeeper)")
    parser.add_argument("--group", default=None, help="group id (--zookeeper; default: a fresh one)")
    parser.add_argument("--from-latest", action="store_true", help="start at the log end instead of the beginning")
    parser.add_argument("--timeout", type=int, default=10000, help="ms without a message before giving up")
    parser.add_argument("--hide-header", action="store_true")
    parser.add_argument("--show-detailed-stats", action="store_true",
                        help="print a line of stats every --reporting-interval (instead of the summary)")
    parser.add_argument("--reporting-interval", type=int, default=5000, metavar="MS", help="interval of the detailed stats")
    parser.add_argument("--consumer.config", dest="consumer_config", metavar="FILE", help="a consumer .properties file")


DETAILED_HEADER = ("time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec, "
                   "rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec")


class Progress:
    """Kafka's --show-detailed-stats: every ``interval_ms`` a line of totals and of the interval's rates."""

    def __init__(self, interval_ms: int, start: float, rebalance_ms: float = 0.0,
                 emit: Callable[[str], None] = print) -> None:
        self.interval_ms, self.emit, self.rebalance_ms = interval_ms, emit, rebalance_ms
        self.last_time, self.last_bytes, self.last_msgs = start, 0, 0

    def update(self, now: float, nbytes: int, nmsg: int) -> None:
        """Called as messages arrive; prints when an interval has passed."""
        if (now - self.last_time) * 1000 >= self.interval_ms:
            self.emit(self.line(now, nbytes, nmsg))

    def line(self, now: float, nbytes: int, nmsg: int) -> str:
        elapsed_ms = max((now - self.last_time) * 1000, 1e-6)
        fetch_ms = max(elapsed_ms - self.rebalance_ms, 1e-6)
        interval_mb = (nbytes - self.last_bytes) / (1024 * 1024)
        interval_msgs = nmsg - self.last_msgs
        text = (f"{_ts(now)}, {nbytes / (1024 * 1024):.4f}, {1000 * interval_mb / elapsed_ms:.4f}, {nmsg}, "
                f"{1000 * interval_msgs / elapsed_ms:.4f}, {self.rebalance_ms:.0f}, {fetch_ms:.0f}, "
                f"{1000 * interval_mb / fetch_ms:.4f}, {1000 * interval_msgs / fetch_ms:.4f}")
        self.last_time, self.last_bytes, self.last_msgs, self.rebalance_ms = now, nbytes, nmsg, 0.0
        return text


def _ts(t: float) -> str:
    return datetime.fromtimestamp(t).strftime("%Y-%m-%d %H:%M:%S:%f")[:-3]


def summary(start: float, end: float, nbytes: int, nmsg: int, rebalance_ms: float = 0.0) -> str:
    mb = nbytes / (1024 * 1024)
    secs = max(end - start, 1e-9)
    fetch_secs = max(secs - rebalance_ms / 1000.0, 1e-9)
    return (f"{_ts(start)}, {_ts(end)}, {mb:.4f}, {mb / secs:.4f}, {nmsg}, {nmsg / secs:.4f}, "
            f"{rebalance_ms:.0f}, {fetch_secs * 1000:.0f}, {mb / fetch_secs:.4f}, {nmsg / fetch_secs:.4f}")


def run(args: argparse.Namespace) -> int:
    if args.messages <= 0:
        raise CommandError("--messages must be positive")
    if args.reporting_interval <= 0:
        raise CommandError("--reporting-interval must be positive")
    try:
        args.consumer_props = load_with_overrides(args.consumer_config, [])
    except (ConfigError, OSError) as exc:
        raise CommandError(str(exc)) from exc
    if args.show_detailed_stats and not args.hide_header:
        print(DETAILED_HEADER)
    if args.bootstrap_server:
        nmsg, nbytes, start, end, rebalance_ms = _run_bootstrap(args)
    else:
        nmsg, nbytes, start, end, rebalance_ms = _run_zookeeper(args)
    if args.show_detailed_stats:
        return 0
    if not args.hide_header:
        print(HEADER)
    print(summary(start, end, nbytes, nmsg, rebalance_ms))
    return 0


def _progress(args: argparse.Namespace, start: float, rebalance_ms: float = 0.0) -> Progress | None:
    return Progress(args.reporting_interval, start, rebalance_ms) if args.show_detailed_stats else None


def _run_bootstrap(args: argparse.Namespace) -> tuple:
    nmsg = nbytes = 0
    start = time.time()
    end = start
    progress = _progress(args, start)
    fetch_size = int(args.consumer_props.get("max.partition.fetch.bytes", args.fetch_size))
    try:
        for m in bootstrap_messages(args.bootstrap_server, [args.topic], None, not args.from_latest,
                                    fetch_size=fetch_size, timeout_ms=args.timeout,
                                    security=access_of_props(args.consumer_props).security):
            nmsg += 1
            nbytes += len(m.value or b"") + len(m.key or b"")
            if progress is not None:
                progress.update(time.time(), nbytes, nmsg)
            if nmsg >= args.messages:
                break
        end = time.time()
    except BrokerConnectionError as exc:
        raise CommandError(str(exc)) from exc
    except KafkaError as exc:
        raise CommandError(f"{type(exc).__name__}: {exc}") from exc
    return nmsg, nbytes, start, end, 0.0


def _run_zookeeper(args: argparse.Namespace) -> tuple:
    from broker.client.zk_consumer import ConsumerTimeoutException, ZookeeperConsumerConnector

    group = args.group or f"perf-consumer-{uuid.uuid4().hex[:8]}"
    start = time.time()
    try:
        connector = ZookeeperConsumerConnector({
            "zookeeper.connect": args.zookeeper, "group.id": group, "auto.commit.enable": "false",
            "auto.offset.reset": "largest" if args.from_latest else "smallest",
            "fetch.message.max.bytes": str(args.fetch_size), "consumer.timeout.ms": str(args.timeout),
            "rebalance.backoff.ms": "500", "rebalance.max.retries": "20", **args.consumer_props,
        })
    except ZkError as exc:
        raise CommandError(str(exc)) from exc
    counts = {"msgs": 0, "bytes": 0}
    lock = threading.Lock()
    done = threading.Event()
    end = [start]
    try:
        try:
            streams = connector.create_message_streams({args.topic: max(args.threads, 1)})[args.topic]
        except Exception as exc:
            raise CommandError(str(exc)) from exc
        rebalance_ms = (time.time() - start) * 1000
        progress = _progress(args, start, rebalance_ms)

        def read(stream) -> None:
            n = b = 0
            try:
                for m in stream:
                    n += 1
                    b += len(m[4] or b"") + len(m[3] or b"")
                    if n % 1000 == 0:
                        with lock:
                            counts["msgs"] += n
                            counts["bytes"] += b
                            n = b = 0
                            if progress is not None:
                                progress.update(time.time(), counts["bytes"], counts["msgs"])
                            if counts["msgs"] >= args.messages:
                                end[0] = time.time()
                                done.set()
                                return
                    if done.is_set():
                        break
            except ConsumerTimeoutException:
                pass
            with lock:
                counts["msgs"] += n
                counts["bytes"] += b
                end[0] = max(end[0], time.time())

        threads = [threading.Thread(target=read, args=(s,), daemon=True) for s in streams]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        connector.shutdown()
    return counts["msgs"], counts["bytes"], start, end[0], rebalance_ms
