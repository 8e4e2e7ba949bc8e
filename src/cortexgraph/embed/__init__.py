"""Embedders: turn texts into unit vectors for vector recall (shell: may do I/O).

Five implementations of the :class:`Embedder` protocol:

- :class:`HashEmbedder` — deterministic feature hashing, no model, identical bits on every
  machine; the default.
- :class:`LocalEmbedder` — all-MiniLM-L6-v2 on ONNX Runtime, on the CPU, offline, without
  torch; ``pip install 'cortexgraph[local]'``.
- :class:`StaticEmbedder` — the same model distilled into static word-piece vectors
  (model2vec): thousands of texts a second, for bulk ingestion and small machines;
  ``pip install 'cortexgraph[static]'``.
- :class:`TorchEmbedder` — the same model on torch (sentence-transformers), for stores
  embedded with it; ``pip install 'cortexgraph[torch]'``.
- :class:`HttpEmbedder` — any OpenAI-compatible ``/v1/embeddings`` server;
  ``pip install 'cortexgraph[http]'``.

Importing this package imports none of onnxruntime, torch or httpx; they load when an
embedder that needs them is created. ``docs/embedders.md`` compares them and shows how to
plug in your own.

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
from .static import StaticEmbedder
from .torch_backend import TorchEmbedder

__all__ = [
    "Embedder",
    "HashEmbedder",
    "HttpEmbedder",
    "LocalEmbedder",
    "StaticEmbedder",
    "TorchEmbedder",
    "check_texts",
    "embedder_for",
    "normalize_rows",
]


def embedder_for(spec: dict[str, object]) -> Embedder:
    """The embedder a store recorded (``{"name", "dim"}``), when it can be made without
    arguments: a :class:`HashEmbedder`, the :class:`LocalEmbedder`, the
    :class:`StaticEmbedder` or the :class:`TorchEmbedder` (each needs its extra).

    Raises:
        ValidationError: the store uses an embedder that needs arguments (an HTTP server):
            open it with ``embedder=...``.
    """
    name, dim = spec.get("name"), spec.get("dim")
    if type(dim) is int and name == f"hash-v1-{dim}":  # HashEmbedder(dim).name, unbuilt
        return HashEmbedder(dim)
    if name == LocalEmbedder.name and dim == LocalEmbedder.dim:
        return LocalEmbedder()
    if name == StaticEmbedder.name and dim == StaticEmbedder.dim:
        return StaticEmbedder()
    if name == TorchEmbedder.name and dim == TorchEmbedder.dim:
        return TorchEmbedder()
    raise ValidationError(
        f"this store's vectors come from embedder {name!r} (dim {dim}); open it with"
        " embedder=... to use vector recall",
        field="embedder",
    )
