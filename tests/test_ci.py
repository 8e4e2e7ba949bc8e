"""The CI entry point fails when pytest runs no test (pytest's exit code 5)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_pytest_reports_5_when_nothing_is_collected() -> None:
    """The premise: a run that selects no test exits 5, not 0."""
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-k",
            "no_test_has_this_name",
            str(ROOT / "tests" / "test_uri.py"),
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert out.returncode == 5, out.stdout[-500:]


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_make_pytest_fails_when_nothing_is_collected() -> None:
    """`make pytest` (which `make test` and .ci/run call) turns exit code 5 into a failure."""
    env = {**os.environ, "MAKEFLAGS": ""}
    out = subprocess.run(
        [
            "make",
            "-s",
            "pytest",
            "PYTEST_ARGS=-q -p no:cacheprovider -k no_test_has_this_name tests/test_uri.py",
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
    )
    assert out.returncode != 0, out.stdout[-500:]
    assert "no tests ran" in out.stdout or "deselected" in out.stdout
