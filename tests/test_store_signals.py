"""Two read-only windows on a store: ``Cortex.salience`` (the signals behind a ranking)
and ``cg.store_generation`` (a cache key that moves with every commit)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import cortexgraph as cg
from cortexgraph.core.salience import DEFAULT_WEIGHTS, cold_score, salience_factors

T0 = 1_700_000_000_000
DAY = 86_400_000


def test_salience_reports_the_factors_and_signals(tmp_path: Path) -> None:
    """The factors equal salience_factors computed from the memory's own numbers, the
    access count follows late-binding reads and the in-degree follows edges."""
    with cg.open(tmp_path, "a", clock=cg.ManualClock(T0)) as cx:
        fact = cx.write(cg.Fact(text="the ledger lives in postgres", confidence=0.8, priority=6))
        other = cx.write(cg.Pattern(text="every handler goes through parse and format"))
        cx.add_edge(other, fact, "relates_to")
        cx.recall("ledger postgres", mode="keyword", late_binding=True, now=T0 + DAY)
        cx.recall("ledger postgres", mode="keyword", late_binding=True, now=T0 + 2 * DAY)
        got = cx.salience(fact, now=T0 + 3 * DAY)
        assert (got.access_count, got.last_access, got.in_degree) == (2, T0 + 2 * DAY, 1)
        expected = salience_factors(
            type_name="fact", confidence=0.8, priority=6, pinned=False, in_degree=1,
            max_in_degree=1, access_count=2, max_access=2, age_ms=3 * DAY,
        )
        assert tuple(round(v * 1_000_000) for v in got.factors.values()) == expected
        assert got.score == cold_score(expected, DEFAULT_WEIGHTS)
        pattern = cx.salience(other.id.hex(), now=T0 + 60 * DAY)
        assert pattern.factors["recency"] == 0.5  # one 60-day half-life
        assert (pattern.access_count, pattern.in_degree) == (0, 0)
        with pytest.raises(cg.NotFoundError):
            cx.salience("cx://a/default/" + "00" * 16)


def test_generation_moves_with_commits_only(tmp_path: Path) -> None:
    """0 without a store; +1 per committed write; reads (read-write or read-only) leave it."""
    assert cg.store_generation(tmp_path, "a") == 0
    with cg.open(tmp_path, "a", clock=cg.ManualClock(T0)) as cx:
        start = cg.store_generation(tmp_path, "a")  # read through this process's own open
        cx.write(cg.Fact(text="deploys go through the pipeline"))
        assert cg.store_generation(tmp_path, "a") == start + 1
        with cx.batch() as batch:
            batch.write(cg.Fact(text="one"), at=T0)
            batch.write(cg.Fact(text="two"), at=T0)
        assert cg.store_generation(tmp_path, "a") == start + 2
    after = cg.store_generation(tmp_path, "a")
    with cg.open(tmp_path, "a") as cx:
        cx.find(cg.Q.type(cg.Fact), limit=5)
    with cg.open(tmp_path, "a", readonly=True) as cx:
        cx.recall("pipeline", mode="keyword")
    assert cg.store_generation(tmp_path, "a") == after


def test_generation_seen_from_another_process(tmp_path: Path) -> None:
    """Another process reads the same number while this one holds the store open."""
    with cg.open(tmp_path, "a", clock=cg.ManualClock(T0)) as cx:
        cx.write(cg.Fact(text="deploys go through the pipeline"))
        here = cg.store_generation(tmp_path, "a")
        there = subprocess.run(
            [sys.executable, "-c",
             f"import cortexgraph as cg; print(cg.store_generation({str(tmp_path)!r}, 'a'))"],
            capture_output=True, text=True, check=True,
        ).stdout
        assert int(there) == here
