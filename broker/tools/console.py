"""`logbus console`: a read-only web console of the cluster and its consumer groups' lag.

One process: a collector samples the cluster every ``--interval`` seconds in batched requests
(``broker/console/reader.py``) and the pages are served from the last sample by twisted.web, bound
to 127.0.0.1 unless ``--bind`` says otherwise. ``--command-config`` is a client .properties file
(bootstrap.servers and the security keys of a secured cluster); ``--zookeeper`` adds the members
and owners of ZooKeeper consumer groups; ``--loader-config`` the loader's runs (``pipelines``) and
``--mirror-status`` the mirrors' status files (``mirror``), both imported only when asked for.
"""

from __future__ import annotations

import argparse
from typing import Any

from broker.client.connection import BrokerConnectionError
from broker.protocol.errors import KafkaError
from broker.tools import CommandError
from broker.tools.access import add_command_config, from_args


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--bootstrap-server", metavar="HOST:PORT", help="brokers of the cluster to show")
    add_command_config(parser)
    parser.add_argument("--zookeeper", metavar="HOST:PORT[/CHROOT]",
                        help="the cluster's ZooKeeper, to show the members of ZooKeeper consumer groups")
    parser.add_argument("--bind", default="127.0.0.1", metavar="ADDRESS", help="the address to serve on (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=9000, help="the port to serve on (default 9000; 0: any free port)")
    parser.add_argument("--interval", type=float, default=10.0, metavar="SECONDS",
                        help="seconds between two samples of the cluster (default 10)")
    parser.add_argument("--window", type=int, default=10, metavar="SAMPLES",
                        help="samples a group's status is judged over (default 10)")
    parser.add_argument("--stop-after", type=float, default=600.0, metavar="SECONDS",
                        help="a lagging partition whose committed offset has not moved this long is STOP (default 600)")
    parser.add_argument("--history", type=int, default=60, metavar="SAMPLES",
                        help="rounds of a group's total lag kept for its chart (default 60)")
    parser.add_argument("--loader-config", metavar="loader.yaml",
                        help="add the Loads page: the loader's runs, their validation and Data Docs")
    parser.add_argument("--mirror-status", action="append", default=[], metavar="FILE",
                        help="add the Mirrors page: a mirror-maker's --status.file (repeatable)")
    parser.add_argument("--allow-actions", action="store_true",
                        help="let the group pages reset a group's offsets and delete a group, each after a "
                             "confirmation (off: the console is read-only)")


def run(args: argparse.Namespace) -> int:
    if not 0 <= args.port <= 65535:
        raise CommandError(f"--port must be between 0 and 65535, not {args.port}")
    if args.interval <= 0 or args.window < 1 or args.history < 1 or args.stop_after <= 0:
        raise CommandError("--interval and --stop-after must be positive, --window and --history at least 1")
    access = from_args(args)
    from broker.console.serve import serve

    loads = _loads(args.loader_config) if args.loader_config else None
    mirrors = None
    if args.mirror_status:
        from mirror.stats import MirrorStatusFiles

        mirrors = MirrorStatusFiles(args.mirror_status)
    try:
        return serve(args, access, loads, mirrors)
    except (BrokerConnectionError, KafkaError, OSError) as exc:
        raise CommandError(f"cannot read the cluster at {access.bootstrap}: {exc}") from exc


def _loads(path: str) -> Any:
    """The loader's warehouse as the Loads page reads it; a bad config is one line."""
    from pipelines.config import ConfigError
    from pipelines.console_loads import WarehouseLoads

    try:
        return WarehouseLoads(path)
    except ConfigError as exc:
        raise CommandError(f"--loader-config {path}: {exc}") from None
