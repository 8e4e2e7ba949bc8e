"""What every tool of the MCP server shares: the one store handle of the process, opened
by the server's lifespan, and the boundary that turns library errors into tool errors."""

import functools
import os
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any, ParamSpec, TypeVar

from mcp.server.mcpserver.exceptions import ToolError

import cortexgraph as cg

__all__ = ["Store", "tool_errors"]

_P = ParamSpec("_P")
_T = TypeVar("_T")


class Store:
    """The one handle a server process holds, opened by the lifespan.

    The handle is shared: every connection that enters the lifespan while it is open
    (several in-process clients, say) uses it, and the last one out closes it, since a
    process may hold an LMDB environment only once.
    """

    def __init__(self, root: str | os.PathLike[str], actor: str, options: dict[str, Any]):
        self.root = root
        self.actor = actor
        self.options = options
        self._cx: cg.Cortex | None = None
        self._users = 0

    @property
    def cx(self) -> cg.Cortex:
        if self._cx is None:
            raise cg.CortexError("the store is not open (the server's lifespan has not started)")
        return self._cx

    @asynccontextmanager
    async def lifespan(self, _server: object) -> AsyncIterator[None]:
        if self._cx is None:
            self._cx = cg.open(self.root, self.actor, **self.options)
        self._users += 1
        try:
            yield
        finally:
            self._users -= 1
            if self._users == 0:
                cx, self._cx = self._cx, None
                cx.close()


def tool_errors(fn: Callable[_P, Awaitable[_T]]) -> Callable[_P, Awaitable[_T]]:
    """Turn a ``CortexError`` raised by ``fn`` into a tool error naming its type.

    The SDK reports a ``ToolError`` to the client as ``is_error`` with its text and
    logs it without a traceback; anything else would be reported as a crash with the
    message withheld, which tells the model nothing it could correct.
    """

    @functools.wraps(fn)
    async def run(*args: _P.args, **kwargs: _P.kwargs) -> _T:
        try:
            return await fn(*args, **kwargs)
        except cg.CortexError as exc:
            raise ToolError(f"{type(exc).__name__}: {exc}") from exc

    return run
