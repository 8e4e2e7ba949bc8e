"""Journal export and import (cortexgraph.io): round trips that reproduce the
OverallRoot and every table, incremental and repeated imports, the Markdown view, and
every kind of bad file refused with a JournalFileError naming its line, the store
unchanged."""

from __future__ import annotations

import base64
import io
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tests.conftest import T0
from tests.strategies import memories, memory_changes

import cortexgraph as cg
from cortexgraph.core.journal import Entry, encode_entry
from cortexgraph.errors import JournalFileError
from cortexgraph.io import (
    MAX_LINE_BYTES,
    export_journal,
    export_markdown,
    import_journal,
    read_journal,
)
from cortexgraph.store.env import CACHE_TABLES

AGENT_TYPES = (cg.Fact, cg.Goal, cg.Preference, cg.Constraint, cg.Pattern, cg.Event, cg.ArtifactRef)
RELATIONS = ("relates_to", "derived_from", "contradicts", "refines", "exemplifies")
DAY = 86_400_000

#: not carried by an export: snapshots are stored manifests, not journal entries, and the
#: embedding cache is a cache (not memory state)
NOT_JOURNALED = ("snapshots", *CACHE_TABLES)


def exported(cx: cg.Cortex, since: int = 0) -> bytes:
    out = io.StringIO()
    export_journal(cx, out, since=since)
    return out.getvalue().encode("utf-8")


def journaled_digests(cx: cg.Cortex) -> dict[str, str]:
    return {k: v for k, v in cx.table_digests().items() if k not in NOT_JOURNALED}


# ---------------------------------------------------------------------------
# random op sequences

writes = st.tuples(
    st.just("write"), memories(*AGENT_TYPES, text_size=16), st.sampled_from(["default", "work"])
)
ops = st.one_of(
    writes,
    writes,
    writes,
    st.tuples(st.just("update"), st.integers(0, 50), memory_changes()),
    st.tuples(st.just("head"), st.integers(0, 50), st.integers(1, 2)),
    st.tuples(st.just("tombstone"), st.integers(0, 50), st.sampled_from(["", "obsolete"])),
    st.tuples(
        st.just("edge"),
        st.integers(0, 50),
        st.integers(0, 3),
        st.sampled_from(RELATIONS),
        st.floats(0, 1),
        st.sampled_from(["active", "suggested"]),
    ),
    st.tuples(st.just("unedge"), st.integers(0, 50), st.integers(0, 3), st.sampled_from(RELATIONS)),
    st.tuples(
        st.just("attest"),
        st.lists(st.integers(0, 50), min_size=1, max_size=3),
        st.sampled_from(["success", "failure"]),
    ),
    st.tuples(st.just("read"), st.just(0)),
    st.tuples(st.just("compact"), st.sampled_from([0, 20 * DAY, 60 * DAY])),
    st.tuples(st.just("snapshot"), st.just(0)),
)


def run_op(
    cx: cg.Cortex, clock: cg.ManualClock, uris: list[cg.MemoryURI], op: tuple[Any, ...]
) -> None:
    """Apply one op; an op the store refuses (a CortexError) changes nothing."""
    clock.advance(1000)
    kind = op[0]

    def pick(i: int) -> cg.MemoryURI:
        return uris[i % len(uris)]

    if kind != "write" and not uris:
        return
    try:
        if kind == "write":
            uris.append(cx.write(op[1], ns=op[2]).head)
        elif kind == "update":
            cx.update(pick(op[1]), **op[2])
        elif kind == "head":
            cx.update_head(pick(op[1]).id, version=op[2])
        elif kind == "tombstone":
            cx.tombstone(pick(op[1]), reason=op[2])
        elif kind == "edge":
            cx.add_edge(pick(op[1]), pick(op[1] + 1 + op[2]), op[3], strength=op[4], status=op[5])
        elif kind == "unedge":
            cx.remove_edge(pick(op[1]), pick(op[1] + 1 + op[2]), op[3])
        elif kind == "attest":
            cx.attest(cited=[pick(i) for i in op[1]], outcome=op[2])
        elif kind == "read":
            cx.find(cg.Q.any_of(*(cg.Q.type(t) for t in AGENT_TYPES)), limit=3, late_binding=True)
        elif kind == "compact":
            clock.advance(op[1])
            cx.compact()
        else:
            cx.snapshot()
    except cg.CortexError:
        pass


