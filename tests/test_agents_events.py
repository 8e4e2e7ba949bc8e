"""Agent event files into memory: what ingest_events records, idempotence, resumption,
garbage lines, determinism, bad inputs, and follow tailing a file being written.

The fixtures under ``tests/fixtures/agents/events`` are written from the documented file
format: four runs of three agents, a continuation (by session and chat id), two concurrent
tool calls, an error run and garbage lines.
"""

from __future__ import annotations

import shutil
import threading
from pathlib import Path

import pytest

import cortexgraph as cg
from cortexgraph.integrations.agents import CURSOR_NS, follow, ingest_events

FIXTURES = Path(__file__).parent / "fixtures" / "agents" / "events"
T0 = 1_700_000_000_000


@pytest.fixture
def cx(tmp_path: Path):
    with cg.open(tmp_path / "store", "runner", clock=cg.ManualClock(T0)) as handle:
        yield handle


def _run(cx: cg.Cortex, agent_id: str) -> cg.Record:
    hits = cx.find(cg.Q.tag(f"run-{agent_id}") & cg.Q.tag("agent-run"), limit=2).hits
    assert len(hits) == 1
    return hits[0].record


def _linked(cx: cg.Cortex, run: cg.Record, relation: str) -> list[cg.Record]:
    """The memories that point at ``run`` with ``relation``, ordered by text."""
    found = [cx.resolve(e.src) for e in cx.edges(run.uri, direction="in") if e.relation == relation]
    return sorted(found, key=lambda r: r.memory.text)


def _state(cx: cg.Cortex) -> list[tuple[object, ...]]:
    """Every agent memory's content and edges (by the target's text), independent of how
    many batches wrote it (ids depend on the journal position, so they are left out)."""
    where = cg.Q.tag("agent-run") | cg.Q.tag("tool-call") | cg.Q.tag("agent-result")
    hits = cx.find(where | cg.Q.tag("agent-error"), limit=1000).hits
    rows = []
    for hit in hits:
        m = hit.record.memory
        edges = sorted((e.relation, cx.resolve(e.dst).memory.text) for e in cx.edges(hit.uri))
        rows.append((m.type_name, m.text, m.summary, m.tags, m.valid_from, m.valid_to, edges))
    return sorted(rows, key=repr)


def test_fixture_directory_records_runs_tools_results_errors_and_continuations(cx) -> None:
    """One ingestion of the fixtures records each run in its facet's namespace, pairs the
    concurrent tool calls by call_id with their durations, derives each result from its run,
    tags the error run, links the continuation, and reports the four garbage lines."""
    report = ingest_events(cx, FIXTURES)
    assert (report.files, report.lines, report.events) == (4, 26, 22)
    assert [(g[0], g[1]) for g in report.garbage] == [
        ("reviewer/1700000050000", 2),
        ("reviewer/1700000050000", 4),
        ("reviewer/1700000050000", 6),
        ("reviewer/1700000050000", 7),
    ]
    assert "unknown event 'bogus'" in report.garbage[2][2]
    assert [u.ns for u in report.runs] == ["webshop", "default", "webshop", "ops"]

    first = _run(cx, "1700000000000")
    assert first.memory.text == "Find why the nightly deploy failed"
    assert first.memory.kind == "run" and first.memory.agent_id == "1700000000000"
    assert {
        "finished",
        "agent-default",
        "provider-openai",
        "model-gpt-4o",
        "session-sess-a",
    } <= set(first.memory.tags)
    assert "running" not in first.memory.tags
    tools = _linked(cx, first, "relates_to")
    assert [(t.memory.call_id, t.memory.valid_to - t.memory.valid_from) for t in tools] == [
        ("read_file-1", 150),
        ("search_journal-1", 500),
    ]
    assert all("done" in t.memory.tags for t in tools)
    assert "migration timed out" in tools[1].memory.text  # the result is kept with the call
    derived = _linked(cx, first, "derived_from")  # its result and the continuation run
    assert [r.memory.type_name for r in derived] == ["event", "fact"]
    result = derived[1]
    assert result.memory.text.startswith("The nightly deploy failed because")

    failed = _run(cx, "1700000050000")
    assert {"failed", "error"} <= set(failed.memory.tags)
    errors = [r for r in _linked(cx, failed, "relates_to") if r.memory.kind == "error"]
    assert len(errors) == 1 and "error" in errors[0].memory.tags
    assert errors[0].memory.text.startswith("provider quota exceeded\n\nTraceback")

    continuation = _run(cx, "1700000100000")
    continued = [e.dst.id for e in cx.edges(continuation.uri) if e.relation == "derived_from"]
    assert continued == [first.uri.id]
    assert {"session-sess-a", "chat-1700000000000"} <= set(continuation.memory.tags)

    handoff = _run(cx, "1700000200000")
    assert "handoff-incidentanalyst" in handoff.memory.tags and handoff.uri.ns == "ops"


