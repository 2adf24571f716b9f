"""Start the console: the first sample (so a cluster that cannot be reached is one error line
before anything listens), the listening port, the collector, then the reactor until SIGTERM/Ctrl-C."""

from __future__ import annotations

import argparse
from contextlib import ExitStack
from typing import Any

from broker.console.actions import Actions
from broker.console.collector import Collector
from broker.console.lag_history import LagHistory
from broker.console.reader import ClusterReader
from broker.console.sources import LoadsSource, MirrorsSource
from broker.console.web import Console, site
from broker.console.zk_consumers import ZkConsumers
from broker.tools import CommandError, zookeeper_session
from broker.tools.access import ClusterAccess


def serve(args: argparse.Namespace, access: ClusterAccess, loads: LoadsSource | None = None,
          mirrors: MirrorsSource | None = None) -> int:
    """Run the console until the reactor stops; 0 after a clean stop."""
    from twisted.internet import error
    from twisted.internet import reactor as default_reactor

    reactor: Any = default_reactor

    with ExitStack() as stack:
        reader = ClusterReader(access)
        bootstrap = access.bootstrap
        stack.callback(reader.close)
        first = reader.sample()
        zk = ZkConsumers(stack.enter_context(zookeeper_session(args.zookeeper))) if args.zookeeper else None
        history = LagHistory(keep=args.history, window=args.window, stop_after=args.stop_after)
        collector = Collector(reader.sample, history, reactor, args.interval)
        try:
            port = reactor.listenTCP(args.port, site(Console(collector, reader, zk, bootstrap, loads, mirrors,
                                                        Actions(access) if args.allow_actions else None)),
                                     interface=args.bind)
        except error.CannotListenError as exc:
            raise CommandError(f"cannot listen on {args.bind}:{args.port}: {exc.socketError}") from exc
        host = f"[{args.bind}]" if ":" in args.bind else args.bind
        print(f"logbus console on http://{host}:{port.getHost().port}/ (sampling {bootstrap} every {args.interval:g} s)",
              flush=True)
        collector.start(first)
        stack.callback(collector.stop)
        reactor.run()
    return 0

