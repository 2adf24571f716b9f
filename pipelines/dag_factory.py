"""Airflow DAGs from ``conf/loader.yaml``: one per topic group (``groups:``), ``logbus_load_<group>``.

    plan -> load -> validate -> commit -> complete -> report
         -> audit ------------------------/

``audit`` counts the planned ranges at the cluster while they load; ``complete`` validates and
declares the event hours that became complete and emits one Asset event per topic-hour through
the alias ``logbus-complete-<topic>`` (``pipelines.completeness.asset_uri``; docs/loader.md).

Scheduled from the config (``schedule``, per group or top level; ``@hourly`` by default; ``none``:
only when triggered), ``max_active_runs=1`` so offsets advance in order, catch-up off unless
``airflow.catchup``. A failed task is retried ``airflow.retries`` times after ``airflow.retry_delay``
(every step is safe to run again: a load killed mid-way rewrites its ranges under the same names);
a failed validation and an incomplete run are final.
Params: ``rerun_run_id`` (replay a saved run from its offsets), ``reset`` (earliest, latest,
epoch ms or an ISO time, applied before planning), ``topics`` (a subset of the group's topics).
Building the DAGs reads the YAML only; the tasks import Spark and Great Expectations when
they run (pipelines.airflow_tasks).
"""

from __future__ import annotations

import datetime as dt
import logging
import re

from pipelines import airflow_tasks as steps
from pipelines.config import LoaderConfig, load_config

log = logging.getLogger("logbus.airflow")
DAG_PREFIX = "logbus_load_"
COMPACT_DAG = "logbus_compact"


def _start_date(cfg: LoaderConfig) -> dt.datetime:
    value = cfg.airflow.get("start_date", "2026-01-01")
    when = value if isinstance(value, dt.datetime) else dt.datetime.fromisoformat(str(value))
    return when if when.tzinfo else when.replace(tzinfo=dt.UTC)


def airflow_schedule(value: str) -> str | None:
    """The config's schedule as Airflow takes it: ``none`` is ``None`` (runs only when triggered)."""
    return None if value.strip().lower() == "none" else value


def _default_args(cfg: LoaderConfig) -> dict:
    return {"retries": cfg.airflow_retries, "retry_delay": dt.timedelta(milliseconds=cfg.airflow_retry_delay_ms)}


def complete_alias(topic: str) -> str:
    """The Asset alias whose events say an hour of ``topic`` is complete (a downstream DAG schedules on it)."""
    return f"logbus-complete-{topic}"


def _is_name(topic: str) -> bool:
    return re.fullmatch(r"[A-Za-z0-9._-]+", topic) is not None


