"""Migration from the peers: ``cortexgraph.migrate.import_from`` for each format.

Each fixture in ``fixtures/migration/`` is imported and then checked memory by memory
and edge by edge against the fixture read here independently (``json``, ``sqlite3``),
with the mapping tables of ``docs/migration.md`` written out again in this file. A
second import adds nothing; bad files raise ``ValidationError`` naming the line, record
or row, and leave every table of the store byte-identical.
"""

from __future__ import annotations

import json
import re
import shutil
import sqlite3
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path

import pytest

import cortexgraph as cg
from cortexgraph.core.signals import read_access
from cortexgraph.migrate import FORMATS, MigrationReport, import_from
from cortexgraph.migrate import plan as plan_module

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "migration"
T0 = 1_700_000_000_000
EVERY_STATUS = cg.Q.status("tombstoned") | ~cg.Q.status("tombstoned")


@pytest.fixture
def open_store(tmp_path: Path) -> Iterator[Callable[[str], cg.Cortex]]:
    """Open fresh stores (one per actor) on a manual clock; all are closed afterwards."""
    opened: list[cg.Cortex] = []

    def make(actor: str) -> cg.Cortex:
        store = cg.open(tmp_path / "stores", actor, clock=cg.ManualClock(T0), sync=False)
        opened.append(store)
        return store

    yield make
    for store in opened:
        store.close()


def imported(cx: cg.Cortex, tag: str) -> list[cg.Record]:
    """Every memory carrying ``tag``, whatever its status, by id."""
    hits = cx.find(cg.Q.tag(tag) & EVERY_STATUS, limit=10_000).hits
    return sorted((hit.record for hit in hits), key=lambda r: r.uri.id)


def one(cx: cg.Cortex, tag: str) -> cg.Record:
    found = imported(cx, tag)
    assert len(found) == 1, (tag, found)
    return found[0]


def all_edges(cx: cg.Cortex, records: list[cg.Record]) -> set[tuple[bytes, str, bytes]]:
    return {(e.src.id, e.relation, e.dst.id) for r in records for e in cx.edges(r.uri.id) if True}


def iso_ms(text: str) -> int:
    moment = datetime.fromisoformat(text)
    return int(moment.timestamp() * 1000)


# -- mcp-memory -----------------------------------------------------------------------------

#: the relationTypes of the fixture and what each must become (docs/migration.md)
MCP_RELATIONS = {
    "member of": ("relates_to", "active"),
    "owns": ("relates_to", "active"),
    "documents": ("relates_to", "active"),
    "depends_on": ("relates_to", "active"),
    "source_of": ("source_of", "active"),
    "derived_from": ("derived_from", "active"),
    "refines": ("refines", "active"),
    "based on": ("derived_from", "active"),
    "contradicts": ("contradicts", "active"),
    "Example-Of": ("exemplifies", "active"),
    "supersedes": ("relates_to", "suggested"),
    "mentors": ("relates_to", "active"),
    "works with": ("relates_to", "active"),
}
MCP_TYPES = {"preference": cg.Preference, "rule": cg.Constraint, "goal": cg.Goal}


def test_mcp_memory_fixture_imports_entity_by_entity_and_relation_by_relation(
    open_store: Callable[[str], cg.Cortex],
) -> None:
    """Every entity of the fixture is one memory (name, type, observations and outgoing
    relations in its text, at the import's ``at``), and the edges are exactly the
    relations, mapped by the documented table, identical edges counted once."""
    cx = open_store("agent")
    lines = (FIXTURES / "mcp-memory.jsonl").read_text(encoding="utf-8").splitlines()
    records = [json.loads(line) for line in lines]
    entities = [r for r in records if r["type"] == "entity"]
    relations = [r for r in records if r["type"] == "relation"]
    assert len(records) >= 50

    report = import_from(cx, "mcp-memory", FIXTURES / "mcp-memory.jsonl", at=T0 + 5)

    by_name = {r.memory.summary: r for r in imported(cx, "from:mcp-memory")}
    assert len(by_name) == len(entities)
    for entity in entities:
        record = by_name[f"{entity['name']} ({entity['entityType']})"]
        outgoing = [
            f"{r['relationType']} -> {r['to']}" for r in relations if r["from"] == entity["name"]
        ]
        expected = [f"{entity['name']} ({entity['entityType']})"]
        expected += [f"- {o}" for o in entity["observations"]] + outgoing
        assert record.memory.text.split("\n") == expected
        assert type(record.memory) is MCP_TYPES.get(entity["entityType"], cg.Fact)
        assert "entity:" + entity["entityType"] in record.memory.tags
        assert record.at == T0 + 5 and record.status == "active"
        assert record.memory.source == cg.Source(origin="llm")
    ids = {name.split(" (")[0]: r.uri.id for name, r in by_name.items()}
    expected_edges = {}
    for r in relations:
        rel, status = MCP_RELATIONS[r["relationType"]]
        expected_edges.setdefault((ids[r["from"]], rel, ids[r["to"]]), status)
    found = {
        (e.src.id, e.relation, e.dst.id): e.status
        for r in by_name.values()
        for e in cx.edges(r.uri.id)
    }
    assert found == expected_edges
    assert report.imported == {"memories": len(entities), "edges": len(expected_edges)}
    assert report.skipped == [("line 69", "the same relates_to edge as line 68")]


