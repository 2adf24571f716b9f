"""The `logbus` subcommands, one module each; broker/cli.py holds the table."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from broker.config import ConfigError, load_with_overrides

if TYPE_CHECKING:
    from broker.cluster.zk import ZkClient


class CommandError(Exception):
    """A failure to report as one line, without a traceback."""


@contextmanager
def zookeeper_session(connect: str) -> Iterator[ZkClient]:
    """A tool's ZooKeeper session (``--zookeeper``): started, or a CommandError; closed after."""
    from broker.cluster.zk import ZkClient, ZkError

    try:
        zk = ZkClient(connect, session_timeout_ms=6000, connection_timeout_ms=10000)
        zk.start()
    except ZkError as exc:
        raise CommandError(str(exc)) from exc
    try:
        yield zk
    finally:
        zk.stop()


def client_config(config_file: str | None, overrides: Sequence[str], bootstrap: str | None,
                  missing: str) -> dict[str, Any]:
    """A client tool's config: the ``.properties`` file, then ``key=value`` overrides, then
    ``--bootstrap-server``; ``missing`` is the error when nothing says how to reach the cluster."""
    try:
        config: dict[str, Any] = dict(load_with_overrides(config_file, overrides))
    except (ConfigError, OSError) as exc:
        raise CommandError(str(exc)) from exc
    if bootstrap:
        config["bootstrap.servers"] = bootstrap
    if not (config.get("bootstrap.servers") or config.get("metadata.broker.list") or config.get("zookeeper.connect")):
        raise CommandError(missing)
    return config


def quiet_library_logs() -> None:
    """kazoo's retries ("Connection dropped: ...") go to a log when a command configures one, never
    straight to the terminal: the command's own error is the one line shown."""
    logging.getLogger("kazoo").addHandler(logging.NullHandler())


def run_command(run: Callable[[argparse.Namespace], int], args: argparse.Namespace, prog: str) -> int:
    """Run a parsed subcommand the way every entry point does: a CommandError is one line on
    stderr and exit 1, Ctrl-C exits 130, a closed pipe (``... | head``) exits 0."""
    quiet_library_logs()
    try:
        return run(args)
    except CommandError as exc:
        print(f"{prog}: error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


def command_main(prog: str, description: str, add_arguments: Callable[[argparse.ArgumentParser], None],
                 run: Callable[[argparse.Namespace], int], argv: Sequence[str] | None = None) -> int:
    """``python -m <package>`` for a subcommand that is also its own program (mirror, the loader)."""
    parser = argparse.ArgumentParser(prog=prog, description=description)
    add_arguments(parser)
    return run_command(run, parser.parse_args(argv), prog)
