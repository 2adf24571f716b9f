"""Fixtures of the loader tests: one SparkSession per module (local[2,4]: two cores, and a
failed task is retried up to 4 times)."""

from __future__ import annotations

import os

import pytest

from pipelines.config import parse_config


@pytest.fixture(scope="module")
def spark():
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pipelines.job import make_spark

    cfg = parse_config({"cluster": {"bootstrap.servers": "127.0.0.1:1"}, "warehouse": "file:///tmp",
                        "topics": ["x"], "spark": {"master": "local[2,4]", "conf": {
                            "spark.sql.shuffle.partitions": "2", "spark.driver.memory": "1g"}}})
    session = make_spark(cfg)
    try:
        yield session
    finally:
        session.stop()


