"""Embedding ahead of recall: back-fill, embed on write, and catching the vector index up.

Writers fill the ``emb`` cache (after each batch with ``embed_on_write``, or by
:func:`backfill_embeddings`), so readers embed only their query (see
:mod:`cortexgraph.vector.state`).
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable

from .errors import CortexError, ReadOnlyError, ValidationError
from .handle import Handle
from .vector.state import (
    EMBED_BATCH,
    Progress,
    cached_vector,
    content_key,
    embed_and_cache,
    index_directory,
    live_texts,
    save_due,
    uncached,
)

__all__ = ["backfill_embeddings", "embed_written", "sync_vectors"]


def sync_vectors(
    h: Handle, *, progress: Progress | None = None, indexing: Progress | None = None
) -> int:
    """Bring the handle's vector index up to the journal's end now, rather than at the
    next vector recall (which then embeds only its query).

    Vectors a writer cached are reused; what is not cached is embedded, and on a
    read-write handle cached. On a read-only handle it lives in this handle's in-memory
    index only, so every new read-only handle embeds it again: run
    :meth:`Cortex.backfill_embeddings` once to avoid that.

    Args:
        h: an open handle.
        progress: called as ``progress(done, total)`` while texts are embedded (not at
            all when the cache holds every vector).
        indexing: called as ``indexing(done, total)`` while vectors are inserted into
            the index (not at all when there is nothing to insert).

    Returns:
        How many texts were embedded.

    Raises:
        EmbedderError: the embedder failed or returned bad vectors.
    """
    if h.active_batch() is not None:
        raise CortexError("vectors sync with committed state; call it outside the batch")
    with h.indexed_read() as (txn, columns, _):
        return h.vector_state().sync(txn, columns, progress, indexing=indexing)


def backfill_embeddings(h: Handle, *, progress: Progress | None = None) -> int:
    """Carry out :meth:`Cortex.backfill_embeddings` (arguments as documented there)."""
    if h.readonly:
        raise ReadOnlyError(f"{h.path} is open read-only; back-fill needs a read-write handle")
    if h.active_batch() is not None:
        raise CortexError("backfill_embeddings commits on its own; call it outside the batch")
    if progress is not None and not callable(progress):
        raise ValidationError("must be callable as progress(done, total)", field="progress")
    embedder = h.embedder
    name, dim = embedder.name, embedder.dim
    with h.indexed_read() as (txn, columns, _):
        active = [columns.ids[row] for row in columns.active(columns.all_rows()).tolist()]
        ids, texts, _ = live_texts(txn, active)
        missing = [
            memory_id
            for memory_id, text in zip(ids, texts, strict=True)
            if cached_vector(txn, content_key(name, text), dim) is None
        ]
    total, embedded = len(missing), 0
    if progress is not None:
        progress(0, total)
    for start in range(0, total, EMBED_BATCH):
        chunk = missing[start : start + EMBED_BATCH]
        # a short read; the embedding runs outside any transaction and its vectors are
        # committed on their own, so a crash loses at most this chunk
        with h.env.read() as txn:
            pending = uncached(txn, chunk, embedder)
        if pending:
            embed_and_cache(h.env, embedder, pending)
            embedded += len(pending)
        if progress is not None:
            progress(start + len(chunk), total)
    sync_vectors(h)
    h.vector_state().save()
    return embedded


def embed_written(h: Handle, ids: Iterable[bytes]) -> None:
    """After a batch committed on a handle opened with ``embed_on_write=True``: embed and
    cache the vectors of the active memories among ``ids`` that no one cached yet, then
    save the vector index if the saved one lags the journal enough
    (:func:`~cortexgraph.vector.state.save_due`: by 1,000 entries or a quarter of the
    saved ones), so that readers catch up little.

    The batch is committed whatever happens here: an embedder or storage failure becomes a
    ``RuntimeWarning`` (the memories stay unembedded until a back-fill or a recall embeds
    them), never an error of the write that could make a caller write it twice.
    """
    from .vector.hnsw import VectorIndex  # here, not above: hnswlib loads on first use

    try:
        embedder = h.embedder
        with h.env.read() as txn:
            pending = uncached(txn, ids, embedder)
            last = txn.last_seq()
        if pending:
            embed_and_cache(h.env, embedder, pending)
        state = h.vectors
        saved = (
            state.saved
            if state is not None
            else VectorIndex.saved_watermark(index_directory(h.env), name=embedder.name)
        )
        if save_due(last, saved):
            sync_vectors(h)
            h.vector_state().save()
    except CortexError as exc:
        warnings.warn(
            f"the batch is committed, but its memories were not embedded ({exc}); "
            "Cortex.backfill_embeddings (`cortexgraph backfill`) embeds them later",
            RuntimeWarning,
            stacklevel=3,
        )
