"""What ``cortexgraph hook <Event>`` does when Claude Code calls it.

Claude Code runs a hook as a command with a JSON object on stdin: ``session_id``,
``transcript_path``, ``cwd`` and ``hook_event_name``, plus ``source`` (SessionStart),
``prompt`` (UserPromptSubmit), ``trigger`` (PreCompact) or ``reason`` (SessionEnd).

- **SessionStart** writes the *surface* — the project's most salient active memories,
  grouped by category within per-category line budgets and about 500 tokens in all — into
  ``.claude/cortex-memory.local.md`` between ``<!-- CORTEX_MEMORY_START -->`` and
  ``<!-- CORTEX_MEMORY_END -->`` (the rest of the file is kept; the write is atomic), and
  prints it as ``hookSpecificOutput.additionalContext``.
- **UserPromptSubmit** recalls for the prompt (keyword recall: no model is loaded on this
  path) and prints the best memories that are not on the surface, within 300 tokens.
- **Stop**, **SessionEnd** and **PreCompact** extract memories from the transcript with the
  rule extractor, from the session's cursor on (see :mod:`cortexgraph.extract`), with the
  git branch, recent commits and changed files as context, into the project store.

A hook never disrupts the session: any failure writes one line to
``<project>/.memory/cortex.log`` and the hook exits 0 with nothing printed. Extraction is
one batch per chunk group with its cursor, so a failure leaves nothing partial.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

import cortexgraph as cg

from .install import HOOK_EVENTS, write_atomic
from .stores import StoreLocation, project_store

if TYPE_CHECKING:
    from ...core.extraction import ExtractionContext

__all__ = ["EVENTS", "LOG_NAME", "SURFACE_BUDGETS", "run_hook", "surface_text"]

EVENTS = tuple(event for event, _ in HOOK_EVENTS)
LOG_NAME = "cortex.log"
SURFACE_FILE = Path(".claude") / "cortex-memory.local.md"
START_MARK = "<!-- CORTEX_MEMORY_START -->"
END_MARK = "<!-- CORTEX_MEMORY_END -->"
#: lines per category on the surface; a memory's category is its tag. The plugin's seven
#: categories with their budgets, plus the rules (never/always/must) and preferences the
#: rule extractor tags, which a coding session needs in view as much as its gotchas
SURFACE_BUDGETS = {
    "architecture": 25,
    "decision": 25,
    "rule": 20,
    "pattern": 25,
    "gotcha": 20,
    "progress": 30,
    "preference": 15,
    "context": 15,
    "code_description": 10,
}
#: the surface's token ceiling
SURFACE_TOKENS = 500
#: tokens a prompt's injected memories may take
PROMPT_TOKENS = 300
#: the largest stdin payload a hook reads
MAX_STDIN = 1 << 20
#: how long a git call may take before the context goes without it
GIT_TIMEOUT_S = 2.0


def run_hook(event: str, stdin: IO[str], stdout: IO[str]) -> int:
    """Run the hook ``event`` on the JSON read from ``stdin``; always returns 0.

    Whatever fails is logged as one line in ``<cwd>/.memory/cortex.log`` (when that can be
    written) and nothing is printed, so Claude Code carries on as if no hook had run.
    """
    cwd: Path | None = None
    try:
        raw = stdin.read(MAX_STDIN + 1)
        if len(raw) > MAX_STDIN:
            raise ValueError(f"the hook input is over {MAX_STDIN:,} characters")
        payload = json.loads(raw)
        if not isinstance(payload, dict):
            raise ValueError("the hook input is not a JSON object")
        cwd = Path(str(payload.get("cwd") or os.getcwd()))
        if event not in EVENTS:
            raise ValueError(f"unknown hook event {event!r}; expected one of {', '.join(EVENTS)}")
        text = _HANDLERS[event](payload, cwd)
        if text is not None:
            stdout.write(text)
    except Exception as exc:  # a hook must never disrupt the session
        _log(cwd, event, exc)
    return 0


def _log(cwd: Path | None, event: str, exc: BaseException) -> None:
    """One line in ``.memory/cortex.log``: time, event, error type and message."""
    message = " ".join(str(exc).split())[:500]
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    line = f"{stamp} {event}: {type(exc).__name__}: {message}\n"
    try:
        folder = project_store(cwd if cwd is not None else Path.cwd()).root
        folder.mkdir(parents=True, exist_ok=True)
        with (folder / LOG_NAME).open("a", encoding="utf-8") as log:
            log.write(line)
    except OSError:
        pass  # a read-only project: nothing can be logged, and nothing else may fail


def _line(record: cg.Record) -> str:
    """A memory as one surface line: its text on one line."""
    return "- " + " ".join(record.memory.text.split())


def _additional_context(event: str, text: str) -> str:
    return json.dumps(
        {"hookSpecificOutput": {"hookEventName": event, "additionalContext": text}},
        ensure_ascii=False,
    )


# -- SessionStart -------------------------------------------------------------------------


def surface_text(cx: cg.Cortex, *, now: int | None = None) -> str:
    """The surface of a store: per category (in :data:`SURFACE_BUDGETS` order) its active
    memories by salience, one line each, within the category's line budget and
    :data:`SURFACE_TOKENS` in all. The same store gives the same bytes."""
    lines: list[str] = []
    tokens = 0
    for category, budget in SURFACE_BUDGETS.items():
        found = cx.find(cg.Q.tag(category), limit=budget, order_by="salience", now=now)
        if not found:
            continue
        header = f"## {category.replace('_', ' ')}"
        cost = cg.estimate_tokens(header)
        kept: list[str] = []
        for hit in found:  # the longest run of best lines that fits the ceiling
            line = _line(hit.record)
            if tokens + cost + cg.estimate_tokens(line) > SURFACE_TOKENS:
                break
            kept.append(line)
            cost += cg.estimate_tokens(line)
        if not kept:
            break
        lines += [header, *kept]
        tokens += cost
    return "\n".join(lines)


def _existing_store(cwd: Path) -> StoreLocation | None:
    """The project store of ``cwd`` if it was ever written (reading hooks create none)."""
    where = project_store(cwd)
    return where if (where.root / where.actor).exists() else None


def _session_start(payload: Mapping[str, Any], cwd: Path) -> str | None:
    where = _existing_store(cwd)
    if where is None:
        return None
    with cg.open(where.root, where.actor, readonly=True) as cx:
        surface = surface_text(cx)
    if not surface:
        return None
    _write_surface(cwd / SURFACE_FILE, surface)
    return _additional_context("SessionStart", surface)


def _write_surface(path: Path, surface: str) -> None:
    """Put ``surface`` between the markers of ``path``, keeping the rest, atomically."""
    block = f"{START_MARK}\n{surface}\n{END_MARK}"
    old = path.read_text(encoding="utf-8") if path.exists() else ""
    start, end = old.find(START_MARK), old.find(END_MARK)
    if start >= 0 and end > start:
        new = old[:start] + block + old[end + len(END_MARK) :]
    else:
        new = (old.rstrip("\n") + "\n\n" if old.strip() else "") + block + "\n"
    write_atomic(path, new.encode("utf-8"))


# -- UserPromptSubmit -----------------------------------------------------------------------


def _prompt(payload: Mapping[str, Any], cwd: Path) -> str | None:
    prompt = payload.get("prompt")
    if not isinstance(prompt, str) or not prompt.strip():
        return None
    where = _existing_store(cwd)
    if where is None:
        return None
    surface_file = cwd / SURFACE_FILE
    on_surface = surface_file.read_text(encoding="utf-8") if surface_file.exists() else ""
    lines: list[str] = []
    tokens = 0
    with cg.open(where.root, where.actor, readonly=True) as cx:
        for hit in cx.recall(prompt, mode="keyword", k=10, where=~cg.Q.ns("extraction")):
            line = _line(hit.record)
            if line in on_surface:
                continue
            cost = cg.estimate_tokens(line)
            if tokens + cost > PROMPT_TOKENS:
                break
            lines.append(line)
            tokens += cost
    if not lines:
        return None
    return _additional_context("UserPromptSubmit", "Relevant memories:\n" + "\n".join(lines))


# -- Stop, SessionEnd, PreCompact -----------------------------------------------------------


def _git(cwd: Path, *args: str) -> str | None:
    """A git command's output in ``cwd``, or None outside a repository or on any failure."""
    try:
        done = subprocess.run(
            ["git", *args], cwd=cwd, capture_output=True, text=True, timeout=GIT_TIMEOUT_S
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def git_context(cwd: Path) -> ExtractionContext:
    """The project, cwd, branch, recent commits and changed files of ``cwd`` (none of the
    git parts outside a repository)."""
    from ...core.extraction import ExtractionContext

    branch = _git(cwd, "rev-parse", "--abbrev-ref", "HEAD")
    commits = _git(cwd, "log", "-5", "--format=%s") if branch else None
    changed = _git(cwd, "diff", "--name-only", "HEAD") if branch else None
    return ExtractionContext(
        project=cwd.name,
        cwd=str(cwd),
        branch=branch or None,
        commits=tuple((commits or "").splitlines()),
        changed_files=tuple((changed or "").splitlines()),
    )


def _extract(payload: Mapping[str, Any], cwd: Path) -> str | None:
    # imported here, not at the top: the prompt hook runs on every prompt and needs none
    # of extraction (start-up time)
    from ...extract import ExtractionInput, ingest
    from ...extract.chunking import read_transcript

    transcript = payload.get("transcript_path")
    session = payload.get("session_id")
    if not isinstance(transcript, str) or not isinstance(session, str) or not session:
        raise ValueError("the hook input lacks transcript_path or session_id")
    turns = read_transcript(transcript)
    where = project_store(cwd)
    with cg.open(where.root, where.actor, create=True) as cx:
        ingest(cx, ExtractionInput(turns, git_context(cwd)), source_id=session)
    return None


_HANDLERS = {
    "SessionStart": _session_start,
    "UserPromptSubmit": _prompt,
    "Stop": _extract,
    "SessionEnd": _extract,
    "PreCompact": _extract,
}


def main(event: str) -> int:
    """The ``cortexgraph hook`` entry: stdin and stdout of this process."""
    return run_hook(event, sys.stdin, sys.stdout)
