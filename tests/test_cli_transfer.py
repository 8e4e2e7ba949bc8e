"""`cortexgraph export`, `import` (journal files, and --from handing other formats to
cortexgraph.migrate) and `stats`, through --json; and when progress bars are drawn."""

from __future__ import annotations

import io
import json
import sys
import types
from pathlib import Path
from typing import Any

import attrs
import pytest

import cortexgraph as cg
from cortexgraph.cli import main


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def build(root: Path, steps: int = 5) -> None:
    """Two memories, an edge, a memory in another namespace and its tombstone: one entry
    per step, the same entries in every store (a manual clock)."""
    with cg.open(root, "agent", clock=cg.ManualClock(1_700_000_000_000)) as cx:
        a = cx.write(cg.Fact(text="deploys go through CI", tags=["deploy"]))
        b = cx.write(cg.Constraint(text="never push to main"))
        if steps >= 3:
            cx.add_edge(a.head, b.head, "relates_to", strength=0.5)
        if steps >= 4:
            c = cx.write(cg.Fact(text="an old note"), ns="work")
        if steps >= 5:
            cx.tombstone(c, reason="obsolete")


@pytest.fixture
def store(tmp_path: Path) -> list[str]:
    """The --root/--actor options of a store built by :func:`build` (5 entries)."""
    build(tmp_path / "src")
    return ["--root", str(tmp_path / "src"), "--actor", "agent"]


def test_export_import_round_trip(
    store: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """export -o writes the file and reports it; import into a new root recreates the
    store with the same root; a second import applies nothing; both report in JSON."""
    path = tmp_path / "journal.jsonl"
    code, out, err = run(capsys, "export", *store, "-o", str(path), "--json")
    assert (code, err) == (0, "")
    assert json.loads(out) == {"file": str(path), "format": "jsonl", "entries": 5, "since": 0}
    assert len(path.read_text().splitlines()) == 6

    copy = ["--root", str(tmp_path / "copy"), "--actor", "agent", "--json"]
    code, out, err = run(capsys, "import", str(path), *copy)
    assert (code, err) == (0, "")
    report = json.loads(out)
    assert (report["applied"], report["skipped"], report["root_checked"]) == (5, 0, True)
    code, out, _ = run(capsys, "root", *store)
    assert out.strip() == report["overall_root"]
    code, out, _ = run(capsys, "import", str(path), *copy)
    assert (json.loads(out)["applied"], json.loads(out)["skipped"]) == (0, 5)


def test_export_to_stdout_and_incremental_import_from_stdin(
    store: list[str],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """export without -o prints only the file on stdout; --since gives the entries after
    it; import - reads stdin, and an incremental file applies on top of its prefix."""
    code, full, err = run(capsys, "export", *store)
    assert (code, err) == (0, "")
    code, tail, _ = run(capsys, "export", *store, "--since", "3")
    assert [json.loads(line)["seq"] for line in tail.splitlines()[1:]] == [4, 5]

    build(tmp_path / "prefix", steps=3)  # the source's first 3 entries
    prefix = ["--root", str(tmp_path / "prefix"), "--actor", "agent", "--json"]
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(tail.encode())))
    code, out, err = run(capsys, "import", "-", *prefix)
    assert (code, err) == (0, "")
    report = json.loads(out)
    assert (report["applied"], report["skipped"], report["seq"]) == (2, 0, 5)
    assert report["root_checked"]

    copy = ["--root", str(tmp_path / "copy"), "--actor", "agent", "--json"]
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(full.encode())))
    code, out, err = run(capsys, "import", "-", *copy)
    assert (code, err) == (0, "")
    assert json.loads(out)["applied"] == 5
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(tail.encode())))
    code, out, _ = run(capsys, "import", "-", *copy)
    assert (json.loads(out)["applied"], json.loads(out)["skipped"]) == (0, 2)


