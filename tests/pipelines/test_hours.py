"""The per event hour accounting of ranges (pipelines.hours) and the hours' names (pipelines.completeness)."""

from __future__ import annotations

import numpy as np
import pytest

from pipelines import hours
from pipelines.completeness import asset_uri, hour_name, parse_hour
from pipelines.errors import LoadError
from pipelines.event_time import NO_HOUR
from pipelines.writer import hour_dir, hour_of_path


def test_add_merge_and_accounting():
    tally: hours.HourCounts = {}
    hours.add(tally, "read", np.array([5, 5, 6, NO_HOUR]))
    hours.add(tally, "rows", [5, 6])
    hours.add(tally, "late", [5])
    hours.add(tally, "errors", [NO_HOUR])
    assert tally["5"] == {"read": 2, "rows": 1, "late": 1, "errors": 0, "duplicates": 0}
    assert list(hours.sorted_counts(tally)) == ["none", "5", "6"]
    # late rows moved out (separate/drop) are accounted; reopened ones must be rows
    assert hours.unaccounted(tally["5"], "drop") == 0
    assert hours.unaccounted(tally["5"], "reopen") == 1
    assert hours.unaccounted(tally["none"], "reopen") == 0
    both = hours.merge(hours.merge({}, tally), tally)
    assert both["6"] == {"read": 2, "rows": 2, "late": 0, "errors": 0, "duplicates": 0}


def test_hour_names_and_asset_uris():
    h = parse_hour("2026-01-13T05")
    assert hour_name(h) == "2026-01-13T05" and parse_hour("2026-01-13T05:59:59+00:00") == h
    assert asset_uri("file:///data/wh", "page-views", h) == "logbus://data/wh/page-views/dt=2026-01-13/hour=05"
    with pytest.raises(LoadError, match="is not an hour"):
        parse_hour("yesterday")
    assert hour_of_path(f"{hour_dir('t', h)}/t+0+0+5.parquet") == h  # the inverse of hour_dir
    assert hour_of_path("t/_errors/t+0+0+5.parquet") is None