@pytest.fixture
def stores(tmp_path: Path) -> Iterator[Callable[[str], cg.Cortex]]:
    """Opens stores of actor 'agent' under tmp_path (each name once per test); closes them."""
    opened: list[cg.Cortex] = []
    counter = iter(range(1_000_000))

    def make(name: str = "") -> cg.Cortex:
        cx = cg.open(
            tmp_path / f"{name}{next(counter)}", "agent", clock=cg.ManualClock(T0), sync=False
        )
        opened.append(cx)
        return cx

    yield make
    for cx in opened:
        cx.close()


@settings(max_examples=60)
@given(sequence=st.lists(ops, min_size=12, max_size=40), cut=st.integers(0, 40))
def test_random_histories_round_trip(
    stores: Callable[[str], cg.Cortex], sequence: list[tuple[Any, ...]], cut: int
) -> None:
    """For random sequences of every op (write, update, head, tombstone, edge, unedge,
    attest, late-binding read, compact with archiving and pruning, snapshot), exporting
    and importing into a fresh store reproduces the OverallRoot and every journaled
    table byte for byte; an export taken part-way, imported, then the incremental export
    of the rest imported on top, gives the same; importing again adds nothing."""
    src = stores("src")
    clock = src.clock
    assert isinstance(clock, cg.ManualClock)
    uris: list[cg.MemoryURI] = []
    for op in sequence[:cut]:
        run_op(src, clock, uris, op)
    early, early_seq = exported(src), src.seq
    for op in sequence[cut:]:
        run_op(src, clock, uris, op)
    full = exported(src)

    whole = stores("whole")
    report = import_journal(whole, io.BytesIO(full))
    assert (report.applied, report.skipped, report.root_checked) == (src.seq, 0, True)
    assert whole.overall_root() == src.overall_root()
    assert journaled_digests(whole) == journaled_digests(src)

    part = stores("part")
    import_journal(part, io.BytesIO(early))
    assert part.seq == early_seq
    report = import_journal(part, io.BytesIO(exported(src, since=early_seq)))
    assert (report.applied, report.skipped, report.root_checked) == (
        src.seq - early_seq,
        0,
        True,
    )
    assert journaled_digests(part) == journaled_digests(src)

    again = import_journal(part, io.BytesIO(full))
    assert (again.applied, again.skipped) == (0, src.seq)
    assert journaled_digests(part) == journaled_digests(src)


