"""``python -m mirror ...``: the same as ``logbus mirror-maker ...``."""

from __future__ import annotations

import sys

from broker.tools import command_main
from mirror.cli import add_arguments, run


def main(argv: list[str] | None = None) -> int:
    return command_main("mirror-maker", "mirror source clusters into an aggregate cluster", add_arguments, run, argv)


if __name__ == "__main__":
    sys.exit(main())
