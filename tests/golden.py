"""Golden files: compare, or (with ``CORTEXGRAPH_REGEN_GOLDEN=1``) rewrite and fail.

A golden file is produced by the code it checks, so a run that regenerates it must never
count as a pass: :func:`check_golden` then writes the new bytes and fails the test with
"regenerated ...; review the diff and rerun", and never compares with what it just
wrote. The second, normal run checks the reviewed file.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

__all__ = ["check_golden", "regenerating"]

REGEN_VARIABLE = "CORTEXGRAPH_REGEN_GOLDEN"


def regenerating() -> bool:
    """Whether this run rewrites golden files (``CORTEXGRAPH_REGEN_GOLDEN=1``)."""
    return os.environ.get(REGEN_VARIABLE) == "1"


def check_golden(path: Path, actual: bytes) -> None:
    """Assert that ``path`` holds exactly ``actual``; when regenerating, write ``actual``
    to ``path`` and fail the test instead.

    Raises:
        AssertionError: the file differs from ``actual`` (or is missing).
        pytest.fail.Exception: regenerating (the file has been written).
    """
    if regenerating():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(actual)
        pytest.fail(
            f"regenerated {path.parent.name}/{path.name}; review the diff and rerun without"
            f" {REGEN_VARIABLE}",
            pytrace=False,
        )
    assert path.exists(), f"no golden file {path.name}; run once with {REGEN_VARIABLE}=1"
    assert path.read_bytes() == actual, f"{path.name} differs from the rendering"
