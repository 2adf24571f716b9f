"""Every error the loader raises on purpose, in one place (configuration errors are
``pipelines.config.ConfigError``). Each message is one line that names the topic, partition
and offsets, so the CLI and Airflow show it without a traceback."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pipelines.validation.runner import RunValidation


class LoadError(Exception):
    """A load failure to report as one clear line (names topic, partition and offsets)."""


class OutOfRangeError(LoadError):
    """The planned offsets are no longer (or not yet) in the partition's log."""

    def __init__(self, topic: str, partition: int, offset: int, earliest: int, latest: int, end: int | None = None) -> None:
        self.topic, self.partition, self.offset, self.earliest, self.latest = topic, partition, offset, earliest, latest
        wanted = f"offset {offset}" if end is None else f"offsets {offset}..{end}"
        super().__init__(
            f"{topic}-{partition}: {wanted} out of range: the partition holds {earliest}..{latest} "
            f"(retention removed {earliest - offset} records not yet loaded); "
            f"set out_of_range: earliest to skip the gap, or `logbus load reset --topic {topic} --to earliest`"
            if offset < earliest else
            f"{topic}-{partition}: {wanted} out of range: the partition holds {earliest}..{latest} "
            f"(the saved offset is past the end: was the topic recreated?); "
            f"`logbus load reset --topic {topic} --to earliest` starts it again")


class TopicDeletedError(LoadError):
    """The topic of a planned range was deleted while the run loaded it."""


class IncompleteRunError(LoadError):
    """A run committed what it could but left partitions without a leader out (the DAG run fails)."""


# A Spark job's failure shows these by their message alone (pipelines.job.spark_failure_reason).
ONE_LINE_ERRORS = frozenset(cls.__name__ for cls in (LoadError, OutOfRangeError, TopicDeletedError))


class DecodeError(ValueError):
    """A record value that does not fit the topic's declared schema (it goes to ``_errors/``)."""


class ValidationFailed(Exception):
    """A load that did not validate; the message names every failed check."""

    def __init__(self, run: RunValidation) -> None:
        self.run = run
        lines = [f"validation of run {run.run_id} failed: {len(run.failures)} check(s) did not pass"]
        for topic, check in run.failures:
            lines.append(f"  {topic}: {check['expectation']}: {check['check']}"
                         + (f" (observed {check['observed']})" if check.get("observed") is not None else ""))
        super().__init__("\n".join(lines))

    def one_line(self) -> str:
        """The failure as the command line says it: how many checks failed, the first, where the Data Docs are."""
        topic, first = self.run.failures[0]
        seen = f" (observed {first['observed']})" if first.get("observed") is not None else ""
        more = len(self.run.failures) - 1
        docs = ", ".join(t.docs_path for t in self.run.topics if not t.success)
        line = (f"validation of run {self.run.run_id} failed: {len(self.run.failures)} check(s) did not pass, "
                f"first {topic}: {first['expectation']}: {first['check']}{seen}"
                f"{f' and {more} more' if more else ''}; the offsets did not move (the run stays pending); "
                f"Data Docs: {docs}")
        return " ".join(line.splitlines())
