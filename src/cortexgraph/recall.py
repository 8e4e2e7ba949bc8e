"""``Cortex.recall``: keyword (BM25), vector (HNSW) and hybrid recall.

Keyword: BM25 over the ``postings`` table, served from the column index's per-term arrays
(``store.columns``). Vector: the embedder embeds :func:`core.fusion.embed_text` of each
active memory; vectors are cached in the ``emb`` table by (embedder name, content hash)
and indexed by a persisted hnswlib index (``vector.index``) that catches up with the
journal from its watermark before each query. Writers fill the cache (after each batch
with ``embed_on_write``, or by :func:`backfill_embeddings`), so readers embed only their
query; every call of an embedder goes through ``embed.base.embed_checked``. Hybrid:
reciprocal-rank fusion of the two, then graph expansion (1-hop neighbours of the top hits
at a reduced score; ``source_of`` edges attach the code an ArtifactRef holds), with
salience breaking ties.
"""

from __future__ import annotations

import math
import struct
import warnings
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, overload

import attrs
import blake3
import numpy as np
import numpy.typing as npt

from .core.codec import decode_unchecked
from .core.fusion import (
    CHANNEL_DEPTH,
    EXPANDED_HITS,
    FUSIONS,
    MODES,
    RECALL_BM25,
    embed_text,
    expand,
    fuse,
    fuse_scores,
)
from .core.graph import EdgeState, relation_name
from .core.journal import head_ids
from .core.keys import seq_key
from .core.query import Predicate, check_predicate, to_dnf
from .core.state import HeadState, Record, VersionState, slot_setters
from .core.taxonomy import check_utf8
from .core.text import term_counts
from .core.uri import MemoryURI
from .embed.base import embed_checked
from .errors import CorruptionError, CortexError, ReadOnlyError, ValidationError

if TYPE_CHECKING:
    from .cortex import Cortex
    from .embed import Embedder
    from .store.columns import ColumnIndex, Rows
    from .store.env import ReadTxn
    from .vector.index import VectorIndex

__all__ = ["RecallHit", "RecallResult", "sync_vectors"]

#: ``progress(done, total)``, called as long work advances
Progress = Callable[[int, int], None]

MAX_K = 1000
#: a filter passing few memories is answered by exact vector search over them (see
#: :func:`exact_filter_limit`); at least this many count as few
EXACT_FILTERED_MIN = 64


def exact_filter_limit(live: int) -> int:
    """The most memories a filter may pass for the vector channel to search them exactly
    (``VectorIndex.search_among``) rather than by hnswlib's filtered graph search, with
    ``live`` vectors in the index.

    Exact search costs about 30 µs a passing memory (reading its vector back from
    hnswlib); a filtered graph search visits about ``ef / share passing`` elements, which
    measured as ``0.33 ms x live / passing`` (100,000 vectors, ef 101). The two cost the
    same at ``passing = sqrt(11 x live)``: about 330 memories of 10,000, 1,050 of
    100,000. Below :data:`EXACT_FILTERED_MIN` exact search always wins: a graph search
    that cannot fill the channel falls back to scanning every vector.

    >>> exact_filter_limit(0), exact_filter_limit(10_000), exact_filter_limit(100_000)
    (64, 331, 1048)
    """
    return max(EXACT_FILTERED_MIN, math.isqrt(11 * live))
#: a writer saves its vector index once this many journal entries are not in the saved
#: one (at the next recall, or after the batch with ``embed_on_write``), so a reader
#: loading it catches up at most about this many memories (about 0.1 ms each)
SAVE_EVERY = 1_000
_EMBED_BATCH = 256


@attrs.frozen
class RecallHit:
    """One result of :meth:`Cortex.recall`, with what each channel said about it.

    Attributes:
        uri: the memory, pinned to its head version.
        record: the head version.
        score: the final score (BM25 in keyword mode, cosine similarity in vector mode,
            the fused reciprocal-rank score in hybrid mode; reduced for expanded hits).
        ranks: the 1-based rank the memory had in each channel that found it.
        scores: each channel's own score (``"keyword"``: BM25, ``"vector"``: cosine).
        salience: the salience score at ``now`` (the tie-break).
        via: for a memory added by graph expansion, the hit it was reached from.
        attached: records linked to this hit by ``source_of`` edges (e.g. the
            ArtifactRef holding the code a Fact describes).
    """

    uri: MemoryURI
    record: Record
    score: float
    ranks: Mapping[str, int]
    scores: Mapping[str, float]
    salience: int
    via: MemoryURI | None = None
    attached: tuple[Record, ...] = ()