def test_demo_store_round_trips(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The demo's store (memories of most types, updates, edges, attestations, compaction,
    snapshots) exported and imported into a fresh store gives the same OverallRoot and
    the same journaled tables."""
    from cortexgraph.demo import run_demo

    assert run_demo(tmp_path / "demo", as_json=True) == 0
    capsys.readouterr()
    with cg.open(tmp_path / "demo", "coder", readonly=True) as src:
        data = exported(src)
        root, digests, seq = src.overall_root(), journaled_digests(src), src.seq
    with cg.open(tmp_path / "copy", "coder", sync=False) as copy:
        report = import_journal(copy, io.BytesIO(data))
        assert (report.applied, report.root_checked) == (seq, True)
        assert copy.overall_root() == root
        assert journaled_digests(copy) == digests


# ---------------------------------------------------------------------------
# a small history for the other tests


def build_history(cx: cg.Cortex, steps: int = 9) -> None:
    """Writes in two namespaces, an update, an edge, an attestation (two entries), a
    late-binding read, a write, a tombstone and an edge removal: 10 entries in 9 steps.
    On a ManualClock the same steps give the same entries in every store."""
    a = cg.MemoryURI.parse("cx://agent/default/" + "00" * 16)  # replaced by step 1
    b = a
    c = a
    for step in range(steps):
        if step == 0:
            a = cx.write(cg.Fact(text="deploys go through CI", tags=["deploy"]))
        elif step == 1:
            b = cx.write(cg.Constraint(text="never push to main"), ns="work")
        elif step == 2:
            cx.update(a, expected_version=1, text="deploys go through CI and Argo")
        elif step == 3:
            cx.add_edge(a.head, b.head, "relates_to", strength=0.5)
        elif step == 4:
            cx.attest(cited=[a], outcome="success")
        elif step == 5:
            cx.find(cg.Q.type(cg.Fact), limit=5, late_binding=True)
        elif step == 6:
            c = cx.write(cg.Goal(text="ship the importer"))
        elif step == 7:
            cx.tombstone(c, reason="done")
        else:
            cx.remove_edge(a.head, b.head, "relates_to")


@pytest.fixture
def source(stores: Callable[[str], cg.Cortex]) -> cg.Cortex:
    """A store holding :func:`build_history` (10 entries)."""
    cx = stores("source")
    build_history(cx)
    assert cx.seq == 10
    return cx


def test_export_file_layout(source: cg.Cortex) -> None:
    """Line 1 is the header (format, version, actor, hash, since, last seq and the
    OverallRoot); each further line holds seq, actor, op, the rendering and the base64 of
    exactly the bytes the journal stores; every line ends in a newline."""
    data = exported(source)
    assert data.endswith(b"\n")
    lines = [json.loads(line) for line in data.splitlines()]
    assert lines[0] == {
        "format": "cortexgraph-journal",
        "version": 1,
        "actor": "agent",
        "hash_name": source.hash_name,
        "since": 0,
        "last_seq": 10,
        "overall_root": source.overall_root().hex(),
    }
    stored = dict(source.journal_bytes())
    for line in lines[1:]:
        assert list(line) == ["seq", "actor", "op", "entry", "cbor"]
        assert base64.b64decode(line["cbor"]) == stored[line["seq"]]
        assert line["entry"]["op"] == line["op"] and line["actor"] == "agent"
    assert [line["seq"] for line in lines[1:]] == list(range(1, 11))
    assert [
        line["seq"] for line in map(json.loads, exported(source, since=7).splitlines()[1:])
    ] == [8, 9, 10]
    assert json.loads(exported(source, since=99).splitlines()[0])["since"] == 10


def test_export_stops_at_the_header_seq(source: cg.Cortex) -> None:
    """An entry appended while an export runs is not exported: the file holds exactly the
    entries up to the header's last seq, whose root the header gives."""

    class Racing(io.StringIO):
        def write(self, text: str) -> int:
            if self.tell() == 0:  # the header: now another write lands in the journal
                source.write(cg.Fact(text="written during the export"))
            return super().write(text)

    out = Racing()
    assert export_journal(source, out) == 10
    assert source.seq == 11
    assert len(out.getvalue().splitlines()) == 11


def test_markdown_view(source: cg.Cortex) -> None:
    """The Markdown export has one table row per entry with its seq, UTC time, op and what
    changed, escapes pipes, and is refused by import (it is for people)."""
    source.write(cg.Fact(text="a | b"))
    out = io.StringIO()
    assert export_markdown(source, out, since=8) == 3
    text = out.getvalue()
    rows = [line for line in text.splitlines() if line.startswith("| ") and line[2].isdigit()]
    assert [row.split(" | ")[0] for row in rows] == ["| 9", "| 10", "| 11"]
    assert "2023-11-14 22:13:20.000Z" in rows[0] and "| unedge |" in rows[1]
    assert "fact v1: a \\| b" in rows[2]
    with pytest.raises(JournalFileError, match="line 1: not JSON"):
        read_journal(io.BytesIO(text.encode()))


