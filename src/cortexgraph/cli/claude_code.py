"""``cortexgraph claude-code install`` and ``uninstall``: the plugin's hooks in Claude
Code's settings, or a plugin directory, through :mod:`cortexgraph.integrations.claude_code`."""

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

__all__ = ["add_claude_code_parser", "cmd_install", "cmd_uninstall"]


def add_claude_code_parser(sub: Any, common: argparse.ArgumentParser) -> None:
    """Add ``claude-code install|uninstall`` to ``sub`` (the parser's subparsers action).

    ``common`` is not used: these commands touch settings files, not a store root.
    """
    del common
    p = sub.add_parser("claude-code", help="install the Claude Code memory plugin")
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
