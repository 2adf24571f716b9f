"""The order in which the test files reach `make test`'s two workers: the slowest first.

pytest-xdist hands out whole files (``--dist loadfile``) in collection order; by default it
first sorts them by their number of tests, which puts the single-test files that take two
minutes (the Airflow scheduler, the main job) last, where one worker runs them alone while the
other has nothing left. With ``--no-loadscope-reorder`` and the files below first (the longest
processing time first), the two workers end close together. The seconds are each file's sum of
setup, call and teardown in one full run (`pytest -n 2 --dist loadfile --junitxml`, summed per
file) at ab9dfe2 on a 2-core machine (the whole run: 883 s of tests in 456 s); a file not listed
keeps its place after these.
"""

from __future__ import annotations

import pytest

SLOWEST_FIRST = (
    "tests/dags/test_scheduler.py",                   # 67 s
    "tests/pipelines/test_spark_cluster.py",          # 65 s
    "tests/dags/test_main_job.py",                    # 41 s
    "tests/dags/test_warehouse_load.py",              # 38 s
    "tests/pipelines/test_load_faults.py",            # 31 s
    "tests/mirror/test_mirror_maker.py",              # 30 s
    "tests/mirror/test_exact_resume.py",              # 25 s
    "tests/mirror/test_group_source.py",              # 23 s
    "tests/client/test_group_consumer.py",            # 20 s
    "tests/cluster_replication/test_sessions.py",     # 20 s
    "tests/console/test_console_browser.py",          # 19 s
    "tests/cluster/test_local_cluster.py",            # 18 s
    "tests/coordinator/test_groups.py",               # 18 s
)


def slowest_files_first(items: list[pytest.Item]) -> None:
    """Reorder ``items`` in place: the files of SLOWEST_FIRST first, in its order; the rest after,
    as collected (a stable sort, so each file's tests keep their order)."""
    rank = {path: i for i, path in enumerate(SLOWEST_FIRST)}
    last = len(SLOWEST_FIRST)
    items.sort(key=lambda item: rank.get(item.nodeid.split("::", 1)[0], last))
