"""docs/architecture.md names only files and modules that exist.

The page is the map of the code: every ``path.py`` it names in backticks (from the repository
root, or relative to a folder the page is describing) must be a file of the tree, and every
dotted ``broker.``/``pipelines.``/``mirror.`` name a module, or a name defined at the top level
of one. A module moved or deleted without the page following fails here. Read with ``ast``
only: nothing is imported, no process is started.
"""

from __future__ import annotations

import ast
import re
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "architecture.md"
CODE_DIRS = ("broker", "pipelines", "mirror", "dags", "bench", "tests")

#: Files the page names as still to come (its TODO block): the ZooKeeper-data branch adds them.
PLANNED: set[str] = set()  # files a doc may name before they land

FENCED = re.compile(r"^```.*?^```", re.S | re.M)
CODE_SPAN = re.compile(r"`([^`]+)`")  # a span may wrap onto the next line
PATH = re.compile(r"(?<![\w./-])((?:[\w.-]+/)*[\w-]+\.py)\b")
DOTTED = re.compile(r"(?<![\w./-])((?:broker|pipelines|mirror)(?:\.\w+)+)(?![\w/])")


def spans() -> list[str]:
    """The page's code: its inline code spans and its fenced blocks (the diagrams and flows)."""
    text = DOC.read_text()
    return CODE_SPAN.findall(FENCED.sub("", text)) + FENCED.findall(text)


def named_paths() -> set[str]:
    return {p for span in spans() for p in PATH.findall(span)}


def named_modules() -> set[str]:
    return {d for span in spans() for d in DOTTED.findall(span) if not d.endswith(".py")}


@cache
def python_files() -> list[str]:
    return sorted(str(p.relative_to(ROOT)) for d in CODE_DIRS for p in (ROOT / d).rglob("*.py"))


def path_exists(name: str) -> bool:
    """``name`` from the root, or the tail of a file's path (``records/layout.py``, ``partition.py``)."""
    return (ROOT / name).is_file() or any(f.endswith("/" + name) for f in python_files())


def module_file(dotted: str) -> Path | None:
    base = ROOT.joinpath(*dotted.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


@cache
def top_level_names(path: Path) -> frozenset[str]:
    names: set[str] = set()
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update(t.id for t in targets if isinstance(t, ast.Name))
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
    return frozenset(names)


def dotted_exists(dotted: str) -> bool:
    """The longest module prefix exists, and what follows it is a top-level name there."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        path = module_file(".".join(parts[:cut]))
        if path is not None:
            return cut == len(parts) or parts[cut] in top_level_names(path)
    return False


def test_the_page_names_python_files_and_modules() -> None:
    assert len(named_paths()) > 100 and len(named_modules()) > 15  # the patterns still find what the page names


def test_every_named_path_exists() -> None:
    missing = sorted(p for p in named_paths() - PLANNED if not path_exists(p))
    assert not missing, f"docs/architecture.md names files that do not exist: {missing}"


def test_every_named_module_exists() -> None:
    missing = sorted(d for d in named_modules() if not dotted_exists(d))
    assert not missing, f"docs/architecture.md names modules or names that do not exist: {missing}"
