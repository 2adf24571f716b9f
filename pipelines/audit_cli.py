"""`logbus audit`: count loaded (or planned) ranges per event hour at the cluster (pipelines.audit).

    logbus audit [--config conf/loader.yaml] [--topic T ...] [--run-id RUN_ID]
    logbus audit --source-cluster HOST:PORT [...]   (a mirrored topic's rows against its source clusters)

Without ``--run-id``: every range of the committed loads that has no count yet. With it: every
planned range of that run (it may still be loading). Counts go to ``<warehouse>/_audit/<topic>/``;
``logbus load completeness`` compares them with what the loads read.
"""

from __future__ import annotations

import argparse
import sys

from broker.tools import CommandError
from pipelines.cli import DEFAULT_CONFIG, _overrides


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", default=DEFAULT_CONFIG, help=f"loader config (default {DEFAULT_CONFIG})")
    parser.add_argument("--bootstrap-server", help="override cluster.bootstrap.servers")
    parser.add_argument("--zookeeper", help="override cluster.zookeeper.connect")
    parser.add_argument("--warehouse", help="override the warehouse URL")
    parser.add_argument("--topic", action="append", help="only this topic (repeatable; default: every loaded topic)")
    parser.add_argument("--run-id", help="audit this run's planned ranges (default: the committed ranges not audited yet)")
    parser.add_argument("--source-cluster", action="append", metavar="HOST:PORT",
                        help="a source cluster of the mirror (repeatable): count the source partitions the warehouse "
                             "holds births of, and compare with the warehouse rows (pipelines.source_audit)")


def run(args: argparse.Namespace) -> int:
    from pipelines.audit import audit_committed, audit_run
    from pipelines.config import ConfigError, load_config
    from pipelines.errors import LoadError

    try:
        config = load_config(args.config, _overrides(args))
    except ConfigError as exc:
        raise CommandError(f"bad loader config: {exc}") from None
    for topic in args.topic or ():
        if config.spec_for(topic) is None:
            raise CommandError(f"topic {topic!r} is not in the loader config's topics")
    say = lambda line: print(f"  {line}", file=sys.stderr, flush=True)  # noqa: E731
    if args.source_cluster:
        return _sources(config, args, say)
    try:
        counts = audit_run(config, args.run_id, args.topic, say) if args.run_id else audit_committed(config, args.topic, say)
    except LoadError as exc:
        raise CommandError(str(exc)) from None
    except OSError as exc:
        raise CommandError(f"{config.warehouse}: {exc}") from None
    topics = sorted({c.topic for c in counts})
    print(f"audited {len(counts)} range(s) of {len(topics)} topic(s): {sum(c.records for c in counts):,} records"
          + (f" ({', '.join(topics)})" if topics else " (nothing new to audit)"))
    return 0


def _sources(config, args: argparse.Namespace, say) -> int:
    """``--source-cluster``: the warehouse rows of mirrored topics against their source partitions."""
    from pipelines.completeness import hour_name
    from pipelines.errors import LoadError
    from pipelines.manifest import OffsetStore
    from pipelines.source_audit import audit_sources, source_ids

    try:
        sources = source_ids(args.source_cluster, config)
        topics = args.topic or [t for t in OffsetStore(config.warehouse_fs()).topics() if config.spec_for(t) is not None]
        counts = [c for t in topics for c in audit_sources(config, t, sources, say)]
    except LoadError as exc:
        raise CommandError(str(exc)) from None
    for c in counts:
        hours = c.mismatched_hours()
        print(f"{c.cluster_id} {c.topic}-{c.partition} [{c.start}, {c.end}): source {sum(c.source.values()):,}, "
              f"warehouse {sum(c.warehouse.values()):,}"
              + (f"  MISMATCH in hour(s) {', '.join(hour_name(h) for h in hours)}" if hours else "  ok"))
    missing = sum(max(0, c.missing) for c in counts)
    bad = [c for c in counts if c.mismatched_hours()]
    if bad:
        raise CommandError(f"{len(bad)} source partition(s) differ from the warehouse ({missing:,} source records "
                           "without a row)")
    print(f"{len(counts)} source partition(s) of {len(sources)} cluster(s): every source record of the spans "
          "is in the warehouse once")
    return 0
