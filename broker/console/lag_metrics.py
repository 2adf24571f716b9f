"""Consumer lag as Prometheus metrics on the console's ``/metrics``, in the text format of
``broker/metrics_text.py`` (the broker's and the mirror's)."""

from __future__ import annotations

from broker.console.lag_history import LagView
from broker.console.lag_status import Status
from broker.metrics_text import Exposition


def render(view: LagView) -> str:
    """``logbus_consumer_group_lag{group,topic,partition}`` and ``logbus_consumer_group_status{group,status}``
    (1 for the group's status, 0 for the others, so each status can be alerted on by name)."""
    out = Exposition()
    groups = sorted(view.groups.items())
    lags = [((("group", g), ("topic", t), ("partition", p)), lag.lag)
            for g, gl in groups for (t, p), lag in gl.partitions.items()]
    out.gauge("logbus_consumer_group_lag", "Log end offset minus the group's committed offset, per partition.", lags)
    flags = [((("group", g), ("status", s.name)), int(gl.status == s)) for g, gl in groups for s in Status]
    out.gauge("logbus_consumer_group_status", "The group's Burrow-like status from its lag history (1: the current one).",
              flags)
    return out.text()