(_SET_URI, _SET_RECORD, _SET_SCORE, _SET_RANKS, _SET_SCORES, _SET_SALIENCE, _SET_VIA,
 _SET_ATTACHED) = slot_setters(RecallHit)  # fmt: skip


def _hit(
    uri: MemoryURI,
    record: Record,
    score: float,
    ranks: Mapping[str, int],
    scores: Mapping[str, float],
    salience: int,
    via: MemoryURI | None,
    attached: tuple[Record, ...],
) -> RecallHit:
    """``RecallHit(...)`` for values recall has already checked, without attrs' frozen
    ``__init__`` (about a microsecond a hit): each slot set directly. A test holds the
    two equal."""
    hit: RecallHit = object.__new__(RecallHit)
    _SET_URI(hit, uri)
    _SET_RECORD(hit, record)
    _SET_SCORE(hit, score)
    _SET_RANKS(hit, ranks)
    _SET_SCORES(hit, scores)
    _SET_SALIENCE(hit, salience)
    _SET_VIA(hit, via)
    _SET_ATTACHED(hit, attached)
    return hit


@attrs.frozen
class RecallResult(Sequence[RecallHit]):
    """The hits of one :meth:`Cortex.recall` call, best first."""

    hits: tuple[RecallHit, ...]
    mode: str
    seq: int

    @overload
    def __getitem__(self, index: int) -> RecallHit: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[RecallHit]: ...
    def __getitem__(self, index: int | slice) -> RecallHit | Sequence[RecallHit]:
        return self.hits[index]

    def __len__(self) -> int:
        return len(self.hits)

    def __iter__(self) -> Iterator[RecallHit]:
        return iter(self.hits)

    @property
    def uris(self) -> list[MemoryURI]:
        return [hit.uri for hit in self.hits]


# ---------------------------------------------------------------------------
# the vector side


def content_key(name: str, text: str) -> bytes:
    """The ``emb`` cache key: embedder name, NUL, BLAKE3 of the embedded text."""
    return name.encode("utf-8") + b"\0" + blake3.blake3(text.encode("utf-8")).digest()


def _index_directory(cx: Cortex) -> Path:
    return Path(cx.path) / "vectors"


def _live_texts(txn: ReadTxn, ids: Iterable[bytes]) -> tuple[list[tuple[bytes, str]], set[bytes]]:
    """The text to embed (:func:`core.fusion.embed_text`) of each active memory of ``ids``,
    in order, and the set of those that are not active."""
    live: list[tuple[bytes, str]] = []
    inactive: set[bytes] = set()
    for memory_id in ids:
        raw = txn.get("heads", memory_id)
        if raw is None:
            raise CortexError(f"memory {memory_id.hex()} vanished from the store")
        head = HeadState.decode(raw)
        if head.status != "active":
            inactive.add(memory_id)
            continue
        version = txn.get("versions", memory_id + struct.pack(">I", head.head))
        if version is None:
            raise CortexError(f"memory {memory_id.hex()} has no head version")
        live.append((memory_id, embed_text(VersionState.decode(version).memory(), head.ns)))
    return live, inactive


def _cached(txn: ReadTxn, key: bytes, dim: int) -> npt.NDArray[np.float32] | None:
    """The cached vector under ``key``, or None (a row of the wrong size counts as none)."""
    raw = txn.get("emb", key)
    if raw is None or len(raw) != 4 * dim:
        return None
    return np.frombuffer(raw, dtype="<f4")


def _uncached(txn: ReadTxn, ids: Iterable[bytes], embedder: Embedder) -> dict[bytes, str]:
    """Cache key -> text of the active memories of ``ids`` whose vector is not cached."""
    name, dim = embedder.name, embedder.dim
    pending: dict[bytes, str] = {}
    for _, text in _live_texts(txn, ids)[0]:
        key = content_key(name, text)
        if key not in pending and _cached(txn, key, dim) is None:
            pending[key] = text
    return pending


