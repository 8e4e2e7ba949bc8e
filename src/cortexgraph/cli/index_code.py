"""``cortexgraph index-code``: pair each public Python symbol with a ``code_description``
memory, through :func:`cortexgraph.integrations.claude_code.indexing.index_code`."""

from __future__ import annotations

import argparse
from typing import Any

from .output import Output

__all__ = ["add_index_code_parser", "cmd_index_code"]


def add_index_code_parser(sub: Any, common: argparse.ArgumentParser) -> None:
    """Add the ``index-code`` subcommand to ``sub`` (the parser's subparsers action)."""
    p = sub.add_parser(
        "index-code",
        parents=[common],
        help="index Python files: a code_description memory and the code for each symbol",
    )
    p.add_argument("paths", nargs="+", help="Python files and directories")
    p.add_argument(
        "--base", default=".", help="paths are recorded relative to it (default: this directory)"
    )
    p.add_argument("--ns", default="default", help="namespace of the memories")
    p.set_defaults(func=cmd_index_code)


def cmd_index_code(args: argparse.Namespace, out: Output) -> int:
    """Run ``cortexgraph index-code``; prints what was written, updated and tombstoned."""
    from .. import open as open_store
    from ..integrations.claude_code.indexing import index_code

    with open_store(args.root, args.actor) as cx:
        report = index_code(cx, args.paths, base=args.base, ns=args.ns)
    lines = [
        f"{report.symbols} symbols in {report.files} files: {len(report.written)} new,"
        f" {len(report.updated)} changed, {report.unchanged} unchanged,"
        f" {len(report.tombstoned)} removed, {len(report.skipped)} files skipped"
    ]
    lines.extend(f"  + {name}" for name in report.written)
    lines.extend(f"  ~ {name}" for name in report.updated)
    lines.extend(f"  - {name}" for name in report.tombstoned)
    lines.extend(f"  ! {path}: {reason}" for path, reason in report.skipped)
    out.emit(report.to_json(), "\n".join(lines))
    return 0
