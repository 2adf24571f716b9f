"""What a Spark executor must import to run the loader's tasks, declared once.

The probe (``pipelines.probe``) checks these modules on an executor before a load, and
``logbus load pack-env`` (``pipelines.pack_env``) installs the distributions that provide
them; logbus' own packages reach the executors from the driver (``pipelines.code_zip``).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Need:
    """One module the tasks import and the PyPI distribution that provides it."""

    module: str
    distribution: str
    why: str
    writer: str | None = None  # needed only by this parquet.writer's tasks (None: by both)


#: logbus' own modules a task imports, by parquet.writer: shipped by the driver as a zip
#: (``pipelines.code_zip``), never installed on the executors.
WRITER_MODULES = {"python": ("pipelines.task", "pipelines.writer"), "spark": ("pipelines.task", "pipelines.hadoop_writer")}
TASK_MODULES = tuple(dict.fromkeys(m for modules in WRITER_MODULES.values() for m in modules))

#: Third-party modules the tasks import, native libraries first: the executors' Python must have them.
THIRD_PARTY: tuple[Need, ...] = (
    Need("crc32c", "crc32c", "CRC-32C of every fetched batch (the record walk)"),
    Need("cramjam", "cramjam", "snappy and gzip batches"),
    Need("lz4.frame", "lz4", "lz4 batches"),
    Need("zstandard", "zstandard", "zstd batches"),
    Need("numpy", "numpy", "the columnar record reader"),
    Need("pyarrow", "pyarrow", "decoding and Parquet"),
    Need("pandas", "pandas", "PySpark's Arrow path (parquet.writer: spark)", writer="spark"),
    Need("yaml", "pyyaml", "pipelines.config"),
    Need("kazoo", "kazoo", "broker.client (ZooKeeper discovery)"),
    Need("hdfs", "hdfs", "webhdfs:// warehouses"),
)


def executor_modules(writer: str) -> tuple[str, ...]:
    """What the probe imports on an executor for ``parquet.writer``: the third-party modules, then logbus' own."""
    return tuple(n.module for n in THIRD_PARTY if n.writer in (None, writer)) + WRITER_MODULES[writer]


def distributions() -> tuple[str, ...]:
    """The distributions a packed executor environment holds (pinned by constraints/known-good.txt)."""
    return tuple(dict.fromkeys(n.distribution for n in THIRD_PARTY))
