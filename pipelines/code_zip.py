"""logbus' own code for the executors: one zip of the packages the tasks import, built once per content.

The zip holds every ``.py`` file of ``SHIPPED_PACKAGES`` from the tree the driver imports, with
fixed timestamps, and is named after a hash of that content, so it is built once per version
of the code (cached under ``cache_dir()``) and the same code always gives the same bytes.
``pipelines.job.make_spark`` adds it with ``SparkContext.addPyFile``.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
import zipfile
from pathlib import Path

#: The packages a task imports (``pipelines.executor_env.TASK_MODULES`` and what they import).
SHIPPED_PACKAGES = ("broker", "pipelines")

_ROOT = Path(__file__).resolve().parent.parent
_FIXED_TIME = (2020, 1, 1, 0, 0, 0)


def cache_dir() -> Path:
    """Where built artefacts are kept: ``$LOGBUS_CACHE_DIR``, else ``$XDG_CACHE_HOME/logbus`` (``~/.cache/logbus``)."""
    configured = os.environ.get("LOGBUS_CACHE_DIR")
    if configured:
        return Path(configured)
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "logbus"


def shippable(root: Path = _ROOT) -> bool:
    """Whether the shipped packages are a tree on disk (not imported from a zip that spark-submit already ships)."""
    return all((root / package).is_dir() for package in SHIPPED_PACKAGES)


def _sources(root: Path) -> list[tuple[str, Path]]:
    """(name in the zip, file) of every ``.py`` file of the shipped packages, sorted."""
    found = []
    for package in SHIPPED_PACKAGES:
        for path in (root / package).rglob("*.py"):
            if "__pycache__" not in path.parts:
                found.append((path.relative_to(root).as_posix(), path))
    return sorted(found)


def code_zip(directory: Path | None = None, root: Path = _ROOT) -> Path:
    """The zip of the shipped packages' current content, built only when no zip of that content exists."""
    sources = _sources(root)
    digest = hashlib.sha256()
    contents = []
    for name, path in sources:
        data = path.read_bytes()
        contents.append((name, data))
        digest.update(name.encode() + b"\0" + len(data).to_bytes(8, "big") + data)
    directory = directory or cache_dir() / "code"
    target = directory / f"logbus-code-{digest.hexdigest()[:16]}.zip"
    if target.exists():
        return target
    directory.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=".building-", suffix=".zip")
    try:
        with os.fdopen(fd, "wb") as out, zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as zf:
            for name, data in contents:
                info = zipfile.ZipInfo(name, _FIXED_TIME)
                info.compress_type = zipfile.ZIP_DEFLATED
                info.external_attr = 0o644 << 16
                zf.writestr(info, data)
        os.replace(tmp, target)  # another process building the same content writes the same bytes
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return target