# -- mem0 -----------------------------------------------------------------------------------

NAME = re.compile(r"[a-z0-9][a-z0-9._-]{0,63}")


def test_mem0_fixture_imports_record_by_record(open_store: Callable[[str], cg.Cortex]) -> None:
    """Each of alice's non-empty records is one Fact (Pattern for procedural memory) in
    the namespace of its run, written at its created_at, tagged with its categories;
    the records of other owners and the empty one are skipped with their reasons."""
    cx = open_store("alice")
    results = json.loads((FIXTURES / "mem0.json").read_text(encoding="utf-8"))["results"]
    assert len(results) >= 50

    report = import_from(cx, "mem0", FIXTURES / "mem0.json")

    expected_skips = []
    wanted = []
    for index, record in enumerate(results):
        owner = record.get("user_id") or record.get("agent_id")
        if owner != "alice":
            expected_skips.append((f"results[{index}]", f"belongs to {owner!r}, not to 'alice'"))
        elif not record["memory"]:
            expected_skips.append((f"results[{index}]", "the memory is empty"))
        else:
            wanted.append(record)
    assert report.skipped == expected_skips
    assert report.imported == {"memories": len(wanted), "edges": 0}
    assert len(imported(cx, "from:mem0")) == len(wanted)
    for record in wanted:
        got = one(cx, "mem0:" + record["id"])
        metadata = record.get("metadata") or {}
        procedural = metadata.get("memory_type") == "procedural_memory"
        assert type(got.memory) is (cg.Pattern if procedural else cg.Fact)
        assert got.memory.text == record["memory"]
        assert got.at == iso_ms(record["created_at"])
        run = record.get("run_id")
        if run is None:
            assert got.uri.ns == "default"
        elif NAME.fullmatch(run):
            assert got.uri.ns == run
        else:
            assert re.fullmatch(r"run-[0-9a-f]{20}", got.uri.ns)
        for category in metadata.get("categories", []):
            assert category.lower().replace(" ", "-") in got.memory.tags
        if record.get("agent_id"):
            assert "agent:" + record["agent_id"] in got.memory.tags
        assert got.memory.source == cg.Source(origin="llm")


def test_mem0_owner_chooses_whose_records_are_imported(
    open_store: Callable[[str], cg.Cortex],
) -> None:
    """``owner=`` imports another user's records (bob's six) into a store of any actor."""
    cx = open_store("bob-store")
    report = import_from(cx, "mem0", FIXTURES / "mem0.json", owner="bob")
    assert report.imported == {"memories": 6, "edges": 0}
    assert len(report.skipped) == 54


# -- claude-memory-sqlite -------------------------------------------------------------------

CLAUDE_TYPES = {
    "architecture": cg.Fact,
    "decision": cg.Fact,
    "context": cg.Fact,
    "pattern": cg.Pattern,
    "gotcha": cg.Constraint,
    "progress": cg.Event,
    "code_description": cg.Fact,
    "code": cg.ArtifactRef,
}
CLAUDE_STATUSES = {
    "active": "active",
    "archived": "archived",
    "pruned": "pruned",
    "superseded": "merged",
}
CLAUDE_ORIGINS = {"extraction": "llm", "manual": "human", "consolidation": "llm"}


