"""The `logbus` command: a table of subcommands with Kafka's names and flags.

Each subcommand lives in ``broker.tools.<name>`` with ``add_arguments(parser)`` and
``run(args) -> int``. Errors print one line and exit non-zero; tracebacks are for bugs.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys

from broker.tools import CommandError

SUBCOMMANDS: dict[str, tuple[str, str]] = {
    "server-start": ("broker.tools.server_start", "start a broker from a server.properties file"),
    "topics": ("broker.tools.topics", "create, list, describe, alter or delete topics"),
    "dump-log": ("broker.tools.dump_log", "print the record batches of log segment files"),
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="logbus", description="logbus: a Kafka broker cluster and batch suite in Python")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name, (module_name, summary) in SUBCOMMANDS.items():
        module = importlib.import_module(module_name)
        sub = subparsers.add_parser(name, help=summary, description=summary)
        module.add_arguments(sub)
        sub.set_defaults(run=module.run)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.run(args)
    except CommandError as exc:
        print(f"logbus {args.command}: error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # `logbus dump-log ... | head`
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


if __name__ == "__main__":
    sys.exit(main())
