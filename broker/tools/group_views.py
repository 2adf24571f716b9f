"""`consumer-groups --describe` views beyond offsets: Kafka's --state and --members tables.

Pure formatting of a GroupView (``broker.tools.coordinator_groups``), so each table is unit-tested.
"""

from __future__ import annotations

from collections.abc import Sequence

from broker.tools.coordinator_groups import GroupView

STATE_HEADER = ("GROUP", "COORDINATOR (ID)", "ASSIGNMENT-STRATEGY", "STATE", "#MEMBERS")
MEMBERS_HEADER = ("GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS")


def table(header: Sequence[str], rows: Sequence[Sequence[object]]) -> list[str]:
    """Columns padded to their widest cell, as Kafka prints them."""
    cells = [tuple(header)] + [tuple(str(c) for c in r) for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    return [" ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in cells]


def state_rows(view: GroupView, coordinator: str, coordinator_id: int, strategy: str) -> list[tuple]:
    """--state: one row, the coordinator as ``host:port  (id)`` like Kafka's."""
    return [(view.group, f"{coordinator} ({coordinator_id})", strategy or "-", view.state, len(view.members))]


def member_rows(view: GroupView) -> list[tuple]:
    """--members: one row per member with its number of assigned partitions."""
    return [(view.group, m.member_id, m.host or "-", m.client_id, len(m.partitions))
            for m in sorted(view.members, key=lambda m: m.member_id)]
