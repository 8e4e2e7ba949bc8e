"""What the Stop and prompt hooks do beyond extraction: the configured extractor, the
global store, the lifecycle, access records, hybrid recall with a configured embedder."""

from __future__ import annotations

import io
import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest

import cortexgraph as cg
from claude_code_support import hook, session_start, stop, transcript
from cortexgraph.integrations.claude_code import hooks
from cortexgraph.integrations.claude_code.stores import global_store, project_store

DAY = 86_400_000

FAKE_LLM = """\
import json, sys
sys.stdin.read()
print(json.dumps({"memories": [
    {"type": "preference", "text": "I prefer small pull requests with one change each.",
     "confidence": 0.95, "priority": 6, "scope": "global"},
    {"type": "decision", "text": "We keep the ledger in Postgres, not in Redis.",
     "confidence": 0.9, "priority": 8, "scope": "project"},
    {"type": "gotcha", "text": "Careful: the staging cluster shares its queue with CI.",
     "confidence": 0.7, "priority": 7, "scope": "global"},
]}))
"""


def configure(repo: Path, settings: dict[str, Any]) -> None:
    (repo / ".memory").mkdir(exist_ok=True)
    (repo / ".memory" / "config.json").write_text(json.dumps(settings))


def test_a_configured_extractor_feeds_both_stores(repo: Path, tmp_path: Path) -> None:
    """With an extraction command configured, its memories land in the project store; the
    global-scope one above 0.8 confidence is also written to the global store, the global
    one at 0.7 is not; the next surface shows the global memory once."""
    script = tmp_path / "fake_llm.py"
    script.write_text(FAKE_LLM)
    configure(repo, {"extractor": {"command": [sys.executable, str(script)], "timeout": 60}})
    done = stop(repo, transcript(tmp_path))
    assert (done.returncode, done.stdout) == (0, "")
    assert not (repo / ".memory" / "cortex.log").exists()
    where = global_store()
    with cg.open(where.root, where.actor, readonly=True) as gx:
        texts = [
            h.record.memory.text
            for h in gx.find(cg.Q.type(cg.Preference) | cg.Q.type(cg.Constraint), limit=10)
        ]
    assert texts == ["I prefer small pull requests with one change each."]
    project = project_store(repo)
    with cg.open(project.root, project.actor, readonly=True) as cx:
        found = {
            h.record.memory.text
            for h in cx.find(
                cg.Q.type(cg.Fact) | cg.Q.type(cg.Preference) | cg.Q.type(cg.Constraint), limit=50
            )
        }
    assert {
        "We keep the ledger in Postgres, not in Redis.",
        "Careful: the staging cluster shares its queue with CI.",
        "I prefer small pull requests with one change each.",
    } <= found
    start = session_start(repo)
    surface = json.loads(start.stdout)["hookSpecificOutput"]["additionalContext"]
    assert surface.count("I prefer small pull requests with one change each.") == 1


def test_stop_runs_the_lifecycle_with_category_half_lives(repo: Path, tmp_path: Path) -> None:
    """A context memory (30-day half-life) of confidence 0.5 written 100 days ago and never
    read is archived by the next Stop; a decision (stable) of the same age is not."""
    project = project_store(repo)
    long_ago = cg.SystemClock().now_ms() - 100 * DAY
    with cg.open(project.root, project.actor) as cx:
        old_context = cx.write(
            cg.Fact(text="The demo server is called aurora.", tags=("context",), confidence=0.5),
            at=long_ago,
        )
        old_decision = cx.write(
            cg.Fact(text="We chose the aurora naming scheme.", tags=("decision",), confidence=0.5),
            at=long_ago,
        )
    assert stop(repo, transcript(tmp_path)).returncode == 0
    with cg.open(project.root, project.actor, readonly=True) as cx:
        archived = {
            h.uri.id for h in cx.find(cg.Q.status("archived") & cg.Q.type(cg.Fact), limit=10)
        }
    assert old_context.id in archived
    assert old_decision.id not in archived


def test_the_prompt_hook_records_access(repo: Path, tmp_path: Path) -> None:
    """The memories a prompt recalls are recorded as read (their access count rises)."""
    assert stop(repo, transcript(tmp_path)).returncode == 0
    (repo / ".claude" / "cortex-memory.local.md").write_text("")  # nothing on the surface
    asked = hook(
        "UserPromptSubmit",
        {
            "session_id": "s2",
            "cwd": str(repo),
            "hook_event_name": "UserPromptSubmit",
            "prompt": "which database does billing use?",
        },
        repo,
    )
    assert "PostgreSQL" in asked.stdout
    project = project_store(repo)
    with cg.open(project.root, project.actor, readonly=True) as cx:
        hit = cx.recall("PostgreSQL billing", mode="keyword", k=1)[0]
        assert cx.salience(hit.uri).access_count == 1


def test_the_prompt_hook_is_hybrid_with_an_embedder(
    repo: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """With an embedder configured, the prompt hook asks for hybrid recall; without one,
    keyword recall (and no embedder is made)."""
    assert stop(repo, transcript(tmp_path)).returncode == 0
    modes: list[str] = []
    real = cg.Cortex.recall

    def spy(self: cg.Cortex, text: str, **kwargs: Any) -> Any:
        modes.append(kwargs["mode"])
        return real(self, text, **kwargs)

    monkeypatch.setattr(cg.Cortex, "recall", spy)
    payload = json.dumps({"cwd": str(repo), "prompt": "which database does billing use?"})
    hooks.run_hook("UserPromptSubmit", io.StringIO(payload), io.StringIO())
    configure(repo, {"embedder": "hash"})
    out = io.StringIO()
    hooks.run_hook("UserPromptSubmit", io.StringIO(payload), out)
    assert modes == ["keyword", "hybrid"]
    assert not (repo / ".memory" / "cortex.log").exists(), (
        repo / ".memory" / "cortex.log"
    ).read_text()


def test_a_bad_settings_file_is_logged(repo: Path, tmp_path: Path) -> None:
    """A malformed settings file: the hook exits 0, logs one line naming the key, and
    extracts nothing."""
    configure(repo, {"embedder": "gpt"})
    done = stop(repo, transcript(tmp_path))
    assert (done.returncode, done.stdout) == (0, "")
    log = (repo / ".memory" / "cortex.log").read_text().splitlines()
    assert len(log) == 1 and "embedder" in log[0]
    assert not (repo / ".memory" / "project").exists()
    assert os.environ["CORTEXGRAPH_HOME"]  # the suite's private global store