def test_ingesting_again_writes_nothing(cx) -> None:
    """A second ingestion of unchanged files consumes no line and journals no entry."""
    ingest_events(cx, FIXTURES)
    seq, root = cx.seq, cx.overall_root()
    again = ingest_events(cx, FIXTURES)
    assert (again.lines, again.events, again.written, again.garbage) == (0, 0, (), ())
    assert (cx.seq, cx.overall_root()) == (seq, root)


def test_cursors_live_in_their_reserved_namespace(cx) -> None:
    """Each file's cursor is one memory in the cursor namespace, keyed by name/ts, and the
    namespace is refused as a target for runs."""
    ingest_events(cx, FIXTURES)
    cursors = cx.find(cg.Q.tag("agent-events-cursor") & cg.Q.ns(CURSOR_NS), limit=10).hits
    assert len(cursors) == 4
    with pytest.raises(cg.ValidationError) as caught:
        ingest_events(cx, FIXTURES, ns=CURSOR_NS)
    assert caught.value.field == "ns"


def test_resuming_an_active_file_gives_the_same_memories(tmp_path: Path) -> None:
    """A run ingested line by line while its file is active, then renamed, ends with the
    same memories and edges as the finished file ingested at once; a last line without
    its newline waits for the next call."""
    lines = (FIXTURES / "default" / "1700000000000.jsonl").read_bytes().splitlines(keepends=True)
    whole = tmp_path / "whole" / "default"
    whole.mkdir(parents=True)
    (whole / "1700000000000.jsonl").write_bytes(b"".join(lines))
    steps = tmp_path / "steps" / "default"
    steps.mkdir(parents=True)
    active = steps / "1700000000000_active.jsonl"
    with cg.open(tmp_path / "a", "runner", clock=cg.ManualClock(T0)) as cx:
        ingest_events(cx, whole.parent)
        expected = _state(cx)
    with cg.open(tmp_path / "b", "runner", clock=cg.ManualClock(T0)) as cx:
        for line in lines:
            with active.open("ab") as out:
                out.write(line[:-5])  # a line cut short: not consumed yet
            assert ingest_events(cx, steps.parent).lines == 0
            with active.open("ab") as out:
                out.write(line[-5:])
            assert ingest_events(cx, steps.parent).lines == 1
        active.rename(steps / "1700000000000.jsonl")
        assert ingest_events(cx, steps.parent).lines == 0
        actual = _state(cx)
    assert actual == expected and len(actual) == 4  # the run, two tool calls, the result


def test_same_files_give_the_same_journal_bytes(tmp_path: Path) -> None:
    """Ingestion is deterministic: two fresh stores fed the same files journal identical
    bytes (every time comes from the events' ts)."""
    journals = []
    for name in ("one", "two"):
        with cg.open(tmp_path / name, "runner", clock=cg.ManualClock(T0)) as cx:
            ingest_events(cx, FIXTURES)
            journals.append(list(cx.journal_bytes()))
    assert journals[0] == journals[1] and len(journals[0]) > 20


