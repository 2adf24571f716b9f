"""What reaches a cluster's executors, without a cluster: logbus' code zip (built once per content,
deterministic), the list of what tasks import (it covers every distribution they load), the probe's
one line, and the spark section's keys."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import zipfile
from importlib import metadata
from pathlib import Path

import pytest

from pipelines.code_zip import SHIPPED_PACKAGES, code_zip, shippable
from pipelines.config import ConfigError, parse_config
from pipelines.executor_env import TASK_MODULES, distributions, executor_modules
from pipelines.probe import missing_line

ROOT = Path(__file__).resolve().parents[2]


def test_code_zip_is_built_once_per_content(tmp_path: Path):
    tree = tmp_path / "tree"
    for package in SHIPPED_PACKAGES:
        (tree / package / "__pycache__").mkdir(parents=True)
        (tree / package / "__init__.py").write_text(f"NAME = {package!r}\n")
        (tree / package / "__pycache__" / "x.cpython-311.pyc").write_bytes(b"\0")
    first = code_zip(tmp_path / "cache", root=tree)
    again = code_zip(tmp_path / "cache", root=tree)
    assert first == again and first.read_bytes() == again.read_bytes()
    assert sorted(zipfile.ZipFile(first).namelist()) == sorted(f"{p}/__init__.py" for p in SHIPPED_PACKAGES)
    (tree / "pipelines" / "__init__.py").write_text("NAME = 'changed'\n")
    changed = code_zip(tmp_path / "cache", root=tree)
    assert changed != first and len(list((tmp_path / "cache").glob("*.zip"))) == 2


def test_only_a_tree_on_disk_is_shipped(tmp_path: Path):
    assert shippable()  # this checkout
    assert not shippable(tmp_path)  # e.g. imported from the --py-files zip of a cluster-mode driver


def test_the_probe_checks_what_the_configured_writer_needs():
    python, spark = executor_modules("python"), executor_modules("spark")
    assert "pipelines.writer" in python and "pipelines.hadoop_writer" not in python and "pandas" not in python
    assert "pipelines.hadoop_writer" in spark and "pandas" in spark
    for modules in (python, spark):
        assert {"crc32c", "cramjam", "lz4.frame", "zstandard", "pyarrow", "numpy", "pipelines.task"} <= set(modules)


def test_code_zip_holds_what_tasks_import(tmp_path: Path):
    names = set(zipfile.ZipFile(code_zip(tmp_path)).namelist())
    for module in TASK_MODULES:
        assert module.replace(".", "/") + ".py" in names
    assert "broker/protocol/records/walker.py" in names and not any("__pycache__" in n for n in names)


def _requirements(dist: str, seen: set[str]) -> None:
    """``dist`` and every distribution it requires (without extras), by normalised name."""
    name = re.sub(r"[-_.]+", "-", dist).lower()
    if name in seen:
        return
    seen.add(name)
    try:
        requires = metadata.requires(dist) or []
    except metadata.PackageNotFoundError:
        return
    for req in requires:
        if "extra ==" not in req:
            _requirements(re.split(r"[\s<>=!~;\[(]", req, maxsplit=1)[0], seen)


def test_the_packed_environment_covers_every_distribution_tasks_load():
    code = ("import json, sys\nfrom importlib import metadata\nstartup = set(sys.modules)\n"
            f"for m in {list(TASK_MODULES)!r}: __import__(m)\n"
            "owners = metadata.packages_distributions()\n"
            "print(json.dumps(sorted({d for m in set(sys.modules) - startup for d in owners.get(m.split('.')[0], [])})))")
    loaded = json.loads(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                                       cwd=ROOT).stdout)
    covered: set[str] = {"pyspark", "py4j", "logbus"}  # Spark's own on every executor; logbus shipped as a zip
    for dist in distributions():
        _requirements(dist, covered)
    missing = {re.sub(r"[-_.]+", "-", d).lower() for d in loaded} - covered
    assert not missing, f"tasks load {sorted(missing)}: add them to pipelines.executor_env.THIRD_PARTY"


def test_the_probe_line_names_the_modules_and_the_fix():
    line = missing_line("spark://h:7077", "/usr/bin/python3", [("crc32c", ""), ("pipelines", ""), ("zstandard", "bad ELF")])
    assert "\n" not in line
    assert line.startswith("executors of spark://h:7077 (Python /usr/bin/python3) cannot import crc32c, pipelines, "
                           "zstandard (bad ELF): ")
    assert "logbus load pack-env" in line and "spark.ship_code: true" in line
    only_env = missing_line("yarn", "python3", [("pyarrow", "")])
    assert "logbus load pack-env" in only_env and "ship_code" not in only_env


def test_spark_section_keys():
    base = {"cluster": {"bootstrap.servers": "h:1"}, "warehouse": "file:///tmp/w", "topics": ["t"]}
    cfg = parse_config({**base, "spark": {"archives": ["env.tar.gz#environment"], "python_env": "./environment/bin/python",
                                          "ship_code": False, "probe_timeout_ms": 5000}})
    assert cfg.spark_archives == ("env.tar.gz#environment",)
    assert (cfg.spark_python_env, cfg.spark_ship_code, cfg.spark_probe_timeout_ms) == ("./environment/bin/python", False, 5000)
    default = parse_config(base)
    assert (default.spark_archives, default.spark_python_env, default.spark_ship_code) == ((), None, True)
    assert parse_config(base, overrides={"spark.archives": "a.tgz#x,b.zip"}).spark_archives == ("a.tgz#x", "b.zip")
    with pytest.raises(ConfigError, match="spark.ship_code"):
        parse_config({**base, "spark": {"ship_code": "maybe"}})
    with pytest.raises(ConfigError, match="spark.probe_timeout_ms"):
        parse_config({**base, "spark": {"probe_timeout_ms": 10}})