def test_import_refuses_inside_a_batch_and_read_only(source: cg.Cortex, tmp_path: Path) -> None:
    """Import is a write of its own: refused inside a batch and on a read-only handle."""
    data = exported(source)
    with source.batch(), pytest.raises(cg.CortexError, match="inside a batch"):
        import_journal(source, io.BytesIO(data))
    with cg.open(tmp_path / "ro", "agent", sync=False):
        pass
    with cg.open(tmp_path / "ro", "agent", readonly=True) as ro, pytest.raises(cg.ReadOnlyError):
        import_journal(ro, io.BytesIO(data))


def test_import_from_path_and_checked_file(
    source: cg.Cortex, stores: Callable[[str], cg.Cortex], tmp_path: Path
) -> None:
    """A path and an already checked JournalFile import the same as a stream; progress
    ends at twice the entries from a path (read, then applied), at the entries from a
    JournalFile (applied only)."""
    path = tmp_path / "export.jsonl"
    path.write_bytes(exported(source))
    seen: list[tuple[int, int]] = []
    target = stores("target")
    import_journal(target, path, progress=lambda d, t: seen.append((d, t)))
    assert target.overall_root() == source.overall_root()
    assert seen[-1] == (20, 20)
    other = stores("other")
    seen.clear()
    import_journal(other, read_journal(path), progress=lambda d, t: seen.append((d, t)))
    assert seen[-1] == (10, 10)
    assert other.overall_root() == source.overall_root()
    with path.open("r") as text, pytest.raises(JournalFileError, match="binary mode"):
        import_journal(other, text)  # type: ignore[arg-type]


# ---------------------------------------------------------------------------
# bad files: a typed error naming the line, and the store unchanged

Lines = list[bytes]


def _edit(lines: Lines, index: int, change: Callable[[dict[str, Any]], None]) -> None:
    value = json.loads(lines[index])
    change(value)
    lines[index] = json.dumps(value, ensure_ascii=False).encode() + b"\n"


def _set(index: int, **fields: Any) -> Callable[[Lines], None]:
    return lambda lines: _edit(lines, index, lambda v: v.update(fields))


def _forged(lines: Lines, index: int, make: Callable[[Entry], Entry]) -> None:
    """Replace line ``index`` by a well-formed line for a different entry."""
    from cortexgraph.core.journal import decode_entry
    from cortexgraph.io import render_entry

    old = json.loads(lines[index])
    entry = make(decode_entry(base64.b64decode(old["cbor"])))
    data = encode_entry(entry)
    line = {"seq": entry.seq, "actor": "agent", "op": entry.op, "entry": render_entry(entry)}
    line["cbor"] = base64.b64encode(data).decode()
    lines[index] = json.dumps(line).encode() + b"\n"


def _all_actors(name: str) -> Callable[[Lines], None]:
    def change(lines: Lines) -> None:
        for i in range(len(lines)):
            _edit(lines, i, lambda v: v.update(actor=name))

    return change


def _delete(index: int, field: str) -> Callable[[Lines], None]:
    return lambda lines: _edit(lines, index, lambda v: v.pop(field))


def _replace_text(index: int, old: bytes, new: bytes) -> Callable[[Lines], None]:
    def change(lines: Lines) -> None:
        assert old in lines[index]
        lines[index] = lines[index].replace(old, new)

    return change


def _incremental(lines: Lines, *, since: int) -> None:
    """Make the file the incremental export after ``since``."""
    _set(0, since=since)(lines)
    del lines[1 : since + 1]


