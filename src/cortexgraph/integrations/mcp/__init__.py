"""cortexgraph as an MCP server, on the official ``mcp`` SDK (the ``mcp`` extra).

:func:`build_server` returns an :class:`mcp.server.MCPServer` over one actor's store:
with ``compat=None`` it serves cortexgraph's own tools (remember, recall, find, get,
update, forget, link, traverse, context, prove, scope, root) and resources; with
``compat="memory-server"`` it serves the reference MCP memory server's tool set instead
(:mod:`.compat`). ``cortexgraph mcp`` runs it over stdio or streamable HTTP; a test or a
benchmark connects to it in-process with ``mcp.Client(build_server(...))``.

The store is opened in the server's lifespan, once per process, and every write is
synced (durable) before the tool answers. ``docs/integrations.md`` documents the tools.
"""

from cortexgraph.errors import MissingExtraError

try:
    import mcp as _sdk  # noqa: F401 - only checked for: the modules below import from it
except ImportError as exc:
    raise MissingExtraError(
        "the MCP server needs the 'mcp' extra (the mcp SDK is missing):"
        " pip install 'cortexgraph[mcp]'",
        extra="mcp",
    ) from exc

from .server import COMPAT_MODES, Filter, build_server

__all__ = ["COMPAT_MODES", "Filter", "build_server"]
