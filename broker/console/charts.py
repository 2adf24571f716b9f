"""The geometry of the console's inline SVG pictures, as plain numbers for the templates to draw.

No SVG text is built here (the templates escape and draw it), so every shape is unit-tested.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Bar:
    x: float
    y: float
    width: float
    height: float
    value: int
    series: int  # which of the values of a group: 0 the first (replicas), 1 the second (leaders)


@dataclass(frozen=True)
class BarGroup:
    label: str
    x: float  # the centre of the group, for its label
    bars: list[Bar]


@dataclass(frozen=True)
class BarChart:
    width: float
    height: float  # of the plot; labels go below it
    top: int  # the largest value, the plot's full height
    groups: list[BarGroup]


def bar_chart(groups: Sequence[tuple[str, Sequence[int]]], width: float = 480, height: float = 140,
              gap: float = 12) -> BarChart:
    """Side-by-side bars per labelled group (a broker: its replicas and its leaders), scaled to the largest value."""
    top = max((v for _, values in groups for v in values), default=0)
    slot = width / max(len(groups), 1)
    out = []
    for i, (label, values) in enumerate(groups):
        bar_width = max((slot - gap) / max(len(values), 1), 1.0)
        bars = []
        for j, v in enumerate(values):
            h = height * v / top if top else 0.0
            bars.append(Bar(round(i * slot + gap / 2 + j * bar_width, 1), round(height - h, 1), round(bar_width - 1, 1),
                            round(h, 1), v, j))
        out.append(BarGroup(label, round(i * slot + slot / 2, 1), bars))
    return BarChart(width, height, top, out)


@dataclass(frozen=True)
class LineChart:
    width: float
    height: float
    points: str  # SVG polyline points: "x,y x,y ..."
    top: int  # the largest value (the plot's full height)
    span: float  # seconds from the first point to the last
    last: int  # the last value


def line_chart(series: Sequence[tuple[float, int]], width: float = 320, height: float = 80) -> LineChart:
    """A polyline of (time, value) points, time across and value up, scaled to the largest value."""
    if not series:
        return LineChart(width, height, "", 0, 0.0, 0)
    t0, t1 = series[0][0], series[-1][0]
    top = max(v for _, v in series)
    span = t1 - t0

    def x(t: float) -> float:
        return round(width * (t - t0) / span, 1) if span else width

    def y(v: int) -> float:
        return round(height - height * v / top, 1) if top else height

    return LineChart(width, height, " ".join(f"{x(t)},{y(v)}" for t, v in series), top, span, series[-1][1])
