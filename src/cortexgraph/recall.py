"""``Cortex.recall``: keyword (BM25), vector (HNSW) and hybrid recall.

Keyword: BM25 over the ``postings`` table, served from the column index's per-term arrays
(``cortexgraph.index``). Vector: the embedder embeds :func:`core.fusion.embed_text` of each
active memory; vectors are cached in the ``emb`` table by (embedder name, content hash)
and indexed by a persisted hnswlib index (``vector.hnsw``) that catches up with the
journal from its watermark before each query. Writers fill the cache (after each batch
with ``embed_on_write``, or by :func:`backfill_embeddings`), so readers embed only their
query; every call of an embedder goes through ``embed.base.embed_checked``. Hybrid:
reciprocal-rank fusion of the two, then graph expansion (1-hop neighbours of the top hits
at a reduced score; ``source_of`` edges attach the code an ArtifactRef holds), with
salience breaking ties.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import attrs
import numpy as np
import numpy.typing as npt

from .batch import record_access
from .core.fusion import (
    CHANNEL_DEPTH,
    EXPANDED_HITS,
    FUSIONS,
    MODES,
    RECALL_BM25,
    expand,
    fuse,
    fuse_scores,
)
from .core.graph import EdgeState, relation_name
from .core.predicates import Predicate, check_predicate
from .core.query import to_dnf
from .core.state import HeadState, Record, slot_setters
from .core.taxonomy import check_utf8
from .core.text import term_counts
from .core.uri import MemoryURI
from .errors import CortexError, ValidationError
from .handle import Handle
from .reading import BareId, read_head, read_record, row_record
from .records import HitSequence

if TYPE_CHECKING:
    from .index import ColumnIndex, Rows
    from .store.txn import ReadTxn

__all__ = ["RecallHit", "RecallResult"]

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
    that cannot fill the channel falls back to scanning every vector. An index without a
    graph (at most ``full_scan_threshold`` vectors) answers both ways exactly, with the
    same hits; there the rule only picks the cheaper: scoring the passing memories' rows,
    or one product over every row with the filter asked from the top down.

    >>> exact_filter_limit(0), exact_filter_limit(10_000), exact_filter_limit(100_000)
    (64, 331, 1048)
    """
    return max(EXACT_FILTERED_MIN, math.isqrt(11 * live))


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
class RecallResult(HitSequence[RecallHit]):
    """The hits of one :meth:`Cortex.recall` call, best first."""

    hits: tuple[RecallHit, ...]
    mode: str
    seq: int


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
    h: Handle,
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
    _check(text, k, mode, fusion, late_binding)
    dnf = to_dnf(check_predicate(where)) if where is not None else None
    if h.active_batch() is not None:
        raise CortexError("recall reads committed state; call it outside the batch")
    now = h.at(now)
    depth = max(CHANNEL_DEPTH, k)
    with h.indexed_read() as (txn, columns, seq):

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
            state = h.vector_state()
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
            record = row_record(txn, h.actor, columns, row, seq)
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
                    None if origin is None else _head_uri(h, txn, columns.ids[origin]),
                    # no active in-edge: no source_of edge to follow
                    _attached(h, txn, columns.ids[row]) if in_edges else (),
                )
            )
    if late_binding and hits:
        record_access(h, [hit.uri for hit in hits], at=now)
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


def _head_uri(h: Handle, txn: ReadTxn, memory_id: bytes) -> MemoryURI:
    head = read_head(txn, BareId(memory_id))
    return MemoryURI.trusted(h.actor, head.ns, memory_id, head.head)


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


def _attached(h: Handle, txn: ReadTxn, memory_id: bytes) -> tuple[Record, ...]:
    """The active memories this one is the target of a ``source_of`` edge from (its code)."""
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
        uri = MemoryURI.trusted(h.actor, head.ns, source, head.head)
        out.append(read_record(txn, h.actor, uri, head, head.head))
    return tuple(out)