def _embed_and_cache(
    cx: Cortex, embedder: Embedder, pending: Mapping[bytes, str]
) -> dict[bytes, npt.NDArray[np.float32]]:
    """Embed the texts of ``pending`` (cache key -> text) and cache the vectors, in a write
    transaction of their own (nothing is cached on a read-only handle)."""
    keys = list(pending)
    matrix = embed_checked(embedder, [pending[key] for key in keys])
    rows = [(key, row.tobytes()) for key, row in zip(keys, matrix, strict=True)]
    cx._env.write_cache("emb", rows)
    return dict(zip(keys, matrix, strict=True))


class VectorState:
    """One handle's vector index and the embedder that fills it.

    The index is loaded from ``<store>/vectors/`` when first needed and kept for the
    handle's life; :meth:`sync` catches it up with the journal, taking vectors from the
    ``emb`` cache and embedding only what no one cached. A read-only handle cannot cache
    what it embeds nor save the index: what it embeds lives in its in-memory index only.
    """

    def __init__(self, cx: Cortex, embedder: Embedder) -> None:
        from .vector.index import VectorIndex

        self.cx = cx
        self.embedder = embedder
        self.index: VectorIndex = VectorIndex.open(
            _index_directory(cx), name=embedder.name, dim=embedder.dim
        )
        #: the watermark of the index saved on disk (None: none saved)
        self.saved: int | None = self.index.watermark if self.index.status == "loaded" else None
        self.unsaved = 0
        #: column-index row of each vector label (-1: none), for the numbering of the
        #: column index's build ``_rows_build``
        self._rows: npt.NDArray[np.int64] = np.zeros(0, dtype=np.int64)
        self._rows_build = -1

    def _label_rows(self, columns: ColumnIndex) -> npt.NDArray[np.int64]:
        """The column-index row of every label given out so far (-1: none known)."""
        count = self.index.label_count()
        if self._rows_build != columns.builds:
            self._rows, self._rows_build = np.zeros(0, dtype=np.int64), columns.builds
        if len(self._rows) < count:
            row_of, id_of = columns.row_of, self.index.id_of
            fresh = [row_of.get(id_of(label), -1) for label in range(len(self._rows), count)]
            self._rows = np.concatenate((self._rows, np.asarray(fresh, dtype=np.int64)))
        return self._rows

    def label_filter(self, columns: ColumnIndex, passing: Rows) -> Callable[[int], bool]:
        """Whether a label's memory is among the column-index rows ``passing``, as a
        C-level callable (a bool array's ``item``) for hnswlib's filter: a filtered
        search asks it about hundreds to thousands of labels."""
        rows = self._label_rows(columns)
        passes = np.zeros(len(columns.ids), dtype=np.bool_)
        passes[passing] = True
        ok = np.zeros(len(rows), dtype=np.bool_)
        known = rows >= 0
        ok[known] = passes[rows[known]]
        test: Callable[[int], bool] = ok.item
        return test

    def rows_of(self, labels: list[int], columns: ColumnIndex) -> list[int]:
        """The column-index rows of the memories vector ``labels`` name."""
        rows = self._label_rows(columns)
        found: list[int] = list(map(rows.item, labels))
        if -1 in found:  # not mapped yet when first seen
            for i, row in enumerate(found):
                if row < 0:
                    memory_id = self.index.id_of(labels[i])
                    mapped = columns.row_of.get(memory_id)
                    if mapped is None:
                        raise CorruptionError(
                            f"the vector index holds memory {memory_id.hex()}, which the "
                            "store lacks"
                        )
                    rows[labels[i]] = found[i] = mapped
        return found

    def sync(self, txn: ReadTxn, columns: ColumnIndex, progress: Progress | None = None) -> int:
        """Bring the index to the journal's end: index what changed, drop what left.

        Vectors come from the ``emb`` cache; the rest are embedded (and cached, on a
        read-write handle). ``progress(done, total)`` follows the embedding, if any.

        Returns:
            How many texts were embedded (0 when the cache held every vector).
        """
        last = txn.last_seq()
        index = self.index
        if index.watermark == last:
            return 0
        if index.watermark > last or index.watermark == 0:
            todo = {columns.ids[row]: None for row in columns.active(columns.all_rows())}
            gone: set[bytes] = set(index.ids()) - set(todo)
        else:
            todo, gone = self._changed(txn, index.watermark), set()
        live, inactive = _live_texts(txn, todo)
        gone |= inactive
        vectors, embedded = self._vectors(txn, [text for _, text in live], progress)
        for (memory_id, _), vector in zip(live, vectors, strict=True):
            index.upsert(memory_id, vector)
        for memory_id in sorted(gone):
            if memory_id in index:
                index.remove(memory_id)
        self.unsaved += len(live) + len(gone)
        index.watermark = last
        if self.unsaved >= SAVE_EVERY:
            self.save()
        return embedded

    def _changed(self, txn: ReadTxn, since: int) -> dict[bytes, None]:
        """The memories whose head changed after journal seq ``since``."""
        todo: dict[bytes, None] = {}
        with txn.cursor("journal") as cur:
            if cur.set_range(seq_key(since + 1)):
                for _, value in cur:
                    entry = decode_unchecked(bytes(value), what="a journal entry")
                    todo.update(dict.fromkeys(head_ids(entry["op"], entry)))
        return todo

    def _vectors(
        self, txn: ReadTxn, texts: list[str], progress: Progress | None
    ) -> tuple[list[npt.NDArray[np.float32]], int]:
        """Vectors for ``texts``: from the ``emb`` cache, else embedded (and cached), in
        chunks; and how many texts were embedded."""
        name, dim = self.embedder.name, self.embedder.dim
        keys = [content_key(name, text) for text in texts]
        found: dict[bytes, npt.NDArray[np.float32]] = {}
        for key in keys:
            vector = _cached(txn, key, dim)
            if vector is not None:
                found[key] = vector
        missing = list(dict.fromkeys(k for k in keys if k not in found))
        if missing:
            text_of = dict(zip(keys, texts, strict=True))
            if progress is not None:
                progress(0, len(missing))
            for start in range(0, len(missing), _EMBED_BATCH):
                chunk = missing[start : start + _EMBED_BATCH]
                pending = {key: text_of[key] for key in chunk}
                found.update(_embed_and_cache(self.cx, self.embedder, pending))
                if progress is not None:
                    progress(start + len(chunk), len(missing))
        return [found[key] for key in keys], len(missing)

    def save(self) -> None:
        """Save the index if it changed since it was loaded or saved (never on a read-only
        handle: what a reader embedded is kept in memory only)."""
        index = self.index
        if not self.cx.readonly and (index.dirty or index.watermark != self.saved):
            index.save(index.watermark)
            self.saved = index.watermark
        self.unsaved = 0

    def query(self, text: str) -> npt.NDArray[np.float32]:
        """A query's vector: the text embedded as it is, without the ``[type] [ns]`` prefix
        memories get (measured: prefixing questions lowered vector recall on LoCoMo)."""
        first: npt.NDArray[np.float32] = embed_checked(self.embedder, [text])[0]
        return first