# Line n + 1 holds seq n. The target store already holds entries 1 to 4 (the same
# ones), so a good file would append entries 5 to 10 and skip the rest.
BAD_FILES: list[tuple[str, Callable[[Lines], object], int | None, str]] = [
    ("last line cut", lambda ls: ls.__setitem__(-1, ls[-1][:-20]), 11, "cut .* truncated"),
    ("last line missing", lambda ls: ls.pop(), 11, "ends after entry 9, .* truncated"),
    ("empty file", lambda ls: ls.clear(), 1, "the file is empty"),
    ("not JSON", lambda ls: ls.__setitem__(5, b"{not json\n"), 6, "not JSON"),
    ("not an object", lambda ls: ls.__setitem__(5, b"[5]\n"), 6, "not a JSON object"),
    (
        "huge integer",
        lambda ls: ls.__setitem__(5, b'{"seq": ' + b"1" * 5000 + b"}\n"),
        6,
        "not JSON this import reads",
    ),
    (
        "deep nesting",
        lambda ls: ls.__setitem__(5, b"[" * 100_000 + b"]" * 100_000 + b"\n"),
        6,
        "not JSON",
    ),
    ("blank line", lambda ls: ls.insert(5, b"\n"), 6, "not JSON"),
    ("missing cbor", _delete(5, "cbor"), 6, "missing field.*cbor"),
    ("missing seq", _delete(5, "seq"), 6, "missing field.*seq"),
    ("bad base64", _set(5, cbor="not base64!"), 6, "not valid base64"),
    ("cbor garbage", _set(5, cbor=base64.b64encode(b"\xa1\x61").decode()), 6, "does not decode"),
    ("cbor not an entry", _set(5, cbor=base64.b64encode(b"\x01").decode()), 6, "does not decode"),
    (
        "rendering disagrees",
        lambda ls: _edit(ls, 5, lambda v: v["entry"].update(at=1)),
        6,
        "disagrees",
    ),
    ("op disagrees", _set(5, op="update"), 6, "says op 'update'"),
    (
        "cbor of another entry",
        lambda ls: _edit(ls, 5, lambda v: v.update(cbor=json.loads(ls[6])["cbor"])),
        6,
        "holds entry 6, the line says 5",
    ),
    ("seq gap", lambda ls: ls.pop(5), 6, "seq gap: expected entry 5, found 6"),
    ("duplicate line", lambda ls: ls.insert(6, ls[5]), 7, "seq gap: expected entry 6, found 5"),
    ("seq as a string", _set(5, seq="5"), 6, "seq gap"),
    ("line of another actor", _set(5, actor="someone"), 6, "actor 'someone'"),
    (
        "file of another actor",
        _all_actors("someone"),
        1,
        "actor 'someone''s journal; this store is actor 'agent'",
    ),
    ("another hash", _set(0, hash_name="sha256"), 1, "committed with sha256"),
    ("invalid UTF-8", _replace_text(8, b"ship", b"sh\xffp"), 9, "not valid UTF-8"),
    ("wrong format", _set(0, format="mem0"), 1, "not a cortexgraph journal export"),
    ("wrong version", _set(0, version=2), 1, "format version 2 is not supported"),
    ("header without last_seq", _delete(0, "last_seq"), 1, "'last_seq' is missing"),
    ("header root malformed", _set(0, overall_root="xyz"), 1, "not 64 lowercase hex"),
    ("header since past last_seq", _set(0, since=11), 1, "since .* past last_seq"),
    ("more entries than promised", _set(0, last_seq=9), 11, "past the header's last seq"),
    (
        "wrong root",
        _set(0, overall_root="ab" * 32),
        1,
        "OverallRoot at seq 10 would be [0-9a-f]{64}, not abab",
    ),
    (
        "history diverges",
        lambda ls: _forged(ls, 2, lambda e: Entry(e.seq, e.at + 1, e.op, e.ns, e.fields)),
        3,
        "entry 2 differs from the store's entry 2",
    ),
    (
        "entry does not apply",
        lambda ls: _forged(
            ls, 5, lambda e: Entry(e.seq, e.at, "head", e.ns, {"id": b"\x07" * 16, "version": 1})
        ),
        6,
        "journal entry 5 \\(head\\) names an unknown memory",
    ),
    (
        "forged write id",
        lambda ls: _forged(
            ls, 8, lambda e: Entry(e.seq, e.at, e.op, e.ns, {**e.fields, "id": b"\x07" * 16})
        ),
        9,
        "journal entry 8 has an id that does not match",
    ),
    (
        "starts past the store's end",
        lambda ls: _incremental(ls, since=6),
        2,
        "continue at seq 7, but the store ends at seq 4: entries 5 to 6 are missing",
    ),
]


