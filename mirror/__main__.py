"""``python -m mirror ...``: the same as ``logbus mirror-maker ...``."""

from __future__ import annotations

import argparse
import sys

from broker.tools import CommandError
from mirror.cli import add_arguments, run


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m mirror", description="mirror source clusters into an aggregate cluster")
    add_arguments(parser)
    args = parser.parse_args(argv)
    try:
        return run(args)
    except CommandError as exc:
        print(f"mirror-maker: error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
