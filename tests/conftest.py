"""Shared fixtures. The suite runs with CORTEXGRAPH_INVARIANTS=1 (expensive runtime checks)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

import cortexgraph as cg

os.environ.setdefault("CORTEXGRAPH_INVARIANTS", "1")

settings.register_profile(
    "default",
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
settings.load_profile("default")

T0 = 1_700_000_000_000  # a fixed instant: 2023-11-14T22:13:20Z


@pytest.fixture
def clock() -> cg.ManualClock:
    """A clock that only moves when a test moves it."""
    return cg.ManualClock(T0)


@pytest.fixture
def cx(tmp_path: Path, clock: cg.ManualClock) -> Iterator[cg.Cortex]:
    """A fresh store for actor 'agent' on a manual clock, closed after the test."""
    handle = cg.open(tmp_path / "store", "agent", clock=clock, sync=False)
    try:
        yield handle
    finally:
        handle.close()