# ---------------------------------------------------------------------------
# embedding ahead of recall: back-fill, embed on write, catch-up


def sync_vectors(cx: Cortex, *, progress: Progress | None = None) -> int:
    """Bring the handle's vector index up to the journal's end now, rather than at the
    next vector recall (which then embeds only its query).

    Vectors a writer cached are reused; what is not cached is embedded, and on a
    read-write handle cached. On a read-only handle it lives in this handle's in-memory
    index only, so every new read-only handle embeds it again: run
    :meth:`Cortex.backfill_embeddings` once to avoid that.

    Args:
        cx: an open handle.
        progress: called as ``progress(done, total)`` while texts are embedded (not at
            all when the cache holds every vector).

    Returns:
        How many texts were embedded.

    Raises:
        EmbedderError: the embedder failed or returned bad vectors.
    """
    if cx._active_batch() is not None:
        raise CortexError("vectors sync with committed state; call it outside the batch")
    with cx._indexed_read() as (txn, columns, _):
        return cx._vector_state().sync(txn, columns, progress)


def backfill_embeddings(cx: Cortex, *, progress: Progress | None = None) -> int:
    """Carry out :meth:`Cortex.backfill_embeddings` (arguments as documented there)."""
    if cx.readonly:
        raise ReadOnlyError(f"{cx.path} is open read-only; back-fill needs a read-write handle")
    if cx._active_batch() is not None:
        raise CortexError("backfill_embeddings commits on its own; call it outside the batch")
    if progress is not None and not callable(progress):
        raise ValidationError("must be callable as progress(done, total)", field="progress")
    embedder = cx.embedder
    name, dim = embedder.name, embedder.dim
    with cx._indexed_read() as (txn, columns, _):
        active = [columns.ids[row] for row in columns.active(columns.all_rows()).tolist()]
        missing = [
            memory_id
            for memory_id, text in _live_texts(txn, active)[0]
            if _cached(txn, content_key(name, text), dim) is None
        ]
    total, embedded = len(missing), 0
    if progress is not None:
        progress(0, total)
    for start in range(0, total, _EMBED_BATCH):
        chunk = missing[start : start + _EMBED_BATCH]
        # a short read; the embedding runs outside any transaction and its vectors are
        # committed on their own, so a crash loses at most this chunk
        with cx._env.read() as txn:
            pending = _uncached(txn, chunk, embedder)
        if pending:
            _embed_and_cache(cx, embedder, pending)
            embedded += len(pending)
        if progress is not None:
            progress(start + len(chunk), total)
    sync_vectors(cx)
    cx._vector_state().save()
    return embedded


