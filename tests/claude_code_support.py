"""Running the Claude Code hooks as Claude Code does, for the plugin's tests: a fresh
process per hook with the event's JSON on stdin, in a temporary git repository."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import cortexgraph as cg

#: a short recorded session in Claude Code's JSON Lines shape: text, tool_use and
#: tool_result blocks, a summary line
SESSION: list[dict[str, Any]] = [
    {"type": "summary", "summary": "Billing service work"},
    {
        "type": "user",
        "message": {
            "role": "user",
            "content": "We decided to use PostgreSQL instead of MySQL for the billing service.",
        },
    },
    {
        "type": "assistant",
        "message": {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Understood. I will check the migrations folder."},
                {
                    "type": "tool_use",
                    "id": "t1",
                    "name": "Bash",
                    "input": {"command": "ls migrations"},
                },
            ],
        },
    },
    {
        "type": "user",
        "message": {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "t1",
                    "content": "0001_init.sql\n0002_billing.sql",
                },
            ],
        },
    },
    {
        "type": "assistant",
        "message": {
            "role": "assistant",
            "content": [
                {
                    "type": "text",
                    "text": "Never run migrations from CI; run them by hand with make migrate.",
                },
            ],
        },
    },
    {
        "type": "user",
        "message": {
            "role": "user",
            "content": "Gotcha: the login page crashes on Safari when cookies are disabled.",
        },
    },
]


def hook(event: str, payload: dict[str, Any] | str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """Run the hook as Claude Code does: a fresh process, JSON on stdin."""
    stdin = payload if isinstance(payload, str) else json.dumps(payload)
    return subprocess.run(
        [sys.executable, "-m", "cortexgraph.cli", "hook", event],
        input=stdin,
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(Path(cg.__file__).parent.parent)},
        check=False,
    )


def transcript(tmp_path: Path, lines: list[dict[str, Any]] = SESSION) -> Path:
    path = tmp_path / "session.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def stop(repo: Path, path: Path, event: str = "Stop") -> subprocess.CompletedProcess[str]:
    payload = {
        "session_id": "s1",
        "transcript_path": str(path),
        "cwd": str(repo),
        "hook_event_name": event,
    }
    return hook(event, payload, repo)


def session_start(
    repo: Path, session_id: str = "s2", source: str = "startup"
) -> subprocess.CompletedProcess[str]:
    payload = {
        "session_id": session_id,
        "cwd": str(repo),
        "hook_event_name": "SessionStart",
        "source": source,
    }
    return hook("SessionStart", payload, repo)
