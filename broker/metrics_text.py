"""The Prometheus text exposition format (version 0.0.4), shared by the broker and the mirror-maker.

Only the text: escaping, labels, numbers, counter/gauge/histogram families. No HTTP and no
Twisted (the broker serves it with twisted.web, the thread-based mirror with http.server), so
every part of logbus may use it without a client library.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Iterable, Sequence
from typing import Any

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

#: Request latency buckets (seconds), Prometheus' usual spread from 0.5 ms to 10 s.
LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)

#: Label pairs as given by callers: (name, value), the value turned into text with str().
Labels = Iterable[tuple[str, Any]]

_METRIC_NAME = re.compile(r"^[a-zA-Z_:][a-zA-Z0-9_:]*$")
_KINDS = ("counter", "gauge", "histogram", "summary", "untyped")


def escape_label_value(value: str) -> str:
    """A label value inside double quotes: backslash, newline and quote escaped."""
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def escape_help(text: str) -> str:
    """HELP text: backslash and newline escaped (quotes stay as they are)."""
    return text.replace("\\", "\\\\").replace("\n", "\\n")


def format_labels(pairs: Labels) -> str:
    """``{a="x",b="y"}``, or the empty string for no labels."""
    text = ",".join(f'{k}="{escape_label_value(str(v))}"' for k, v in pairs)
    return "{" + text + "}" if text else ""


def format_value(v: float) -> str:
    """A sample value: ints as they are, floats by repr, infinities and NaN by their exposition names."""
    if isinstance(v, bool):
        return "1" if v else "0"
    if isinstance(v, float):
        if v != v:
            return "NaN"
        if v in (float("inf"), float("-inf")):
            return "+Inf" if v > 0 else "-Inf"
        return repr(v)
    return str(v)


class Histogram:
    """Buckets (counted per bucket, rendered cumulative), sum and count of one labelled series."""

    __slots__ = ("bounds", "counts", "sum", "count")

    def __init__(self, bounds: Sequence[float] = LATENCY_BUCKETS) -> None:
        self.bounds = bounds
        self.counts = [0] * len(bounds)
        self.sum = 0.0
        self.count = 0

    def observe(self, value: float) -> None:
        i = bisect.bisect_left(self.bounds, value)
        if i < len(self.counts):
            self.counts[i] += 1
        self.sum += value
        self.count += 1

    def samples(self, labels: Labels = ()) -> list[tuple[str, str, Any]]:
        """(suffix, rendered labels, value) of the ``_bucket`` lines (``le`` last), ``_sum`` and ``_count``."""
        pairs = list(labels)
        out: list[tuple[str, str, Any]] = []
        cumulative = 0
        for bound, c in zip(self.bounds, self.counts):
            cumulative += c
            out.append(("_bucket", format_labels(pairs + [("le", format_value(bound))]), cumulative))
        out.append(("_bucket", format_labels(pairs + [("le", "+Inf")]), self.count))
        out.append(("_sum", format_labels(pairs), self.sum))
        out.append(("_count", format_labels(pairs), self.count))
        return out


class Exposition:
    """One scrape's text: metric families in the order they are added, then ``text()``."""

    def __init__(self) -> None:
        self._lines: list[str] = []

    def family(self, name: str, kind: str, help_text: str, samples: Iterable[tuple[str, str, Any]]) -> None:
        """HELP and TYPE lines, then one line per (suffix, rendered labels, value)."""
        if not _METRIC_NAME.match(name) or kind not in _KINDS:
            raise ValueError(f"bad metric family {name!r} of type {kind!r}")
        lines = self._lines
        lines.append(f"# HELP {name} {escape_help(help_text)}")
        lines.append(f"# TYPE {name} {kind}")
        for suffix, labels, value in samples:
            lines.append(f"{name}{suffix}{labels} {format_value(value)}")

    def counter(self, name: str, help_text: str, samples: Iterable[tuple[Labels, Any]]) -> None:
        """A counter family from (label pairs, value); the name should end in ``_total``."""
        self.family(name, "counter", help_text, (("", format_labels(k), v) for k, v in samples))

    def gauge(self, name: str, help_text: str, samples: Iterable[tuple[Labels, Any]]) -> None:
        """A gauge family from (label pairs, value)."""
        self.family(name, "gauge", help_text, (("", format_labels(k), v) for k, v in samples))

    def histogram(self, name: str, help_text: str, series: Iterable[tuple[Labels, Histogram]]) -> None:
        """A histogram family from (label pairs, Histogram)."""
        self.family(name, "histogram", help_text, (s for labels, h in series for s in h.samples(labels)))

    def text(self) -> str:
        return "\n".join(self._lines) + "\n"
