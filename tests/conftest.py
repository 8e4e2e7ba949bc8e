"""Shared fixtures. The suite runs with CORTEXGRAPH_INVARIANTS=1 (expensive runtime checks)."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

import cortexgraph as cg
from cortexgraph import compiled

os.environ.setdefault("CORTEXGRAPH_INVARIANTS", "1")

settings.register_profile(
    "default",
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
settings.load_profile("default")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Tests marked ``pure_python`` replace a name inside one of the compiled modules
    (``cortexgraph.compiled.MODULES``). Compiled code binds the names it calls when it is
    built, so the replacement would not be seen: those tests run in the suite's
    pure-Python pass (``CORTEXGRAPH_PURE_PYTHON=1``, the second half of ``make pytest``)."""
    if not compiled.state()[0]:
        return
    skip = pytest.mark.skip(
        reason="patches a name inside a compiled module: runs in the pure-Python pass"
    )
    for item in items:
        if item.get_closest_marker("pure_python") is not None:
            item.add_marker(skip)

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


@pytest.fixture(autouse=True)
def _private_global_store(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every test (and every hook subprocess it starts) sees its own empty global store of
    the Claude Code plugin, never the ~/.claude/memory of whoever runs the suite."""
    monkeypatch.setenv("CORTEXGRAPH_HOME", str(tmp_path_factory.mktemp("cortexgraph-home")))


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A git repository with one commit, on branch main."""
    project = tmp_path / "proj"
    project.mkdir()
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@example.com"]
    subprocess.run([*git, "init", "-q", "-b", "main"], cwd=project, check=True)
    subprocess.run(
        [*git, "commit", "-q", "--allow-empty", "-m", "start billing"], cwd=project, check=True
    )
    return project
