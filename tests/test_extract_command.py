"""CommandExtractor against a real subprocess: a small script put on PATH as
``fake-claude`` stands in for ``claude -p``. Its behaviour is chosen by the environment
variable FAKE_CLAUDE_MODE; it saves the prompt it received next to itself."""

from __future__ import annotations

import json
import os
import stat
import sys
from pathlib import Path

import pytest

import cortexgraph as cg
from cortexgraph.errors import ExtractionError, ValidationError
from cortexgraph.extract import CommandExtractor, ExtractionInput, Turn, ingest

ANSWER = [
    {"type": "constraint", "text": "Never push directly to main.", "confidence": 0.9,
     "priority": 9, "tags": ["git"]},
    {"type": "gotcha", "text": "vi.mock at module level leaks between test files.",
     "edges": [{"to": 0, "relation": "related", "strength": 0.3}]},
]

SCRIPT = f"""#!{sys.executable}
import json, os, sys, time
prompt = sys.stdin.read()
here = os.path.dirname(os.path.abspath(__file__))
with open(os.path.join(here, "prompt.txt"), "w", encoding="utf-8") as f:
    f.write(prompt)
mode = os.environ.get("FAKE_CLAUDE_MODE", "json")
answer = {json.dumps(json.dumps(ANSWER))}
if mode == "json":
    print(answer)
elif mode == "fenced":
    print("Sure! Here are the memories:\\n```json\\n" + answer + "\\n```\\nAnything else?")
elif mode == "malformed":
    items = json.loads(answer) + [{{"type": "mood", "text": "x"}}, "not an object",
        {{"type": "fact", "text": "y", "edges": [{{"to": 0, "relation": "supersedes"}}]}}]
    print(json.dumps(items))
elif mode == "garbage":
    print("I could not find anything worth remembering, sorry.")
elif mode == "sleep":
    time.sleep(30)
elif mode == "fail":
    print("rate limited", file=sys.stderr)
    sys.exit(3)
elif mode == "latin1":
    sys.stdout.buffer.write(b"[\\xff]")
"""


@pytest.fixture
def fake_claude(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """``fake-claude`` on PATH; returns its directory (where it leaves prompt.txt)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    script = bin_dir / "fake-claude"
    script.write_text(SCRIPT, encoding="utf-8")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}")
    return bin_dir


SOURCE = ExtractionInput([Turn("user", "Never push directly to main."),
                          Turn("assistant", "Noted; vi.mock leaks between files too.")])


def _run(cx: cg.Cortex, mode: str, monkeypatch: pytest.MonkeyPatch, timeout: float = 20.0):
    monkeypatch.setenv("FAKE_CLAUDE_MODE", mode)
    extractor = CommandExtractor(["fake-claude", "-p"], timeout=timeout)
    return ingest(cx, SOURCE, source_id="session-1", extractor=extractor)


@pytest.mark.parametrize("mode", ["json", "fenced"])
def test_valid_answers_are_written(
    cx: cg.Cortex, fake_claude: Path, monkeypatch: pytest.MonkeyPatch, mode: str
) -> None:
    """A plain JSON answer and one wrapped in a fence and prose both give the two
    memories (the plugin's ``gotcha`` becomes a tagged Constraint) and the proposed edge;
    the command received the built prompt on stdin."""
    report = _run(cx, mode, monkeypatch)
    memories = [cx.resolve(uri).memory for uri in report.written]
    assert [(m.type_name, m.text) for m in memories] == [
        ("constraint", "Never push directly to main."),
        ("constraint", "vi.mock at module level leaks between test files."),
    ]
    assert "gotcha" in memories[1].tags and memories[0].source.origin == "llm"
    assert report.edges == 1 and report.skipped == ()
    assert [e.relation for e in cx.edges(report.written[1])] == ["relates_to"]
    prompt = (fake_claude / "prompt.txt").read_text(encoding="utf-8")
    assert prompt.endswith("[assistant] Noted; vi.mock leaks between files too.")


def test_malformed_candidates_are_counted_and_skipped(
    cx: cg.Cortex, fake_claude: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An unknown type and a non-object are skipped, a supersedes edge is dropped, and
    the valid candidates are still written; every skip names its candidate."""
    report = _run(cx, "malformed", monkeypatch)
    assert len(report.written) == 3
    where = [w for w, _ in report.skipped]
    assert where == ["candidate 2", "candidate 3", "candidate 4"]
    assert "supersedes" in report.skipped[2][1]


@pytest.mark.parametrize(
    ("mode", "message", "status"),
    [
        ("garbage", "no JSON array", None),
        ("sleep", "timed out after 0.5 s", None),
        ("fail", "exited with status 3: rate limited", 3),
        ("latin1", "not UTF-8", None),
    ],
)
def test_failures_raise_and_write_nothing(
    cx: cg.Cortex,
    fake_claude: Path,
    monkeypatch: pytest.MonkeyPatch,
    mode: str,
    message: str,
    status: int | None,
) -> None:
    """Garbage output, a timeout, a non-zero exit and non-UTF-8 output each raise
    ExtractionError naming the cause, and the store's tables are byte-for-byte unchanged
    (no memory, no cursor)."""
    cx.write(cg.Fact(text="already here"))
    before, seq = cx.table_digests(), cx.seq
    with pytest.raises(ExtractionError, match=message) as info:
        _run(cx, mode, monkeypatch, timeout=0.5 if mode == "sleep" else 20.0)
    assert info.value.status == status
    assert cx.table_digests() == before and cx.seq == seq


def test_a_missing_command_is_an_extraction_error(cx: cg.Cortex) -> None:
    """A command that does not exist raises ExtractionError (not FileNotFoundError)."""
    with pytest.raises(ExtractionError, match="could not be run"):
        CommandExtractor(["no-such-fake-claude-here"]).extract(SOURCE)


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"command": []}, "command"),
        ({"command": "claude -p"}, "command"),
        ({"command": ["claude", 3]}, "command"),
        ({"timeout": 0}, "timeout"),
        ({"timeout": float("nan")}, "timeout"),
        ({"timeout": True}, "timeout"),
    ],
)
def test_bad_arguments_name_their_field(kwargs: dict[str, object], field: str) -> None:
    """An empty, string or non-string command and a zero, NaN or boolean timeout are
    ValidationErrors naming the argument."""
    with pytest.raises(ValidationError) as info:
        CommandExtractor(**kwargs)  # type: ignore[arg-type]
    assert info.value.field == field

