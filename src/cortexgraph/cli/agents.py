"""``cortexgraph ingest-events`` and ``cortexgraph run-agent``: the agent runner's memory
from the command line, through the public :mod:`cortexgraph.integrations.agents`, as a
library user would call it."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from .output import Output

if TYPE_CHECKING:
    from ..core.predicates import Predicate

# The agents modules (and through them the store) are imported inside the functions that
# run the commands: building the parser, which every command and ``--help`` does, must not
# load the library.

__all__ = ["add_agents_parser", "cmd_ingest_events", "cmd_run_agent"]


def add_agents_parser(sub: Any, common: argparse.ArgumentParser) -> None:
    """Add the ``ingest-events`` and ``run-agent`` subcommands to ``sub``."""
    p = sub.add_parser(
        "ingest-events",
        parents=[common],
        help="record agent event files (<name>/<ts>[_active].jsonl) into memory, resumably",
    )
    p.add_argument("dir", help="the event directory (or one event file)")
    p.add_argument("--ns", default="default", help="namespace of runs without a facet")
    p.add_argument(
        "--follow", action="store_true", help="keep tailing active files until they are renamed"
    )
    p.add_argument("--interval", type=float, default=0.2, help="--follow: seconds between passes")
    p.add_argument("--timeout", type=float, default=None, help="--follow: give up after seconds")
    p.set_defaults(func=cmd_ingest_events)

    p = sub.add_parser(
        "run-agent",
        parents=[common],
        help="run an agent command with a scope, recording its events (-- COMMAND...)",
    )
    p.add_argument(
        "--dir", default=None, help="event directory (default: ROOT/.agent-events/ACTOR)"
    )
    p.add_argument("--name", required=True, help="the agent's name")
    p.add_argument("--prompt", required=True, help="the request's prompt")
    p.add_argument("--tag", action="append", help="scope: memories with this tag (repeat: any)")
    p.add_argument("--recall", type=int, default=10, help="scope: recall hits of the prompt")
    p.add_argument("--scope-limit", type=int, default=50, help="scope: most memories by tag")
    p.add_argument("--provider", default=None)
    p.add_argument("--facet", default=None, help="the run's namespace")
    p.add_argument("--session-id", default=None, help="continue this session")
    p.add_argument("--chat-id", default=None, help="the chat this run belongs to")
    p.add_argument("--timeout", type=float, default=None, help="kill the agent after seconds")
    p.add_argument("agent_command", nargs=argparse.REMAINDER, help="-- COMMAND [ARG...]")
    p.set_defaults(func=cmd_run_agent)


def cmd_ingest_events(args: argparse.Namespace, out: Output) -> int:
    """Run ``cortexgraph ingest-events``; prints the ingestion report."""
    from .. import open as open_store
    from ..integrations.agents import follow, ingest_events

    with open_store(args.root, args.actor) as cx:
        if args.follow:
            report = follow(cx, args.dir, ns=args.ns, interval=args.interval, timeout=args.timeout)
        else:
            report = ingest_events(cx, args.dir, ns=args.ns)
    lines = [
        f"{report.files} files, {report.lines} new lines: {report.events} events,"
        f" {len(report.written)} memory versions written, {len(report.runs)} runs,"
        f" {len(report.garbage)} garbage lines"
    ]
    lines.extend(f"  ! {file}:{line}: {reason}" for file, line, reason in report.garbage)
    out.emit(report.to_json(), "\n".join(lines))
    return 0


def cmd_run_agent(args: argparse.Namespace, out: Output) -> int:
    """Run ``cortexgraph run-agent``; exits 0 when the agent finished, 1 when it failed."""
    from pathlib import Path

    from .. import Q, ValidationError
    from .. import open as open_store
    from ..integrations.agents import AgentRunner

    command = list(args.agent_command)
    if command and command[0] == "--":
        command = command[1:]
    if not command:
        raise ValidationError("give the agent command after --", field="command")
    where: Predicate | None = None
    for tag in args.tag or ():
        where = Q.tag(tag) if where is None else where | Q.tag(tag)
    # a dot name can never be an actor's directory (actor names start with a letter or digit)
    directory = Path(args.dir) if args.dir else Path(args.root) / ".agent-events" / args.actor
    with open_store(args.root, args.actor) as cx:
        result = AgentRunner(cx, directory).run(
            args.name,
            args.prompt,
            command,
            where=where,
            recall=args.recall,
            scope_limit=args.scope_limit,
            provider=args.provider,
            facet=args.facet,
            session_id=args.session_id,
            chat_id=args.chat_id,
            timeout=args.timeout,
        )
    data = {
        "agent_id": result.agent_id,
        "path": str(result.path),
        "run": None if result.run is None else str(result.run),
        "returncode": result.returncode,
        "result": result.result,
        "error": result.error,
        "events": result.events,
        "scope": result.scope_size,
    }
    text = f"run {result.agent_id} ({result.events} events, scope of {result.scope_size}): " + (
        f"error: {result.error}" if result.error is not None else f"{result.result}"
    )
    out.emit(data, text)
    return 1 if result.error is not None else 0
