"""The loader's one fault-injection seam: tests hand a ``LoadFaults`` to the ``Loader`` (it
travels to the Spark tasks inside the ``TaskContext``) to make a load fail where a real one
can. The default, ``NO_FAULTS``, does nothing.

A loader the test starts as a process (to kill it) takes its faults from the environment
variable ``LOGBUS_LOADER_FAULTS``; ``from_environment`` is the only reader of it, and the
``logbus load`` command and the Airflow load step (a scheduler a test starts) its only callers.
"""

from __future__ import annotations

import json
import os
import signal
import time
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pipelines.task import RangeTask

FAULTS_ENV = "LOGBUS_LOADER_FAULTS"


@dataclass(frozen=True)
class LoadFaults:
    """What goes wrong, and where. Picklable: it crosses to the Spark executors."""

    fail_after_write: str | None = None  # a marker directory: each task's first attempt fails after its first file
    fetch_delay_ms: int = 0              # every fetch waits this long first (keeps a task busy while a test acts)
    kill_before_manifest: bool = False   # the driver dies (SIGKILL) between the data commit and the manifest commit

    def before_fetch(self) -> None:
        """Called by a task before each fetch from the partition's leader."""
        if self.fetch_delay_ms:
            time.sleep(self.fetch_delay_ms / 1000)

    def after_first_file(self, task: RangeTask) -> None:
        """Called by a task once its first output is in place: fails the task's first attempt
        (a marker file per range tells a retry from a first attempt)."""
        if self.fail_after_write is None:
            return
        os.makedirs(self.fail_after_write, exist_ok=True)
        marker = os.path.join(self.fail_after_write, f"{task.topic}+{task.partition}+{task.start}+{task.end}")
        try:
            fd = os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        except FileExistsError:
            return
        os.close(fd)
        raise RuntimeError(f"injected failure after the first file of {task.topic}-{task.partition} "
                           f"[{task.start}, {task.end}) was committed")

    def before_manifest(self) -> None:
        """Called by the driver after the data is committed, before any manifest is written."""
        if self.kill_before_manifest:
            os.kill(os.getpid(), signal.SIGKILL)

    def environment(self) -> dict[str, str]:
        """The environment that makes a loader process started with it suffer these faults."""
        return {FAULTS_ENV: json.dumps(asdict(self))}

    @classmethod
    def from_environment(cls) -> LoadFaults:
        """The faults named by ``LOGBUS_LOADER_FAULTS`` (none when it is unset)."""
        raw = os.environ.get(FAULTS_ENV)
        return cls(**json.loads(raw)) if raw else NO_FAULTS


NO_FAULTS = LoadFaults()


COMPACT_KILL_ENV = "LOGBUS_COMPACT_KILL_AT"


def compaction_step_from_environment():
    """The step callback of ``pipelines.compaction.compact_hour`` for ``logbus load compact``: SIGKILL this
    process at the step ``LOGBUS_COMPACT_KILL_AT`` names (after_rename, after_manifest, after_first_delete),
    set only by tests that kill a compaction; otherwise it does nothing."""
    target = os.environ.get(COMPACT_KILL_ENV)

    def step(name: str) -> None:
        if name == target:
            os.kill(os.getpid(), signal.SIGKILL)

    return step
