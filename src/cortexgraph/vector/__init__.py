"""The I/O shell around hnswlib: a persisted, verified approximate-nearest-neighbour index.

:class:`~cortexgraph.vector.index.VectorIndex` maps 16-byte memory ids to vectors and answers
cosine-similarity searches. It is derived state: the recall layer decides what to embed and
when, and rebuilds the index from its embedding cache whenever ``open`` reports it
``"missing"`` or ``"damaged"``. See ``docs/vector-index.md``.
"""

from __future__ import annotations

from .index import VectorIndex

__all__ = ["VectorIndex"]
