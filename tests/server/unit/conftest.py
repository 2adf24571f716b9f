"""Fixtures of the server's unit tests (no broker process, no ZooKeeper)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.server.unit.harness import Replicas


@pytest.fixture
def replicas(tmp_path: Path) -> Iterator[Replicas]:
    r = Replicas(tmp_path)
    yield r
    r.close()