def embed_written(cx: Cortex, ids: Iterable[bytes]) -> None:
    """After a batch committed on a handle opened with ``embed_on_write=True``: embed and
    cache the vectors of the active memories among ``ids`` that no one cached yet, then
    save the vector index if the saved one lags the journal by :data:`SAVE_EVERY` entries
    or more (so readers catch up little).

    The batch is committed whatever happens here: an embedder or storage failure becomes a
    ``RuntimeWarning`` (the memories stay unembedded until a back-fill or a recall embeds
    them), never an error of the write that could make a caller write it twice.
    """
    from .vector.index import VectorIndex

    try:
        embedder = cx.embedder
        with cx._env.read() as txn:
            pending = _uncached(txn, ids, embedder)
            last = txn.last_seq()
        if pending:
            _embed_and_cache(cx, embedder, pending)
        state = cx._vectors
        saved = (
            state.saved
            if state is not None
            else VectorIndex.saved_watermark(_index_directory(cx), name=embedder.name)
        )
        if last - (saved or 0) >= SAVE_EVERY:
            sync_vectors(cx)
            cx._vector_state().save()
    except CortexError as exc:
        warnings.warn(
            f"the batch is committed, but its memories were not embedded ({exc}); "
            "Cortex.backfill_embeddings (`cortexgraph backfill`) embeds them later",
            RuntimeWarning,
            stacklevel=3,
        )


# ---------------------------------------------------------------------------
# recall


def _check(text: object, k: object, mode: object, fusion: object, late_binding: object) -> None:
    if type(text) is not str or not text.strip():
        raise ValidationError("must be a non-empty string", field="text")
    check_utf8(text, "text")  # here, or the embedder's own check would blame "texts"
    if type(k) is not int or not 1 <= k <= MAX_K:
        raise ValidationError(f"must be an integer in 1..{MAX_K}", field="k")
    if mode not in MODES:
        raise ValidationError(f"must be one of {', '.join(MODES)}, not {mode!r}", field="mode")
    if fusion not in FUSIONS:
        raise ValidationError(
            f"must be one of {', '.join(FUSIONS)}, not {fusion!r}", field="fusion"
        )
    if type(late_binding) is not bool:
        raise ValidationError("must be True or False", field="late_binding")


def _ranked(
    columns: ColumnIndex, rows: Rows, scores: npt.NDArray[Any], depth: int
) -> tuple[list[int], list[float]]:
    """The ``depth`` best rows by score descending, ties by memory id, with their scores.

    Only the rows scoring at least the ``depth``-th best score are sorted (all of them
    if there are ties at the cut), so the order is the one a sort of every row gives.
    """
    if not len(rows):
        return [], []
    if len(rows) > depth:
        threshold = np.partition(scores, len(rows) - depth)[len(rows) - depth]
        pool = scores >= threshold
        rows, scores = rows[pool], scores[pool]
    order = np.lexsort((columns.cols["idkey"][rows], -scores))[:depth]
    ranked: list[int] = rows[order].tolist()
    ranked_scores: list[float] = scores[order].tolist()
    return ranked, ranked_scores


