"""The plugin's slash commands as ``cortexgraph claude-code <name>``: recall over the
project and global stores (project first, code attached, depth-2 neighbours, access
recorded, archived memories restored, branch filter), remember (categories, --global,
--pin, exact duplicates), forget (by id or URI; a fuzzy query archives nothing),
consolidate (merge, review, promote, drop), inspect (stats, extractions, log, health) and
bad inputs (exit 2 with a message)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import cortexgraph as cg
from cortexgraph.cli import main
from cortexgraph.extract import ExtractionInput, Turn, ingest
from cortexgraph.integrations.claude_code.install import slash_command_line, write_plugin
from cortexgraph.integrations.claude_code.stores import global_store, project_store

SRC = Path(__file__).resolve().parents[1] / "src"


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A project directory, with the global store under ``tmp_path/home``."""
    monkeypatch.setenv("CORTEXGRAPH_HOME", str(tmp_path / "home"))
    where = tmp_path / "proj"
    where.mkdir()
    yield where


def _open(project: Path, which: str = "project") -> cg.Cortex:
    where = project_store(project) if which == "project" else global_store()
    return cg.open(where.root, where.actor, sync=False)


def _run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, Any, str]:
    """Run ``cortexgraph claude-code ARGS --json``: exit status, parsed stdout, stderr."""
    capsys.readouterr()
    code = main(["claude-code", *args, "--json"])
    captured = capsys.readouterr()
    return code, json.loads(captured.out) if captured.out.strip() else None, captured.err


def _fact(text: str, *tags: str, branch: str | None = None) -> cg.Fact:
    source = cg.Source(origin="llm", branch=branch) if branch else None
    return cg.Fact(text=text, tags=list(tags), source=source)


# -- recall ------------------------------------------------------------------------------------


