"""The I/O shell around hnswlib: a persisted, verified approximate-nearest-neighbour index.

:class:`~cortexgraph.vector.hnsw.VectorIndex` maps 16-byte memory ids to vectors and answers
cosine-similarity searches. It is derived state: :class:`~cortexgraph.vector.state.VectorState`
decides what to embed and when, and rebuilds the index from its embedding cache whenever
``open`` reports it ``"missing"`` or ``"damaged"``. See ``docs/vector-index.md``.

``VectorIndex`` is loaded on first use, so that importing this package (or
``vector.state``) does not load hnswlib: ``import cortexgraph`` stays light.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .hnsw import VectorIndex

__all__ = ["VectorIndex"]


def __getattr__(name: str) -> Any:
    if name == "VectorIndex":
        from .hnsw import VectorIndex  # here, not above: hnswlib loads on first use

        return VectorIndex
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
