"""The Spark side: one task per planned range, each running ``pipelines.task.run_range``.

The ranges become an RDD with one element per partition, so Spark schedules (and on
failure, retries) each range as its own task; a task returns its ``TaskStats``, which the
driver collects for the manifest. Output files are committed by the task itself (staged,
then renamed under the range's deterministic name), so a retried attempt replaces, never
adds to, what a failed one left.
"""

from __future__ import annotations

import os
import re
import sys

from pipelines.config import LoaderConfig
from pipelines.errors import ONE_LINE_ERRORS, LoadError
from pipelines.task import RangeTask, TaskContext
from pipelines.task_stats import TaskStats


def is_local_master(master: str) -> bool:
    """Whether the executors run on this machine with the driver's Python and tree (``local``, ``local[...]``...)."""
    return master.startswith("local")


def make_spark(config: LoaderConfig, master: str | None = None):
    """A SparkSession for the loader (``SPARK_LOCAL_IP`` defaults to 127.0.0.1 for local masters).

    The one place a session is made, inline and under ``spark-submit``: on a cluster master it
    also ships logbus' code (``spark.ship_code``) and points the executors at their Python
    (``spark.archives``, ``spark.python_env``)."""
    master = master or config.spark_master
    if is_local_master(master):
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    # executors import pipelines/ and broker/ from the same tree as the driver
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    path = os.environ.get("PYTHONPATH", "")
    if root not in path.split(os.pathsep):
        os.environ["PYTHONPATH"] = root + (os.pathsep + path if path else "")
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.master(master).appName(config.spark_app_name)
    settings = {"spark.ui.enabled": "false", "spark.ui.showConsoleProgress": "false",
                "spark.sql.session.timeZone": "UTC", "spark.python.worker.reuse": "true"}
    settings.update(config.spark_conf)
    if config.spark_archives:
        settings["spark.archives"] = ",".join(filter(None, [settings.get("spark.archives"), *config.spark_archives]))
    if config.spark_python_env:
        settings["spark.pyspark.python"] = config.spark_python_env
    for k, v in settings.items():
        builder = builder.config(k, v)
    spark = builder.getOrCreate()
    sc = spark.sparkContext
    sc.setLogLevel(config.spark_conf.get("logbus.log.level", "ERROR"))
    if config.spark_python_env:
        sc.pythonExec = config.spark_python_env  # PySpark takes the workers' Python from here (PYSPARK_PYTHON at start)
    if config.spark_ship_code and not is_local_master(master):
        ship_code(sc)
    return spark


def ship_code(sc) -> None:
    """Add logbus' code zip (``pipelines.code_zip``) to the executors' Python path; the driver keeps its own tree."""
    from pipelines.code_zip import code_zip, shippable

    if not shippable():  # this driver runs from --py-files itself (cluster deploy mode): they ship already
        return
    path = str(code_zip())
    driver_path = list(sys.path)
    sc.addPyFile(path)
    sys.path[:] = driver_path  # addPyFile also puts the zip first on the driver's path: keep importing the tree


def _run_partition(ctx: TaskContext):
    def run(_index, items):
        from pyspark import TaskContext as SparkTaskContext

        from pipelines.task import run_range

        tc = SparkTaskContext.get()
        attempt = tc.attemptNumber() if tc is not None else 0
        for task in items:
            yield run_range(task, ctx, attempt)  # pickled back to the driver

    return run


def run_tasks(spark, tasks: list[RangeTask], ctx: TaskContext, description: str = "logbus load") -> list[TaskStats]:
    """Run every range as one Spark task; returns the tasks' stats in task order."""
    if not tasks:
        return []
    sc = spark.sparkContext
    sc.setJobDescription(description)
    rdd = sc.parallelize(tasks, len(tasks))
    try:
        stats = rdd.mapPartitionsWithIndex(_run_partition(ctx)).collect()
    except Exception as exc:  # Py4JJavaError carrying the Python traceback of the last attempt
        raise LoadError(spark_failure_reason(exc)) from None
    return sorted(stats, key=lambda s: s.index)


_PY_ERROR = re.compile(r"^(?:[a-z_][\w]*\.)*(\w*(?:Error|Exception)): (.+)$", re.M)


def spark_failure_reason(exc: BaseException) -> str:
    """The last Python exception line of a failed Spark job, e.g. ``OutOfRangeError: t-0: ...``."""
    text = str(exc)
    found = [m for m in _PY_ERROR.finditer(text)
             if not m.group(0).startswith(("org.", "java.", "scala.", "py4j.")) and "Py4J" not in m.group(1)]
    interesting = [m for m in found if m.group(1) not in ("PythonException", "SparkException")]
    if interesting:
        m = interesting[-1]
        name, message = m.group(1), m.group(2).strip()
        return message if name in ONE_LINE_ERRORS else f"{name}: {message}"
    first = text.strip().splitlines()[0] if text.strip() else type(exc).__name__
    return f"the Spark job failed: {first[:500]}"