def build_dag(path: str, cfg: LoaderConfig, group: str):
    from airflow.sdk import DAG, Asset, AssetAlias, Param, get_current_context, task
    from airflow.sdk.exceptions import AirflowFailException

    spec = next(g for g in cfg.topic_groups() if g.name == group)
    params = {
        "rerun_run_id": Param(None, type=["null", "string"],
                              description="replay this saved run from its offsets (same rows, same files); nothing is committed"),
        "reset": Param(None, type=["null", "string"],
                       description="before planning, move the topics to earliest, latest, epoch ms or an ISO-8601 time"),
        "topics": Param(None, type=["null", "array", "string"],
                        description=f"a subset of {', '.join(spec.topics)} (default: all of them)"),
    }
    dag = DAG(
        dag_id=f"{DAG_PREFIX}{group}",
        description=f"load {', '.join(spec.topics)} into {cfg.warehouse}: plan -> load -> validate -> commit",
        schedule=airflow_schedule(spec.schedule or cfg.schedule),
        start_date=_start_date(cfg),
        catchup=bool(cfg.airflow.get("catchup", False)),
        max_active_runs=1,
        params=params,
        tags=["logbus", "warehouse"],
        default_args=_default_args(cfg),
        doc_md=__doc__,
    )

    def params_now() -> dict:
        return dict(get_current_context()["params"])

    # an alias per topic named in the group; topics a pattern matches share the group's
    aliases = {t: AssetAlias(complete_alias(t)) for t in spec.topics if _is_name(t)}
    group_alias = AssetAlias(complete_alias(f"group-{group}"))
    with dag:
        @task(task_id="plan")
        def plan() -> dict:
            return steps.plan_step(path, group, params_now())

        @task(task_id="load")
        def load(info: dict) -> dict:
            return steps.load_step(path, group, info)

        @task(task_id="validate")
        def validate(info: dict, loaded: dict) -> dict:
            from pipelines.validation import ValidationFailed

            try:
                return steps.validate_step(path, group, info)
            except ValidationFailed as exc:  # no retry: the offsets stay where they were
                raise AirflowFailException(str(exc)) from None

        @task(task_id="commit")
        def commit(info: dict, validation: dict) -> dict:
            return steps.commit_step(path, group, info)

        @task(task_id="audit")
        def audit(info: dict) -> dict:
            return steps.audit_step(path, group, info)

        @task(task_id="complete", outlets=[*aliases.values(), group_alias])
        def complete(info: dict, committed: dict, audited: dict, *, outlet_events=None) -> list[dict]:
            declared = steps.complete_step(path, group, info)
            for d in declared:
                if outlet_events is not None:
                    outlet_events[aliases.get(d["topic"], group_alias)].add(Asset(uri=d["uri"], name=f"{d['topic']}/{d['name']}"),
                                             extra={k: d[k] for k in ("topic", "name", "rows", "late", "reopened")})
            return declared

        @task(task_id="report")
        def report(info: dict, committed: dict, declared: list) -> dict:
            from pipelines.errors import IncompleteRunError

            try:
                return steps.report_step(path, group, info)
            except IncompleteRunError as exc:  # partitions without a leader: the next scheduled run, not a retry
                raise AirflowFailException(str(exc)) from None

        # Called while building the DAG, a task takes the XComArgs of others in place of the values they return
        # at run time; Airflow types the call with the function's own parameters (the mypy plugin of its repository,
        # which accepts XComArgs there, is not shipped), hence the ignores.
        info = plan()
        loaded = load(info)  # type: ignore[arg-type]
        audited = audit(info)  # type: ignore[arg-type]
        validation = validate(info, loaded)  # type: ignore[arg-type]
        committed = commit(info, validation)  # type: ignore[arg-type]
        report(info, committed, complete(info, committed, audited))  # type: ignore[arg-type]
    return dag


def build_compact_dag(path: str, cfg: LoaderConfig):
    """``logbus_compact``: the maintenance DAG merging closed hours' small files (``compaction:``)."""
    from airflow.sdk import DAG, task

    dag = DAG(
        dag_id=COMPACT_DAG,
        description=f"merge the small files of closed hours older than {cfg.compaction_older_than_ms // 3_600_000} h "
                    f"in {cfg.warehouse}",
        schedule=airflow_schedule(cfg.compaction_schedule),
        start_date=_start_date(cfg),
        catchup=False,
        max_active_runs=1,
        tags=["logbus", "warehouse", "maintenance"],
        default_args=_default_args(cfg),
        doc_md="Runs `logbus load compact --older-than <compaction.older_than>` for every loaded topic "
               "(pipelines.compaction; docs/loader.md, \"Compaction of small files\").",
    )
    with dag:
        @task(task_id="compact")
        def compact() -> list[dict]:
            return steps.compact_step(path)

        compact()
    return dag


def build_dags(path: str | None = None) -> dict:
    """{dag_id: DAG} for every topic group of the loader config (``$LOGBUS_LOADER_CONFIG``), and the
    compaction DAG."""
    path = path or steps.config_path()
    cfg = load_config(path)
    dags = {f"{DAG_PREFIX}{g.name}": build_dag(path, cfg, g.name) for g in cfg.topic_groups()}
    dags[COMPACT_DAG] = build_compact_dag(path, cfg)
    return dags
