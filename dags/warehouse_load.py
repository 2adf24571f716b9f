"""Airflow warehouse loads: one DAG per topic group of conf/loader.yaml (or $LOGBUS_LOADER_CONFIG),
plan -> load -> validate -> commit -> report. The DAGs are built by pipelines.dag_factory;
this file holds no logic. See docs/loader.md ("Airflow and validation")."""

from pipelines.dag_factory import build_dags

globals().update(build_dags())
