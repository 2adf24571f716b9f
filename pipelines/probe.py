"""Before a load on a cluster, one cheap task checks that an executor can import what the tasks need.

Without it, an executor lacking logbus' code or a native library fails every range task
``spark.task.maxFailures`` times and the user reads a traceback; with it, the run stops in
seconds with one line naming the missing modules and the fix. Local masters are not probed
(their executors run the driver's own Python and tree); a cluster is probed once per
SparkContext.
"""

from __future__ import annotations

import uuid
import weakref

from pipelines.errors import LoadError
from pipelines.executor_env import TASK_MODULES, executor_modules
from pipelines.job import is_local_master, spark_failure_reason

_PROBED: weakref.WeakSet = weakref.WeakSet()  # SparkContexts whose executors passed

FIX_ENV = ("build the executors' environment with `logbus load pack-env --output env.tar.gz` and set "
           "spark.archives: [env.tar.gz#environment] and spark.python_env: ./environment/bin/python in the loader "
           "config (docs/loader.md, \"Running on a Spark cluster\")")
FIX_CODE = "set spark.ship_code: true in the loader config so the driver ships logbus' code"


def _check(modules: tuple[str, ...]):
    """The probe task: a closure, so it is pickled by value and needs nothing of logbus to run."""
    def check(_items):
        import importlib
        import sys

        missing: dict[str, str] = {}
        for name in modules:
            try:
                importlib.import_module(name)
            except ModuleNotFoundError as exc:
                missing.setdefault(exc.name or name, "")
            except ImportError as exc:  # a native library that is there but does not load
                missing.setdefault(name, str(exc).splitlines()[0][:200])
        yield sys.executable, sorted(missing.items())

    return check


def missing_line(master: str, python: str, missing: list[tuple[str, str]]) -> str:
    """The one line naming what an executor cannot import and how to fix it."""
    names = ", ".join(f"{name} ({why})" if why else name for name, why in missing)
    own = {m.split(".")[0] for m in TASK_MODULES} | {"broker"}
    fixes = []
    if any(name.split(".")[0] not in own for name, _ in missing):
        fixes.append(FIX_ENV)
    if any(name.split(".")[0] in own for name, _ in missing):
        fixes.append(FIX_CODE)
    return f"executors of {master} (Python {python}) cannot import {names}: {'; '.join(fixes)}"


def probe_executors(spark, timeout_ms: int, writer: str = "python") -> None:
    """Run the probe task (for ``parquet.writer``'s tasks) once per SparkContext of a cluster master;
    LoadError in one line if it fails."""
    sc = spark.sparkContext
    if is_local_master(sc.master) or sc in _PROBED:
        return
    from pyspark import InheritableThread

    group = f"logbus-probe-{uuid.uuid4().hex[:8]}"
    outcome: dict = {}

    def run() -> None:
        sc.setJobGroup(group, "logbus: can an executor import what the tasks need?", interruptOnCancel=True)
        try:
            outcome["result"] = sc.parallelize([0], 1).mapPartitions(_check(executor_modules(writer))).collect()
        except Exception as exc:  # the executors' Python did not start, or the task failed every attempt
            outcome["error"] = exc

    thread = InheritableThread(target=run, daemon=True)
    thread.start()
    thread.join(timeout_ms / 1000)
    if thread.is_alive():
        sc.cancelJobGroup(group)
        thread.join(10)
        raise LoadError(f"no executor of {sc.master} ran the probe task within {timeout_ms / 1000:g} s: are workers "
                        "registered with a free core and enough memory for spark.executor.memory? "
                        "(spark.probe_timeout_ms)")
    if "error" in outcome:
        raise LoadError(f"the probe task failed on the executors of {sc.master}: "
                        f"{spark_failure_reason(outcome['error'])}; {FIX_ENV}")
    python, missing = outcome["result"][0]
    if missing:
        raise LoadError(missing_line(sc.master, python, missing))
    _PROBED.add(sc)
