"""`logbus server-start conf/server.properties [--override key=value ...]`: run one broker
in the foreground until SIGTERM or SIGINT, then shut down cleanly."""

from __future__ import annotations

import argparse
import logging
import signal
import sys
from typing import Any

from broker.config import BrokerConfig, ConfigError, load_with_overrides
from broker.tools import CommandError


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("config", help="path to server.properties")
    parser.add_argument(
        "--override", action="append", default=[], metavar="KEY=VALUE", help="override a property (repeatable)"
    )
    parser.add_argument("--verbose", action="store_true", help="log the traceback of a failure to start")


def run(args: argparse.Namespace) -> int:
    try:
        config = BrokerConfig.from_properties(load_with_overrides(args.config, args.override))
    except (ConfigError, OSError) as exc:
        raise CommandError(str(exc)) from exc

    from twisted.internet import reactor as the_reactor
    from twisted.internet.task import LoopingCall
    from twisted.logger import Logger, globalLogBeginner, textFileLogObserver

    from broker.cluster.zk import BrokerIdInUseError
    from broker.server.broker import Broker
    from broker.server.heap import REFREEZE_INTERVAL_S, FreezeAfterSlowCollections, collect_and_freeze

    reactor: Any = the_reactor  # the installed reactor: more interfaces than the module's declared type
    observers: list[Any] = [textFileLogObserver(sys.stdout)]  # an ILogObserver by zope's declaration
    globalLogBeginner.beginLoggingTo(observers, redirectStandardIO=False)
    # kazoo's and our ZooKeeper module's warnings (connection retries, a registration wait) are log
    # lines too: to the log, never stderr, where a failure to start says why in one line
    logging.basicConfig(stream=sys.stdout, level=logging.WARNING, format="%(asctime)s [%(name)s] %(message)s")
    unknown = config.unknown_keys()
    if unknown:
        Logger().warn("ignoring unknown properties: {keys}", keys=", ".join(sorted(unknown)))
    # Twisted installs its SIGTERM/SIGINT handlers only in reactor.run(), but the listener is open
    # (and the broker looks ready) before that: a signal arriving in between is held and turned
    # into a clean shutdown as soon as the reactor runs.
    held_signals: list[int] = []
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda received, frame: held_signals.append(received))
    broker = Broker(config, reactor)
    try:
        broker.start()
    except BrokerIdInUseError as exc:
        raise CommandError(str(exc)) from exc
    except Exception as exc:  # a broker that cannot start says why in one line; --verbose logs the trace
        if args.verbose:
            Logger().failure("broker {id} failed to start", id=config.broker_id)
        raise CommandError(f"broker {config.broker_id} failed to start: {exc}") from exc
    reactor.addSystemEventTrigger("before", "shutdown", broker.stop)
    reactor.callWhenRunning(lambda: held_signals and reactor.stop())
    refreeze = LoopingCall(collect_and_freeze)
    refreeze.clock = reactor
    reactor.callWhenRunning(lambda: refreeze.start(REFREEZE_INTERVAL_S, now=True))
    FreezeAfterSlowCollections(reactor.callFromThread).install()
    reactor.run()
    return 0
