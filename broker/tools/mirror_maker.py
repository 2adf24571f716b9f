"""`logbus mirror-maker`: copy topics of several source clusters into one aggregate cluster.

The work is in the ``mirror`` package (see docs/mirror.md); this module is the command's entry.
``mirror`` is imported only when the command runs, so ``broker`` never needs it.
"""

from __future__ import annotations

import argparse


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from mirror.cli import add_arguments as mirror_arguments

    mirror_arguments(parser)


def run(args: argparse.Namespace) -> int:
    from mirror.cli import run as run_mirror

    return run_mirror(args)
