"""What ``cortexgraph hook <Event>`` does when Claude Code calls it.

Claude Code runs a hook as a command with a JSON object on stdin: ``session_id``,
``transcript_path``, ``cwd`` and ``hook_event_name``, plus ``source`` (SessionStart),
``prompt`` (UserPromptSubmit), ``trigger`` (PreCompact) or ``reason`` (SessionEnd).

- **SessionStart** brings the *surface* up to date (:mod:`.surface`: the project's and the
  global store's best memories under the seed's ranking profile, per-category line budgets,
  300-500 tokens, cached for 24 hours per branch and directory) in
  ``.claude/cortex-memory.local.md`` between ``<!-- CORTEX_MEMORY_START -->`` and
  ``<!-- CORTEX_MEMORY_END -->``, and prints it as ``hookSpecificOutput.additionalContext``.
- **UserPromptSubmit** recalls for the prompt in the project store, then the global one
  (keyword recall, or hybrid when an embedder is configured), and prints the best memories
  that are not on the surface within the prompt budget (300 tokens by default). What it
  returns is recorded as accessed. No model is loaded on the keyword path.
- **Stop**, **SessionEnd** and **PreCompact** extract memories from the transcript from
  the session's cursor on (the configured extractor: the rule extractor by default), with
  the git branch, recent commits and changed files as context, into the project store;
  global-scope memories with confidence above 0.8 are also written to the global store.
  Then the lifecycle runs (:meth:`cortexgraph.Cortex.compact` with the categories'
  half-lives) and the surface is regenerated.

The settings (embedder, extractor, prompt budget) come from :mod:`.config`. A hook never
disrupts the session: any failure writes one line to ``<project>/.memory/cortex.log`` and
the hook exits 0 with nothing printed. Extraction is one batch per chunk group with its
cursor, so a failure leaves nothing partial.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

import cortexgraph as cg

from .install import HOOK_EVENTS
from .stores import StoreLocation, global_store, project_store, same_text

if TYPE_CHECKING:
    from ...core.extraction import ExtractionContext
    from ...embed import Embedder

__all__ = ["EVENTS", "LOG_NAME", "git_context", "run_hook"]

EVENTS = tuple(event for event, _ in HOOK_EVENTS)
LOG_NAME = "cortex.log"
#: the largest stdin payload a hook reads
MAX_STDIN = 1 << 20
#: how long a git call may take before the context goes without it
GIT_TIMEOUT_S = 2.0
#: hits asked of each store for a prompt
PROMPT_HITS = 10
#: where ingest puts global-scope memories inside the project store
GLOBAL_NS = "global"


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
    """One line in ``.memory/cortex.log`` (on stderr when that cannot be written): time,
    event, error type and message."""
    message = " ".join(str(exc).split())[:500]
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    line = f"{stamp} {event}: {type(exc).__name__}: {message}\n"
    try:
        folder = project_store(cwd if cwd is not None else Path.cwd()).root
        folder.mkdir(parents=True, exist_ok=True)
        with (folder / LOG_NAME).open("a", encoding="utf-8") as log:
            log.write(line)
    except OSError:  # a read-only project: the line goes to stderr, which Claude Code
        with contextlib.suppress(OSError, ValueError):  # keeps out of the session
            sys.stderr.write(line)


def _additional_context(event: str, text: str) -> str:
    return json.dumps(
        {"hookSpecificOutput": {"hookEventName": event, "additionalContext": text}},
        ensure_ascii=False,
    )


def _git(cwd: Path, *args: str) -> str | None:
    """A git command's output in ``cwd``, or None outside a repository or on any failure."""
    try:
        done = subprocess.run(
            ["git", *args], cwd=cwd, capture_output=True, text=True, timeout=GIT_TIMEOUT_S
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def git_branch(cwd: Path) -> str | None:
    """The current git branch of ``cwd`` (None outside a repository)."""
    return _git(cwd, "rev-parse", "--abbrev-ref", "HEAD") or None


def git_context(cwd: Path) -> ExtractionContext:
    """The project, cwd, branch, recent commits and changed files of ``cwd`` (none of the
    git parts outside a repository)."""
    from ...core.extraction import ExtractionContext

    branch = git_branch(cwd)
    commits = _git(cwd, "log", "-5", "--format=%s") if branch else None
    changed = _git(cwd, "diff", "--name-only", "HEAD") if branch else None
    return ExtractionContext(
        project=cwd.name,
        cwd=str(cwd),
        branch=branch,
        commits=tuple((commits or "").splitlines()),
        changed_files=tuple((changed or "").splitlines()),
    )


# -- SessionStart -------------------------------------------------------------------------


def _session_start(payload: Mapping[str, Any], cwd: Path) -> str | None:
    from .surface import refresh_surface

    surface = refresh_surface(cwd, git_branch(cwd), project_store(cwd), global_store())
    return _additional_context("SessionStart", surface) if surface else None


# -- UserPromptSubmit -----------------------------------------------------------------------


def _surface_lines(cwd: Path) -> set[str]:
    """The memory texts on the surface file's block, as :func:`.ranking.same_text_key`
    compares them (empty without a surface)."""
    from .surface import END_MARK, START_MARK, SURFACE_FILE

    try:
        text = (cwd / SURFACE_FILE).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return set()
    start, end = text.find(START_MARK), text.find(END_MARK)
    if start < 0 or end < start:
        return set()
    from .ranking import same_text_key

    out = set()
    for line in text[start:end].splitlines():
        body = line.removeprefix("- ")
        if body.startswith("["):  # a [global] memory
            body = body.partition("] ")[2]
        out.add(same_text_key(body))
    return out


def _recall(
    where: StoreLocation, prompt: str, embedder: Embedder | None
) -> list[cg.RecallHit]:
    """Recall for ``prompt`` in one store, recording access when the store is writable."""
    where_not_cursor = ~cg.Q.ns("extraction")
    for readonly in (False, True):
        try:
            try:
                cx = cg.open(
                    where.root, where.actor, create=False, readonly=readonly, embedder=embedder
                )
            except cg.ValidationError as error:
                if error.field != "embedder" or embedder is None:
                    raise
                # the store's vectors come from another embedder (the next Stop re-embeds
                # them with the configured one): keyword recall until then
                embedder = None
                cx = cg.open(where.root, where.actor, create=False, readonly=readonly)
        except (cg.StorageError, cg.ReadOnlyError, PermissionError):
            if readonly:
                raise
            continue  # a store this user cannot write: read it without recording access
        mode = "keyword" if embedder is None else "hybrid"
        with cx:
            hits = cx.recall(
                prompt, k=PROMPT_HITS, mode=mode, where=where_not_cursor, late_binding=not readonly
            )
            return list(hits)
    raise AssertionError("unreachable: the read-only attempt returns or raises")


def _prompt(payload: Mapping[str, Any], cwd: Path) -> str | None:
    from .config import load_config
    from .ranking import line_text, same_text_key

    prompt = payload.get("prompt")
    if not isinstance(prompt, str) or not prompt.strip():
        return None
    project = project_store(cwd)
    if not project.exists():
        return None
    config = load_config(cwd)
    embedder = config.make_embedder()  # once for both stores (a model loads once)
    skip = _surface_lines(cwd)
    lines: list[str] = []
    tokens = 0
    for label, where in (("project", project), ("global", global_store())):
        if not where.exists():
            continue
        for hit in _recall(where, prompt, embedder):
            memory = hit.record.memory
            line = line_text(memory.text, "" if label == "project" else label)
            if same_text_key(memory.text) in skip:
                continue
            cost = cg.estimate_tokens(line)
            if tokens + cost > config.prompt_tokens:
                continue
            skip.add(same_text_key(memory.text))
            lines.append(line)
            tokens += cost
    if not lines:
        return None
    return _additional_context("UserPromptSubmit", "Relevant memories:\n" + "\n".join(lines))


# -- Stop, SessionEnd, PreCompact -----------------------------------------------------------


def _copy_to_global(
    records: list[cg.Record], where: StoreLocation, embedder: Embedder | None
) -> None:
    """Write each of ``records``' memories into the global store, unless it holds the
    same text already; then run its lifecycle."""
    from .categories import HALF_LIVES

    with where.open(embedder, create=True) as gx:
        wrote = False
        for record in records:
            if same_text(gx, record.memory.text) is None:
                gx.write(record.memory)
                wrote = True
        if wrote:
            gx.compact(half_lives=HALF_LIVES)


def _extract(payload: Mapping[str, Any], cwd: Path) -> str | None:
    # imported here, not at the top: the prompt hook runs on every prompt and needs none
    # of extraction (start-up time)
    from ...extract import ExtractionInput, ingest
    from ...extract.chunking import read_transcript
    from .categories import HALF_LIVES
    from .config import load_config
    from .surface import refresh_surface

    transcript = payload.get("transcript_path")
    session = payload.get("session_id")
    if not isinstance(transcript, str) or not isinstance(session, str) or not session:
        raise ValueError("the hook input lacks transcript_path or session_id")
    config = load_config(cwd)
    turns = read_transcript(transcript, partial_tail=True)
    context = git_context(cwd)
    project, global_ = project_store(cwd), global_store()
    embedder = config.make_embedder()
    with project.open(embedder, create=True) as cx:
        report = ingest(
            cx,
            ExtractionInput(turns, context),
            source_id=session,
            extractor=config.make_extractor(),
            global_ns=GLOBAL_NS,
        )
        shared = [cx.resolve(uri) for uri in report.written if uri.ns == GLOBAL_NS]
        cx.compact(half_lives=HALF_LIVES)
    if shared:
        _copy_to_global(shared, global_, embedder)
    refresh_surface(cwd, context.branch, project, global_)
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
