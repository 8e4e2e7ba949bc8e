"""Migration from other agent memories: ``import_from(cx, format, path)``.

Three source formats (``FORMATS``), one reader each:

- ``mcp-memory``: the JSON Lines file of the reference MCP memory server
  (:mod:`cortexgraph.migrate.mcp_memory`);
- ``mem0``: the JSON of mem0's ``Memory.get_all()`` (:mod:`cortexgraph.migrate.mem0`);
- ``claude-memory-sqlite``: the SQLite database of the Claude Code memory plugin
  (:mod:`cortexgraph.migrate.claude_sqlite`).

Every import reads and checks the whole file first, then writes it in one batch: a bad
record raises a ``ValidationError`` naming its line, record or row, and the store is
unchanged. Imports are idempotent: each memory is tagged with its id in the source, and a
second import of the same file writes nothing (see :mod:`cortexgraph.migrate.plan`).
``docs/migration.md`` has the mapping tables and examples.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from ..cortex import Cortex
from ..errors import ValidationError
from .claude_sqlite import read_claude_sqlite
from .mcp_memory import read_mcp_memory
from .mem0 import read_mem0
from .plan import MigrationReport, Plan, apply_plan

__all__ = ["FORMATS", "MigrationReport", "import_from"]

#: The formats :func:`import_from` reads.
FORMATS = ("mcp-memory", "mem0", "claude-memory-sqlite")

_READERS: dict[str, Callable[..., Plan]] = {
    "mcp-memory": read_mcp_memory,
    "mem0": read_mem0,
    "claude-memory-sqlite": read_claude_sqlite,
}


def import_from(
    cx: Cortex,
    fmt: str,
    path: str | Path,
    *,
    progress: Callable[[int, int], None] | None = None,
    at: int | None = None,
    owner: str | None = None,
) -> MigrationReport:
    """Import the memories of another system from ``path`` into ``cx``, in one batch.

    Args:
        cx: the store, open for writing.
        fmt: the source format, one of :data:`FORMATS`.
        path: the source file.
        progress: called with ``(done, total)`` as records are written.
        at: the time given to records without a timestamp of their own (the MCP memory
            server keeps none); default: the store's clock, read once.
        owner: ``mem0`` only: the mem0 user (or agent) id whose memories to import;
            default: the store's actor. Records of other owners are skipped.

    Returns:
        A :class:`MigrationReport`: the memories and edges imported, and every record
        skipped with its reason (already imported, another owner, ...).

    Raises:
        ValidationError: an unknown format (field ``format``), a missing file (field
            ``path``), or a bad record, named by its line, record or row. Nothing is
            written then.
    """
    reader = _READERS.get(fmt) if type(fmt) is str else None
    if reader is None:
        raise ValidationError(
            f"unknown format {fmt!r}; one of {', '.join(FORMATS)}", field="format"
        )
    if owner is not None and fmt != "mem0":
        raise ValidationError("only a mem0 import has owners", field="owner")
    options = {} if owner is None else {"owner": owner}
    plan = reader(Path(path), actor=cx.actor, **options)
    return apply_plan(cx, plan, at=at, progress=progress)
