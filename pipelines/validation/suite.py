"""The expectation suite of one topic's run: built from the declared schema and the run's manifest.

Every expectation carries ``meta.check``: one sentence saying what it checks, which is what a
failed validation reports (together with the expectation's name and what was observed).
"""

from __future__ import annotations

from typing import Any

from pipelines.config import TopicSpec

DATA = ("_source", "data")   # rows of the data files (undecodable values are _source == "errors")

# Python value types Great Expectations sees in a frame of pyarrow-backed columns, per declared type
# (exact widths are checked on the Arrow schema, see ARROW_TYPES).
VALUE_TYPES = {
    "string": "str", "json": "str", "int": "int", "long": "int", "float": "float", "double": "float",
    "boolean": "bool", "timestamp": "datetime", "binary": "bytes",
}
ARROW_TYPES = {
    "string": "string", "json": "string", "int": "int32", "long": "int64", "float": "float", "double": "double",
    "boolean": "bool", "timestamp": "timestamp[ms, tz=UTC]", "binary": "binary",
}


def declared_columns(spec: TopicSpec) -> list[tuple[str, str, bool]]:
    """(column, declared type, required) of the loader's own columns and the topic's value columns."""
    cols = [("topic", "string", True), ("partition", "int", True), ("offset", "long", True),
            ("timestamp", "timestamp", False)]
    if spec.format == "raw":
        cols.append(("value", "binary", False))
    elif spec.format == "utf8":
        cols.append(("value", "string", False))
    else:
        cols += [(f.name, f.type, f.required) for f in spec.schema]
    return cols


def expected_records(p: dict) -> int:
    """Offsets of [start, end) that must be a row or an error: the range less recorded gaps and dropped
    duplicate copies inside it."""
    start, end = int(p["start"]), int(p["end"])
    missing = 0
    for a, b in (p.get("gaps") or []) + (p.get("duplicate_offsets") or []) + (p.get("late_offsets") or []):
        lo, hi = max(int(a), start), min(int(b), end)
        missing += max(0, hi - lo)
    return max(0, end - start - missing)


def expectation_specs(topic: str, spec: TopicSpec, manifest: dict) -> list[dict]:
    """The suite as plain dicts ({type, kwargs, check}); ``build_suite`` turns them into GE objects."""
    out: list[dict] = []

    def add(etype: str, check: str, **kwargs: Any) -> None:
        out.append({"type": etype, "kwargs": kwargs, "check": check})

    def where(*conds: tuple[str, Any]) -> dict:
        return {"where": list(conds)}  # column == value, all of them; made a GE Condition in build_suite

    partitions = sorted(manifest.get("partitions", []), key=lambda p: int(p["partition"]))
    for col, _, _ in declared_columns(spec):
        add("expect_column_to_exist", f"column {col} is present", column=col)
    add("expect_compound_columns_to_be_unique", "(topic, partition, offset) is unique",
        column_list=["topic", "partition", "offset"])
    add("expect_column_values_to_be_in_set", f"every row belongs to topic {topic}", column="topic", value_set=[topic])
    add("expect_column_values_to_be_in_set", "every row belongs to a planned partition", column="partition",
        value_set=[int(p["partition"]) for p in partitions])
    add("expect_column_values_to_be_in_set",
        "offsets are contiguous (each follows the previous one of its partition, from the planned start)",
        column="_offset_step", value_set=[1])
    for p in partitions:
        n, start, end = int(p["partition"]), int(p["start"]), int(p["end"])
        add("expect_table_row_count_to_equal", f"partition {n}: row count equals the manifest's count ({p['count']})",
            value=int(p["count"]), **where(("partition", n), DATA))
        add("expect_table_row_count_to_equal",
            f"partition {n}: rows + undecodable values cover the planned range [{start}, {end})",
            value=expected_records(p), **where(("partition", n)))
        if end > start:
            add("expect_column_values_to_be_between", f"partition {n}: offsets inside the planned range [{start}, {end})",
                column="offset", min_value=start, max_value=end - 1, **where(("partition", n)))
    for col, ftype, required in declared_columns(spec):
        add("expect_column_values_to_be_of_type", f"column {col} holds {ftype} values", column=col,
            type_=VALUE_TYPES[ftype], **where(DATA))
        if required:
            add("expect_column_values_to_not_be_null", f"column {col} is required: never null", column=col,
                **where(DATA))
    for i, extra in enumerate(spec.expectations):
        kwargs = dict(extra.get("kwargs") or {})
        if "row_condition" not in kwargs:
            kwargs.update(where(DATA))
        elif isinstance(kwargs["row_condition"], str):
            kwargs.setdefault("condition_parser", "pandas")
        add(extra["type"], f"expectations[{i}] of topic {topic} in the loader config", **kwargs)
    return out


def _class_name(etype: str) -> str:
    return "".join(part.capitalize() for part in etype.split("_"))


def build_suite(name: str, specs: list[dict]):
    """A Great Expectations ``ExpectationSuite`` of ``specs`` (raises ValueError naming a bad one)."""
    import great_expectations as gx
    import great_expectations.expectations as gxe
    from great_expectations.expectations.row_conditions import Column

    suite = gx.ExpectationSuite(name=name)
    for s in specs:
        kwargs = dict(s["kwargs"])
        where = kwargs.pop("where", None)
        if where:
            cond = None
            for col, value in where:
                c = Column(col) == value
                cond = c if cond is None else cond & c
            kwargs["row_condition"] = cond
        cls = getattr(gxe, _class_name(s["type"]), None)
        if cls is None:
            raise ValueError(f"{s['check']}: {s['type']!r} is not a Great Expectations 1.x expectation")
        try:
            suite.add_expectation(cls(**kwargs, meta={"check": s["check"]}))
        except Exception as exc:  # pydantic validation error: bad arguments from the config
            first = str(exc).strip().splitlines()
            raise ValueError(f"{s['check']}: {s['type']}({s['kwargs']}): {first[0] if first else exc}") from None
    return suite