def run_recall(
    cx: Cortex,
    text: str,
    *,
    k: int,
    where: Predicate | None,
    mode: str,
    fusion: str,
    late_binding: bool,
    now: int | None,
    expand_graph: bool,
) -> RecallResult:
    """Carry out :meth:`Cortex.recall` (arguments as documented there)."""
    from .cortex import _row_record

    _check(text, k, mode, fusion, late_binding)
    dnf = to_dnf(check_predicate(where)) if where is not None else None
    if cx._active_batch() is not None:
        raise CortexError("recall reads committed state; call it outside the batch")
    now = cx._at(now)
    depth = max(CHANNEL_DEPTH, k)
    with cx._indexed_read() as (txn, columns, seq):

        def allowed(rows: Rows) -> Rows:
            return columns.active(rows) if dnf is None else columns.filter(rows, dnf)

        rankings: dict[str, list[int]] = {}  # per channel, rows best first
        found: dict[str, list[float]] = {}  # per channel, their scores
        if mode in ("keyword", "hybrid"):
            rows, bm25 = columns.bm25(txn, list(term_counts(text)), RECALL_BM25)
            kept = allowed(rows)
            if len(kept) != len(rows):
                # rows is sorted and kept is a subsequence of it
                bm25 = bm25[np.searchsorted(rows, kept)]
                rows = kept
            ranked, ranked_scores = _ranked(columns, rows, bm25, depth)
            if mode == "keyword":
                ranked, ranked_scores = _candidates_of(ranked, ranked_scores, k)
            rankings["keyword"], found["keyword"] = ranked, ranked_scores
        if mode in ("vector", "hybrid"):
            state = cx._vector_state()
            state.sync(txn, columns)
            # vector mode needs only its candidates: the first k and their ties
            first = k if mode == "vector" else None
            passing = None if dnf is None else allowed(columns.all_rows())
            query = state.query(text)
            if passing is None:
                labels, sims = state.index.search_labels(query, depth, first=first)
            elif len(passing) <= exact_filter_limit(len(state.index)):
                ids = [columns.ids[row] for row in passing.tolist()]
                labels, sims = state.index.search_among(query, depth, ids, first=first)
            else:
                labels, sims = state.index.search_labels(
                    query, depth, allowed_labels=state.label_filter(columns, passing), first=first
                )
            if mode == "vector":
                labels, sims = _candidates_of(labels, sims, k)
            rankings["vector"], found["vector"] = state.rows_of(labels, columns), sims
        if mode != "hybrid":
            # One channel, already cut to its candidates: its ranking is the order
            candidates, top_scores = rankings[mode], found[mode]
            fused = dict(zip(candidates, top_scores, strict=True))
            channel = {mode: fused}
            positions = {mode: {row: rank for rank, row in enumerate(candidates, start=1)}}
            via: dict[int, int] = {}
            # all scores distinct: the ranking is the final order (no tie for salience)
            settled = len(set(top_scores)) == len(top_scores)
        else:
            channel = {
                name: dict(zip(ranked, found[name], strict=True))
                for name, ranked in rankings.items()
            }
            fused = fuse(rankings) if fusion == "rrf" else fuse_scores(channel)
            via = {}
            if expand_graph and fused:
                top = sorted(fused, key=lambda r: (-fused[r], columns.ids[r]))[:EXPANDED_HITS]
                neighbours = _neighbours(txn, columns, top, allowed)
                for row, (score, parent) in expand(fused, top, neighbours).items():
                    fused[row] = score
                    via[row] = parent
            candidates = sorted(fused, key=lambda r: -fused[r])[: 4 * k + 16]
            if len(candidates) > k:
                # salience only breaks ties: a candidate scoring below the k-th cannot
                # make the cut, so only those scoring at least as much need their salience
                cut = fused[candidates[k - 1]]
                candidates = [row for row in candidates if fused[row] >= cut]
            positions = {
                name: {row: rank for rank, row in enumerate(ranked, start=1)}
                for name, ranked in rankings.items()
            }
            settled = False
        salience = dict(zip(candidates, columns.scores_of(candidates, now), strict=True))
        if settled:
            final = candidates
        else:
            final = sorted(candidates, key=lambda r: (-fused[r], -salience[r], columns.ids[r]))
            del final[k:]
        linked = columns.cols["indeg"][final].tolist()  # 0: no active in-edge at all
        hits = []
        for row, in_edges in zip(final, linked, strict=True):
            record = _row_record(txn, cx.actor, columns, row, seq)
            origin = via.get(row)
            if mode == "hybrid":
                ranks = {c: p[row] for c, p in positions.items() if row in p}
                scores = {c: v[row] for c, v in channel.items() if row in v}
            else:  # every candidate is in the one channel
                ranks, scores = {mode: positions[mode][row]}, {mode: fused[row]}
            hits.append(
                _hit(
                    record.uri,
                    record,
                    fused[row],
                    ranks,
                    scores,
                    salience[row],
                    None if origin is None else _head_uri(cx, txn, columns.ids[origin]),
                    # no active in-edge: no source_of edge to follow
                    _attached(cx, txn, columns.ids[row]) if in_edges else (),
                )
            )
    if late_binding and hits:
        cx._record_access([hit.uri for hit in hits], at=now)
    return RecallResult(tuple(hits), mode, seq)


