"""The validation page (``docs/index.html``): one self-contained HTML file rendered with Jinja2 from
Great Expectations' result JSON and the Arrow-type checks, so it opens offline.

Great Expectations' own Data Docs load Bootstrap, jQuery, Vega and Font Awesome from CDNs and show
a blank page without internet; this page has its styles inline, no script, and a
Content-Security-Policy that forbids the browser any other request.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from jinja2 import Environment, PackageLoader, StrictUndefined
from markupsafe import Markup

_ENV = Environment(loader=PackageLoader("pipelines.validation", "templates"), autoescape=True,
                   undefined=StrictUndefined, trim_blocks=True, lstrip_blocks=True)
_HIDDEN_KWARGS = ("batch_id", "row_condition", "condition_parser")


def observed(result: Mapping[str, Any]) -> Any:
    """What an expectation saw, in one value or phrase (the failure line, validation.json, the page)."""
    if "observed_value" in result:
        return result["observed_value"]
    if result.get("unexpected_count"):
        values = result.get("partial_unexpected_list") or []
        return f"{result['unexpected_count']} unexpected, e.g. {values[:5]}"
    return None


def condition_text(condition: Any) -> str:
    """A row condition as text: ``partition == 1 and _source == 'data'`` (GE's JSON form or a string)."""
    if not condition:
        return ""
    if isinstance(condition, str):
        return condition
    if isinstance(condition, Mapping) and "conditions" in condition:
        joiner = f" {condition.get('type', 'and')} "
        return joiner.join(condition_text(c) for c in condition["conditions"])
    if isinstance(condition, Mapping) and "column" in condition:
        column = condition["column"]
        name = column.get("name") if isinstance(column, Mapping) else column
        return f"{name} {condition.get('operator', '?')} {condition.get('parameter')!r}"
    return json.dumps(condition, default=str, sort_keys=True)


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, default=str, sort_keys=True)


def _expectation_row(r: Mapping[str, Any]) -> dict:
    cfg = r.get("expectation_config") or {}
    kwargs = cfg.get("kwargs") or {}
    result = r.get("result") or {}
    exc = r.get("exception_info") or {}
    seen = observed(result)
    if seen is None and "element_count" in result:  # a column check that passed: say how many rows it saw
        seen = f"{result.get('unexpected_count') or 0} unexpected of {result['element_count']} rows"
    return {
        "success": bool(r.get("success")), "check": (cfg.get("meta") or {}).get("check", cfg.get("type", "")),
        "expectation": Markup("_<wbr>").join(str(cfg.get("type", "")).split("_")),  # may wrap at underscores
        "arguments": ", ".join(f"{k}={_text(v)}" for k, v in kwargs.items() if k not in _HIDDEN_KWARGS),
        "where": condition_text(kwargs.get("row_condition")),
        "observed": "" if seen is None else _text(seen),
        "error": str(exc.get("exception_message") or "") if exc.get("raised_exception") else "",
    }


def render_page(topic: str, run_id: str, ge_result: Mapping[str, Any], arrow_checks: Sequence[Mapping[str, Any]],
                partitions: Sequence[Mapping[str, Any]], rows: int, files: Sequence[str]) -> str:
    """The page of one topic's validated run: every GE expectation and every Arrow-type check."""
    expectations = [_expectation_row(r) for r in ge_result.get("results", [])]
    arrow = [{"success": bool(c["success"]), "check": c["check"], "column": c["kwargs"]["column"],
              "wanted": c["kwargs"]["type"], "stored": c["observed"] or "missing"} for c in arrow_checks]
    failed = [e for e in expectations + arrow if not e["success"]]
    meta = ge_result.get("meta") or {}
    return _ENV.get_template("validation.html").render(
        topic=topic, run_id=run_id, success=not failed, failed=failed, expectations=expectations, arrow=arrow,
        partitions=partitions, rows=rows, files=len(files), suite=ge_result.get("suite_name", ""),
        ge_version=meta.get("great_expectations_version", ""), validated_at=meta.get("validation_time", ""),
        evaluated=len(expectations) + len(arrow))
