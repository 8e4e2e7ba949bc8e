"""The ``cortexgraph`` command. Every command goes through the public API only.

Exit codes: 0 success; 1 the library refused or failed (a ``CortexError``: not found,
validation, conflict, corruption); 2 usage errors and I/O errors. ``--json`` prints one
JSON document (or JSON lines for streams) for scripts; without it output is for people.

The store is ``--root`` (default ``$CORTEXGRAPH_ROOT`` or ``./.cortexgraph``) and the actor
``--actor`` (default ``$CORTEXGRAPH_ACTOR`` or ``agent``).

This module builds the argument parser and runs :func:`main`, which maps errors to exit
codes; :mod:`.commands` runs each command and :mod:`.output` prints what they return.
"""

from __future__ import annotations

import argparse
import builtins
import importlib
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any

from .. import CortexError, NotFoundError, __version__, compiled
from .agents import add_agents_parser
from .chat import add_chat_parser
from .claude_code import add_claude_code_parser
from .extract import add_extract_parser
from .fleet import add_fleet_parser
from .hook import add_hook_parser
from .index_code import add_index_code_parser
from .keys import add_keys_parser
from .mcp import add_mcp_parser
from .output import Output, fail
from .replication import add_replication_parser

__all__ = ["main"]


def _lazy(module: str, name: str) -> Callable[[argparse.Namespace, Output], int]:
    """The command ``name`` of ``module`` (relative to this package), imported when it runs.

    Building the parser, ``--help`` and a usage error then load none of the library: every
    command module imports the store, numpy and the verbs, which ``--help`` never needs.
    """

    def run(args: argparse.Namespace, out: Output) -> int:
        command: Callable[[argparse.Namespace, Output], int]
        command = getattr(importlib.import_module(module, __package__), name)
        return command(args, out)

    run.__name__ = run.__qualname__ = name
    return run


cmd_backfill = _lazy(".commands", "cmd_backfill")
cmd_compact = _lazy(".commands", "cmd_compact")
cmd_context = _lazy(".commands", "cmd_context")
cmd_demo = _lazy(".commands", "cmd_demo")
cmd_find = _lazy(".commands", "cmd_find")
cmd_forget = _lazy(".commands", "cmd_forget")
cmd_get = _lazy(".commands", "cmd_get")
cmd_init = _lazy(".commands", "cmd_init")
cmd_inspect = _lazy(".commands", "cmd_inspect")
cmd_journal = _lazy(".commands", "cmd_journal")
cmd_link = _lazy(".commands", "cmd_link")
cmd_rebuild = _lazy(".commands", "cmd_rebuild")
cmd_recall = _lazy(".commands", "cmd_recall")
cmd_remember = _lazy(".commands", "cmd_remember")
cmd_root = _lazy(".commands", "cmd_root")
cmd_scope = _lazy(".commands", "cmd_scope")
cmd_snapshot = _lazy(".commands", "cmd_snapshot")
cmd_traverse = _lazy(".commands", "cmd_traverse")
cmd_unlink = _lazy(".commands", "cmd_unlink")
cmd_update = _lazy(".commands", "cmd_update")
cmd_verify = _lazy(".commands", "cmd_verify")
cmd_export = _lazy(".transfer", "cmd_export")
cmd_import = _lazy(".transfer", "cmd_import")
cmd_stats = _lazy(".transfer", "cmd_stats")


def _default_root() -> str:
    return os.environ.get("CORTEXGRAPH_ROOT", ".cortexgraph")


def _default_actor() -> str:
    return os.environ.get("CORTEXGRAPH_ACTOR", "agent")


# -- parser -------------------------------------------------------------------------------


def _root_arg(text: str) -> bytes:
    """``--trusted-root``: a 32-byte OverallRoot as 64 hex digits (a usage error otherwise)."""
    try:
        root = bytes.fromhex(text)
    except ValueError:
        root = b""
    if len(root) != 32:
        raise argparse.ArgumentTypeError(
            f"must be 64 hex digits (a 32-byte OverallRoot, as `cortexgraph root` prints"
            f" it), not {text!r}"
        )
    return root


def _seq_arg(text: str) -> int:
    """``--since``: a non-negative integer (a usage error otherwise)."""
    try:
        value = int(text, 10)
    except ValueError:
        value = -1
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be a non-negative integer, not {text!r}")
    return value


