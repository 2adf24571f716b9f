"""`logbus mirror-maker`: copy topics of several source clusters into one aggregate cluster.

The work is in the ``mirror`` package (see docs/mirror.md); this module is the command's entry.
"""

from mirror.cli import add_arguments, run

__all__ = ["add_arguments", "run"]
