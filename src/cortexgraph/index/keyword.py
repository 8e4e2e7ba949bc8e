"""BM25 over the keyword index: term postings as arrays, kept current by the catch-up.

The ``postings`` table holds, per term, one key per memory whose indexed version holds
it (with the term frequency), and per memory its forward posting (length and terms).
:meth:`Keywords.bm25` scores every memory that holds any query term, with numpy, from
the postings of each term read once from LMDB and then kept in memory.

Invariants:

- A kept term posting answers exactly as a fresh read of LMDB would at the table's seq:
  each entry carries the generation (``gen`` column) it was valid for and is ignored
  once the memory's head moved on; the catch-up appends the new head's entry for every
  kept term it holds (:meth:`Keywords.follow`); a build drops them all.
- The scores use the same float operations in the same order as
  ``core.text.bm25_scores``, the reference the tests compare against.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import numpy.typing as npt

from ..core.postings import posting_prefix, read_stats
from ..core.text import Bm25Params, bm25_idf
from ..errors import CorruptionError
from ..store.txn import ReadTxn
from .table import Change, Rows, Table

__all__ = ["Keywords"]

#: cached term posting lists beyond this many are dropped (and rescanned on demand)
_MAX_CACHED_TERMS = 50_000


class _Terms:
    """One term's postings as arrays, with the generation each entry was valid for."""

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
        """Whether a catch-up must report the moved heads' postings: only while some
        term is kept (a keyword recall read it)."""
        return bool(self._terms)

    def follow(self, change: Change) -> None:
        """Add the new heads' entries to the kept terms (under the table's lock)."""
        if change.rebuilt:
            self._terms = {}
            return
        terms = self._terms
        for row, seq, forward in change.heads:
            if forward is not None:
                for term, tf in forward.items():
                    cached = terms.get(term)
                    if cached is not None:
                        cached.pending.append((row, tf, seq))

    def term_postings(self, txn: ReadTxn, term: str) -> tuple[Rows, Rows]:
        """``(rows, term frequencies)`` of the memories whose indexed version holds
        ``term``, read from LMDB once and then kept current by the catch-up."""
        gen = self._table.cols["gen"]
        cached = self._terms.get(term)
        if cached is None:
            prefix = posting_prefix(term)
            keys, values = txn.prefix_range("postings", prefix)
            count = len(keys)
            width = len(prefix) + 16
            joined_keys, joined_values = b"".join(keys), b"".join(values)
            if len(joined_keys) != count * width or len(joined_values) != 4 * count:
                raise CorruptionError(f"a posting of {term!r} is malformed")
            ids = np.frombuffer(joined_keys, dtype=np.uint8).reshape(count, width)
            rows_array = self._rows_of(ids[:, len(prefix) :], term)
            tf = np.frombuffer(joined_values, dtype=">u4").astype(np.int64)
            if len(self._terms) >= _MAX_CACHED_TERMS:
                self._terms.clear()
            cached = self._terms[term] = _Terms(rows_array, tf, gen[rows_array])
        cached.settle()
        valid = cached.gen == gen[cached.rows]
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
