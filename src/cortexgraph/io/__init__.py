"""Moving memories in and out of a store.

:mod:`cortexgraph.io.journal`: the journal exported as JSON Lines (every entry's canonical
CBOR with a readable rendering) or as Markdown, and imported back, all or nothing. The
format and its guarantees: ``docs/export.md``.
"""

from __future__ import annotations

from . import journal
from .journal import *  # noqa: F403  (journal's __all__, listed there once)

__all__ = journal.__all__
