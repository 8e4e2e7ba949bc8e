"""``cortexgraph hook <Event>``: the command Claude Code's hooks call (see
:mod:`cortexgraph.integrations.claude_code.hooks`). It reads the event's JSON on stdin,
prints what the session should see, and always exits 0."""

from __future__ import annotations

import argparse
import os
from typing import Any

from ..integrations.claude_code.install import HOOK_EVENTS

__all__ = ["add_hook_parser"]


def add_hook_parser(sub: Any, common: argparse.ArgumentParser) -> None:
    """Add ``hook EVENT`` to ``sub`` (the parser's subparsers action). ``common`` is not
    used: the store is the project's, found from the event's ``cwd``."""
    del common

    p = sub.add_parser(
        "hook",
        help="run a Claude Code hook (JSON on stdin; always exits 0)",
        description="Run a Claude Code hook: the event's JSON on stdin, additionalContext"
        " JSON on stdout when there is something to add. Failures go to"
        " <project>/.memory/cortex.log; the exit status is always 0.",
    )
    p.add_argument("event", help=f"one of {', '.join(event for event, _ in HOOK_EVENTS)}")
    p.set_defaults(func=_run_hook, json=False)


def _run_hook(args: argparse.Namespace, out: Any) -> int:
    # one BLAS thread: a hook's few small vector operations gain nothing from a pool,
    # whose start-up costs tens of milliseconds of CPU on every prompt (set before numpy
    # is first imported; a user's own setting is kept)
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    from ..integrations.claude_code.hooks import main

    return main(args.event)
