"""``cortexgraph mcp``: serve an actor's memory to MCP clients, over stdio (the default)
or streamable HTTP on 127.0.0.1, through :func:`cortexgraph.integrations.mcp.build_server`.

The ``mcp`` SDK is imported when the command runs, so the parser (and ``--help``) work
without the ``mcp`` extra; without it the command fails with ``MissingExtraError``
(exit status 1) saying how to install it.
"""

from __future__ import annotations

import argparse
from typing import Any

from .output import Output

__all__ = ["add_mcp_parser", "cmd_mcp"]


def _port(text: str) -> int:
    """``--port``: a TCP port, 1..65535 (a usage error otherwise)."""
    try:
        port = int(text, 10)
    except ValueError:
        port = 0
    if not 1 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"must be a TCP port (1..65535), not {text!r}")
    return port


def add_mcp_parser(sub: Any, common: argparse.ArgumentParser) -> None:
    """Add the ``mcp`` subcommand to ``sub`` (the parser's subparsers action)."""
    p = sub.add_parser(
        "mcp",
        parents=[common],
        help="serve the memory to MCP clients (stdio, or streamable HTTP on 127.0.0.1)",
    )
    p.add_argument(
        "--transport",
        choices=["stdio", "streamable-http"],
        default="stdio",
        help="stdio (default: the client starts the server) or streamable-http",
    )
    p.add_argument(
        "--port", type=_port, default=8000, help="streamable-http: the port (default 8000)"
    )
    p.add_argument(
        "--compat",
        choices=["memory-server"],
        default=None,
        help="serve the reference MCP memory server's tools instead of cortexgraph's",
    )
    p.set_defaults(func=cmd_mcp)


def cmd_mcp(args: argparse.Namespace, out: Output) -> int:
    """Run the server until the client disconnects (stdio) or the process is stopped."""
    from .. import open as open_store
    from ..integrations.mcp import build_server  # MissingExtraError without the mcp extra

    # open once before serving, so that a bad root or actor, or a store another process
    # holds, is a plain error and exit status 1 rather than a failure inside the transport
    with open_store(args.root, args.actor):
        pass
    server = build_server(args.root, args.actor, compat=args.compat)
    if args.transport == "stdio":
        server.run("stdio")
    else:
        # 127.0.0.1 only: the server has no authentication, so it must not be reachable
        # from another machine
        server.run("streamable-http", host="127.0.0.1", port=args.port)
    return 0
