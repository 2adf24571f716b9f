"""``logbus console --allow-actions``: a group's offsets reset, or a group deleted, from the pages.

Each action has a confirmation page (what would change, as ``--dry-run`` shows it) whose form
carries a token only this console process can make: an HMAC of the action and the group under a
secret drawn at start-up, so another site cannot make a browser post one (CSRF). The work is the
``consumer-groups`` tool's own (``reset_group``, ``delete_groups``), with its rules: a group with
active members is refused."""

from __future__ import annotations

import hashlib
import hmac
import secrets
from typing import Any

from broker.protocol.errors import ErrorCode
from broker.tools import CommandError
from broker.tools.access import ClusterAccess
from broker.tools.group_deletes import delete_groups
from broker.tools.reset_offsets import Scenario, reset_group

TopicPartition = tuple[str, int]

#: The form's ``to`` -> Kafka's scenario, and whether it takes a number.
RESETS: dict[str, tuple[str, bool]] = {
    "earliest": ("to-earliest", False),
    "latest": ("to-latest", False),
    "offset": ("to-offset", True),
    "shift": ("shift-by", True),
}


class ActionError(Exception):
    """An action refused or failed: one line for the page."""


class Actions:
    """The actions the pages may take, against one cluster."""

    def __init__(self, access: ClusterAccess, secret: bytes | None = None) -> None:
        self.access = access
        self._secret = secret or secrets.token_bytes(32)

    def token(self, action: str, group: str) -> str:
        return hmac.new(self._secret, f"{action}\0{group}".encode(), hashlib.sha256).hexdigest()

    def check(self, token: str, action: str, group: str) -> None:
        if not hmac.compare_digest(token.encode(), self.token(action, group).encode()):
            raise ActionError("This form did not come from this console (its token is wrong or missing).")

    def reset(self, group: str, form: dict[str, str], execute: bool) -> dict[TopicPartition, int]:
        """The new offsets (committed when ``execute``) of the form's choice: ``to`` (earliest,
        latest, offset, shift), ``value`` for the last two, ``topic`` (empty: every topic)."""
        to = form.get("to", "")
        if to not in RESETS:
            raise ActionError(f"Reset to what? Choose one of {', '.join(RESETS)}.")
        name, numeric = RESETS[to]
        value = 0
        if numeric:
            try:
                value = int(form.get("value", ""))
            except ValueError:
                raise ActionError(f"'{form.get('value', '')}' is not a number of records.") from None
        topic = form.get("topic", "").strip()
        try:
            return reset_group(self.access, group, Scenario(name, value), [topic] if topic else None, execute,
                               warn=lambda line: None)
        except (CommandError, OSError) as exc:
            raise ActionError(str(exc)) from None

    def delete(self, group: str) -> None:
        try:
            code = delete_groups(self.access, [group])[group]
        except OSError as exc:
            raise ActionError(str(exc)) from None
        if code != ErrorCode.NONE:
            raise ActionError(f"Group '{group}' could not be deleted: {ErrorCode(code).name}.")

    def plan_rows(self, plan: dict[TopicPartition, int]) -> list[dict[str, Any]]:
        return [{"topic": t, "partition": p, "offset": o} for (t, p), o in sorted(plan.items())]