def test_claude_sqlite_fixture_imports_row_by_row(
    open_store: Callable[[str], cg.Cortex],
) -> None:
    """Every memories row is one memory of the mapped type with its confidence, priority,
    pinned, status, tags, source and access count; every edges row is an edge with its
    relation, strength and status (both ways when bidirectional)."""
    cx = open_store("dev")
    db = sqlite3.connect(FIXTURES / "claude-memory.db")
    db.row_factory = sqlite3.Row
    memories = db.execute("SELECT * FROM memories ORDER BY rowid").fetchall()
    edges = db.execute("SELECT * FROM edges ORDER BY rowid").fetchall()
    db.close()
    assert len(memories) >= 50

    report = import_from(cx, "claude-memory-sqlite", FIXTURES / "claude-memory.db")

    assert report.imported["memories"] == len(memories)
    ids = {}
    for row in memories:
        got = one(cx, "claude-memory-sqlite:" + row["id"])
        ids[row["id"]] = got.uri.id
        memory = got.memory
        assert type(memory) is CLAUDE_TYPES[row["memory_type"]]
        if row["memory_type"] == "code":
            assert memory.content == row["content"] and memory.text == row["summary"]
        else:
            assert memory.text == row["content"]
            assert memory.summary == row["summary"]
        assert memory.confidence == row["confidence"]
        assert memory.priority == row["priority"]
        assert memory.pinned is bool(row["pinned"])
        assert got.status == CLAUDE_STATUSES[row["status"]]
        assert got.at == iso_ms(row["created_at"])
        expected_tags = {row["memory_type"], "scope:" + row["category"]}
        expected_tags |= {t.lower().replace(" ", "-") for t in json.loads(row["tags"])}
        if row["status"] == "superseded":
            expected_tags.add("superseded")
        assert expected_tags <= set(memory.tags)
        assert memory.source == cg.Source(
            origin=CLAUDE_ORIGINS.get(row["source_type"], "system"),
            session=row["source_session"],
            branch=row["source_context"],
        )
        with cx._handle.reading() as txn:  # the access counters have no public reader
            count, last = read_access(txn, got.uri.id)
        assert count == row["access_count"]
        if row["access_count"]:
            assert last == iso_ms(row["last_accessed_at"])
    expected_edges = {}
    for row in edges:
        value = (row["strength"], row["status"])
        expected_edges[(ids[row["source_id"]], row["relation_type"], ids[row["target_id"]])] = value
        if row["bidirectional"]:
            key = (ids[row["target_id"]], row["relation_type"], ids[row["source_id"]])
            expected_edges.setdefault(key, value)
    found = {}
    for mid in ids.values():
        for e in cx.edges(mid):
            found[(e.src.id, e.relation, e.dst.id)] = (e.strength, e.status)
            assert e.origin == ("human" if e.relation == "supersedes" else "system")
    assert found == expected_edges
    assert report.imported["edges"] == len(expected_edges)


# -- every format ---------------------------------------------------------------------------

FIXTURE_OF = {
    "mcp-memory": ("mcp-memory.jsonl", "agent"),
    "mem0": ("mem0.json", "alice"),
    "claude-memory-sqlite": ("claude-memory.db", "dev"),
}


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_second_import_adds_nothing(fmt: str, open_store: Callable[[str], cg.Cortex]) -> None:
    """Importing the same file again writes no journal entry (every table, the root and
    the seq unchanged) and reports every record as skipped."""
    name, actor = FIXTURE_OF[fmt]
    cx = open_store(actor)
    first = import_from(cx, fmt, FIXTURES / name)
    digests, seq = cx.table_digests(), cx.seq
    second = import_from(cx, fmt, FIXTURES / name)
    assert second.imported == {"memories": 0, "edges": 0}
    assert cx.table_digests() == digests and cx.seq == seq
    assert len(second.skipped) > len(first.skipped)
    assert any("already imported" in why for _, why in second.skipped)


@pytest.mark.parametrize("fmt", FORMATS)
def test_imports_are_deterministic(
    fmt: str, tmp_path: Path, open_store: Callable[[str], cg.Cortex]
) -> None:
    """The same file imported into two fresh stores gives the same OverallRoot."""
    name, actor = FIXTURE_OF[fmt]
    roots = []
    for place in ("a", "b"):
        with cg.open(tmp_path / place, actor, clock=cg.ManualClock(T0), sync=False) as cx:
            import_from(cx, fmt, FIXTURES / name)
            roots.append(cx.overall_root())
    assert roots[0] == roots[1]


