"""The integer options the benchmarks share the shape of: ``--records 1000 --per-batch 10 ...``."""

from __future__ import annotations

import argparse


def int_options(**defaults: int) -> argparse.ArgumentParser:
    """A parser with one ``--name`` int option per keyword (``per_batch`` is ``--per-batch``), defaulting to its value."""
    parser = argparse.ArgumentParser()
    for name, default in defaults.items():
        parser.add_argument("--" + name.replace("_", "-"), type=int, default=default)
    return parser
