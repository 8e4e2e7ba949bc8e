"""Ingest: the journaled per-source cursor (idempotent, resumable), chunking, the dedup
tiers, scopes, and bad inputs with typed errors that leave the store unchanged."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import cortexgraph as cg
from cortexgraph.errors import CorruptionError, ExtractionError, ReadOnlyError, ValidationError
from cortexgraph.extract import (
    CURSOR_NS,
    Candidate,
    ExtractionInput,
    Turn,
    chunk_turns,
    cursor_of,
    ingest,
    read_transcript,
)

TURNS = [
    Turn("user", "Never push directly to main."),
    Turn("assistant", "We decided to use SQLite with WAL mode for the cache."),
    Turn("user", "I prefer tabs over spaces in Go files."),
]


class Fixed:
    """A fake extractor that returns the same candidates for every chunk, and counts calls."""

    def __init__(self, *candidates: Candidate) -> None:
        self.candidates = list(candidates)
        self.calls: list[ExtractionInput] = []

    def extract(self, source: ExtractionInput) -> list[Candidate]:
        self.calls.append(source)
        return list(self.candidates)


def test_rerun_writes_nothing_and_longer_transcript_resumes(cx: cg.Cortex) -> None:
    """A second run over the same transcript journals nothing; a longer transcript is
    extracted from the cursor on (only its new turn reaches the extractor), and the cursor
    is one Event in the reserved namespace whose versions record the turns consumed."""
    first = ingest(cx, ExtractionInput(TURNS[:2]), source_id="s1")
    assert [cx.resolve(u).memory.type_name for u in first.written] == ["constraint", "fact"]
    seq = cx.seq
    again = ingest(cx, ExtractionInput(TURNS[:2]), source_id="s1")
    assert cx.seq == seq and again.written == () and again.turns == 0
    spy = Fixed(Candidate(type="preference", text="Tabs over spaces in Go files."))
    longer = ingest(cx, ExtractionInput(TURNS), source_id="s1", extractor=spy)
    assert [t.text for call in spy.calls for t in call.turns] == [TURNS[2].text]
    assert longer.turns == 1 and longer.cursor == 3 and len(longer.written) == 1
    cursor = cursor_of(cx, "s1")
    assert cursor.turns == 3 and cursor.uri is not None and cursor.uri.ns == CURSOR_NS
    assert cursor.uri.version == 2


def test_changed_transcript_is_refused_unless_restarted(cx: cg.Cortex) -> None:
    """A transcript whose extracted turns changed raises ExtractionError and writes
    nothing; restart=True extracts it again, and dedup keeps the known memory from being
    written twice."""
    ingest(cx, ExtractionInput(TURNS[:2]), source_id="s1")
    edited = [Turn("user", "Never push directly to main!"), TURNS[1]]
    before = cx.table_digests()
    with pytest.raises(ExtractionError, match="no longer starts with the 2 turns"):
        ingest(cx, ExtractionInput(edited), source_id="s1")
    assert cx.table_digests() == before
    report = ingest(cx, ExtractionInput(edited), source_id="s1", restart=True)
    assert report.written == () and len(report.duplicates) == 2


def test_sources_have_separate_cursors(cx: cg.Cortex) -> None:
    """Two source ids over the same turns each keep a cursor of their own."""
    ingest(cx, ExtractionInput(TURNS[:1]), source_id="a")
    ingest(cx, ExtractionInput(TURNS), source_id="b")
    assert (cursor_of(cx, "a").turns, cursor_of(cx, "b").turns, cursor_of(cx, "c").turns) == (
        1,
        3,
        0,
    )


def test_dedup_tiers(cx: cg.Cortex) -> None:
    """Against an existing memory: an unrelated candidate is new with no edge; a partly
    overlapping one is new with an active relates_to of its Jaccard strength; one at
    0.4-0.6 is new with a suggested edge; one at >= 0.6 is not written and is reported as
    a duplicate of the existing memory."""
    base = cx.write(cg.Fact(text="deploy pipeline runs tests lint build package upload"))
    cases = [
        ("fact", "grandmother bakes excellent apple pie", None),
        ("fact", "deploy pipeline runs slowly on mondays because caches expire", "active"),
        ("fact", "deploy pipeline runs tests lint quickly today", "suggested"),
        ("fact", "deploy pipeline runs tests lint build package upload nightly", "dup"),
    ]
    for n, (kind, text, want) in enumerate(cases):
        report = ingest(
            cx,
            ExtractionInput([Turn("user", text)]),
            source_id=f"t{n}",
            extractor=Fixed(Candidate(type=kind, text=text)),
        )
        if want == "dup":
            assert report.written == () and report.duplicates[0][1].id == base.id
            continue
        (uri,) = report.written
        edges = [e for e in cx.edges(uri) if e.dst.id == base.id]
        if want is None:
            assert edges == []
        else:
            (edge,) = edges
            assert edge.status == want and 0.1 <= edge.strength < 0.6


def test_repeated_candidates_in_one_answer_write_one_memory(cx: cg.Cortex) -> None:
    """An extractor that proposes the same memory twice gets one memory and a duplicate."""
    same = Candidate(type="constraint", text="Never push directly to main.")
    report = ingest(cx, ExtractionInput(TURNS[:1]), source_id="s", extractor=Fixed(same, same))
    assert len(report.written) == 1 and len(report.duplicates) == 1


def test_scope_global_needs_confidence_above_0_8(cx: cg.Cortex) -> None:
    """A global candidate goes to the global namespace only above confidence 0.8."""
    sure = Candidate(
        type="preference", text="Answers short, bullet points.", confidence=0.9, scope="global"
    )
    unsure = Candidate(
        type="preference", text="Maybe likes dark roast coffee.", confidence=0.5, scope="global"
    )
    report = ingest(
        cx, ExtractionInput(TURNS[:1]), source_id="s", ns="webshop", extractor=Fixed(sure, unsure)
    )
    assert [u.ns for u in report.written] == ["global", "webshop"]


def test_long_transcripts_are_chunked_and_committed_per_group(cx: cg.Cortex) -> None:
    """Turns go to the extractor in chunks of at most max_chunk_bytes; a turn larger than
    that is cut into pieces at character boundaries; every turn's text reaches the
    extractor exactly once."""
    turns = [Turn("user", f"Note {n}: " + "é" * 300) for n in range(6)]
    turns.append(Turn("assistant", "ü" * 1500))
    spy = Fixed()
    report = ingest(
        cx, ExtractionInput(turns), source_id="long", extractor=spy, max_chunk_bytes=1000
    )
    sizes = [sum(len(f"[{t.role}] {t.text}\n".encode()) for t in c.turns) for c in spy.calls]
    assert max(sizes) <= 1000 and report.chunks == len(spy.calls) > 4
    assert "".join(t.text for c in spy.calls for t in c.turns) == "".join(t.text for t in turns)
    assert cursor_of(cx, "long").turns == 7


def test_failure_in_a_later_group_keeps_earlier_whole_groups(cx: cg.Cortex) -> None:
    """When the extractor fails on the second group, the first group's memories and
    cursor are committed whole, and a rerun resumes at the failed group."""

    class FailSecond(Fixed):
        def extract(self, source: ExtractionInput) -> list[Candidate]:
            if len(self.calls) == 1:
                self.calls.append(source)
                raise ExtractionError("model overloaded")
            return super().extract(source)

    turns = [Turn("user", "a" * 700), Turn("user", "b" * 700)]
    ex = FailSecond(Candidate(type="fact", text="first chunk fact"))
    with pytest.raises(ExtractionError):
        ingest(cx, ExtractionInput(turns), source_id="g", extractor=ex, max_chunk_bytes=1000)
    assert cursor_of(cx, "g").turns == 1
    ex2 = Fixed(Candidate(type="fact", text="second chunk fact about other things"))
    report = ingest(cx, ExtractionInput(turns), source_id="g", extractor=ex2, max_chunk_bytes=1000)
    assert [c.turns[0].text[0] for c in ex2.calls] == ["b"] and len(report.written) == 1


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"source_id": ""}, "source_id"),
        ({"source_id": "x" * 1025}, "source_id"),
        ({"ns": CURSOR_NS}, "ns"),
        ({"ns": "Bad NS"}, "ns"),
        ({"global_ns": CURSOR_NS}, "global_ns"),
        ({"extractor": object()}, "extractor"),
        ({"source": [Turn("user", "hi there friend")]}, "source"),
        ({"max_chunk_bytes": 10}, "max_chunk_bytes"),
        ({"cosine": 1}, "cosine"),
        ({"extractor": Fixed(), "source": ExtractionInput([])}, None),
    ],
)
def test_bad_arguments_are_typed_and_write_nothing(
    cx: cg.Cortex, kwargs: dict[str, object], field: str | None
) -> None:
    """Each bad argument raises ValidationError naming it, with the store unchanged (the
    last row is the control: an empty transcript is fine and writes nothing)."""
    before = cx.table_digests()
    args: dict[str, object] = {"source": ExtractionInput(TURNS), "source_id": "s"}
    args.update(kwargs)
    if field is None:
        assert ingest(cx, **args).written == ()  # type: ignore[arg-type]
    else:
        with pytest.raises(ValidationError) as info:
            ingest(cx, **args)  # type: ignore[arg-type]
        assert info.value.field == field
    assert cx.table_digests() == before


def test_extractor_returning_non_candidates_is_refused(cx: cg.Cortex) -> None:
    """An extractor answering dicts instead of Candidates is a ValidationError (field
    ``candidates``) and nothing is written."""

    class Dicts:
        def extract(self, source: ExtractionInput) -> list[object]:
            return [{"type": "fact", "text": "x"}]

    before = cx.table_digests()
    with pytest.raises(ValidationError) as info:
        ingest(cx, ExtractionInput(TURNS), source_id="s", extractor=Dicts())  # type: ignore[arg-type]
    assert info.value.field == "candidates" and cx.table_digests() == before


def test_damaged_cursor_is_a_corruption_error(cx: cg.Cortex) -> None:
    """A cursor memory whose text was changed by hand is reported as corruption, not
    silently re-extracted."""
    ingest(cx, ExtractionInput(TURNS[:1]), source_id="s")
    cursor = cursor_of(cx, "s")
    assert cursor.uri is not None
    cx.update(cursor.uri, text="not json")
    with pytest.raises(CorruptionError, match="extraction cursor"):
        ingest(cx, ExtractionInput(TURNS), source_id="s")


def test_chunk_turns_rejects_bad_start() -> None:
    """A start beyond the transcript is a ValidationError naming ``start``."""
    with pytest.raises(ValidationError) as info:
        chunk_turns(TURNS, start=4)
    assert info.value.field == "start"


def test_read_transcript_reads_claude_code_and_plain_lines(tmp_path: Path) -> None:
    """Claude Code lines (string or block content, tool results, summaries) and plain
    role/text lines become turns."""
    lines = [
        {"type": "summary", "summary": "x"},
        {"type": "user", "message": {"role": "user", "content": "Never push to main."}},
        {
            "type": "assistant",
            "message": {
                "content": [
                    {"type": "text", "text": "Running tests."},
                    {"type": "tool_use", "name": "Bash", "input": {"command": "make test"}},
                ]
            },
        },
        {"type": "user", "message": {"content": [{"type": "tool_result", "content": "12 passed"}]}},
        {"role": "assistant", "text": "All good.", "at": 5},
    ]
    path = tmp_path / "t.jsonl"
    path.write_text("\n".join(json.dumps(line) for line in lines) + "\n\n", encoding="utf-8")
    turns = read_transcript(path)
    assert [(t.role, t.text) for t in turns] == [
        ("user", "Never push to main."),
        ("assistant", 'Running tests.\n[tool Bash] {"command": "make test"}'),
        ("tool", "12 passed"),
        ("assistant", "All good."),
    ]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b'{"role": "user", "text": "ok"}\n{"role": "user", "text": "tru', "line 2: not JSON"),
        (b'{"role": "user", "text": "ok"}\n\xff\xfe\n', "line 2: not UTF-8"),
        (b"[1, 2]\n", "line 1: not a JSON object"),
        (b'{"role": "robot", "text": "x"}\n', "line 1: role"),
        (b'{"type": "user", "message": "hi"}\n', "line 1: message"),
        (b'{"type": 7}\n', "line 1"),
    ],
)
def test_bad_transcripts_name_the_line(tmp_path: Path, content: bytes, message: str) -> None:
    """A truncated line, invalid UTF-8, a non-object, an unknown role, a message that is
    not an object and a line of neither shape raise ValidationError naming the line."""
    path = tmp_path / "bad.jsonl"
    path.write_bytes(content)
    with pytest.raises(ValidationError, match=message) as info:
        read_transcript(path)
    assert info.value.field == "transcript"


def test_missing_transcript_file_is_a_validation_error(tmp_path: Path) -> None:
    """A path that does not exist is a ValidationError naming the transcript."""
    with pytest.raises(ValidationError, match="cannot read") as info:
        read_transcript(tmp_path / "nope.jsonl")
    assert info.value.field == "transcript"


class SameVector:
    """A fake embedder that gives every text the same vector: cosine 1 for any pair."""

    name, dim = "same-vector-v1", 4

    def embed(self, texts: list[str]) -> np.ndarray:
        return np.ones((len(texts), self.dim), dtype=np.float32) / 2


@pytest.mark.parametrize(("cosine", "duplicate"), [(False, False), (True, True)])
def test_cosine_judges_the_uncertain_band(tmp_path: Path, cosine: bool, duplicate: bool) -> None:
    """A candidate whose Jaccard similarity is in the uncertain band (about 0.3) is a new
    memory with an edge by Jaccard alone; with cosine=True the embedder (here: cosine 1)
    judges it, and it becomes a duplicate of the existing memory."""
    with cg.open(tmp_path, "a", sync=False, embedder=SameVector()) as cx:
        base = cx.write(cg.Fact(text="release notes live in the changelog file"), at=1)
        text = "the changelog file is generated from commit messages by towncrier"
        report = ingest(
            cx,
            ExtractionInput([Turn("user", text)]),
            source_id="c",
            at=2,
            cosine=cosine,
            extractor=Fixed(Candidate(type="fact", text=text)),
        )
        if duplicate:
            assert report.written == () and report.duplicates[0][1].id == base.id
        else:
            (uri,) = report.written
            (edge,) = cx.edges(uri)
            assert edge.dst.id == base.id and 0.1 <= edge.strength < 0.4


def test_read_only_handle_is_refused_before_extracting(tmp_path: Path) -> None:
    """On a read-only handle ingest raises ReadOnlyError before calling the extractor."""
    cg.open(tmp_path, "a", sync=False).close()
    spy = Fixed()
    with cg.open(tmp_path, "a", readonly=True) as cx, pytest.raises(ReadOnlyError):
        ingest(cx, ExtractionInput(TURNS), source_id="s", extractor=spy)
    assert spy.calls == []


def test_cursor_and_memories_are_journaled(cx: cg.Cortex) -> None:
    """The cursor lives in the journal: after a rebuild from the journal alone the root
    is the same, the cursor reads the same, and a rerun still writes nothing."""
    ingest(cx, ExtractionInput(TURNS), source_id="s")
    root, cursor = cx.overall_root(), cursor_of(cx, "s")
    cx.rebuild()
    assert cx.overall_root() == root and cursor_of(cx, "s") == cursor
    seq = cx.seq
    assert ingest(cx, ExtractionInput(TURNS), source_id="s").written == () and cx.seq == seq


def test_transcript_skips_sidechains_meta_and_the_bulk_of_tool_output(tmp_path: Path) -> None:
    """Sidechain and meta lines are not the conversation: they are passed over; a long tool
    result keeps only its head; a cut-short last line is an error unless the reader is told
    the transcript is still being written."""
    from cortexgraph.extract.chunking import TOOL_RESULT_CHARS, read_transcript

    lines = [
        {"type": "user", "message": {"role": "user", "content": "We decided to use Postgres."}},
        {
            "type": "user",
            "isMeta": True,
            "message": {"role": "user", "content": "Caveat: the messages below were generated."},
        },
        {
            "type": "assistant",
            "isSidechain": True,
            "message": {"role": "assistant", "content": "We decided to use Redis."},
        },
        {
            "type": "user",
            "message": {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": "t", "content": "y" * 50_000}],
            },
        },
    ]
    path = tmp_path / "t.jsonl"
    body = "".join(json.dumps(line) + "\n" for line in lines)
    path.write_text(body + '{"type": "user", "mess')
    with pytest.raises(ValidationError, match="line 5: not JSON"):
        read_transcript(path)
    turns = read_transcript(path, partial_tail=True)
    assert [t.role for t in turns] == ["user", "tool"]
    assert turns[0].text == "We decided to use Postgres."
    assert turns[1].text.startswith("y" * TOOL_RESULT_CHARS + "\n[... 48,000 more characters]")
    path.write_text(body.replace("\n", "\n{not json}\n", 1))
    with pytest.raises(ValidationError, match="line 2: not JSON"):
        read_transcript(path, partial_tail=True)  # only the last line may be cut short
