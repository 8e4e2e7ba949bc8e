"""``cortexgraph sync SRC DST`` and ``cortexgraph serve-journal``: journal replication
(:mod:`cortexgraph.replication`).

``sync SRC DST`` brings the store of ``--actor`` under ``DST`` up to the leader ``SRC`` (a
store root, or the ``http://127.0.0.1:PORT`` of a ``serve-journal`` process) after checking
a consistency proof from the follower's own root to the leader's, and with ``--key
PUBKEY`` the leader's signed checkpoint; it exits 0 when synced, 1 when the leader is
refused (a fork, a truncated journal, a bad proof or entry: the follower is unchanged).
``serve-journal`` serves ``--root``/``--actor``'s journal on ``--host`` (127.0.0.1) and
``--port`` until interrupted.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from .output import Output

__all__ = ["add_replication_parser", "cmd_serve_journal", "cmd_sync"]


def add_replication_parser(sub: Any, common: argparse.ArgumentParser) -> None:
    """Add ``sync`` and ``serve-journal`` to ``sub`` (the parser's subparsers action)."""
    p = sub.add_parser(
        "sync",
        parents=[common],
        help="pull the entries a follower lacks from a leader, after a consistency proof",
        description="Exit status: 0 synced, 1 the leader was refused (follower unchanged).",
    )
    p.add_argument("source", metavar="SRC", help="the leader: a store root or an http:// URL")
    p.add_argument("destination", metavar="DST", help="the follower's store root")
    p.add_argument(
        "--key", metavar="PUBKEY", default=None,
        help="require the leader's checkpoint signed with this verifier key (file or text)",
    )  # fmt: skip
    p.set_defaults(func=cmd_sync)

    p = sub.add_parser(
        "serve-journal",
        parents=[common],
        help="serve the store's journal to followers over HTTP (127.0.0.1 by default)",
    )
    p.add_argument("--host", default="127.0.0.1", help="address to listen on")
    p.add_argument("--port", type=int, default=8765, help="port to listen on (0: any free)")
    p.set_defaults(func=cmd_serve_journal)


def cmd_sync(args: argparse.Namespace, out: Output) -> int:
    from ..replication import sync
    from .keys import read_verifier_key
    from .progress import ProgressBar

    key = None if args.key is None else read_verifier_key(args.key)
    with ProgressBar(enabled=not args.json) as bar:
        report = sync(
            args.source, args.destination, args.actor, key=key,
            progress=bar.step(f"syncing {args.actor}"),
        )  # fmt: skip
    out.emit(
        report.to_dict(),
        f"{report.actor}: {report.appended} entries appended (seq {report.before} ->"
        f" {report.after}), root {report.root}",
    )
    return 0


def cmd_serve_journal(args: argparse.Namespace, out: Output) -> int:
    from .. import open as open_store
    from ..replication import make_server

    with open_store(args.root, args.actor, readonly=True) as cx:
        server = make_server(cx, args.host, args.port)
        host, port = str(server.server_address[0]), int(server.server_address[1])
        out.emit(
            {"actor": args.actor, "url": f"http://{host}:{port}"},
            f"serving {args.actor}'s journal at http://{host}:{port} (Ctrl-C stops)",
        )
        sys.stdout.flush()  # a parent process reads the URL before the server ever returns
        try:
            server.serve_forever()
        except KeyboardInterrupt:
            pass
        finally:
            server.server_close()
    return 0