def test_garbage_never_raises(cx, tmp_path: Path) -> None:
    """Binary noise, a wrong agent_id, a bad ts and an oversized tag value are garbage
    lines with reasons; the valid lines around them are recorded."""
    folder = tmp_path / "ev" / "noisy"
    folder.mkdir(parents=True)
    (folder / "1700000300000.jsonl").write_bytes(
        b'{"event":"request","ts":1700000300000,"prompt":"p","name":"noisy"}\n'
        b"\xff\xfe\x00garbage\n"
        b'{"event":"start","ts":1700000300001,"agent_id":"999"}\n'
        b'{"event":"start","ts":-5}\n'
        b'{"event":"finish","ts":1.5e12}\n'
        b"\n"
        b'{"event":"finish","ts":1700000300009,"result":"done"}'
    )
    report = ingest_events(cx, tmp_path / "ev")
    assert report.events == 2 and [g[1] for g in report.garbage] == [2, 3, 4, 5]
    assert "is not the file's" in report.garbage[1][2]
    run = _run(cx, "1700000300000")
    assert "finished" in run.memory.tags
    assert [r.memory.text for r in _linked(cx, run, "derived_from")] == ["done"]


def test_a_file_shorter_than_its_cursor_is_reported(cx, tmp_path: Path) -> None:
    """A file cut below what was ingested is reported on each call and writes nothing;
    what was ingested from it stays."""
    shutil.copytree(FIXTURES, tmp_path / "ev")
    ingest_events(cx, tmp_path / "ev")
    path = tmp_path / "ev" / "researcher" / "1700000200000.jsonl"
    path.write_bytes(path.read_bytes()[:100])
    seq = cx.seq
    for _ in range(2):
        report = ingest_events(cx, tmp_path / "ev")
        assert [(g[0], g[1]) for g in report.garbage] == [("researcher/1700000200000", 8)]
        assert "fewer than the" in report.garbage[0][2] and cx.seq == seq
    assert "finished" in _run(cx, "1700000200000").memory.tags


def test_a_slice_of_garbage_is_dated_by_the_file_not_the_clock(tmp_path: Path) -> None:
    """Lines that are all garbage still move the cursor, at the file's own time: two
    stores with different clocks journal the same bytes."""
    folder = tmp_path / "ev" / "noise"
    folder.mkdir(parents=True)
    (folder / "1700000400000.jsonl").write_text("nope\n[]\n")
    journals = []
    for n, now in enumerate((T0, T0 + 999_999)):
        with cg.open(tmp_path / f"s{n}", "runner", clock=cg.ManualClock(now)) as cx:
            assert len(ingest_events(cx, tmp_path / "ev").garbage) == 2
            journals.append(list(cx.journal_bytes()))
    assert journals[0] == journals[1]


@pytest.mark.parametrize(
    ("path", "field"),
    [("missing-dir", "path"), ("default/notes.jsonl", "path")],
)
def test_bad_paths_are_validation_errors(cx, tmp_path: Path, path: str, field: str) -> None:
    """A path that is neither a directory nor an event file is refused, writing nothing."""
    (tmp_path / "default").mkdir()
    (tmp_path / "default" / "notes.jsonl").write_text("{}\n")
    seq = cx.seq
    with pytest.raises(cg.ValidationError) as caught:
        ingest_events(cx, tmp_path / path)
    assert caught.value.field == field and cx.seq == seq


def test_read_only_handle_is_refused(tmp_path: Path) -> None:
    """Ingestion needs a writable store."""
    cg.open(tmp_path / "s", "runner").close()
    with cg.open(tmp_path / "s", "runner", readonly=True) as cx, pytest.raises(cg.ReadOnlyError):
        ingest_events(cx, FIXTURES)


