"""``logbus load pack-env``: the executors' Python environment as one archive, for ``spark.archives``.

A fresh virtualenv gets the distributions the tasks import (``pipelines.executor_env``), at the
versions of ``constraints/known-good.txt``, and venv-pack turns it into a ``.tar.gz`` that
Spark unpacks next to each executor (PySpark's documented way for a virtualenv). logbus itself
is not in it: the driver ships its code (``pipelines.code_zip``), so the archive changes only
when the dependencies do.
"""

from __future__ import annotations

import hashlib
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

from pipelines.errors import LoadError
from pipelines.executor_env import distributions

CONSTRAINTS = Path(__file__).resolve().parent.parent / "constraints" / "known-good.txt"


def pack_env(output: Path, constraints: Path | None = CONSTRAINTS, compress_level: int = 4,
             say: Callable[[str], None] = lambda line: None) -> Path:
    """Build the executors' environment and pack it into ``output`` (``.tar.gz``); returns ``output``."""
    try:
        import venv_pack
    except ImportError:
        raise LoadError("venv-pack is not installed: pip install 'logbus[pipelines]'") from None
    output = Path(output).resolve()
    output.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="logbus-env-") as tmp:
        env = Path(tmp) / "env"
        say(f"creating a virtualenv for Python {sys.version_info.major}.{sys.version_info.minor} in {env}")
        _run([sys.executable, "-m", "venv", str(env)])
        pins = ["-c", str(constraints)] if constraints is not None and constraints.exists() else []
        say(f"installing {', '.join(distributions())}" + (f" (pinned by {constraints})" if pins else ""))
        _run([str(env / "bin" / "python"), "-m", "pip", "install", "-q", "--disable-pip-version-check",
              *pins, *distributions()])
        say(f"packing it into {output}")
        partial = output.with_name(".partial-" + output.name)  # same suffix: venv-pack infers the format from it
        venv_pack.pack(prefix=str(env), output=str(partial), force=True, compress_level=compress_level)
        partial.replace(output)
    return output


def cached_env(directory: Path, constraints: Path = CONSTRAINTS, compress_level: int = 1) -> Path:
    """The packed environment for these constraints and this Python, built only once (tests, benchmarks)."""
    key = hashlib.sha256(repr((sys.version_info[:2], distributions())).encode()
                         + (constraints.read_bytes() if constraints.exists() else b"")).hexdigest()[:16]
    target = directory / f"executor-env-{key}.tar.gz"
    if not target.exists():
        pack_env(target, constraints, compress_level)
    return target


def _run(cmd: list[str]) -> None:
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        last = [ln for ln in (proc.stderr or proc.stdout).splitlines() if ln.strip() and "WARNING" not in ln]
        raise LoadError(f"{Path(cmd[0]).name} {' '.join(cmd[1:3])} failed: {last[-1] if last else proc.returncode}")