def test_markdown_export(store: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    """--format md prints a table with one row per entry."""
    code, out, _ = run(capsys, "export", *store, "--format", "md")
    assert code == 0 and out.startswith("# Journal of `agent`")
    rows = [line for line in out.splitlines() if line.startswith("| ") and line[2].isdigit()]
    assert [row.split(" | ")[2] for row in rows] == ["write", "write", "edge", "write", "tombstone"]


def test_bad_file_exits_1_and_creates_no_store(
    store: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A cut file exits 1 with a JSON error naming the line on stderr, and no store is
    created for it (the file is checked before the store is opened)."""
    code, full, _ = run(capsys, "export", *store)
    path = tmp_path / "cut.jsonl"
    path.write_text(full[:-10])
    code, out, err = run(
        capsys, "import", str(path), "--root", str(tmp_path / "new"), "--actor", "agent", "--json"
    )
    assert (code, out) == (1, "")
    error = json.loads(err)
    assert error["error"] == "JournalFileError"
    assert error["message"].startswith("file: line 6: the line is cut")
    assert not (tmp_path / "new").exists()


def test_import_of_another_actors_file_names_it(
    store: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Importing agent's journal as another actor exits 1 naming both actors."""
    path = tmp_path / "journal.jsonl"
    run(capsys, "export", *store, "-o", str(path))
    code, _, err = run(
        capsys, "import", str(path), "--root", str(tmp_path / "x"), "--actor", "bob", "--json"
    )
    assert code == 1
    assert "actor 'agent''s journal; this store is actor 'bob''s" in json.loads(err)["message"]


def test_stats(store: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    """stats --json counts memories by type and status, edges and journal entries, and
    gives the sizes and the same root as `cortexgraph root`."""
    code, out, err = run(capsys, "stats", *store, "--json")
    assert (code, err) == (0, "")
    stats = json.loads(out)
    assert stats["memories"] == 3
    assert stats["by_type"] == {"constraint": 1, "fact": 2}
    assert stats["by_status"] == {"active": 2, "tombstoned": 1}
    assert (stats["edges"], stats["journal_entries"], stats["seq"]) == (1, 5, 5)
    assert stats["file_bytes"] > 0 and stats["map_size"] >= stats["file_bytes"]
    _, root, _ = run(capsys, "root", *store)
    assert stats["overall_root"] == root.strip()
    code, out, _ = run(capsys, "stats", *store)
    assert "3 memories, 1 edges, 5 journal entries" in out and "2 active, 1 tombstoned" in out


# ---------------------------------------------------------------------------
# --from: the migrate contract, against a fake module (the real one is migrate's)


@attrs.frozen
class FakeReport:
    imported: dict[str, int]
    skipped: list[tuple[str, str]]

    def to_json(self) -> dict[str, Any]:
        return {"imported": self.imported, "skipped": [list(s) for s in self.skipped]}


@pytest.fixture
def fake_migrate(monkeypatch: pytest.MonkeyPatch) -> list[tuple[Any, ...]]:
    """A fake cortexgraph.migrate, named as a fake: records its calls, writes one memory
    per call, refuses unknown formats like the real one must."""
    calls: list[tuple[Any, ...]] = []

    def import_from(cx: cg.Cortex, fmt: str, path: Path, *, progress: Any = None) -> FakeReport:
        if fmt not in ("mcp-memory", "mem0", "claude-memory-sqlite"):
            raise cg.ValidationError(f"unknown format {fmt!r}", field="format")
        calls.append((cx.actor, fmt, path, callable(progress)))
        cx.write(cg.Fact(text=f"migrated from {fmt}"))
        return FakeReport({"memories": 1, "edges": 0}, [("line 7", "no name")])

    fake = types.ModuleType("cortexgraph.migrate")
    fake.import_from = import_from  # type: ignore[attr-defined]
    fake.FORMATS = ("mcp-memory", "mem0", "claude-memory-sqlite")  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "cortexgraph.migrate", fake)
    return calls


def test_import_from_delegates_to_migrate(
    fake_migrate: list[tuple[Any, ...]], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """import --from FORMAT calls migrate.import_from(cx, FORMAT, Path(FILE), progress=...)
    and prints its report: JSON with --json, counts and each skip for people."""
    opts = ["--root", str(tmp_path / "m"), "--actor", "agent"]
    code, out, err = run(capsys, "import", "memory.json", "--from", "mem0", *opts, "--json")
    assert (code, err) == (0, "")
    assert json.loads(out) == {
        "imported": {"memories": 1, "edges": 0},
        "skipped": [["line 7", "no name"]],
    }
    assert fake_migrate == [("agent", "mem0", Path("memory.json"), True)]
    code, out, _ = run(capsys, "import", "memory.json", "--from", "mem0", *opts)
    assert out.splitlines() == ["imported 1 memories, 0 edges", "skipped 1", "  line 7: no name"]


def test_import_from_runs_the_real_importer_idempotently(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """import --from mem0 through the real cortexgraph.migrate: alice's non-empty records
    of the fixture become memories (counted here from the fixture itself), everyone
    else's are skipped with a reason, and a second run imports nothing."""
    fixture = Path(__file__).resolve().parent.parent / "fixtures" / "migration" / "mem0.json"
    records = json.loads(fixture.read_text())["results"]
    mine = [
        r
        for r in records
        if (r.get("user_id") or r.get("agent_id")) == "alice" and r["memory"].strip()
    ]
    opts = ["--root", str(tmp_path / "m"), "--actor", "alice", "--json"]
    code, out, err = run(capsys, "import", str(fixture), "--from", "mem0", *opts)
    assert (code, err) == (0, "")
    first = json.loads(out)
    assert first["imported"]["memories"] == len(mine) > 40
    assert len(first["skipped"]) == len(records) - len(mine)
    code, out, _ = run(capsys, "import", str(fixture), "--from", "mem0", *opts)
    assert code == 0 and json.loads(out)["imported"]["memories"] == 0


def test_import_from_unknown_format(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """An unknown --from format is migrate's ValidationError(field="format"): exit 1."""
    opts = ["--root", str(tmp_path / "m"), "--actor", "agent", "--json"]
    code, _, err = run(capsys, "import", "x.json", "--from", "nope", *opts)
    assert code == 1 and json.loads(err)["message"].startswith("format: unknown format")


# ---------------------------------------------------------------------------
# progress bars: on a terminal, never with --json


@pytest.mark.parametrize(
    "argv",
    [
        ["export", "--root", "{root}", "--actor", "agent", "-o", "{tmp}/e.jsonl"],
        ["import", "{tmp}/e.jsonl", "--root", "{tmp}/copy", "--actor", "agent"],
        ["rebuild", "--root", "{root}", "--actor", "agent"],
        ["verify", "{root}", "--actor", "agent"],
    ],
    ids=["export", "import", "rebuild", "verify"],
)
def test_progress_bar_only_on_a_terminal_without_json(
    argv: list[str],
    store: list[str],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """With stderr a terminal a bar is drawn on stderr; with --json nothing is (verify
    drew its bar with --json before). When stderr is not a terminal nothing is drawn."""
    run(capsys, "export", *store, "-o", str(tmp_path / "e.jsonl"))
    args = [a.format(tmp=tmp_path, root=store[1]) for a in argv]

    code, _, err = run(capsys, *args)  # stderr captured: not a terminal
    assert (code, err) == (0, "")
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True, raising=False)
    if args[0] == "import":
        args[args.index("--root") + 1] = str(tmp_path / "copy2")
    code, _, err = run(capsys, *args, "--json")
    assert (code, err) == (0, "")
    if args[0] == "import":
        args[args.index("--root") + 1] = str(tmp_path / "copy3")
    code, _, err = run(capsys, *args)
    assert code == 0 and "100%" in err


def test_stats_of_a_store_whose_derived_tables_are_dropped(
    store: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Between drop_derived and rebuild there is no root to give: stats reports the
    journal and no root (null), instead of failing on the missing Merkle nodes."""
    from cortexgraph.replay import drop_derived

    with cg.open(tmp_path / "src", "agent") as cx:
        drop_derived(cx._handle)
    code, out, _ = run(capsys, "stats", *store, "--json")
    stats = json.loads(out)
    assert code == 0
    assert (stats["seq"], stats["memories"], stats["overall_root"]) == (5, 0, None)
    code, out, _ = run(capsys, "stats", *store)
    assert "root: none (rebuild first)" in out
