"""Principals as Kafka writes them: ``User:<name>``; ``User:ANONYMOUS`` before (or without) a login."""

from __future__ import annotations

USER_TYPE = "User"
ANONYMOUS = f"{USER_TYPE}:ANONYMOUS"


def user(name: str) -> str:
    """The principal of an authenticated user ``name``."""
    return f"{USER_TYPE}:{name}"
