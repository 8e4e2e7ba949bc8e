"""The plugin's surface: the seed's ranking profile, the per-category budgets with
overflow, the 24-hour cache keyed by branch and directory, and the PID lock."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import cortexgraph as cg
from cortexgraph.integrations.claude_code import surface as surface_module
from cortexgraph.integrations.claude_code.categories import CATEGORIES
from cortexgraph.integrations.claude_code.ranking import (
    SURFACE_TITLE,
    SurfaceLine,
    compose_surface,
)
from cortexgraph.integrations.claude_code.stores import StoreLocation
from cortexgraph.integrations.claude_code.surface import (
    CACHE_DIR,
    LOCK_FILE,
    LockTimeout,
    cache_key,
    compute_surface,
    pid_lock,
    refresh_surface,
)

T0 = 1_700_000_000_000
DAY = 86_400_000


def lines_by_category(surface: str) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    current = ""
    for line in surface.splitlines()[1:]:
        if line.startswith("## "):
            current = line[3:]
            out[current] = []
        else:
            out[current].append(line)
    return out


def tokens(surface: str) -> int:
    return cg.estimate_tokens(surface)


def test_budgets_share_the_window_then_overflow() -> None:
    """With plenty of every category, each category gets lines (its share of the window)
    and the whole fills the 300-500 token window; the best decision lines are not crowded
    out by a flood of better-ranked progress lines beyond their share."""
    lines = (
        [
            SurfaceLine(
                "progress", 590_000 - i, f"Progress note {i} on the billing rollout.", f"p{i:03}"
            )
            for i in range(100)
        ]
        + [
            SurfaceLine(
                "decision", 500_000 - i, f"Decision {i}: keep the ledger in Postgres.", f"d{i:03}"
            )
            for i in range(100)
        ]
        + [SurfaceLine("gotcha", 400_000, "Safari drops the session cookie.", "g1")]
    )
    surface = compose_surface(lines)
    groups = lines_by_category(surface)
    assert surface.splitlines()[0] == SURFACE_TITLE
    assert set(groups) == {"decision", "gotcha", "progress"}
    assert 300 <= tokens(surface) <= 500
    for name, got in groups.items():
        assert len(got) <= CATEGORIES[name].budget
    # within a category, best first, and only its best lines
    assert groups["decision"][0] == "- Decision 0: keep the ledger in Postgres."
    assert groups["progress"] == sorted(groups["progress"], key=lambda t: int(t.split()[3]))


def test_overflow_fills_unused_budget() -> None:
    """One category alone: after its share it overflows into the unused window. Ordinary
    lines stop at its own line budget (25 decision lines); high-value lines borrow the
    lines the other categories leave unused, up to 500 tokens."""
    ordinary = [
        SurfaceLine("decision", 590_000 - i, f"Decision {i} on billing.", f"d{i:03}")
        for i in range(60)
    ]
    assert len(lines_by_category(compose_surface(ordinary))["decision"]) == 25
    valuable = [
        SurfaceLine("decision", 900_000 - i, f"Decision {i} on billing.", f"d{i:03}")
        for i in range(60)
    ]
    surface = compose_surface(valuable)
    assert len(lines_by_category(surface)["decision"]) > 25
    assert 450 < tokens(surface) <= 500
    long_lines = [
        SurfaceLine("context", 900_000 - i, "word " * 50 + str(i), f"c{i:03}") for i in range(60)
    ]
    assert tokens(compose_surface(long_lines)) <= 500


def test_code_is_never_surfaced_and_repeats_are_dropped() -> None:
    """Code has a budget of 0; a line that repeats a better one (the project's and the
    global store's copy of one memory) appears once; nothing to show gives ''."""
    assert compose_surface([SurfaceLine("code", 999_999, "def f(): pass", "x")]) == ""
    surface = compose_surface(
        [
            SurfaceLine("rule", 800_000, "Never push to main.", "a"),
            SurfaceLine("rule", 700_000, "Never  push to main.", "b"),
        ]
    )
    assert surface.count("Never push to main.") == 1


def write(cx: cg.Cortex, memory: cg.Memory, at: int) -> cg.MemoryURI:
    return cx.write(memory, at=at)


def test_the_seed_profile_ranks(tmp_path: Path) -> None:
    """Confidence, priority, the current branch and decay order the lines as the seed's
    formula says: a memory from this branch outranks its twin from another; fresh progress
    outranks month-old progress; pinned progress does not decay."""
    main = cg.Source(origin="llm", branch="main")
    feature = cg.Source(origin="llm", branch="feature/ledger")
    with cg.open(tmp_path, "project", clock=cg.ManualClock(T0)) as cx:
        write(
            cx,
            cg.Fact(text="The ledger lives in Postgres main.", tags=("architecture",), source=main),
            T0,
        )
        write(
            cx,
            cg.Fact(
                text="The ledger lives in Postgres feature.", tags=("architecture",), source=feature
            ),
            T0,
        )
        write(
            cx,
            cg.Event(
                text="Migrated the invoices table last month.", tags=("progress",), confidence=0.9
            ),
            T0,
        )
        write(
            cx,
            cg.Event(
                text="Pinned: the release train is weekly.",
                tags=("progress",),
                confidence=0.9,
                pinned=True,
            ),
            T0,
        )
        write(
            cx,
            cg.Event(
                text="Finished the refund endpoint today.", tags=("progress",), confidence=0.9
            ),
            T0 + 30 * DAY,
        )
        on_feature = lines_by_category(compute_surface([("project", cx)], "feature/ledger"))
        on_main = lines_by_category(compute_surface([("project", cx)], "main"))
    assert on_feature["architecture"][0].endswith("feature.")
    assert on_main["architecture"][0].endswith("main.")
    progress = on_main["progress"]
    assert progress.index("- Finished the refund endpoint today.") < progress.index(
        "- Migrated the invoices table last month."
    )
    assert progress.index("- Pinned: the release train is weekly.") < progress.index(
        "- Migrated the invoices table last month."
    )


def test_the_surface_depends_on_the_store_not_the_wall_clock(tmp_path: Path) -> None:
    """The same store and branch give the same bytes whatever the clock says: decay is
    evaluated at the store's last entry."""
    with cg.open(tmp_path, "project", clock=cg.ManualClock(T0)) as cx:
        for i in range(30):
            write(
                cx,
                cg.Event(text=f"Finished step {i} of the migration.", tags=("progress",)),
                T0 + i * DAY,
            )
        first = compute_surface([("project", cx)], None)
    with cg.open(tmp_path, "project", clock=cg.ManualClock(T0 + 400 * DAY)) as cx:
        assert compute_surface([("project", cx)], None) == first


def make_project(tmp_path: Path) -> tuple[Path, StoreLocation, StoreLocation]:
    cwd = tmp_path / "proj"
    project = StoreLocation(cwd / ".memory", "project")
    global_ = StoreLocation(tmp_path / "home", "global")
    with cg.open(project.root, project.actor, clock=cg.ManualClock(T0)) as cx:
        cx.write(cg.Fact(text="We chose Postgres for the ledger.", tags=("decision",)))
    return cwd, project, global_


def test_global_memories_join_the_surface(tmp_path: Path) -> None:
    """The global store's memories are ranked with the project's, marked [global]."""
    cwd, project, global_ = make_project(tmp_path)
    with cg.open(global_.root, global_.actor, clock=cg.ManualClock(T0)) as gx:
        gx.write(cg.Preference(text="I prefer small pull requests.", tags=("preference",)))
    surface = refresh_surface(cwd, "main", project, global_)
    assert "- [global] I prefer small pull requests." in surface
    assert "- We chose Postgres for the ledger." in surface


def test_no_project_store_no_surface(tmp_path: Path) -> None:
    """A project the plugin never learned from gets no surface and no files."""
    cwd = tmp_path / "proj"
    cwd.mkdir()
    assert (
        refresh_surface(
            cwd,
            None,
            StoreLocation(cwd / ".memory", "project"),
            StoreLocation(tmp_path / "home", "global"),
        )
        == ""
    )
    assert list(cwd.iterdir()) == []


def test_the_cache_serves_until_a_write_or_a_day(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A second refresh is served from the cache (computing is not called); a write to
    the store invalidates it; so does a day; the key is sha256(branch:cwd)."""
    cwd, project, global_ = make_project(tmp_path)
    first = refresh_surface(cwd, "main", project, global_)
    entry = project.root / CACHE_DIR / f"{cache_key('main', cwd)}.json"
    assert json.loads(entry.read_text())["surface"] == first
    calls: list[int] = []
    real = surface_module.compute_surface

    def counting(*args: object, **kwargs: object) -> str:
        calls.append(1)
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(surface_module, "compute_surface", counting)
    assert refresh_surface(cwd, "main", project, global_) == first
    assert calls == []
    with cg.open(project.root, project.actor) as cx:
        cx.write(cg.Constraint(text="Never deploy on Fridays.", tags=("rule",)))
    second = refresh_surface(cwd, "main", project, global_)
    assert calls == [1] and "Never deploy on Fridays." in second
    record = json.loads(entry.read_text())
    record["written"] -= 24 * 3600 + 1
    entry.write_text(json.dumps(record))
    assert refresh_surface(cwd, "main", project, global_) == second
    assert calls == [1, 1]
    refresh_surface(cwd, "feature", project, global_)
    assert (project.root / CACHE_DIR / f"{cache_key('feature', cwd)}.json").exists()
    assert (cwd / ".claude" / "cortex-memory.local.md").read_text().count("Never deploy") == 1


def dead_pid() -> int:
    done = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        capture_output=True,
        text=True,
        check=True,
    )
    return int(done.stdout)


def test_a_stale_lock_is_taken_over(tmp_path: Path) -> None:
    """A lock left by a process that is gone does not block; the lock is released after."""
    path = tmp_path / LOCK_FILE
    path.parent.mkdir(parents=True)
    path.write_text(f"{dead_pid()}\n")
    with pid_lock(path, wait_s=0.2):
        assert path.read_text() == f"{os.getpid()}\n"
    assert not path.exists()


def test_a_live_lock_is_waited_for(tmp_path: Path) -> None:
    """A lock held by a running process (this one) is not taken: the wait times out."""
    path = tmp_path / LOCK_FILE
    path.parent.mkdir(parents=True)
    path.write_text(f"{os.getpid()}\n")
    with pytest.raises(LockTimeout), pid_lock(path, wait_s=0.1):
        pass
    assert path.read_text() == f"{os.getpid()}\n"


def test_an_old_lock_is_stale_whatever_it_holds(tmp_path: Path) -> None:
    """A lock file older than the stale age is taken over even if its PID runs (a PID may
    have been reused) or it holds no PID at all."""
    path = tmp_path / LOCK_FILE
    path.parent.mkdir(parents=True)
    path.write_text("garbage")
    old = path.stat().st_mtime - surface_module.LOCK_STALE_S - 5
    os.utime(path, (old, old))
    with pid_lock(path, wait_s=0.1):
        pass
    assert not path.exists()