def test_recall_merges_project_first_with_code_and_depth_2_neighbours(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Project hits come before global ones even when a global hit scores higher; a hit
    carries the code its ``source_of`` edge attaches and the memories one and two edges
    away, and not those three away; raw code is never a hit of its own."""
    with _open(project) as cx:
        hit = cx.write(_fact("The invoice exporter writes CSV files", "architecture"))
        code = cx.write(cg.ArtifactRef(text="function export_invoices in billing.py",
                                       path="billing.py", content="def export_invoices(): ..."))
        cx.add_edge(code, hit, "source_of")
        one = cx.write(_fact("Accountants open the files in a spreadsheet"))
        two = cx.write(_fact("The spreadsheet macros live in the finance share"))
        three = cx.write(_fact("The finance share is backed up nightly"))
        cx.add_edge(hit, one, "relates_to")
        cx.add_edge(one, two, "relates_to")
        cx.add_edge(two, three, "relates_to")
    with _open(project, "global") as cx:
        cx.write(_fact("Invoice invoice invoice: an invoice exporter quotes every field"))
    code_, report, _ = _run(capsys, "recall", "invoice", "exporter", "--project", str(project))
    assert code_ == 0
    assert [h["store"] for h in report["hits"]] == ["project", "global"]
    first = report["hits"][0]
    assert first["uri"].startswith(f"cx://project/default/{hit.id.hex()}")
    assert [c["content"] for c in first["code"]] == ["def export_invoices(): ..."]
    assert {(r["uri"].split("@")[0], r["depth"]) for r in first["related"]} == {
        (str(one).split("@")[0], 1),
        (str(two).split("@")[0], 2),
    }
    assert all(h["category"] != "code" for h in report["hits"])


def test_recall_records_access_and_restores_an_archived_memory(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """/recall finds an archived memory (ranked before an active hit holding fewer of the
    query's words), journals an access of what it returns, and the access makes the
    archived memory active again (the escape hatch)."""
    with _open(project) as cx:
        note = cx.write(_fact("The staging host is called tortoise", "context"))
        shell = cx.write(_fact("A tortoise shell is mostly keratin"))
        other = cx.write(_fact("Unrelated note about lunch"))
        cx.archive(note)
        seq = cx.seq
    code, report, _ = _run(capsys, "recall", "staging", "tortoise", "--project", str(project))
    assert code == 0
    assert [(_base(h["uri"]), h["status"]) for h in report["hits"]] == [
        (_base(note), "archived"),
        (_base(shell), "active"),
    ]
    with _open(project) as cx:
        assert cx.resolve(note).status == "active"
        entries = list(cx.journal(since=seq))
        assert [e.op for e in entries] == ["access"]
        assert sorted(entries[0].fields["ids"]) == sorted([note.id, shell.id])
        assert cx.resolve(other).status == "active"


def test_recall_reads_no_store_into_existence(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Without stores, recall finds nothing and creates neither store."""
    code, report, _ = _run(capsys, "recall", "anything", "--project", str(project))
    assert (code, report["hits"], report["stores"]) == (0, [], [])
    assert not (project / ".memory").exists()
    assert not global_store().root.exists()


def test_recall_branch_keeps_the_memories_of_that_branch(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--branch B`` keeps only the memories whose source branch is B."""
    with _open(project) as cx:
        feat = cx.write(_fact("The login form validates emails", "progress", branch="feat"))
        cx.write(_fact("The login form has a captcha", "progress", branch="main"))
        cx.write(_fact("The login form is styled with CSS", "progress"))
    code, report, _ = _run(capsys, "recall", "login", "form", "--branch", "feat",
                           "--project", str(project))
    assert code == 0
    assert [h["uri"].split("@")[0] for h in report["hits"]] == [str(feat).split("@")[0]]
    assert report["hits"][0]["branch"] == "feat"
    _, everything, _ = _run(capsys, "recall", "login", "form", "--project", str(project))
    assert len(everything["hits"]) == 3


def test_recall_is_hybrid_with_an_embedder_configured(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """With an embedder in the plugin's settings recall is hybrid; ``--keyword`` (or no
    embedder) makes it keyword recall."""
    with _open(project) as cx:
        cx.write(_fact("Releases are cut on Thursdays"))
    _, plain, _ = _run(capsys, "recall", "releases", "--project", str(project))
    (project / ".memory" / "config.json").write_text('{"embedder": "hash"}')
    _, hybrid, _ = _run(capsys, "recall", "releases", "--project", str(project))
    _, keyword, _ = _run(capsys, "recall", "releases", "--keyword", "--project", str(project))
    assert (plain["mode"], hybrid["mode"], keyword["mode"]) == ("keyword", "hybrid", "keyword")
    assert len(hybrid["hits"]) == 1


# -- remember ----------------------------------------------------------------------------------


def _git(cwd: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True)


def test_remember_writes_a_human_memory_once(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The category picks the type and the tag; origin human, confidence 1.0, the given
    priority and tags, the git branch and cwd in the source. The same text again writes
    nothing and says so; a related text is linked to it."""
    _git(project, "init", "-q", "-b", "feat-login")
    _git(project, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q",
         "--allow-empty", "-m", "start")
    text = "Gotcha: the login cookie must be SameSite=Lax"
    code, report, _ = _run(capsys, "remember", text, "--type", "gotcha", "--priority", "8",
                           "--tag", "auth", "--project", str(project))
    assert (code, report["written"], report["store"]) == (0, True, "project")
    with _open(project) as cx:
        record = cx.resolve(report["uri"])
        seq = cx.seq
    memory = record.memory
    assert memory.type_name == "constraint" and set(memory.tags) == {"gotcha", "auth"}
    assert (memory.confidence, memory.priority, memory.pinned) == (1.0, 8, False)
    assert memory.source is not None
    assert (memory.source.origin, memory.source.branch, memory.source.cwd) == (
        "human", "feat-login", str(project)
    )
    again, second, _ = _run(capsys, "remember", text, "--type", "gotcha",
                            "--project", str(project))
    assert (again, second["written"], second["uri"]) == (0, False, report["uri"])
    with _open(project) as cx:
        assert cx.seq == seq
    _, near, _ = _run(capsys, "remember", "The login cookie expires after a day",
                      "--project", str(project))
    with _open(project) as cx:
        (edge,) = cx.edges(near["uri"])
    assert (edge.relation, _base(edge.dst)) == ("relates_to", _base(report["uri"]))


def test_remember_global_and_pin(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``--global`` writes to the global store only; ``--pin`` pins the memory."""
    code, report, _ = _run(capsys, "remember", "Prefer", "pathlib", "over", "os.path",
                           "--type", "preference", "--global", "--pin",
                           "--project", str(project))
    assert (code, report["store"]) == (0, "global")
    assert not (project / ".memory").exists()
    with _open(project, "global") as cx:
        memory = cx.resolve(report["uri"]).memory
    assert (memory.text, memory.type_name, memory.pinned) == (
        "Prefer pathlib over os.path", "preference", True
    )


# -- forget ------------------------------------------------------------------------------------


def test_forget_archives_by_id_prefix_and_by_uri(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An id prefix of 8 hex digits archives that project memory; a global URI archives
    the global one."""
    with _open(project) as cx:
        local = cx.write(_fact("The CI runs on self-hosted runners"))
    with _open(project, "global") as cx:
        shared = cx.write(_fact("Rust editions are opt-in per crate"))
    code, report, _ = _run(capsys, "forget", local.id.hex()[:8], "--project", str(project))
    assert (code, report["archived"]["store"]) == (0, "project")
    code, report, _ = _run(capsys, "forget", str(shared), "--project", str(project))
    assert (code, report["archived"]["store"]) == (0, "global")
    with _open(project) as cx:
        assert cx.resolve(local).status == "archived"
    with _open(project, "global") as cx:
        assert cx.resolve(shared).status == "archived"


def test_a_fuzzy_forget_lists_candidates_and_archives_nothing(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A query lists its candidates (exit 0) and journals nothing; a query that matches
    nothing exits 1."""
    with _open(project) as cx:
        for n in range(7):
            cx.write(_fact(f"Database migration number {n} adds a column"))
        seq = cx.seq
    code, report, _ = _run(capsys, "forget", "database", "migration", "--project", str(project))
    assert code == 0 and report["archived"] is None
    assert len(report["candidates"]) == 5
    assert all(len(c["id"]) == 32 for c in report["candidates"])
    code, report, _ = _run(capsys, "forget", "kangaroo", "--project", str(project))
    assert (code, report["candidates"]) == (1, [])
    with _open(project) as cx:
        assert cx.seq == seq


# -- consolidate -------------------------------------------------------------------------------


def _pairs(cx: cg.Cortex) -> tuple[cg.MemoryURI, ...]:
    """Two near-duplicates (Jaccard 10/11), a borderline pair (5/8) and a weakly linked
    pair, each joined by a suggested edge."""
    words = "quokka wombat platypus echidna dingo bilby numbat wallaby possum kookaburra"
    a = cx.write(_fact(words))
    b = cx.write(_fact(words + " cassowary"))
    c = cx.write(_fact("galah cockatoo lorikeet rosella budgie corella"))
    d = cx.write(_fact("galah cockatoo lorikeet rosella budgie magpie currawong"))
    e = cx.write(_fact("taipan mamba cobra"))
    f = cx.write(_fact("krait adder viper"))
    cx.add_edge(a, b, "relates_to", strength=0.9, status="suggested")
    cx.add_edge(c, d, "relates_to", strength=0.6, status="suggested")
    cx.add_edge(e, f, "relates_to", strength=0.45, status="suggested")
    return a, b, c, d, e, f


def _base(uri: str | cg.MemoryURI) -> str:
    return str(uri).split("@")[0]


def test_consolidate_merges_and_lists_the_rest_for_review(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A dry run changes nothing and says what would merge; the real run merges the pair
    at similarity >= 0.7, lists the 0.5-0.7 pair for review and the suggested edges
    with their strength."""
    with _open(project) as cx:
        a, b, c, d, e, f = _pairs(cx)
        seq = cx.seq
    code, dry, _ = _run(capsys, "consolidate", "--dry-run", "--project", str(project))
    assert code == 0 and not dry["ran"]
    assert [{_base(p["src"]), _base(p["dst"])} for p in dry["to_merge"]] == [
        {_base(a), _base(b)}
    ]
    with _open(project) as cx:
        assert cx.seq == seq
    code, report, _ = _run(capsys, "consolidate", "--project", str(project))
    assert code == 0 and report["ran"]
    assert [{_base(s), _base(m)} for s, m in report["merged"]] == [{_base(a), _base(b)}]
    assert [(_base(p["src"]), _base(p["dst"])) for p in report["review"]] == [
        (_base(c), _base(d))
    ]
    assert 0.5 <= report["review"][0]["similarity"] < 0.7
    suggested = {(_base(p["src"]), _base(p["dst"])): p["strength"] for p in report["suggested"]}
    assert suggested == {(_base(c), _base(d)): 0.6, (_base(e), _base(f)): 0.45}


def test_consolidate_decays_by_the_plugins_categories(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Compaction runs with the plugin's half-lives by category tag: a progress note
    (7 days) unread for 60 days is archived, though its type (Fact) never decays; an
    architecture fact of the same age stays."""
    import time

    old = int(time.time() * 1000) - 60 * 86_400_000
    with _open(project) as cx:
        progress = cx.write(_fact("Wave 3 of the migration is done", "progress"), at=old)
        design = cx.write(_fact("The app is split into core and shell", "architecture"), at=old)
    code, report, _ = _run(capsys, "consolidate", "--project", str(project))
    assert code == 0
    assert [_base(u) for u in report["archived"]] == [_base(progress)]
    with _open(project) as cx:
        assert (cx.resolve(progress).status, cx.resolve(design).status) == (
            "archived", "active"
        )


def test_promote_and_drop_change_the_suggested_edge(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--promote A B`` makes the suggested edge active (by id prefixes, either order);
    ``--drop A B`` removes it."""
    with _open(project) as cx:
        _, _, c, d, e, f = _pairs(cx)
    code, report, _ = _run(capsys, "consolidate", "--promote", f.id.hex()[:10],
                           e.id.hex()[:10], "--project", str(project))
    assert code == 0 and report["changed"][0][0] == "promoted"
    code, report, _ = _run(capsys, "consolidate", "--drop", str(c), str(d),
                           "--project", str(project))
    assert code == 0 and report["changed"][0][0] == "dropped"
    with _open(project) as cx:
        (edge,) = cx.edges(e)
        assert (edge.status, edge.strength, edge.origin) == ("active", 0.45, "human")
        assert cx.edges(c, direction="both") == []
        assert [(t.uri.id, t.depth) for t in cx.traverse(e, depth=1)] == [(f.id, 1)]


# -- inspect -----------------------------------------------------------------------------------


def test_inspect_reports_stats_extractions_log_and_health(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Counts by category and status, edges, entries and root per store; the session's
    extraction with what it wrote; the last 10 lines of cortex.log; both stores ok."""
    turns = [Turn("user", "We decided to use SQLite with WAL mode for the cache.")]
    with _open(project) as cx:
        ingest(cx, ExtractionInput(turns), source_id="session-1")
        gone = cx.write(_fact("An obsolete note", "context"))
        cx.archive(gone)
        root = cx.overall_root().hex()
    with _open(project, "global") as cx:
        cx.write(cg.Constraint(text="Never commit secrets", tags=["rule"]))
    (project / ".memory" / "cortex.log").write_text(
        "".join(f"line {n}\n" for n in range(12)), encoding="utf-8"
    )
    code, report, _ = _run(capsys, "inspect", "--project", str(project))
    assert code == 0 and report["ok"]
    local, shared = report["stores"]
    assert (local["store"], shared["store"]) == ("project", "global")
    assert local["memories"]["decision"] == {"active": 1}
    assert local["memories"]["context"] == {"archived": 1}
    assert shared["memories"] == {"rule": {"active": 1}}
    assert local["root"] == root and local["entries"] > 0
    (extraction,) = local["extractions"]
    assert extraction["session"] == "session-1" and extraction["turns"] == 1
    assert extraction["memories"] == ["We decided to use SQLite with WAL mode for the cache."]
    assert report["log"] == [f"line {n}" for n in range(2, 12)]


def test_inspect_reports_a_corrupted_store_as_failed(
    project: Path, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """A copy of a store with one flipped byte of a journaled text fails verification:
    inspect reports that store as failed, still reports the other, and exits 1."""
    with _open(project) as cx:
        cx.write(_fact("Marker text zebracorn for the flip"))
    with _open(project, "global") as cx:
        cx.write(_fact("A sound global memory"))
    copy = tmp_path / "copy"
    shutil.copytree(project, copy)
    data = copy / ".memory" / "project" / "data.mdb"
    raw = bytearray(data.read_bytes())
    at = raw.index(b"zebracorn")
    raw[at] ^= 0x01
    data.write_bytes(bytes(raw))
    code, report, _ = _run(capsys, "inspect", "--project", str(copy))
    assert code == 1 and not report["ok"]
    local, shared = report["stores"]
    assert not local["ok"] and local["problems"]
    assert shared["ok"]
    code, _, _ = _run(capsys, "inspect", "--project", str(project))
    assert code == 0


# -- bad inputs, the plugin's files, a real process --------------------------------------------


@pytest.mark.parametrize(
    ("args", "field"),
    [
        (["remember", "x", "--type", "musing"], "unknown category"),
        (["remember", "x", "--priority", "11"], "priority"),
        (["recall", "x", "--limit", "0"], "limit"),
        (["forget", "0123456789abcdef0123456789abcdef"], "no memory has the id"),
        (["forget", "cx://project/default/zz"], "URIError"),
        (["consolidate"], "no memory store"),
        (["remember", "x", "--project", "{project}/typo"], "is not a directory"),
        (["consolidate", "--promote", "cx://project/default/" + "ab" * 16, "deadbeef00"],
         "NotFoundError"),
    ],
)
def test_bad_inputs_exit_2_with_a_message(
    project: Path, capsys: pytest.CaptureFixture[str], args: list[str], field: str
) -> None:
    """Each bad argument exits 2 with the error named on stderr, and writes nothing."""
    if args[0] != "consolidate" or "--promote" in args:
        with _open(project) as cx:
            cx.write(_fact("Something to keep"))
    before = sorted(p.name for p in project.rglob("*"))
    args = [arg.format(project=project) for arg in args]
    where = [] if "--project" in args else ["--project", str(project)]
    code, _, err = _run(capsys, *args, *where)
    assert code == 2 and field in err
    assert sorted(p.name for p in project.rglob("*")) == before


def test_bad_settings_and_unlinked_pairs_exit_2(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A malformed settings file and a promote between memories with no suggested edge
    are input errors (exit 2); argparse refuses a half --promote (exit 2)."""
    with _open(project) as cx:
        a = cx.write(_fact("One"))
        b = cx.write(_fact("Two"))
    (project / ".memory" / "config.json").write_text('{"embedder": "gpt"}')
    code, _, err = _run(capsys, "recall", "one", "--project", str(project))
    assert code == 2 and "embedder" in err
    code, _, err = _run(capsys, "consolidate", "--promote", str(a), str(b),
                        "--project", str(project))
    assert code == 2 and "no suggested edge" in err
    with pytest.raises(SystemExit) as exited:
        main(["claude-code", "consolidate", "--promote", str(a)])
    assert exited.value.code == 2


def test_the_command_files_run_these_subcommands(tmp_path: Path) -> None:
    """Each plugin command file runs its ``cortexgraph claude-code`` subcommand with the
    slash command's arguments; /index-code indexes into the project store."""
    write_plugin(tmp_path / "plugin", program="cg")
    commands = tmp_path / "plugin" / "commands"
    for name in ("recall", "remember", "forget", "consolidate"):
        text = (commands / f"{name}.md").read_text(encoding="utf-8")
        assert f"cg claude-code {name} $ARGUMENTS" in text
    assert "cg claude-code inspect\n" in (commands / "inspect.md").read_text(encoding="utf-8")
    assert slash_command_line("index-code", "cg") in (commands / "index-code.md").read_text(
        encoding="utf-8"
    )
    assert "--root .memory --actor project" in slash_command_line("index-code", "cg")


def test_remember_then_recall_in_real_processes(project: Path, tmp_path: Path) -> None:
    """The subcommands as Claude Code runs them: separate processes, the global store
    from CORTEXGRAPH_HOME, plain text out."""
    env = {**os.environ, "PYTHONPATH": str(SRC), "CORTEXGRAPH_HOME": str(tmp_path / "home")}

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "cortexgraph.cli", "claude-code", *args],
            cwd=project, env=env, capture_output=True, text=True, timeout=120,
        )

    wrote = run("remember", "The", "API", "rate", "limit", "is", "100", "per", "minute",
                "--type", "gotcha")
    assert wrote.returncode == 0 and "remembered (project, gotcha)" in wrote.stdout
    found = run("recall", "rate", "limit")
    assert found.returncode == 0, found.stderr
    assert "[project gotcha] The API rate limit is 100 per minute" in found.stdout
    missing = run("forget", "nothing-like-this")
    assert missing.returncode == 1 and "nothing matches" in missing.stdout