def _add_memory_options(p: argparse.ArgumentParser, *, for_update: bool) -> None:
    p.add_argument("--tag", action="append", help="a tag (repeat for several)")
    p.add_argument("--summary", help="a one-line summary")
    p.add_argument("--priority", type=int, help="1..10")
    p.add_argument("--confidence", type=float, help="0..1")
    if not for_update:
        p.add_argument("--type", default="fact", help="memory type (default: fact)")
        p.add_argument("--pinned", action="store_true", help="exempt from decay")
        p.add_argument("--ns", default="default", help="namespace (default: default)")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="cortexgraph",
        description="An embeddable, deterministic, verifiable memory graph for AI agents.",
    )
    parser.add_argument(
        "--version", action="version", version=f"cortexgraph {__version__}: {compiled.describe()}"
    )
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--root", default=_default_root(), help="store root directory")
    common.add_argument("--actor", default=_default_actor(), help="actor name")
    common.add_argument("--json", action="store_true", help="machine-readable output")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("init", parents=[common], help="create an actor's store")
    p.add_argument("--hash", choices=["blake3", "sha256"], default=None, help="commit hash")
    p.set_defaults(func=cmd_init)

    p = sub.add_parser("remember", parents=[common], help="write a memory")
    p.add_argument("text")
    _add_memory_options(p, for_update=False)
    p.set_defaults(func=cmd_remember)

    p = sub.add_parser("get", parents=[common], help="resolve a memory URI")
    p.add_argument("uri")
    p.add_argument("--history", action="store_true", help="every version")
    p.set_defaults(func=cmd_get)

    p = sub.add_parser("update", parents=[common], help="write a new version of a memory")
    p.add_argument("uri")
    p.add_argument("--text")
    p.add_argument("--expected-version", type=int, default=None)
    _add_memory_options(p, for_update=True)
    p.set_defaults(func=cmd_update)

    p = sub.add_parser("forget", parents=[common], help="tombstone a memory")
    p.add_argument("uri")
    p.add_argument("--reason", default="")
    p.set_defaults(func=cmd_forget)

    p = sub.add_parser("find", parents=[common], help="typed query, ranked and rendered")
    p.add_argument("--type", action="append", help="memory type (repeat: any of them)")
    p.add_argument("--tag", action="append", help="tag (repeat: all of them)")
    p.add_argument("--ns", help="only this namespace")
    p.add_argument("--status", help="status (default: active only)")
    p.add_argument("--min-priority", type=int, default=None)
    p.add_argument("--min-confidence", type=float, default=None)
    p.add_argument("--since", type=int, default=None, help="head version written at >= ms")
    p.add_argument("--limit", type=int, default=None, help="most hits (default 10)")
    p.add_argument("--budget-tokens", type=int, default=None, help="token budget for hits")
    p.add_argument("--order-by", default="salience", help="salience|recent|priority|confidence")
    p.add_argument("--form", default="short", help="short|medium|full")
    p.add_argument("--late-binding", action="store_true", help="journal the reads")
    p.set_defaults(func=cmd_find)

    p = sub.add_parser("recall", parents=[common], help="keyword, vector or hybrid recall")
    p.add_argument("text")
    p.add_argument("--k", type=int, default=10)
    p.add_argument("--mode", default="hybrid", help="keyword|vector|hybrid")
    p.add_argument("--late-binding", action="store_true", help="journal the reads")
    p.set_defaults(func=cmd_recall)

    p = sub.add_parser("context", parents=[common], help="a token-budgeted context bundle")
    p.add_argument("--query", default=None)
    p.add_argument("--channel", default=None)
    p.add_argument("--budget-tokens", type=int, default=2000)
    p.set_defaults(func=cmd_context)

    p = sub.add_parser("compact", parents=[common], help="forget and consolidate (journaled)")
    p.set_defaults(func=cmd_compact)

    p = sub.add_parser("scope", parents=[common], help="export or verify a scope bundle")
    p.add_argument("action", choices=["export", "verify"])
    p.add_argument("file")
    p.add_argument("--tag", action="append", help="export: memories with any of these tags")
    p.add_argument("--uri", action="append", help="export: these memories")
    p.add_argument("--limit", type=int, default=100)
    p.add_argument(
        "--trusted-root",
        type=_root_arg,
        default=None,
        help="verify: the OverallRoot you trust (64 hex digits); without it the bundle is"
        " only checked for self-consistency, reported as NOT verified, and the exit status"
        " is 1",
    )
    p.add_argument(
        "--sign", metavar="KEYFILE", default=None,
        help="export: add a checkpoint signed with this key (see `cortexgraph keygen`)",
    )
    p.add_argument(
        "--key", metavar="PUBKEY", default=None,
        help="verify: the verifier key (a .pub file or its text); the bundle's signed"
        " checkpoint must verify with it, and then no --trusted-root is needed",
    )
    p.set_defaults(func=cmd_scope)

    p = sub.add_parser("link", parents=[common], help="add or change an edge")
    p.add_argument("src")
    p.add_argument("relation")
    p.add_argument("dst")
    p.add_argument("--strength", type=float, default=1.0)
    p.add_argument("--status", default="active", help="active|suggested")
    p.add_argument("--origin", default="human", help="human|llm|system (default: human)")
    p.set_defaults(func=cmd_link)

    p = sub.add_parser("unlink", parents=[common], help="remove an edge")
    p.add_argument("src")
    p.add_argument("relation")
    p.add_argument("dst")
    p.set_defaults(func=cmd_unlink)

    p = sub.add_parser("traverse", parents=[common], help="breadth-first walk of the graph")
    p.add_argument("uri")
    p.add_argument("--depth", type=int, default=2)
    p.add_argument("--relation", action="append", help="only these relations (repeat)")
    p.add_argument("--direction", default="out", help="out|in|both")
    p.add_argument("--min-strength", type=float, default=0.0)
    p.set_defaults(func=cmd_traverse)

    p = sub.add_parser("journal", parents=[common], help="print the change feed")
    p.add_argument(
        "--since",
        type=_seq_arg,
        default=0,
        help="print entries after this seq (a non-negative integer; past the end: none)",
    )
    p.set_defaults(func=cmd_journal)

    p = sub.add_parser("inspect", parents=[common], help="table counts and digests")
    p.set_defaults(func=cmd_inspect)

    p = sub.add_parser(
        "verify",
        help="replay each store's journal and check it against its tables and snapshots",
        description="Exit status: 0 all match, 1 a mismatch or corruption, 2 usage or I/O.",
    )
    p.add_argument("store_root", metavar="ROOT", help="directory holding one store per actor")
    p.add_argument("--actor", default=None, help="verify only this actor")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument(
        "--key", metavar="PUBKEY", default=None,
        help="also check the stored checkpoints signed with this verifier key (a .pub file"
        " or its text): each must verify and match the replayed snapshot at its seq, and"
        " each actor must have at least one",
    )
    p.set_defaults(func=cmd_verify)

    p = sub.add_parser("rebuild", parents=[common], help="drop derived tables and replay")
    p.set_defaults(func=cmd_rebuild)

    p = sub.add_parser(
        "backfill",
        parents=[common],
        help="embed every memory not embedded yet, so that recall embeds only its query",
    )
    p.set_defaults(func=cmd_backfill)

    p = sub.add_parser("snapshot", parents=[common], help="store a snapshot manifest")
    p.add_argument(
        "--sign", metavar="KEYFILE", default=None,
        help="also store a checkpoint signed with this key (see `cortexgraph keygen`)",
    )
    p.set_defaults(func=cmd_snapshot)

    p = sub.add_parser("root", parents=[common], help="print the OverallRoot")
    p.set_defaults(func=cmd_root)

    # -- moving memories in and out, and what a store holds
    p = sub.add_parser("export", parents=[common], help="write the journal as JSON Lines")
    p.add_argument(
        "--since", type=_seq_arg, default=0, help="export only the entries after this seq"
    )
    p.add_argument(
        "--format",
        choices=["jsonl", "md"],
        default="jsonl",
        help="jsonl (importable, default) or md (a table for people)",
    )
    p.add_argument("-o", "--output", default=None, help="write to FILE (default: stdout)")
    p.set_defaults(func=cmd_export)

    p = sub.add_parser(
        "import",
        parents=[common],
        help="replay a journal export into the store, all or nothing (or migrate --from)",
    )
    p.add_argument("file", help="the export (JSON Lines; - reads stdin)")
    p.add_argument(
        "--from",
        dest="from_format",
        default=None,
        metavar="FORMAT",
        help="import another memory system's file instead (mcp-memory, mem0,"
        " claude-memory-sqlite)",
    )
    p.set_defaults(func=cmd_import)

    p = sub.add_parser("stats", parents=[common], help="memories by type and status, sizes, root")
    p.set_defaults(func=cmd_stats)

    p = sub.add_parser("demo", parents=[common], help="run the end-to-end demo")
    p.add_argument("--dir", default=None, help="keep the demo store here")
    p.set_defaults(func=cmd_demo)

    add_extract_parser(sub, common)
    add_claude_code_parser(sub, common)
    add_hook_parser(sub, common)
    add_index_code_parser(sub, common)
    add_mcp_parser(sub, common)
    add_chat_parser(sub, common)
    add_agents_parser(sub, common)
    add_keys_parser(sub, common)
    add_fleet_parser(sub, common)
    add_replication_parser(sub, common)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    out = Output(args.json)
    try:
        code: int = args.func(args, out)
    except NotFoundError as exc:
        fail(out, type(exc).__name__, str(exc))
        return 2 if args.command in ("verify", "verify-fleet") else 1
    except CortexError as exc:
        fail(out, type(exc).__name__, str(exc))
        return 1
    except BrokenPipeError:  # the reader went away (`| head`): stop quietly
        sys.stdout = _devnull()
        return 0
    except OSError as exc:
        fail(out, "OSError", str(exc))
        return 2
    except KeyboardInterrupt:
        return 130
    return code


def _devnull() -> Any:
    return builtins.open(os.devnull, "w")
