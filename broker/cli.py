"""The `logbus` command: a table of subcommands with Kafka's names and flags.

Each subcommand lives in ``broker.tools.<name>`` with ``add_arguments(parser)`` and
``run(args) -> int``; only the chosen one is imported, so the command starts fast. Errors print
one line and exit non-zero; tracebacks are for bugs.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from broker.tools import run_command

SUBCOMMANDS: dict[str, tuple[str, str]] = {
    "server-start": ("broker.tools.server_start", "start a broker from a server.properties file"),
    "topics": ("broker.tools.topics", "create, list, describe, alter or delete topics"),
    "dump-log": ("broker.tools.dump_log", "print the record batches of log segment files"),
    "cluster": ("broker.tools.cluster", "start, inspect or stop a local cluster (ZooKeeper + N brokers)"),
    "console-producer": ("broker.tools.console_producer", "send lines from stdin to a topic"),
    "console-consumer": ("broker.tools.console_consumer", "print a topic's records to stdout"),
    "consumer-groups": ("broker.tools.consumer_groups", "list and describe consumer groups, with lag"),
    "acls": ("broker.tools.acls", "add, remove or list ACLs (brokers with an authorizer)"),
    "configs": ("broker.tools.configs", "alter or describe dynamic configs of topics and brokers"),
    "delete-records": ("broker.tools.delete_records", "delete a partition's records below an offset"),
    "reassign-partitions": ("broker.tools.reassign_partitions", "move partition replicas between brokers"),
    "leader-election": ("broker.tools.leader_election", "elect preferred (or, explicitly, unclean) partition leaders"),
    "log-dirs": ("broker.tools.log_dirs", "describe the brokers' log directories and partition sizes"),
    "producer-perf-test": ("broker.tools.producer_perf_test", "measure producer throughput and latency"),
    "consumer-perf-test": ("broker.tools.consumer_perf_test", "measure consumer throughput"),
    "console": ("broker.tools.console", "serve a read-only web console of the cluster and its consumer lag"),
    "mirror-maker": ("broker.tools.mirror_maker", "mirror topics of source clusters into an aggregate cluster"),
    "audit": ("pipelines.audit_cli", "count loaded ranges per event hour at the cluster (warehouse completeness)"),
    "load": ("pipelines.cli", "plan, run, rerun, list and reset warehouse loads (topics -> Parquet via Spark)"),
}


def _usage() -> str:
    width = max(map(len, SUBCOMMANDS))
    lines = ["usage: logbus COMMAND [options]   (logbus COMMAND --help for a command's options)", "", "commands:"]
    lines += [f"  {name:<{width}}  {summary}" for name, (_, summary) in SUBCOMMANDS.items()]
    return "\n".join(lines)


def build_parser(command: str) -> argparse.ArgumentParser:
    """The argument parser of one subcommand (importing only that subcommand's module)."""
    module_name, summary = SUBCOMMANDS[command]
    module = importlib.import_module(module_name)
    parser = argparse.ArgumentParser(prog=f"logbus {command}", description=summary)
    module.add_arguments(parser)
    parser.set_defaults(run=module.run, command=command)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] in ("-h", "--help"):
        print(_usage())
        return 0 if argv else 2
    command = argv[0]
    if command not in SUBCOMMANDS:
        print(f"logbus: unknown command '{command}'\n\n{_usage()}", file=sys.stderr)
        return 2
    args = build_parser(command).parse_args(argv[1:])
    return run_command(args.run, args, f"logbus {command}")


if __name__ == "__main__":
    sys.exit(main())
