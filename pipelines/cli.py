"""`logbus load`: run, plan, rerun, history and reset warehouse loads (conf/loader.yaml).

    logbus load run     [--config conf/loader.yaml] [--bootstrap-server H:P] [--warehouse URL] [--master M] [--validate]
    logbus load plan    (what the next run would read; nothing is written)
    logbus load rerun   --run-id ID
    logbus load history [--topic T]
    logbus load reset   --topic T --to earliest|latest|<epoch ms>|<ISO time>
    logbus load pack-env [--output env.tar.gz]  (the executors' Python environment, for spark.archives)
    logbus load completeness --topic T [--since 2026-01-13T05|6h] [--declare]
    logbus load compact --topic T (--hour 2026-01-13T05 | --older-than 1d) [--target-size 256MB] [--dry-run]
"""

from __future__ import annotations

import argparse
import sys

from broker.tools import CommandError, command_main

DEFAULT_CONFIG = "conf/loader.yaml"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="action", metavar="ACTION", required=True)

    def common(p: argparse.ArgumentParser) -> None:
        p.add_argument("--config", default=DEFAULT_CONFIG, help=f"loader config (default {DEFAULT_CONFIG})")
        p.add_argument("--bootstrap-server", help="override cluster.bootstrap.servers")
        p.add_argument("--zookeeper", help="override cluster.zookeeper.connect")
        p.add_argument("--warehouse", help="override the warehouse URL (file:///..., webhdfs://..., hdfs://...)")

    def spark(p: argparse.ArgumentParser) -> None:
        p.add_argument("--master", help="override spark.master (local[*], spark://host:7077, yarn, ...)")
        p.add_argument("--quiet", action="store_true", help="no per-partition progress")

    p = sub.add_parser("run", help="finish any pending run, then plan, load and commit a new one")
    common(p)
    spark(p)
    p.add_argument("--validate", action="store_true",
                   help="validate each run with the DAG's Great Expectations suites before committing it "
                        "(a failure: the offsets do not move, exit 1) and write its Data Docs")
    p = sub.add_parser("plan", help="show what the next run would read (writes nothing)")
    common(p)
    p = sub.add_parser("rerun", help="replay a past run's ranges from its saved offsets")
    common(p)
    spark(p)
    p.add_argument("--run-id", required=True)
    p = sub.add_parser("history", help="the runs recorded in the warehouse, with ranges and counts")
    common(p)
    p.add_argument("--topic")
    p = sub.add_parser("reset", help="move a topic's saved offsets")
    common(p)
    p.add_argument("--topic", required=True)
    p.add_argument("--to", required=True, help="earliest, latest, epoch milliseconds or an ISO-8601 time")
    p = sub.add_parser("completeness", help="per event hour of a topic: complete, incomplete (why) or reopened, "
                                            "with the loads' and the audit's counts")
    common(p)
    p.add_argument("--topic", required=True)
    p.add_argument("--since", help="from this hour (2026-01-13T05) or this long ago (6h, 2d)")
    p.add_argument("--declare", action="store_true",
                   help="validate the hours that became complete and declare them (as the Airflow DAG does)")
    p = sub.add_parser("compact", help="merge closed hours' small files into files of about --target-size")
    common(p)
    p.add_argument("--topic", required=True)
    which = p.add_mutually_exclusive_group(required=True)
    which.add_argument("--hour", help="this hour (2026-01-13T05); refused unless it is closed")
    which.add_argument("--older-than", help="every closed hour that ended at least this long ago (6h, 1d)")
    p.add_argument("--target-size", help="about this many bytes per file (64MB, 1GB; default compaction.target_size)")
    p.add_argument("--dry-run", action="store_true", help="say what would be merged; change nothing")
    p = sub.add_parser("pack-env", help="pack the executors' Python environment (venv-pack) for spark.archives")
    p.add_argument("--output", default="env.tar.gz", help="the archive to write (default env.tar.gz)")
    p.add_argument("--constraints", help="pin versions with this pip constraints file (default: the repository's "
                                         "constraints/known-good.txt, when there is one)")


def _overrides(args: argparse.Namespace) -> dict:
    o = {"warehouse": args.warehouse, "spark.master": getattr(args, "master", None)}
    if args.bootstrap_server:
        o["cluster.bootstrap.servers"] = args.bootstrap_server
        o["cluster.zookeeper.connect"] = None
    if args.zookeeper:
        o["cluster.zookeeper.connect"] = args.zookeeper
    return o


