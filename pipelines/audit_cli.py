"""`logbus audit`: count loaded (or planned) ranges per event hour at the cluster (pipelines.audit).

    logbus audit [--config conf/loader.yaml] [--topic T ...] [--run-id RUN_ID]

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
