"""Validation of warehouse loads with Great Expectations 1.x: a load's offsets
move only after its suite passes.

One suite per topic, built from the topic's declared schema and the run's manifest (the
plan's ranges plus the load's counts, i.e. what ``commit`` would write):

- row count of every partition equals the manifest's count;
- (topic, partition, offset) unique; offsets inside the planned ranges and contiguous
  (every offset of [start, end) is a row or an undecodable value in ``_errors``, less
  recorded retention gaps and the duplicate copies deduplication by origin dropped);
- the declared columns present, typed (and their exact Arrow types), non-null where required;
- the topic's extra ``expectations:`` from ``conf/loader.yaml``.

Results go next to the data: ``<warehouse>/<topic>/_validation/<run_id>/validation.json``
(ours: one line per check), ``ge_result.json`` (Great Expectations' own) and ``docs/index.html``
(the Data Docs: one page rendered from those with Jinja2 that opens offline, ``page.py``).
The DAG's validate step and ``logbus load run --validate`` both call ``validate_run``.

    from pipelines.validation import validate_run, ValidationFailed
    report = validate_run(config, run_id)          # raises ValidationFailed naming the failed checks
"""

from pipelines.validation.runner import RunValidation, TopicValidation, ValidationFailed, validate_run, validate_topic

__all__ = ["validate_run", "validate_topic", "RunValidation", "TopicValidation", "ValidationFailed"]
