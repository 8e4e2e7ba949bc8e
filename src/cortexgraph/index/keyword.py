"""BM25 over the keyword index: term postings as arrays, kept current by the catch-up.

The ``postings`` table holds the keyword index as immutable segments (``core.segments``):
a term's postings are read from every segment (one seek each, :func:`term_segments`) and
a posting counts only while it is live (the memory's index seq, the ``iseq`` column,
lies in its segment's range). :meth:`Keywords.bm25` scores every memory that holds any
query term, with numpy, from the live postings of each term read once from LMDB and then
kept in memory.

Invariants:

- A kept term posting answers exactly as a fresh read of LMDB would at the table's seq:
  each entry carries the index seq it was live for and is ignored once the memory's
  index seq moved on (re-indexed or no longer indexed); the catch-up appends the entry
  of every memory indexed anew for each kept term it holds (:meth:`Keywords.follow`); a
  build drops them all.
- The scores use the same float operations in the same order as
  ``core.text.bm25_scores``, the reference the tests compare against.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import numpy.typing as npt

from ..core.segments import (
    PREFIX_SIZE,
    SEGMENT,
    STATS,
    IdArray,
    block_term,
    decode_stats,
    segment_of_key,
    segment_prefix,
    span,
)
from ..core.text import Bm25Params, bm25_idf
from ..errors import CorruptionError
from ..store.txn import ReadTxn
from .table import Change, Rows, Table

__all__ = ["Keywords", "read_stats", "segment_list", "term_segments"]


def segment_list(txn: ReadTxn) -> list[tuple[int, int]]:
    """``(level, first seq)`` of every segment the ``postings`` table holds, in key
    order: one cursor seek per segment (it jumps past each segment's blocks)."""
    found: list[tuple[int, int]] = []
    with txn.cursor("postings") as cur:
        target = SEGMENT
        while cur.set_range(target):
            key = cur.key()
            if key[:1] != SEGMENT:
                break
            level, first = segment_of_key(bytes(key))
            found.append((level, first))
            target = segment_prefix(level, first + 1)
    return found


def term_segments(
    txn: ReadTxn, term: str, segments: list[tuple[int, int]] | None = None
) -> list[tuple[int, int, IdArray, npt.NDArray[np.int64]]]:
    """A term's postings in each segment that has some: ``(level, first seq, ids,
    term frequencies)``, live or not (one seek per segment).

    Args:
        segments: the segments to look in (:func:`segment_list` when None).
    """
    raw = term.encode("utf-8")
    found = []
    with txn.cursor("postings") as cur:
        for level, first in segment_list(txn) if segments is None else segments:
            prefix = segment_prefix(level, first)
            if not cur.set_range(prefix + raw):
                continue
            key = cur.key()
            if key[:PREFIX_SIZE] != prefix:
                continue
            hit = block_term(bytes(cur.value()), raw)
            if hit is not None:
                found.append((level, first, hit[0], hit[1]))
    return found


def read_stats(txn: ReadTxn) -> tuple[int, int]:
    """``(memories indexed, sum of their lengths)`` (K2)."""
    return decode_stats(txn.get("postings", STATS))

#: cached term posting lists beyond this many are dropped (and rescanned on demand)
_MAX_CACHED_TERMS = 50_000


class _Terms:
    """One term's postings as arrays, with the index seq each entry was live for."""

    __slots__ = ("gen", "pending", "rows", "tf")

    def __init__(self, rows: Rows, tf: Rows, gen: Rows) -> None:
        self.rows, self.tf, self.gen = rows, tf, gen
        self.pending: list[tuple[int, int, int]] = []

    def settle(self) -> None:
        if self.pending:
            rows, tf, gen = zip(*self.pending, strict=True)
            self.rows = np.concatenate((self.rows, np.asarray(rows, dtype=np.int64)))
            self.tf = np.concatenate((self.tf, np.asarray(tf, dtype=np.int64)))
            self.gen = np.concatenate((self.gen, np.asarray(gen, dtype=np.int64)))
            self.pending = []


class Keywords:
    """Term postings and BM25 scores over the rows of one :class:`Table`."""

    def __init__(self, table: Table) -> None:
        self._table = table
        self._terms: dict[str, _Terms] = {}

    def following(self) -> bool:
        """Whether a catch-up must report the memories indexed anew with their terms:
        only while some term is kept (a keyword recall read it)."""
        return bool(self._terms)

    def follow(self, change: Change) -> None:
        """Add the entries of the memories indexed anew to the kept terms (under the
        table's lock)."""
        if change.rebuilt:
            self._terms = {}
            return
        terms = self._terms
        for row, index_seq, indexed in change.heads:
            if indexed is not None:
                for term, tf in indexed.items():
                    cached = terms.get(term)
                    if cached is not None:
                        cached.pending.append((row, tf, index_seq))

    def term_postings(self, txn: ReadTxn, term: str) -> tuple[Rows, Rows]:
        """``(rows, term frequencies)`` of the memories whose indexed version holds
        ``term`` (the live postings of every segment), read from LMDB once and then kept
        current by the catch-up."""
        iseq = self._table.cols["iseq"]
        cached = self._terms.get(term)
        if cached is None:
            rows_parts: list[Rows] = [np.zeros(0, dtype=np.int64)]
            tf_parts: list[Rows] = [np.zeros(0, dtype=np.int64)]
            for level, first, ids, tf in term_segments(txn, term):
                rows = self._rows_of(ids, term)
                held = iseq[rows]
                live = (held >= first) & (held < first + span(level))
                rows_parts.append(rows[live])
                tf_parts.append(tf[live])
            rows_array = np.concatenate(rows_parts)
            if len(self._terms) >= _MAX_CACHED_TERMS:
                self._terms.clear()
            cached = self._terms[term] = _Terms(
                rows_array, np.concatenate(tf_parts), iseq[rows_array]
            )
        cached.settle()
        valid = cached.gen == iseq[cached.rows]
        if valid.all():
            return cached.rows, cached.tf
        return cached.rows[valid], cached.tf[valid]

    def _rows_of(self, ids: npt.NDArray[np.uint8], term: str) -> Rows:
        """The rows of memory ids (one 16-byte id per row of ``ids``): a binary search
        over the rows a build loaded in id order, the id map for the rest."""
        table = self._table
        count = len(ids)
        high = np.ascontiguousarray(ids[:, :8]).view(">u8").ravel().astype(np.uint64)
        low = np.ascontiguousarray(ids[:, 8:]).view(">u8").ravel().astype(np.uint64)
        rows = np.zeros(count, dtype=np.int64)
        found = np.zeros(count, dtype=np.bool_)
        sorted_rows = table.sorted_rows
        if sorted_rows and count:
            cols = table.cols
            at = np.searchsorted(cols["idkey"][:sorted_rows], high)
            inside = np.flatnonzero(at < sorted_rows)
            match = inside[
                (cols["idkey"][at[inside]] == high[inside])
                & (cols["idlo"][at[inside]] == low[inside])
            ]
            rows[match] = at[match]
            found[match] = True
        for i in np.flatnonzero(~found).tolist():
            row = table.row_of.get(ids[i].tobytes())
            if row is None:
                raise CorruptionError(f"a posting of {term!r} names an unknown memory")
            rows[i] = row
        return rows

    def bm25(
        self, txn: ReadTxn, terms: Iterable[str], params: Bm25Params
    ) -> tuple[Rows, npt.NDArray[np.float64]]:
        """BM25 scores of every memory matching any of ``terms``: ``(rows, scores)``.

        Per term, the same float operations in the same order as ``core.text.bm25_scores``
        (the reference the tests compare against), summed over terms in the given order.
        """
        n_docs, total = read_stats(txn)
        if not n_docs:
            return np.zeros(0, dtype=np.int64), np.zeros(0)
        avg = total / n_docs
        k1, b = params.k1, params.b
        found_rows: list[Rows] = []
        found_scores: list[npt.NDArray[np.float64]] = []
        for term in terms:
            rows, tf = self.term_postings(txn, term)
            if not len(rows):
                continue
            idf = bm25_idf(n_docs, len(rows))
            dl = self._table.cols["dlen"][rows]
            tf_f = tf.astype(np.float64)
            found_rows.append(rows)
            found_scores.append(idf * tf_f * (k1 + 1.0) / (tf_f + k1 * (1.0 - b + b * dl / avg)))
        if not found_rows:
            return np.zeros(0, dtype=np.int64), np.zeros(0)
        all_rows = np.concatenate(found_rows)
        # Dense accumulators over every row: bincount adds each row's scores in input
        # order (term by term), as the sum over np.unique's inverse did, without a sort.
        size = len(self._table.ids)
        matched = np.flatnonzero(np.bincount(all_rows, minlength=size))
        totals = np.bincount(all_rows, weights=np.concatenate(found_scores), minlength=size)
        return matched, np.asarray(totals[matched], dtype=np.float64)