def run(args: argparse.Namespace) -> int:
    if args.action == "pack-env":
        return _pack_env(args, sys.stdout)
    from pipelines.config import ConfigError, load_config
    from pipelines.errors import LoadError, ValidationFailed
    from pipelines.faults import LoadFaults
    from pipelines.loader import Loader

    try:
        config = load_config(args.config, _overrides(args))
        if args.bootstrap_server and config.zookeeper_connect:
            from dataclasses import replace

            config = replace(config, zookeeper_connect=None)
    except ConfigError as exc:
        raise CommandError(f"bad loader config: {exc}") from None
    out = sys.stdout
    progress = None if getattr(args, "quiet", False) else sys.stderr
    try:
        # faults only when a test started this process to break it (pipelines.faults)
        with Loader(config, progress=progress, faults=LoadFaults.from_environment()) as loader:
            return ACTIONS[args.action](loader, args, out)
    except (LoadError, ConfigError) as exc:
        raise CommandError(str(exc)) from None
    except ValidationFailed as exc:
        raise CommandError(exc.one_line()) from None
    except OSError as exc:
        raise CommandError(f"{config.warehouse}: {exc}") from None


def _run(loader, args, out) -> int:
    from pipelines.progress import format_table

    results = loader.run(validate=args.validate)
    for result in results:
        print(f"\nrun {result.run_id}{' (finished a pending run)' if result.resumed else ''}: "
              f"{result.records:,} records, {result.errors:,} errors, "
              f"{f'{result.duplicates_dropped:,} duplicate copies dropped, ' if result.duplicates_dropped else ''}"
              f"{result.bytes:,} bytes in {result.seconds:.1f} s"
              f" ({result.records / result.seconds if result.seconds else 0:,.0f} records/s)", file=out)
        rows = result.partition_rows()
        if rows:
            for r in rows:
                from pipelines.progress import fmt_ts

                r["min"], r["max"] = fmt_ts(r["min_ts"]), fmt_ts(r["max_ts"])
            print(format_table(rows, [("topic", "topic"), ("partition", "part"), ("start", "start"), ("end", "end"),
                                      ("tasks", "tasks"), ("records", "records"), ("errors", "errors"),
                                      ("duplicates", "dups dropped"), ("late", "late"), ("bytes", "bytes"), ("files", "files"),
                                      ("min", "first record (UTC)"), ("max", "last record (UTC)"), ("gap", "gap"),
                                      ("status", "status")]), file=out)
        for t in result.validation.topics if result.validation else ():
            print(f"{t.topic}: validation passed ({len(t.checks)} checks); Data Docs: {t.docs_path}", file=out)
    incomplete = [r for r in results if r.plan.unavailable]
    if incomplete:
        from pipelines.plan import incomplete_line

        for r in incomplete:
            print(f"logbus load: {incomplete_line(r.run_id, r.plan.unavailable)}", file=sys.stderr)
        return 1
    return 0


def _plan(loader, args, out) -> int:
    from pipelines.progress import format_table

    pending, plan = loader.preview()
    for p in pending:
        print(f"pending run {p.run_id} (planned, never committed) is finished first:", file=out)
        print(format_table(p.rows(), [("topic", "topic"), ("partition", "part"), ("start", "start"), ("end", "end")]), file=out)
    for topic, why in plan.skipped.items():
        print(f"{topic}: skipped ({why})", file=out)
    rows = [{**r, "records": r["end"] - r["start"], "tasks": sum(1 for s, e in r["ranges"] if e > s),
             "gap": f"{r['gap'][0]}..{r['gap'][1]}" if r.get("gap") else None} for r in plan.rows()]
    print(f"next run: {len(plan.topics)} topic(s), {len(plan.tasks())} task(s), {plan.offsets:,} offsets", file=out)
    if plan.unavailable:
        from pipelines.plan import incomplete_line

        print("WARN: " + incomplete_line(plan.run_id, plan.unavailable), file=out)
    if rows:
        print(format_table(rows, [("topic", "topic"), ("partition", "part"), ("start", "start"), ("end", "end"),
                                  ("records", "offsets"), ("tasks", "tasks"), ("leader", "leader"),
                                  ("reason", "start from"), ("gap", "gap")]), file=out)
    return 0


def _rerun(loader, args, out) -> int:
    from pipelines.progress import format_table

    result = loader.rerun(args.run_id)
    print(f"rerun of {result.run_id}: {result.records:,} records, {result.errors:,} errors, "
          f"{f'{result.duplicates_dropped:,} duplicate copies dropped, ' if result.duplicates_dropped else ''}"
          f"{sum(len(r.files) for r in result.results)} files rewritten in {result.seconds:.1f} s", file=out)
    print(format_table(result.partition_rows(), [("topic", "topic"), ("partition", "part"), ("start", "start"),
                                                 ("end", "end"), ("records", "records"), ("files", "files")]), file=out)
    return 0


def _history(loader, args, out) -> int:
    from pipelines.progress import format_table

    rows = loader.history(args.topic)
    if not rows:
        print(f"no runs recorded in {loader.config.warehouse}", file=out)
        return 0
    print(format_table(rows, [("run_id", "run"), ("topic", "topic"), ("kind", "kind"), ("status", "status"),
                              ("partitions", "parts"), ("records", "records"), ("errors", "errors"),
                              ("duplicates", "dups dropped"), ("bytes", "bytes"), ("gaps", "gaps"), ("reruns", "reruns"),
                              ("ranges", "ranges (partition:start-end)")]), file=out)
    return 0