def test_follow_picks_up_appended_lines_and_stops_at_the_rename(cx, tmp_path: Path) -> None:
    """While follow runs, a writer thread appends a run's lines in two parts (waiting each
    time until follow reports it consumed them) and then renames the file; follow records
    both parts in separate passes and returns once the file is renamed."""
    lines = (FIXTURES / "default" / "1700000000000.jsonl").read_bytes().splitlines(keepends=True)
    folder = tmp_path / "ev" / "default"
    folder.mkdir(parents=True)
    active = folder / "1700000000000_active.jsonl"
    active.write_bytes(lines[0])
    consumed = threading.Condition()
    passes: list[int] = []
    failures: list[BaseException] = []

    def on_report(report) -> None:
        with consumed:
            passes.append(report.lines)
            consumed.notify_all()

    def wait_for(total: int) -> None:
        with consumed:
            if not consumed.wait_for(lambda: sum(passes) >= total, timeout=30):
                raise TimeoutError(f"follow did not consume {total} lines")

    def writer() -> None:
        try:
            wait_for(1)
            with active.open("ab") as out:
                out.write(b"".join(lines[1:4]))
            wait_for(4)
            with active.open("ab") as out:
                out.write(b"".join(lines[4:]))
            active.rename(folder / "1700000000000.jsonl")
        except BaseException as error:  # reported by the test thread
            failures.append(error)

    thread = threading.Thread(target=writer)
    thread.start()
    report = follow(cx, tmp_path / "ev", interval=0.01, timeout=60, on_report=on_report)
    thread.join()
    assert failures == []
    assert report.lines == len(lines) == 8 and report.events == 8
    # the request alone first; the rest came in at least two later passes (the writer
    # appended the last part only after follow had consumed the middle one)
    assert passes[0] == 1 and len(passes) >= 3 and sum(passes) == 8
    assert "finished" in _run(cx, "1700000000000").memory.tags
    assert not list(folder.glob("*_active.jsonl"))


def test_follow_with_nothing_active_returns_after_one_pass(cx, tmp_path: Path) -> None:
    """Finished files only: follow ingests them and returns at once."""
    shutil.copytree(FIXTURES, tmp_path / "ev")
    report = follow(cx, tmp_path / "ev", interval=0.01)
    assert report.events == 22


@pytest.mark.parametrize("interval", [0, -1, 61, "fast"])
def test_follow_rejects_bad_intervals(cx, tmp_path: Path, interval: object) -> None:
    """The pause between passes must be a positive number of seconds up to a minute."""
    with pytest.raises(cg.ValidationError) as caught:
        follow(cx, tmp_path, interval=interval)  # type: ignore[arg-type]
    assert caught.value.field == "interval"


def test_small_batches_record_the_same_memories(tmp_path: Path, monkeypatch) -> None:
    """With batches of three lines (files split across batches, and batches spanning
    files) the fixtures give the same memories and edges as with the default batches."""
    from cortexgraph.integrations.agents import events

    with cg.open(tmp_path / "big", "runner", clock=cg.ManualClock(T0)) as cx:
        ingest_events(cx, FIXTURES)
        expected = _state(cx)
    monkeypatch.setattr(events, "_LINES_PER_BATCH", 3)
    with cg.open(tmp_path / "small", "runner", clock=cg.ManualClock(T0)) as cx:
        report = ingest_events(cx, FIXTURES)
        assert (report.lines, report.events, len(report.runs)) == (26, 22, 4)
        assert _state(cx) == expected
        assert ingest_events(cx, FIXTURES).lines == 0


def test_many_files_are_found_again_by_their_cursors(cx, tmp_path: Path) -> None:
    """More files than one cursor query covers (64): a second pass still writes nothing."""
    for n in range(70):
        folder = tmp_path / "ev" / f"agent{n % 3}"
        folder.mkdir(parents=True, exist_ok=True)
        ts = T0 + n
        (folder / f"{ts}.jsonl").write_text(
            f'{{"event":"request","ts":{ts},"prompt":"task {n}"}}\n'
            f'{{"event":"finish","ts":{ts + 1},"result":"answer {n}"}}\n'
        )
    assert ingest_events(cx, tmp_path / "ev").events == 140
    seq = cx.seq
    again = ingest_events(cx, tmp_path / "ev")
    assert (again.files, again.lines, cx.seq) == (70, 0, seq)