def test_a_tombstoned_import_is_not_brought_back(open_store: Callable[[str], cg.Cortex]) -> None:
    """A memory the user tombstoned after importing it stays tombstoned on re-import, and
    the relations that touch it are skipped with that reason."""
    cx = open_store("agent")
    import_from(cx, "mcp-memory", FIXTURES / "mcp-memory.jsonl")
    alice = next(r for r in imported(cx, "from:mcp-memory") if r.memory.summary.startswith("Alice"))
    cx.tombstone(alice.uri, reason="left the company")
    seq = cx.seq
    report = import_from(cx, "mcp-memory", FIXTURES / "mcp-memory.jsonl")
    assert report.imported == {"memories": 0, "edges": 0} and cx.seq == seq
    assert ("line 32", "an end was tombstoned after an earlier import") in report.skipped


def test_progress_counts_up_to_the_total(open_store: Callable[[str], cg.Cortex]) -> None:
    """``progress`` is called with increasing ``done`` and ends at ``(total, total)``."""
    cx = open_store("agent")
    calls: list[tuple[int, int]] = []
    report = import_from(
        cx, "mcp-memory", FIXTURES / "mcp-memory.jsonl", progress=lambda d, t: calls.append((d, t))
    )
    total = report.imported["memories"] + report.imported["edges"]
    assert calls[-1] == (total, total)
    assert [d for d, _ in calls] == sorted(d for d, _ in calls)


def test_report_to_json() -> None:
    """``to_json`` gives the format, the counts and each skip as ``{"at", "reason"}``."""
    report = MigrationReport({"memories": 1, "edges": 0}, [("results[2]", "empty")], "mem0")
    assert report.to_json() == {
        "format": "mem0",
        "imported": {"memories": 1, "edges": 0},
        "skipped": [{"at": "results[2]", "reason": "empty"}],
    }


# -- bad inputs -----------------------------------------------------------------------------


def _mcp(*lines: str) -> bytes:
    return ("\n".join(lines) + "\n").encode("utf-8")


def test_claude_sqlite_access_counts_are_capped(
    open_store: Callable[[str], cg.Cortex], tmp_path: Path
) -> None:
    """A row claiming a billion reads journals at most MAX_ACCESSES of them (the import
    stays bounded), while the other rows keep their counts."""
    from cortexgraph.migrate.claude_sqlite import MAX_ACCESSES

    db = sqlite3.connect(FIXTURES / "claude-memory.db")
    db.row_factory = sqlite3.Row
    rows = db.execute("SELECT id, access_count FROM memories ORDER BY rowid").fetchall()
    db.close()
    path = _sqlite(
        tmp_path, f"UPDATE memories SET access_count = 1000000000 WHERE id = '{rows[0]['id']}';"
    )
    cx = open_store("agent")
    import_from(cx, "claude-memory-sqlite", path)
    with cx._handle.reading() as txn:  # the access counters have no public reader
        capped, _ = read_access(txn, one(cx, "claude-memory-sqlite:" + rows[0]["id"]).uri.id)
        kept, _ = read_access(txn, one(cx, "claude-memory-sqlite:" + rows[1]["id"]).uri.id)
    assert capped == MAX_ACCESSES
    assert kept == rows[1]["access_count"] < MAX_ACCESSES


ENTITY_A = '{"type":"entity","name":"A","entityType":"x","observations":["one"]}'
ENTITY_B = '{"type":"entity","name":"B","entityType":"x","observations":[]}'


def _sqlite(tmp: Path, change: str) -> Path:
    path = tmp / "bad.db"
    shutil.copy(FIXTURES / "claude-memory.db", path)
    db = sqlite3.connect(path)
    db.executescript(change)
    db.commit()
    db.close()
    return path


def _bytes(data: bytes) -> Callable[[Path], Path]:
    def write(tmp: Path) -> Path:
        path = tmp / "bad.input"
        path.write_bytes(data)
        return path

    return write


def _mem0(results: list[dict[str, object]]) -> Callable[[Path], Path]:
    return _bytes(json.dumps({"results": results}).encode())


_REC = {"id": "r1", "memory": "likes tea", "user_id": "agent"}

