"""`logbus mirror-maker` (and `python -m mirror`): Kafka's MirrorMaker flags.

    logbus mirror-maker --consumer.config dc1.properties --consumer.config dc2.properties \\
        --producer.config aggregate.properties --whitelist 'events\\..*' --num.streams 4
    logbus mirror-maker --status [--status.file F]
"""

from __future__ import annotations

import argparse
import json
import logging
import sys

from broker.config import ConfigError


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--consumer.config", dest="consumer_configs", action="append", default=[], metavar="FILE",
                        help="consumer .properties of one source cluster (repeat: one per source/datacenter)")
    parser.add_argument("--producer.config", dest="producer_config", metavar="FILE",
                        help="producer .properties of the aggregate cluster (acks=all, idempotence are enforced)")
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--whitelist", "--include", dest="whitelist", metavar="REGEX",
                       help="mirror the topics whose whole name matches REGEX (new ones are picked up live)")
    group.add_argument("--blacklist", dest="blacklist", metavar="REGEX",
                       help="mirror every topic except those whose whole name matches REGEX")
    parser.add_argument("--num.streams", dest="num_streams", type=int, default=1, metavar="N",
                        help="consumer streams (and copying threads) per source (default 1)")
    parser.add_argument("--topic.prefix", dest="topic_prefixes", action="append", default=[], metavar="PREFIX",
                        help="prefix for target topic names; the n-th belongs to the n-th --consumer.config "
                             "(also the key topic.prefix in a consumer config)")
    parser.add_argument("--abort.on.send.failure", dest="abort_on_send_failure", default="true",
                        metavar="true|false", help="stop when a send fails for good (default true: never skip data)")
    parser.add_argument("--offset.commit.interval.ms", dest="offset_commit_interval_ms", type=int, default=5000,
                        metavar="MS", help="flush the producer and commit source offsets this often (default 5000)")
    parser.add_argument("--stats.interval.ms", dest="stats_interval_ms", type=int, default=5000, metavar="MS",
                        help="log rate and lag per source and topic this often, and write the status file")
    parser.add_argument("--target.replication.factor", dest="target_replication_factor", type=int, default=-1,
                        metavar="N", help="replication factor of target topics the mirror creates (default: broker's)")
    parser.add_argument("--status.file", dest="status_file", default=None, metavar="FILE",
                        help="where the running mirror writes its status (JSON)")
    parser.add_argument("--metrics.port", dest="metrics_port", type=int, default=0, metavar="PORT",
                        help="serve Prometheus metrics at http://HOST:PORT/metrics (default 0: off)")
    parser.add_argument("--metrics.host", dest="metrics_host", default=None, metavar="HOST",
                        help="interface of the metrics endpoint (default 0.0.0.0: all)")
    parser.add_argument("--resume.scan.max.records", dest="resume_scan_max_records", type=int, default=100_000,
                        metavar="N", help="records of each target partition's tail read back at a (re)start or "
                                          "takeover to resume exactly where the copies end (default 100000; 0: off)")
    parser.add_argument("--sync.topic.configs.interval.ms", dest="sync_topic_configs_interval_ms", type=int,
                        default=60000, metavar="MS",
                        help="apply source topics' config changes to their targets this often (default 60000; 0: off)")
    parser.add_argument("--refresh.topics.interval.ms", dest="refresh_topics_interval_ms", type=int, default=60000,
                        metavar="MS", help="add partitions added at a source to its target this often (default 60000; "
                                           "0: off)")
    parser.add_argument("--sync.group.offsets", dest="sync_group_offsets", action="store_true",
                        help="translate the sources' consumer groups' offsets into the aggregate cluster every "
                             "--sync.group.offsets.interval.ms (groups inactive there; only moved forward)")
    parser.add_argument("--sync.group.offsets.interval.ms", dest="sync_group_offsets_interval_ms", type=int,
                        default=60000, metavar="MS", help="how often --sync.group.offsets runs (default 60000)")
    parser.add_argument("--status", action="store_true",
                        help="print the status (rate, lag per source and topic) of a running mirror and exit")
    parser.add_argument("--json", action="store_true", help="with --status: print the raw JSON")
    parser.add_argument("--log-level", dest="log_level", default="INFO", help="logging level (default INFO)")


def run(args: argparse.Namespace) -> int:
    from broker.tools import CommandError
    from mirror.config import DEFAULT_STATUS_FILE, build_config
    from mirror.stats import format_status, read_status

    if args.status:
        path = args.status_file or DEFAULT_STATUS_FILE
        try:
            status = read_status(path)
        except (OSError, ValueError) as exc:
            raise CommandError(f"no status in {path} ({exc}); is a mirror-maker running with this --status.file?") from None
        print(json.dumps(status, indent=1, sort_keys=True) if args.json else format_status(status))
        return 0
    logging.basicConfig(level=getattr(logging, str(args.log_level).upper(), logging.INFO),
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s", stream=sys.stderr)
    try:
        config = build_config(
            args.consumer_configs, args.producer_config,
            whitelist=args.whitelist, blacklist=args.blacklist, num_streams=args.num_streams,
            topic_prefixes=args.topic_prefixes, abort_on_send_failure=args.abort_on_send_failure,
            offset_commit_interval_ms=args.offset_commit_interval_ms, stats_interval_ms=args.stats_interval_ms,
            status_file=args.status_file, target_replication_factor=args.target_replication_factor,
            metrics_port=args.metrics_port, metrics_host=args.metrics_host,
            resume_scan_max_records=args.resume_scan_max_records,
            sync_topic_configs_interval_ms=args.sync_topic_configs_interval_ms,
            refresh_topics_interval_ms=args.refresh_topics_interval_ms,
            sync_group_offsets=args.sync_group_offsets,
            sync_group_offsets_interval_ms=args.sync_group_offsets_interval_ms,
        )
    except ConfigError as exc:
        raise CommandError(str(exc)) from None
    from broker.client.connection import BrokerConnectionError
    from broker.cluster.zk import ZkError
    from broker.protocol.errors import KafkaError
    from mirror.maker import MirrorError, MirrorMaker

    try:
        return MirrorMaker(config).run()
    except (MirrorError, ConfigError) as exc:
        raise CommandError(str(exc)) from None
    except (BrokerConnectionError, KafkaError, ZkError, OSError) as exc:
        logging.getLogger("mirror").debug("the mirror could not run", exc_info=True)
        raise CommandError(f"{type(exc).__name__}: {exc}") from None