def _reset(loader, args, out) -> int:
    doc = loader.reset(args.topic, args.to)
    print(f"{args.topic}: saved offsets moved to {doc['to']} ({doc['run_id']}):", file=out)
    for p in doc["partitions"]:
        print(f"  partition {p['partition']}: next offset {p['next']} (log {p['earliest']}..{p['latest']})", file=out)
    return 0


def _pack_env(args, out) -> int:
    import time
    from pathlib import Path

    from pipelines.code_zip import code_zip
    from pipelines.errors import LoadError
    from pipelines.pack_env import CONSTRAINTS, pack_env

    started = time.monotonic()
    try:
        pins = Path(args.constraints) if args.constraints else CONSTRAINTS
        if args.constraints and not pins.is_file():
            raise CommandError(f"--constraints {args.constraints}: no such file")
        path = pack_env(Path(args.output), pins, say=lambda line: print(line, file=sys.stderr, flush=True))
    except LoadError as exc:
        raise CommandError(str(exc)) from None
    print(f"{path}: {path.stat().st_size / 2**20:,.0f} MiB in {time.monotonic() - started:.0f} s\n"
          f"in conf/loader.yaml:\n  spark:\n    archives: [{path}#environment]\n"
          f"    python_env: ./environment/bin/python\n"
          f"with spark-submit: --archives {path}#environment --conf spark.pyspark.python=./environment/bin/python\n"
          f"logbus' code (the driver adds it itself; --py-files for --deploy-mode cluster): {code_zip()}", file=out)
    return 0


def _completeness(loader, args, out) -> int:
    from pipelines.completeness import Completeness, declare_complete, parse_hour
    from pipelines.config import ConfigError, parse_duration_ms
    from pipelines.manifest import now_ms
    from pipelines.progress import format_table
    from pipelines.writer import HOUR_MS

    spec = loader.config.spec_for(args.topic)
    if spec is None:
        raise CommandError(f"topic {args.topic!r} is not in the loader config's topics")
    since = None
    if args.since:
        try:
            since = (now_ms() - parse_duration_ms(args.since, "--since")) // HOUR_MS
        except ConfigError:
            since = parse_hour(args.since)
    if args.declare:
        for d in declare_complete(loader.config, [args.topic], since):
            print(f"{d['topic']} {d['name']}: declared complete{' again' if d['reopened'] else ''} "
                  f"({d['rows']:,} rows, {d['late']:,} late) -> {d['uri']}", file=out)
    rows = [st.to_dict() | {"why": "; ".join(st.why), "audited": "-" if st.audited is None else st.audited,
                            "declared": f"{st.declared}x" + (" (pending)" if st.undeclared else "")}
            for st in Completeness(loader.fs, args.topic, spec).statuses(since)]
    if not rows:
        print(f"{args.topic}: no loaded hours in {loader.config.warehouse}", file=out)
        return 0
    print(format_table(rows, [("name", "hour"), ("status", "status"), ("rows", "rows"), ("read", "read"),
                              ("audited", "audited"), ("late", "late"), ("errors", "errors"),
                              ("duplicates", "dups"), ("declared", "declared"), ("why", "why")]), file=out)
    return 0


def _compact(loader, args, out) -> int:
    from pipelines.compaction import compact_topic
    from pipelines.completeness import parse_hour
    from pipelines.config import parse_duration_ms, parse_size_bytes
    from pipelines.faults import compaction_step_from_environment
    from pipelines.progress import format_table
    from pipelines.writer import hour_dir

    done = compact_topic(loader.config, args.topic, hour=parse_hour(args.hour) if args.hour else None,
                         older_than_ms=parse_duration_ms(args.older_than, "--older-than") if args.older_than else None,
                         target_size=parse_size_bytes(args.target_size, "--target-size") if args.target_size else None,
                         dry_run=args.dry_run, step=compaction_step_from_environment())
    rows = [{"hour": hour_dir(r.topic, r.hour).split("/", 1)[1], "files": f"{r.files_before} -> {r.files_after}",
             "merged": sum(len(m.inputs) for m in r.merges), "rows": r.rows,
             "bytes": f"{r.bytes_before:,} -> {r.bytes_after:,}", "seconds": r.seconds} for r in done]
    verb = "would compact" if args.dry_run else "compacted"
    changed = [r for r in done if r.merges]
    print(f"{args.topic}: {verb} {len(changed)} of {len(done)} closed hour(s)", file=out)
    if rows:
        print(format_table(rows, [("hour", "hour"), ("files", "files"), ("merged", "merged"), ("rows", "rows"),
                                  ("bytes", "bytes"), ("seconds", "s")]), file=out)
    return 0


ACTIONS = {"compact": _compact, "completeness": _completeness, "run": _run, "plan": _plan, "rerun": _rerun,
           "history": _history, "reset": _reset}


def main(argv: list[str] | None = None) -> int:
    """``python -m pipelines.cli ...`` (same as ``logbus load ...``)."""
    return command_main("logbus load", "load topics into the warehouse", add_arguments, run, argv)


if __name__ == "__main__":
    sys.exit(main())
