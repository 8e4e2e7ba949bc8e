"""``cortexgraph chat-context`` and ``cortexgraph chat-garden``: the chat memory
(:mod:`cortexgraph.integrations.chat`) from the command line."""

from __future__ import annotations

import argparse
from typing import Any

from .output import Output

__all__ = ["add_chat_parser", "cmd_chat_context", "cmd_chat_garden"]


def add_chat_parser(sub: Any, common: argparse.ArgumentParser) -> None:
    """Add ``chat-context`` and ``chat-garden`` to ``sub`` (the parser's subparsers action)."""
    p = sub.add_parser(
        "chat-context",
        parents=[common],
        help="print a chat turn's context as a model request payload (read-only)",
    )
    p.add_argument("channel", help="the trigger channel")
    p.add_argument("--budget", type=int, default=2000, help="token budget (default 2000)")
    p.add_argument("--format", default="anthropic", choices=["anthropic", "openai"])
    p.add_argument("--now", type=int, default=None, help="the instant, in ms (default: now)")
    p.add_argument("--ns", default="chat", help="the chat memory's namespace (default chat)")
    p.set_defaults(func=cmd_chat_context)

    p = sub.add_parser(
        "chat-garden",
        parents=[common],
        help="run the chat memory's gardener (compact, extract, evict, harvest) at --now",
    )
    p.add_argument("--now", type=int, required=True, help="the instant, in ms")
    p.add_argument("--ns", default="chat", help="the chat memory's namespace (default chat)")
    p.set_defaults(func=cmd_chat_garden)


def cmd_chat_context(args: argparse.Namespace, out: Output) -> int:
    """Run ``cortexgraph chat-context``: the payload's canonical JSON."""
    from .. import open as open_store
    from ..integrations.chat import ChatMemory, render_json

    with open_store(args.root, args.actor, readonly=True, create=False) as cx:
        chat = ChatMemory(cx, ns=args.ns, recover=False)
        payload = chat.assemble(args.channel, args.budget, now=args.now).to_messages(args.format)
    out.emit(payload, render_json(payload).decode("utf-8"))
    return 0


def cmd_chat_garden(args: argparse.Namespace, out: Output) -> int:
    """Run ``cortexgraph chat-garden``: what each step changed."""
    from .. import open as open_store
    from ..integrations.chat import ChatMemory, Gardener

    with open_store(args.root, args.actor) as cx:
        report = Gardener(ChatMemory(cx, ns=args.ns, now=args.now)).run(now=args.now)
    data = {
        "compacted": list(report.compacted),
        "extracted": [str(uri) for uri in report.extracted],
        "evicted": [str(uri) for uri in report.evicted],
        "harvested": [str(uri) for uri in report.harvested],
        "archived_operations": report.archived_operations,
    }
    text = (
        f"compacted {len(report.compacted)} channels, extracted {len(report.extracted)},"
        f" evicted {len(report.evicted)}, harvested {len(report.harvested)},"
        f" archived {report.archived_operations} operations"
    )
    out.emit(data, text)
    return 0
