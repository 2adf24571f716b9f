"""The loader's Spark driver for ``spark-submit`` (the DAG's ``airflow.load: spark-submit`` mode).

    spark-submit --master spark://host:7077 pipelines/submit.py load  --config conf/loader.yaml --group activity --run-id R
    spark-submit --master local[2]          pipelines/submit.py rerun --config conf/loader.yaml --group activity --run-id R

``load`` loads a planned run (stats saved as ``<run_id>.loaded.json`` for the commit step);
``rerun`` replays a committed run from its saved offsets. The last stdout line is a JSON summary.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

if __package__ in (None, ""):  # run as a script by spark-submit: import from the repository
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="pipelines/submit.py", description=__doc__.splitlines()[0])
    parser.add_argument("action", choices=["load", "rerun"])
    parser.add_argument("--config", required=True)
    parser.add_argument("--group", required=True)
    parser.add_argument("--run-id", required=True)
    parser.add_argument("--master", help="the master spark-submit was given (the session uses it)")
    parser.add_argument("--topics", help="comma-separated subset of the group's topics")
    args = parser.parse_args(argv)

    from pipelines.airflow_connection import inherited_overrides
    from pipelines.config import load_config
    from pipelines.errors import LoadError
    from pipelines.job import make_spark
    from pipelines.loader import Loader

    cfg = load_config(args.config, inherited_overrides()).for_group(args.group, args.topics.split(",") if args.topics else None)
    if args.master:
        cfg = cfg.with_overrides(spark_master=args.master)
    spark = make_spark(cfg)
    try:
        with Loader(cfg, spark=spark, progress=sys.stderr) as loader:
            if args.action == "rerun":
                r = loader.rerun(args.run_id)
                records, errors = r.records, r.errors
            else:
                plan = next((p for p in loader.pending_runs() if p.run_id == args.run_id), None)
                if plan is None:
                    raise LoadError(f"run {args.run_id} is not pending (already committed, or never planned)")
                results = loader.load(plan)
                for topic in plan.topics:
                    loader.store.write_loaded(topic, args.run_id, [r for r in results if r.topic == topic])
                records, errors = sum(r.count for r in results), sum(r.errors for r in results)
    except LoadError as exc:
        print(f"submit: error: {exc}", file=sys.stderr)
        return 1
    finally:
        spark.stop()
    print(json.dumps({"run_id": args.run_id, "records": records, "errors": errors,
                      "master": cfg.spark_master}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