#: name -> (format, how to make the bad file in a directory, field, text the message holds)
BAD_INPUTS: dict[str, tuple[str, Callable[[Path], Path], str, str]] = {
    "mcp bad JSON line": (
        "mcp-memory", _bytes(_mcp(ENTITY_A, ENTITY_B, '{"type":"entity",')), "line", "line 3"
    ),
    "mcp invalid UTF-8": (
        "mcp-memory", _bytes(_mcp(ENTITY_A) + b'{"type":"entity","name":"\xff"}\n'), "line",
        "line 2: invalid UTF-8",
    ),
    "mcp duplicate entity": (
        "mcp-memory", _bytes(_mcp(ENTITY_A, ENTITY_B, ENTITY_A)), "id", "line 3: duplicate id",
    ),
    "mcp unknown entity in a relation": (
        "mcp-memory",
        _bytes(_mcp(ENTITY_A, '{"type":"relation","from":"A","to":"Z","relationType":"knows"}')),
        "to", "line 2",
    ),
    "mcp observations not a list": (
        "mcp-memory",
        _bytes(_mcp('{"type":"entity","name":"A","entityType":"x","observations":"one"}')),
        "observations", "line 1",
    ),
    "mcp wrong format file (mem0 JSON)": (
        "mcp-memory", lambda tmp: FIXTURES / "mem0.json", "line", "line 1: not JSON",
    ),
    "mcp line of another kind": (
        "mcp-memory", _bytes(_mcp(ENTITY_A, '{"type":"note","text":"x"}')), "type", "line 2",
    ),
    "mcp observation over 1 MiB": (
        "mcp-memory",
        _bytes(_mcp(json.dumps({"type": "entity", "name": "A", "entityType": "x",
                                "observations": ["x" * (1 << 20)]}))),
        "text", "line 1",
    ),
    "mem0 duplicate ids": ("mem0", _mem0([_REC, {**_REC, "memory": "b"}]), "id", "results[1]"),
    "mem0 wrong format file (JSON Lines)": (
        "mem0", lambda tmp: FIXTURES / "mcp-memory.jsonl", "path", "line 2: not JSON"
    ),
    "mem0 invalid UTF-8": ("mem0", _bytes(b'{"results": [\n{"id": "\xc3("}]}'), "path", "line 2"),
    "mem0 bad timestamp": (
        "mem0", _mem0([_REC, {**_REC, "id": "r2", "created_at": "yesterday"}]), "created_at",
        "results[1]",
    ),
    "mem0 record not an object": ("mem0", _mem0([_REC, "tea"]), "results", "results[1]"),  # type: ignore[list-item]
    "mem0 no results": ("mem0", _bytes(b'{"memories": []}'), "results", "results"),
    "sqlite missing table": (
        "claude-memory-sqlite", lambda tmp: _sqlite(tmp, "DROP TABLE edges;"), "edges", "edges"
    ),
    "sqlite wrong format file (JSON)": (
        "claude-memory-sqlite", lambda tmp: FIXTURES / "mem0.json", "path", "not a readable SQLite"
    ),
    "sqlite invalid UTF-8": (
        "claude-memory-sqlite",
        lambda tmp: _sqlite(
            tmp, "UPDATE memories SET content = CAST(x'ff41' AS TEXT) WHERE rowid = 5;"
        ),
        "content", "memories row 5: invalid UTF-8",
    ),
    "sqlite unknown memory type": (
        "claude-memory-sqlite",
        lambda tmp: _sqlite(tmp, "UPDATE memories SET memory_type = 'idea' WHERE rowid = 9;"),
        "memory_type", "memories row 9",
    ),
    "sqlite edge to an unknown memory": (
        "claude-memory-sqlite",
        lambda tmp: _sqlite(tmp, "UPDATE edges SET target_id = 'nope' WHERE rowid = 2;"),
        "to", "edges row 2",
    ),
    "sqlite duplicate ids": (
        "claude-memory-sqlite",
        lambda tmp: _sqlite(
            tmp,
            "CREATE TABLE m2 AS SELECT * FROM memories; DROP TABLE memories;"
            " ALTER TABLE m2 RENAME TO memories;"
            " UPDATE memories SET id = (SELECT id FROM memories WHERE rowid = 1) WHERE rowid = 3;",
        ),
        "id", "memories row 3: duplicate id",
    ),
    "sqlite strength out of range": (
        "claude-memory-sqlite",
        lambda tmp: _sqlite(tmp, "UPDATE edges SET strength = 1.5 WHERE rowid = 4;"),
        "strength", "edges row 4",
    ),
    "sqlite unknown relation": (
        "claude-memory-sqlite",
        lambda tmp: _sqlite(tmp, "UPDATE edges SET relation_type = 'likes' WHERE rowid = 6;"),
        "relation_type", "edges row 6",
    ),
    "sqlite negative access count": (
        "claude-memory-sqlite",
        lambda tmp: _sqlite(tmp, "UPDATE memories SET access_count = -2 WHERE rowid = 7;"),
        "access_count", "memories row 7",
    ),
    "sqlite damaged database": (
        "claude-memory-sqlite",
        lambda tmp: _bytes((FIXTURES / "claude-memory.db").read_bytes()[:20000])(tmp),
        "path", "not a readable SQLite database",
    ),
    "missing file": ("mem0", lambda tmp: tmp / "absent.json", "path", "no such file"),
}  # fmt: skip