def _candidates_of(
    items: list[int], scores: list[float], k: int
) -> tuple[list[int], list[float]]:
    """One channel's candidates (ranked best first): salience only breaks ties, so the
    first ``k`` and whatever ties the ``k``-th, at most ``4k + 16``.

    >>> _candidates_of([1, 2, 3, 4, 5, 6], [9.0, 8.0, 7.0, 7.0, 7.0, 6.0], 3)
    ([1, 2, 3, 4, 5], [9.0, 8.0, 7.0, 7.0, 7.0])
    """
    end = min(len(scores), k)
    if end:
        cut = scores[end - 1]
        most = min(len(scores), 4 * k + 16)
        while end < most and scores[end] >= cut:
            end += 1
    return items[:end], scores[:end]


def _head_uri(cx: Cortex, txn: ReadTxn, memory_id: bytes) -> MemoryURI:
    from .cortex import _BareId, _read_head

    head = _read_head(txn, _BareId(memory_id))
    return MemoryURI.trusted(cx.actor, head.ns, memory_id, head.head)


def _neighbours(
    txn: ReadTxn, columns: ColumnIndex, rows: list[int], allowed: Any
) -> dict[int, list[int]]:
    """Active 1-hop neighbours (either direction, any relation but ``source_of``) of each
    row that pass the filter."""
    found: dict[int, list[int]] = {}
    for row in rows:
        memory_id = columns.ids[row]
        near: list[int] = []
        for prefix in (b"o", b"i"):
            for key, value in txn.iter_items("edges", prefix + memory_id):
                if relation_name(key[17]) == "source_of" or not EdgeState.decode(value).active:
                    continue
                other = columns.row_of.get(bytes(key[18:]))
                if other is not None and other not in near:
                    near.append(other)
        if near:
            kept = set(allowed(np.asarray(near, dtype=np.int64)).tolist())
            found[row] = [r for r in near if r in kept]
    return found


def _attached(cx: Cortex, txn: ReadTxn, memory_id: bytes) -> tuple[Record, ...]:
    """The active memories this one is the target of a ``source_of`` edge from (its code)."""
    from .cortex import _read_record

    out = []
    for key, value in txn.iter_items("edges", b"i" + memory_id):
        if relation_name(key[17]) != "source_of" or not EdgeState.decode(value).active:
            continue
        source = bytes(key[18:])
        raw = txn.get("heads", source)
        if raw is None:
            continue
        head = HeadState.decode(raw)
        if head.status != "active":
            continue
        uri = MemoryURI.trusted(cx.actor, head.ns, source, head.head)
        out.append(_read_record(txn, cx.actor, uri, head, head.head))
    return tuple(out)
