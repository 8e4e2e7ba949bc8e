"""Where the Claude Code plugin keeps its memories.

Two stores, each a cortexgraph store root holding one actor's environment:

- the **project** store, ``<project>/.memory/`` with actor ``project``, for what belongs
  to one repository (its architecture, decisions, gotchas, progress);
- the **global** store, ``~/.claude/memory/`` with actor ``global``, for what holds across
  projects. The environment variable ``CORTEXGRAPH_HOME`` overrides its directory (tests
  and sandboxes point it at a temporary directory).

The install bookkeeping (the backup of the settings file, see :mod:`.install`) lives in
the same directories, so that everything the plugin writes is under one of the two.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

import attrs

import cortexgraph as cg

if TYPE_CHECKING:
    from ...embed import Embedder

__all__ = [
    "GLOBAL_ACTOR",
    "HOME_ENV",
    "PROJECT_ACTOR",
    "StoreLocation",
    "global_store",
    "project_store",
    "same_text",
]

PROJECT_ACTOR = "project"
GLOBAL_ACTOR = "global"
HOME_ENV = "CORTEXGRAPH_HOME"


@attrs.frozen
class StoreLocation:
    """A store as :func:`cortexgraph.open` takes it: ``open(location.root, location.actor)``.

    Attributes:
        root: the directory that holds the actor's environment (``<root>/<actor>/``).
        actor: the actor's name.
    """

    root: Path
    actor: str

    def exists(self) -> bool:
        """Whether the store was ever written (reading commands and hooks create none)."""
        return (self.root / self.actor / "data.mdb").is_file()

    def open(
        self,
        embedder: Embedder | None = None,
        *,
        create: bool = False,
        readonly: bool = False,
        autolink: bool = False,
    ) -> cg.Cortex:
        """Open the store; with an embedder configured, that embedder (a store created
        with another one is switched to it when writable: the settings are the user's
        current choice) and memories embedded as they are written."""
        if embedder is None:
            return cg.open(
                self.root, self.actor, create=create, readonly=readonly, autolink=autolink
            )
        return cg.open(
            self.root,
            self.actor,
            create=create,
            readonly=readonly,
            autolink=autolink,
            embedder=embedder,
            reembed=not readonly,
            embed_on_write=not readonly,
        )


def project_store(project: str | os.PathLike[str]) -> StoreLocation:
    """The project store of the repository (or directory) ``project``: ``<project>/.memory/``."""
    return StoreLocation(Path(project).absolute() / ".memory", PROJECT_ACTOR)


def global_store(
    environ: Mapping[str, str] | None = None, *, home: str | os.PathLike[str] | None = None
) -> StoreLocation:
    """The global store: ``$CORTEXGRAPH_HOME`` when set (and not empty), else ``~/.claude/memory/``.

    Args:
        environ: the environment to read (default: ``os.environ``).
        home: the user's home directory (default: ``Path.home()``, which reads ``HOME``).
    """
    env = os.environ if environ is None else environ
    override = env.get(HOME_ENV, "")
    if override:
        return StoreLocation(Path(override).expanduser().absolute(), GLOBAL_ACTOR)
    base = Path(home) if home is not None else Path.home()
    return StoreLocation(base / ".claude" / "memory", GLOBAL_ACTOR)


def same_text(cx: cg.Cortex, text: str) -> cg.Record | None:
    """The active memory of ``cx`` whose text is exactly ``text``, if there is one: an
    identical text is among its own best keyword matches (extraction cursors aside)."""
    from ...extract.ingest import CURSOR_NS  # here: reading hooks need none of extraction

    try:
        found = cx.recall(text, k=50, mode="keyword", where=~cg.Q.ns(CURSOR_NS))
    except cg.ValidationError:  # a text recall refuses (no indexable word) has no twin
        return None
    for hit in found:
        if hit.record.memory.text == text:
            return hit.record
    return None
