"""``cortexgraph extract``: memories from a transcript file, through the public
:func:`cortexgraph.extract.ingest`, as a library user would call it."""

from __future__ import annotations

import argparse
import shlex
from typing import TYPE_CHECKING, Any

from .output import Output
from .progress import ProgressBar

if TYPE_CHECKING:
    from ..extract import Extractor

# The extraction modules (and through them the store) are imported inside the functions that
# run the command: building the parser, which every command and ``--help`` does, must not
# load the library.

__all__ = ["add_extract_parser", "cmd_extract"]


def add_extract_parser(sub: Any, common: argparse.ArgumentParser) -> None:
    """Add the ``extract`` subcommand to ``sub`` (the parser's subparsers action)."""
    p = sub.add_parser(
        "extract",
        parents=[common],
        help="extract memories from a transcript (JSON Lines), resumably and deduplicated",
    )
    p.add_argument("transcript", help="a Claude Code session file or role/text JSON lines")
    p.add_argument("--source-id", default=None, help="names the transcript (default: its path)")
    p.add_argument("--ns", default="default", help="namespace of project memories")
    p.add_argument("--global-ns", default="global", help="namespace of global memories")
    p.add_argument(
        "--extractor", choices=["rule", "command", "http"], default="rule", help="default: rule"
    )
    p.add_argument("--command", default="claude -p", help="command extractor: the command line")
    p.add_argument("--timeout", type=float, default=300.0, help="seconds per chunk")
    p.add_argument("--base-url", default=None, help="http extractor: the server")
    p.add_argument("--model", default=None, help="http extractor: the model")
    p.add_argument("--api-key-env", default="OPENAI_API_KEY", help="http extractor: key variable")
    p.add_argument("--project", default=None)
    p.add_argument("--branch", default=None)
    p.add_argument("--cwd", default=None)
    p.add_argument("--restart", action="store_true", help="ignore the cursor, extract all")
    p.add_argument("--cosine", action="store_true", help="judge near-duplicates by embedding")
    p.set_defaults(func=cmd_extract)


def _extractor(args: argparse.Namespace) -> Extractor | None:
    from ..extract import CommandExtractor, HttpExtractor

    if args.extractor == "command":
        return CommandExtractor(shlex.split(args.command), timeout=args.timeout)
    if args.extractor == "http":
        return HttpExtractor(
            args.base_url or "",
            model=args.model or "",
            api_key_env=args.api_key_env or None,
            timeout=args.timeout,
        )
    return None


def cmd_extract(args: argparse.Namespace, out: Output) -> int:
    """Run ``cortexgraph extract``; prints the extraction report."""
    from .. import open as open_store
    from ..extract import ExtractionContext, ExtractionInput, HttpExtractor, ingest, read_transcript

    turns = read_transcript(args.transcript)
    context = ExtractionContext(project=args.project, branch=args.branch, cwd=args.cwd)
    extractor = _extractor(args)
    try:
        with open_store(args.root, args.actor) as cx, ProgressBar(enabled=not args.json) as bar:
            report = ingest(
                cx,
                ExtractionInput(turns, context),
                source_id=args.source_id or str(args.transcript),
                extractor=extractor,
                ns=args.ns,
                global_ns=args.global_ns,
                cosine=args.cosine,
                restart=args.restart,
                progress=lambda d, t: bar("extracting", d, t),
            )
    finally:
        if isinstance(extractor, HttpExtractor):
            extractor.close()
    lines = [
        f"{report.turns} new turns of {report.cursor} in {report.chunks} chunks:"
        f" {len(report.written)} memories written, {len(report.duplicates)} already known,"
        f" {report.edges} edges, {len(report.skipped)} skipped"
    ]
    lines.extend(f"  + {uri}" for uri in report.written)
    lines.extend(f"  = {uri} (already known)" for _, uri in report.duplicates)
    lines.extend(f"  - {where}: {reason}" for where, reason in report.skipped)
    out.emit(report.to_json(), "\n".join(lines))
    return 0
