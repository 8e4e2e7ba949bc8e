"""``cortexgraph claude-code``: installing the plugin (``install``, ``uninstall``: its hooks
in Claude Code's settings, or a plugin directory) and the subcommands its slash commands run
(``recall``, ``remember``, ``forget``, ``consolidate``, ``inspect``), through
:mod:`cortexgraph.integrations.claude_code`.

The slash-command subcommands exit 0 when they did what was asked, 1 when a check failed
(a forget query matched nothing, a store failed verification) and 2 on a usage or input
error (a bad argument, an unknown memory, bad plugin settings), with the error's type and
message on stderr. Their library code is imported when they run, not when the parser is
built."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from ..integrations.claude_code.install import (
    InstallReport,
    default_program,
    install,
    uninstall,
    write_plugin,
)
from ..integrations.claude_code.stores import global_store, project_store
from .output import Output

__all__ = [
    "add_claude_code_parser",
    "cmd_consolidate",
    "cmd_forget",
    "cmd_inspect",
    "cmd_install",
    "cmd_recall",
    "cmd_remember",
    "cmd_uninstall",
]


def add_claude_code_parser(sub: Any, common: argparse.ArgumentParser) -> None:
    """Add ``claude-code install|uninstall|recall|remember|forget|consolidate|inspect``
    to ``sub`` (the parser's subparsers action).

    ``common`` is not used: these commands find their stores from ``--project`` (and the
    global store's location), not from a store root.
    """
    del common
    p = sub.add_parser(
        "claude-code", help="the Claude Code memory plugin: install it; its slash commands"
    )
    actions = p.add_subparsers(dest="action", required=True, metavar="ACTION")
    for name, func, text in (
        ("install", cmd_install, "merge the hooks into settings.json, or write a plugin"),
        ("uninstall", cmd_uninstall, "take the hooks out (the original bytes come back)"),
    ):
        q = actions.add_parser(name, help=text)
        where = q.add_mutually_exclusive_group()
        where.add_argument(
            "--project",
            default=None,
            metavar="DIR",
            help="<DIR>/.claude/settings.json (default: .)",
        )
        where.add_argument("--user", action="store_true", help="~/.claude/settings.json")
        if name == "install":
            where.add_argument("--plugin", default=None, metavar="DIR", help="write a plugin here")
            q.add_argument(
                "--program",
                default=None,
                help="the command line the hooks run (default: this installation's cortexgraph)",
            )
        q.add_argument("--json", action="store_true", help="machine-readable output")
        q.set_defaults(func=func)
    _add_slash_commands(actions)


def _targets(args: argparse.Namespace) -> tuple[Path, Path]:
    """The settings file and the directory of its backup record."""
    if args.user:
        return Path.home() / ".claude" / "settings.json", global_store().root
    project = Path(args.project or ".").absolute()
    return project / ".claude" / "settings.json", project_store(project).root


def _emit(out: Output, report: InstallReport) -> None:
    out.emit(
        {"settings": str(report.settings), "changed": report.changed, "action": report.action},
        f"{report.action}: {report.settings}",
    )


def cmd_install(args: argparse.Namespace, out: Output) -> int:
    """Run ``cortexgraph claude-code install``."""
    program = args.program or default_program()
    if args.plugin is not None:
        files = write_plugin(Path(args.plugin).absolute(), program=program)
        text = "\n".join(
            [f"plugin written to {Path(args.plugin).absolute()}:"] + [f"  {path}" for path in files]
        )
        out.emit(
            {"plugin": str(Path(args.plugin).absolute()), "files": [str(f) for f in files]}, text
        )
        return 0
    settings, backup_dir = _targets(args)
    _emit(out, install(settings, backup_dir, program=program))
    return 0


def cmd_uninstall(args: argparse.Namespace, out: Output) -> int:
    """Run ``cortexgraph claude-code uninstall``."""
    settings, backup_dir = _targets(args)
    _emit(out, uninstall(settings, backup_dir))
    return 0


# -- the slash commands' subcommands ------------------------------------------------------


def _add_slash_commands(actions: Any) -> None:
    def command(name: str, func: Any, text: str) -> argparse.ArgumentParser:
        q: argparse.ArgumentParser = actions.add_parser(name, help=text, description=text)
        q.add_argument(
            "--project", default=".", metavar="DIR", help="the project directory (default: .)"
        )
        q.add_argument("--json", action="store_true", help="machine-readable output")
        q.set_defaults(func=_input_errors(func))
        return q

    q = command("recall", cmd_recall, "recall from the project and global memories (/recall)")
    q.add_argument("query", nargs="+", help="what to look for")
    q.add_argument("--branch", default=None, help="only memories written on this git branch")
    q.add_argument("--keyword", action="store_true", help="keyword recall, even with an embedder")
    q.add_argument("--limit", type=int, default=10, help="the most hits (default 10)")

    q = command("remember", cmd_remember, "remember something for later sessions (/remember)")
    q.add_argument("text", nargs="+", help="what to remember")
    q.add_argument("--type", default="context", metavar="CATEGORY",
                   help="architecture, decision, rule, pattern, gotcha, progress, preference,"
                   " context (default), code_description")
    q.add_argument("--priority", type=int, default=None, help="1..10")
    q.add_argument("--global", dest="to_global", action="store_true",
                   help="into the global store (every project)")
    q.add_argument("--pin", action="store_true", help="never decays")
    q.add_argument("--tag", action="append", default=[], help="another tag (repeat)")

    q = command("forget", cmd_forget, "archive a memory by URI or id; a query lists candidates")
    q.add_argument("ref", nargs="+", metavar="ID_OR_QUERY",
                   help="a memory URI, an id (at least 8 hex digits) or a query")

    q = command("consolidate", cmd_consolidate,
                "merge near-duplicates, list pairs and suggested edges to review (/consolidate)")
    change = q.add_mutually_exclusive_group()
    change.add_argument("--promote", nargs=2, metavar=("A", "B"),
                        help="make the suggested edge between A and B active")
    change.add_argument("--drop", nargs=2, metavar=("A", "B"),
                        help="remove the suggested edge between A and B")
    change.add_argument("--dry-run", action="store_true", help="list only, change nothing")

    command("inspect", cmd_inspect, "stats, recent extractions and health of the stores")


def _input_errors(func: Any) -> Any:
    """``func`` with input errors (a bad argument, an unknown or tombstoned memory, bad
    plugin settings) as exit status 2, as usage errors are; the other library errors
    (corruption, storage) stay exit status 1, as :func:`cortexgraph.cli.main` maps them."""

    def run(args: argparse.Namespace, out: Output) -> int:
        from ..errors import NotFoundError, TombstonedError, ValidationError
        from .output import fail

        try:
            code: int = func(args, out)
        except (ValidationError, NotFoundError, TombstonedError) as exc:
            fail(out, type(exc).__name__, str(exc))
            return 2
        return code

    run.__name__ = run.__qualname__ = func.__name__
    return run


def cmd_recall(args: argparse.Namespace, out: Output) -> int:
    """Run ``cortexgraph claude-code recall``."""
    from ..integrations.claude_code import commands

    report = commands.recall(
        args.project, " ".join(args.query), branch=args.branch, keyword=args.keyword,
        limit=args.limit,
    )
    count = len(report.hits)
    lines = [f"{count} {'memory' if count == 1 else 'memories'} ({report.mode} recall"
             f"{', branch ' + report.branch if report.branch else ''})"]
    for hit in report.hits:
        restored = "  (was archived: restored)" if hit.status == "archived" else ""
        lines.append(f"- [{hit.store} {hit.category or '-'}] {hit.text}{restored}")
        lines.append(f"  {hit.uri}")
        for code in hit.code:
            lines.append(f"  code: {code.text}")
            if code.content:
                lines.extend(f"    {line}" for line in code.content.splitlines())
        for near in hit.related:
            lines.append(f"  {'  ' * (near.depth - 1)}~ {near.relation}: {near.text}")
    out.emit(report.to_json(), "\n".join(lines))
    return 0


def cmd_remember(args: argparse.Namespace, out: Output) -> int:
    """Run ``cortexgraph claude-code remember``."""
    from ..integrations.claude_code import commands

    report = commands.remember(
        args.project, " ".join(args.text), category=args.type, priority=args.priority,
        to_global=args.to_global, pin=args.pin, tags=args.tag,
    )
    text = (
        f"remembered ({report.store}, {report.category}): {report.uri}"
        if report.written
        else f"already remembered, nothing written ({report.store}): {report.uri}"
    )
    out.emit(report.to_json(), text)
    return 0


def cmd_forget(args: argparse.Namespace, out: Output) -> int:
    """Run ``cortexgraph claude-code forget``: exit 1 when a query matches nothing."""
    from ..integrations.claude_code import commands

    report = commands.forget(args.project, " ".join(args.ref))
    if report.archived is not None:
        done = report.archived
        out.emit(report.to_json(), f"archived ({done.store}): {done.uri}\n  {done.text}")
        return 0
    if not report.candidates:
        out.emit(report.to_json(), "nothing matches; nothing was archived")
        return 1
    lines = ["nothing was archived; the candidates (forget one by its id):"]
    lines.extend(
        f"- {c.id}  [{c.store} {c.category or '-'}] {c.text}" for c in report.candidates
    )
    out.emit(report.to_json(), "\n".join(lines))
    return 0


def cmd_consolidate(args: argparse.Namespace, out: Output) -> int:
    """Run ``cortexgraph claude-code consolidate``."""
    from ..integrations.claude_code import commands

    if args.promote or args.drop:
        a, b = args.promote or args.drop
        report = commands.change_edge(args.project, a, b, promote=bool(args.promote))
    else:
        report = commands.consolidate(args.project, dry_run=args.dry_run)
    lines = [f"{action} {src} -> {dst}" for action, src, dst in report.changed]
    if report.ran:
        lines.append(
            f"merged {len(report.merged)}, archived {len(report.archived)},"
            f" pruned {len(report.pruned)}"
        )
        lines.extend(f"  merged {merged} into {survivor}" for survivor, merged in report.merged)
    lines.extend(
        f"would merge ({pair.similarity:.2f}): {pair.src_text} | {pair.dst_text}"
        for pair in report.to_merge
    )
    if report.review:
        lines.append("similar, for review (similarity 0.5-0.7):")
        lines.extend(
            f"  {pair.similarity:.2f}  {pair.src} {pair.dst}\n    {pair.src_text}\n"
            f"    {pair.dst_text}"
            for pair in report.review
        )
    if report.suggested:
        lines.append("suggested edges (strength):")
        lines.extend(
            f"  {pair.strength:.2f}  {pair.src} -{pair.relation}-> {pair.dst}\n"
            f"    {pair.src_text}\n    {pair.dst_text}"
            for pair in report.suggested
        )
        lines.append(
            "promote one: cortexgraph claude-code consolidate --promote A B;"
            " drop one: --drop A B"
        )
    if len(lines) == 0:
        lines.append("nothing to merge or review")
    out.emit(report.to_json(), "\n".join(lines))
    return 0


def cmd_inspect(args: argparse.Namespace, out: Output) -> int:
    """Run ``cortexgraph claude-code inspect``: exit 1 when a store fails verification."""
    from ..integrations.claude_code import commands

    report = commands.inspect(args.project)
    lines: list[str] = []
    if not report.stores:
        lines.append("no memory store yet")
    for store in report.stores:
        lines.append(f"{store.store} store {store.path}: {'ok' if store.ok else 'FAILED'}")
        lines.extend(f"  ! {problem}" for problem in store.problems)
        if store.memories is None:
            continue
        memories = sum((store.statuses or {}).values())
        lines.append(
            f"  {_count(memories, 'memory', 'memories')}, {_count(store.edges, 'edge')},"
            f" {_count(store.entries, 'journal entry', 'journal entries')},"
            f" root {store.root or '-'}"
        )
        for category, counts in store.memories.items():
            spread = ", ".join(f"{n} {status}" for status, n in counts.items())
            lines.append(f"    {category}: {spread}")
        for extraction in store.extractions:
            lines.append(
                f"  extraction {extraction.session}: {extraction.turns} turns, at"
                f" {extraction.at}"
            )
            lines.extend(f"    - {text}" for text in extraction.memories)
    if report.log:
        lines.append("cortex.log (last lines):")
        lines.extend(f"  {line}" for line in report.log)
    out.emit(report.to_json(), "\n".join(lines))
    return 0 if report.ok else 1


def _count(n: int | None, one: str, many: str | None = None) -> str:
    """``n`` with its noun, singular or plural."""
    return f"{n} {one if n == 1 else many or one + 's'}"