@pytest.mark.parametrize(
    ("change", "line", "message"), [c[1:] for c in BAD_FILES], ids=[c[0] for c in BAD_FILES]
)
def test_bad_file_is_refused_and_store_unchanged(
    source: cg.Cortex,
    stores: Callable[[str], cg.Cortex],
    change: Callable[[Lines], object],
    line: int | None,
    message: str,
) -> None:
    """Each kind of bad file raises JournalFileError naming the line at fault, and the
    store (holding a prefix of the file's journal) is byte-identical afterwards."""
    lines = exported(source).splitlines(keepends=True)
    change(lines)
    target = stores("target")
    build_history(target, steps=4)  # entries 1 to 4, equal to the source's
    assert target.seq == 4
    before = target.table_digests()
    with pytest.raises(JournalFileError, match=message) as info:
        import_journal(target, io.BytesIO(b"".join(lines)))
    assert info.value.line == line
    assert str(info.value).startswith(f"file: line {line}: ")
    assert target.table_digests() == before


def test_unchanged_file_imports(source: cg.Cortex, stores: Callable[[str], cg.Cortex]) -> None:
    """The control for the bad files: the unchanged file applies entries 5 to 10 on the
    same target and skips 1 to 4."""
    target = stores("target")
    build_history(target, steps=4)
    report = import_journal(target, io.BytesIO(exported(source)))
    assert (report.applied, report.skipped, report.root_checked) == (6, 4, True)
    assert target.overall_root() == source.overall_root()


class _Endless(io.RawIOBase):
    """``head`` and then ``size`` bytes of ``a``, made up as they are read (never held
    whole); ``pos`` counts what was read."""

    def __init__(self, head: bytes, size: int) -> None:
        self.head = head
        self.end = len(head) + size
        self.pos = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        n = min(len(buffer), self.end - self.pos)
        chunk = self.head[self.pos : self.pos + n]
        chunk += b"a" * (n - len(chunk))
        buffer[:n] = chunk
        self.pos += n
        return n


def test_a_50_mb_line_is_refused_without_reading_it(
    source: cg.Cortex, stores: Callable[[str], cg.Cortex]
) -> None:
    """A 50 MB line is refused (naming its line) after at most the 16 MB limit was read,
    and the store is unchanged."""
    header = exported(source).splitlines(keepends=True)[0]
    raw = _Endless(header + b'{"seq": 1, "cbor": "', 50 << 20)
    target = stores("target")
    before = target.table_digests()
    with pytest.raises(JournalFileError, match="line 2: the line is longer than 16,777,216"):
        import_journal(target, io.BufferedReader(raw))
    assert raw.pos <= len(header) + MAX_LINE_BYTES + 1 + io.DEFAULT_BUFFER_SIZE
    assert target.table_digests() == before


def test_append_entries_directly(source: cg.Cortex, stores: Callable[[str], cg.Cortex]) -> None:
    """Cortex.append_entries, the primitive under import: it appends another store's
    entries all or nothing, skips those already held, and names the seq of an entry
    that does not continue the journal; a wrong expected root is a VerificationError."""
    entries = list(source.journal_bytes())
    target = stores("target")
    assert target.append_entries(entries[:4]) == 4
    before = target.table_digests()
    with pytest.raises(cg.VerificationError, match="OverallRoot at seq 10"):
        target.append_entries(entries, expect_root=(10, b"\x00" * 32))
    with pytest.raises(cg.CorruptionError, match="entry 5 is missing") as info:
        target.append_entries(entries[5:])
    assert getattr(info.value, "seq", None) == 6
    assert target.table_digests() == before
    assert target.append_entries(entries, expect_root=(10, source.overall_root())) == 6
    assert target.overall_root() == source.overall_root()
