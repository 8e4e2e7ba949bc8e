"""``cortexgraph hook <Event>`` as Claude Code runs it: a subprocess with the event's JSON on
stdin, in a temporary git repository, over a recorded session transcript in Claude Code's
JSON Lines shape (text blocks, tool_use and tool_result blocks, a summary line)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import cortexgraph as cg
from claude_code_support import SESSION, hook, session_start, stop, transcript
from cortexgraph.integrations.claude_code.stores import project_store
from cortexgraph.integrations.claude_code.surface import END_MARK, START_MARK, compute_surface


def log_lines(repo: Path) -> list[str]:
    log = repo / ".memory" / "cortex.log"
    return log.read_text().splitlines() if log.exists() else []


def test_a_session_is_learned_surfaced_and_recalled(repo: Path, tmp_path: Path) -> None:
    """Stop extracts the session's decision, rule and gotcha into the project store; the
    next SessionStart prints them as additionalContext and writes them between the markers
    of the surface file, keeping its other lines; a prompt about migrations gets the rule
    that is not already on the surface... or, when it is, nothing twice."""
    done = stop(repo, transcript(tmp_path))
    assert (done.returncode, done.stdout, log_lines(repo)) == (0, "", [])
    where = project_store(repo)
    with cg.open(where.root, where.actor, readonly=True) as cx:
        texts = {
            h.record.memory.text: type(h.record.memory)
            for h in cx.find(cg.Q.tag("decision") | cg.Q.tag("gotcha") | cg.Q.tag("rule"), limit=20)
        }
    assert (
        texts["We decided to use PostgreSQL instead of MySQL for the billing service."] is cg.Fact
    )
    assert any(
        t.startswith("Gotcha: the login page") and k is cg.Constraint for t, k in texts.items()
    )
    assert any("migrations from CI" in t and k is cg.Constraint for t, k in texts.items())

    surface_file = repo / ".claude" / "cortex-memory.local.md"
    assert "PostgreSQL instead of MySQL" in surface_file.read_text()  # Stop regenerated it
    surface_file.write_text("# my notes\nkeep me\n")
    start = session_start(repo)
    assert start.returncode == 0
    context = json.loads(start.stdout)["hookSpecificOutput"]
    assert context["hookEventName"] == "SessionStart"
    assert "PostgreSQL instead of MySQL" in context["additionalContext"]
    assert "Safari" in context["additionalContext"]
    written = surface_file.read_text()
    assert written.startswith("# my notes\nkeep me\n")
    assert (
        written[written.index(START_MARK) + len(START_MARK) : written.index(END_MARK)].strip()
        == context["additionalContext"]
    )

    again = session_start(repo, "s3", "resume")
    assert again.stdout == start.stdout  # the same store gives the same bytes

    def ask(text: str) -> subprocess.CompletedProcess[str]:
        payload = {"session_id": "s2", "cwd": str(repo), "prompt": text}
        return hook("UserPromptSubmit", {**payload, "hook_event_name": "UserPromptSubmit"}, repo)

    prompt = ask("which database does billing use?")
    assert prompt.returncode == 0
    assert prompt.stdout == ""  # the PostgreSQL decision is on the surface already
    surface_file.write_text("")  # a surface without it: the prompt now brings it
    prompt = ask("which database does billing use?")
    assert "PostgreSQL" in json.loads(prompt.stdout)["hookSpecificOutput"]["additionalContext"]


def test_extraction_resumes_and_never_repeats(repo: Path, tmp_path: Path) -> None:
    """Stop, then SessionEnd over the same transcript journals nothing more; a longer
    transcript adds only its new turn."""
    path = transcript(tmp_path)
    stop(repo, path)
    where = project_store(repo)
    with cg.open(where.root, where.actor, readonly=True) as cx:
        seq = cx.stats().seq
    stop(repo, path, "SessionEnd")
    with cg.open(where.root, where.actor, readonly=True) as cx:
        assert cx.stats().seq == seq
    longer = [
        *SESSION,
        {"type": "user", "message": {"role": "user", "content": "I prefer tabs over spaces."}},
    ]
    stop(repo, transcript(tmp_path, longer), "PreCompact")
    with cg.open(where.root, where.actor, readonly=True) as cx:
        prefs = cx.find(cg.Q.tag("preference"), limit=5)
        assert [h.record.memory.text for h in prefs] == ["I prefer tabs over spaces."]


@pytest.mark.parametrize(
    ("case", "stdin"),
    [
        ("malformed stdin", "{not json"),
        ("not an object", "[1, 2]"),
        ("missing transcript", None),
        ("garbage transcript lines", "garbage"),
    ],
)
def test_bad_input_exits_0_with_one_log_line_and_nothing_written(
    repo: Path, tmp_path: Path, case: str, stdin: str | None
) -> None:
    """A hook never disrupts the session: exit 0, nothing on stdout, one line in the log,
    and no memory written."""
    if stdin is None:
        payload: Any = json.dumps(
            {"session_id": "s1", "transcript_path": str(tmp_path / "gone.jsonl"), "cwd": str(repo)}
        )
    elif stdin == "garbage":
        bad = tmp_path / "bad.jsonl"
        bad.write_text(json.dumps(SESSION[1]) + "\n{{{ not json\n")
        payload = json.dumps({"session_id": "s1", "transcript_path": str(bad), "cwd": str(repo)})
    else:
        payload = stdin
    done = hook("Stop", payload, repo)
    assert (done.returncode, done.stdout) == (0, "")
    assert len(log_lines(repo)) == 1, case
    where = project_store(repo)
    if (where.root / where.actor).exists():
        with cg.open(where.root, where.actor, readonly=True) as cx:
            assert cx.stats().seq == 0


def test_outside_a_repository_extraction_goes_without_git(tmp_path: Path) -> None:
    """A cwd that is not a git repository: the memories are extracted all the same."""
    plain = tmp_path / "plain"
    plain.mkdir()
    done = stop(plain, transcript(tmp_path))
    assert (done.returncode, log_lines(plain)) == (0, [])
    with cg.open(project_store(plain).root, "project", readonly=True) as cx:
        assert len(cx.find(cg.Q.tag("decision"), limit=5)) == 1


def test_an_unwritable_memory_location_exits_0(repo: Path, tmp_path: Path) -> None:
    """When ``.memory`` cannot be a directory (a file is in the way), the store cannot be
    opened nor the log written: the hook still exits 0 and prints nothing on stdout (its
    log line goes to stderr), and the file in the way is untouched. (A read-only directory
    is the same failure for a non-root user; the tests run as root, which ignores
    permissions.)"""
    (repo / ".memory").write_text("in the way")
    done = stop(repo, transcript(tmp_path))
    assert (done.returncode, done.stdout) == (0, "")
    (line,) = done.stderr.splitlines()  # the log line, where it could go
    assert "Stop:" in line
    assert (repo / ".memory").read_text() == "in the way"


def test_the_surface_keeps_within_its_token_ceiling(tmp_path: Path) -> None:
    """Many memories in every category: the surface stays within 500 tokens and each
    category within its line budget."""
    with cg.open(tmp_path / "s", "project", clock=cg.ManualClock(1_700_000_000_000)) as cx:
        for i in range(60):
            cx.write(
                cg.Fact(text=f"decision number {i} about the billing service", tags=("decision",))
            )
            cx.write(cg.Constraint(text=f"gotcha number {i} in the login page", tags=("gotcha",)))
        surface = compute_surface([("project", cx)], None)
    assert sum(cg.estimate_tokens(line) for line in surface.splitlines()) <= 500
    assert sum(1 for line in surface.splitlines() if line.startswith("- decision")) <= 25


def test_two_stop_hooks_at_once_lose_nothing(repo: Path, tmp_path: Path) -> None:
    """Two sessions' Stop hooks on one project at the same moment: both sessions' memories
    are there, each once, and the store verifies (the writer lock serialises the batches;
    each batch carries its cursor)."""
    other = [
        {
            "type": "user",
            "message": {"role": "user", "content": "We decided to deploy on Fridays only."},
        },
        {
            "type": "user",
            "message": {
                "role": "user",
                "content": "Gotcha: the cache must be warmed before a deploy.",
            },
        },
    ]
    sessions = []
    for name, lines in (("s1", SESSION), ("s2", other)):
        (tmp_path / name).mkdir()
        sessions.append((name, transcript(tmp_path / name, lines)))
    env = {**os.environ, "PYTHONPATH": str(Path(cg.__file__).parent.parent)}
    procs = []
    for session, path in sessions:
        payload = tmp_path / f"{session}.json"
        payload.write_text(
            json.dumps({"session_id": session, "transcript_path": str(path), "cwd": str(repo)})
        )
        with payload.open() as stdin:  # both start before either is waited for
            procs.append(
                subprocess.Popen(
                    [sys.executable, "-m", "cortexgraph.cli", "hook", "Stop"],
                    stdin=stdin,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    text=True,
                    cwd=repo,
                    env=env,
                )
            )
    outputs = [proc.communicate(timeout=120) for proc in procs]
    assert [proc.returncode for proc in procs] == [0, 0]
    assert outputs == [("", ""), ("", "")]
    assert log_lines(repo) == []
    where = project_store(repo)
    with cg.open(where.root, where.actor, readonly=True) as cx:
        decisions = sorted(h.record.memory.text for h in cx.find(cg.Q.tag("decision"), limit=10))
    assert decisions == [
        "We decided to deploy on Fridays only.",
        "We decided to use PostgreSQL instead of MySQL for the billing service.",
    ]
    report = cg.verify(where.root)
    assert report.ok, report


@pytest.mark.slow
def test_a_20_mb_transcript_is_extracted_in_bounded_time(repo: Path, tmp_path: Path) -> None:
    """A 20 MB session (tool results of 20 KB each between repeated turns) exits 0 without
    a log line, and its repeated decision is one memory (dedup), not thousands."""
    turn = {
        "type": "user",
        "message": {
            "role": "user",
            "content": "We decided to keep the cache warm before each deploy. " * 3,
        },
    }
    tool = {
        "type": "user",
        "message": {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "t", "content": "x" * 20_000}],
        },
    }
    path = tmp_path / "big.jsonl"
    size = 0
    with path.open("w") as out:
        for i in range(100_000):
            line = json.dumps(tool if i % 3 == 0 else turn) + "\n"
            out.write(line)
            size += len(line)
            if size >= 20 * 1024 * 1024:
                break
    done = stop(repo, path)
    assert (done.returncode, done.stdout, log_lines(repo)) == (0, "", [])
    where = project_store(repo)
    with cg.open(where.root, where.actor, readonly=True) as cx:
        assert len(cx.find(cg.Q.tag("decision"), limit=10)) == 1


# -- the surface's size and freshness, as SessionStart prints it ----------------------------

REGIONS = (
    "amsterdam",
    "berlin",
    "chicago",
    "dublin",
    "frankfurt",
    "geneva",
    "helsinki",
    "istanbul",
    "jakarta",
    "kyoto",
    "lisbon",
    "madrid",
    "nairobi",
    "oslo",
    "paris",
    "quebec",
    "riga",
    "santiago",
    "tokyo",
    "utrecht",
    "vienna",
    "warsaw",
    "york",
    "zurich",
)


def fill(repo: Path, memories: list[cg.Memory]) -> None:
    """Write ``memories`` straight into the project store of ``repo``."""
    where = project_store(repo)
    with cg.open(where.root, where.actor, create=True) as cx:
        for memory in memories:
            cx.write(memory)


def start_surface(repo: Path) -> str:
    """What SessionStart prints as additionalContext for ``repo`` (checked to be there)."""
    done = session_start(repo, "s")
    assert done.returncode == 0, done.stderr
    text: str = json.loads(done.stdout)["hookSpecificOutput"]["additionalContext"]
    return text


def test_the_surface_ceiling_counts_the_whole_printed_text(repo: Path) -> None:
    """A store with more than the surface can hold in several categories: what
    SessionStart prints, counted as a whole (its line breaks included), is 300-500 tokens,
    and no category has more lines than its budget."""
    memories: list[cg.Memory] = []
    for i, region in enumerate(REGIONS):
        memories.append(
            cg.Fact(text=f"We decided {region} bills in its own currency.", tags=("decision",))
        )
        memories.append(
            cg.Constraint(text=f"Turns out {region} invoices need a VAT id.", tags=("gotcha",))
        )
        memories.append(
            cg.Fact(text=f"The {region} ledger lives in shard {i}.", tags=("architecture",))
        )
    fill(repo, memories)
    surface = start_surface(repo)
    assert 300 <= cg.estimate_tokens(surface) <= 500, cg.estimate_tokens(surface)
    lines = surface.splitlines()
    assert sum("We decided" in line for line in lines) <= 25
    assert sum("Turns out" in line for line in lines) <= 20
    assert sum("ledger lives in" in line for line in lines) <= 25


def test_the_surface_overflows_into_unused_budget_to_reach_300_tokens(repo: Path) -> None:
    """A store whose memories all fall in one category with a small line budget (context:
    15 lines, about 250 tokens of these): high-value memories overflow into the budget the
    other categories leave unused, so the surface still reaches 300 tokens (and stays
    within 500)."""
    fill(
        repo,
        [
            cg.Fact(
                text=f"The {region} office runs its billing reports every Monday at nine.",
                tags=("context",),
                confidence=0.95,
                priority=9,
            )
            for region in REGIONS
        ],
    )
    surface = start_surface(repo)
    assert 300 <= cg.estimate_tokens(surface) <= 500, (cg.estimate_tokens(surface), surface)


def test_a_new_memory_shows_on_the_next_surface(repo: Path, tmp_path: Path) -> None:
    """A surface printed (and cached) at one SessionStart is not served again once a Stop
    has learned something new: the next SessionStart carries the new memory."""
    stop(repo, transcript(tmp_path))
    first = start_surface(repo)
    assert "deploy on Fridays" not in first
    later = [
        {
            "type": "user",
            "message": {"role": "user", "content": "We decided to deploy on Fridays only."},
        }
    ]
    (tmp_path / "later").mkdir()
    done = hook(
        "Stop",
        {
            "session_id": "s-later",
            "transcript_path": str(transcript(tmp_path / "later", later)),
            "cwd": str(repo),
            "hook_event_name": "Stop",
        },
        repo,
    )
    assert (done.returncode, log_lines(repo)) == (0, [])
    assert "We decided to deploy on Fridays only." in start_surface(repo)


def test_a_prompt_records_access_to_what_it_injects(repo: Path, tmp_path: Path) -> None:
    """UserPromptSubmit journals an access of the memories it injects (recall's late
    binding, which feeds their ranking and restores archived ones); a prompt that finds
    nothing writes nothing."""
    stop(repo, transcript(tmp_path))
    where = project_store(repo)
    (repo / ".claude" / "cortex-memory.local.md").write_text("")  # nothing on the surface

    def ask(text: str) -> subprocess.CompletedProcess[str]:
        payload = {"session_id": "s2", "cwd": str(repo), "prompt": text}
        return hook("UserPromptSubmit", {**payload, "hook_event_name": "UserPromptSubmit"}, repo)

    with cg.open(where.root, where.actor, readonly=True) as cx:
        before = cx.stats().seq
    assert ask("zebra quantum marmalade").stdout == ""
    with cg.open(where.root, where.actor, readonly=True) as cx:
        assert cx.stats().seq == before
    asked = ask("which database does billing use?")
    assert "PostgreSQL" in json.loads(asked.stdout)["hookSpecificOutput"]["additionalContext"]
    with cg.open(where.root, where.actor, readonly=True) as cx:
        assert cx.stats().seq > before
    assert log_lines(repo) == []