@pytest.mark.parametrize("case", sorted(BAD_INPUTS))
def test_bad_input_is_a_typed_error_and_the_store_is_unchanged(
    case: str, tmp_path: Path, open_store: Callable[[str], cg.Cortex]
) -> None:
    """Each bad file raises ``ValidationError`` with the field and the line, record or
    row, after nothing was written: every table digest is what it was before."""
    fmt, make, field, where = BAD_INPUTS[case]
    cx = open_store("agent")
    cx.write(cg.Fact(text="present before the import"))
    before = cx.table_digests()
    with pytest.raises(cg.ValidationError) as caught:
        import_from(cx, fmt, make(tmp_path))
    assert caught.value.field == field
    assert where in str(caught.value)
    assert cx.table_digests() == before


def test_unknown_format_is_a_validation_error(open_store: Callable[[str], cg.Cortex]) -> None:
    """An unknown format name is refused before the file is read (field ``format``)."""
    cx = open_store("agent")
    with pytest.raises(cg.ValidationError) as caught:
        import_from(cx, "obsidian", FIXTURES / "mem0.json")
    assert caught.value.field == "format" and "mcp-memory" in str(caught.value)


def test_a_failure_inside_the_batch_rolls_everything_back(
    open_store: Callable[[str], cg.Cortex],
) -> None:
    """An error raised after half of the records were written (here by the progress
    callback) leaves the store as it was: the import is one batch."""
    cx = open_store("dev")
    before = cx.table_digests()

    def stop(done: int, total: int) -> None:
        if done == 40:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        import_from(cx, "claude-memory-sqlite", FIXTURES / "claude-memory.db", progress=stop)
    assert cx.table_digests() == before and cx.seq == 0


def _writer_between_lookup_and_batch(monkeypatch: pytest.MonkeyPatch, times: int) -> list[int]:
    """Make another write commit during the look-ups of each of the first ``times``
    attempts to import the mcp-memory fixture, as a concurrent writer would (an
    import's look-ups run before its batch, since ``find`` reads committed state).
    Returns the store's seq at the start of each attempt's look-ups."""
    real = plan_module._find_imported
    first = plan_module.source_tag("mcp-memory", "Alice Chen")  # looked up first
    attempts: list[int] = []

    def find_then_interfere(store: cg.Cortex, tag: str) -> object:
        if tag == first:
            attempts.append(store.seq)
            if len(attempts) <= times:
                store.write(cg.Fact(text=f"written concurrently {len(attempts)}"))
        return real(store, tag)

    monkeypatch.setattr(plan_module, "_find_imported", find_then_interfere)
    return attempts


def test_a_concurrent_write_makes_the_import_look_again(
    monkeypatch: pytest.MonkeyPatch, open_store: Callable[[str], cg.Cortex]
) -> None:
    """When another write commits between the look-ups and the batch, the import runs
    its look-ups again and then imports everything once."""
    cx = open_store("agent")
    attempts = _writer_between_lookup_and_batch(monkeypatch, times=1)
    report = import_from(cx, "mcp-memory", FIXTURES / "mcp-memory.jsonl")
    assert attempts == [0, 1]  # looked up again after the concurrent write
    assert report.imported == {"memories": 31, "edges": 37}
    assert len(imported(cx, "from:mcp-memory")) == 31
    assert cx.find(cg.Q.type(cg.Fact) & ~cg.Q.tag("from:mcp-memory"), limit=5).matched == 1


def test_an_import_that_keeps_being_overtaken_gives_up_whole(
    monkeypatch: pytest.MonkeyPatch, open_store: Callable[[str], cg.Cortex]
) -> None:
    """If other writes keep committing in between, the import stops with a CortexError
    after three attempts, and none of its records were written."""
    cx = open_store("agent")
    _writer_between_lookup_and_batch(monkeypatch, times=3)
    with pytest.raises(cg.CortexError, match="3 attempts"):
        import_from(cx, "mcp-memory", FIXTURES / "mcp-memory.jsonl")
    assert imported(cx, "from:mcp-memory") == []
