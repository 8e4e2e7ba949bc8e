"""Which rows a predicate matches: posting lists as arrays, masks per atom, plans, counts.

A predicate (``core.query``) is planned against the table's posting-list sizes: per
alternative, one posting list to start from, lists to intersect or subtract, and atoms
to test on the rows left. This module answers those plans with numpy: a posting list as a
sorted array, and per atom a mask over a given array of rows.

Invariants:

- Everything kept here is derived from the table at one seq: the posting arrays and tag
  bitmaps of a posting list are dropped when the table reports the list changed, and the
  plans and counts are dropped at every catch-up (:meth:`Filter.follow`).
- A mask is never written into once returned (callers may keep it, see ``order``).
- :meth:`Filter.select` returns rows sorted, each once.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import numpy as np
import numpy.typing as npt

from ..core.predicates import Atom, Predicate
from ..core.query import DNF, Conjunct, ConjunctPlan, Plan, plan
from .table import ACTIVE, STATUS_CODE, TYPE_CODE, Change, PostingKey, Rows, Table

__all__ = ["ATOM_COLUMN", "RANGE_KINDS", "Filter", "holds", "literals", "member"]

#: the most query plans (and counts) kept per seq
_PLAN_CACHE = 1_024
#: a tag on at least one row in this many gets a bool per row (``Filter._tagged``) ...
_BITMAP_SHARE = 256
#: ... and the most recently made of those are kept, at most this many
BITMAPS = 64

#: the column each atom kind but "tag" tests
ATOM_COLUMN = {
    "type": "type",
    "status": "status",
    "ns": "ns",
    "pinned": "pinned",
    "since": "at",
    "until": "at",
    "min_confidence": "confidence",
    "min_priority": "priority",
}

#: the atom kinds that compare a column with a bound rather than test a value
RANGE_KINDS = frozenset({"since", "until", "min_confidence", "min_priority"})


class Filter:
    """Posting arrays, per-atom masks, plans and counts over one :class:`Table`."""

    def __init__(self, table: Table) -> None:
        self._table = table
        self._arrays: dict[PostingKey, Rows] = {}
        #: per long posting list, a bool per row (see ``_tagged``), dropped with the array
        self._bitmaps: dict[PostingKey, npt.NDArray[np.bool_]] = {}
        self._plans: dict[Predicate, tuple[int, Plan, str]] = {}
        #: per plan (by id; the plan is kept to check it): the plan, the seq, its count
        self._counts: dict[int, tuple[Plan, int, int]] = {}

    def follow(self, change: Change) -> None:
        """Drop what ``change`` made stale (under the table's lock)."""
        if change.rebuilt:
            self._arrays, self._bitmaps = {}, {}
        else:
            for key in change.posted:
                self._arrays.pop(key, None)
                self._bitmaps.pop(key, None)
        self._plans = {}
        self._counts = {}

    def size(self, atom: Atom) -> int:
        """How many memories the posting list of an indexed atom holds."""
        return len(self._table.postings.get((atom.kind, atom.value), ()))

    def plan(self, predicate: Predicate) -> tuple[Plan, str]:
        """``core.query.plan`` of ``predicate`` against these posting lists, and its
        ``explain()`` text.

        Plans are a function of the predicate and the posting-list sizes, so they are kept
        until the columns move to another seq (at most ``_PLAN_CACHE`` of them).
        """
        seq = self._table.seq
        cached = self._plans.get(predicate)
        if cached is not None and cached[0] == seq:
            return cached[1], cached[2]
        made = plan(predicate, self.size)
        text = made.explain()
        if len(self._plans) < _PLAN_CACHE:
            self._plans[predicate] = (seq, made, text)
        return made, text

    def posting(self, atom: Atom) -> Rows:
        """The rows of an indexed atom's posting list, sorted (kept until it changes)."""
        key = (atom.kind, atom.value)
        array = self._arrays.get(key)
        if array is None:
            array = np.fromiter(sorted(self._table.postings.get(key, ())), dtype=np.int64)
            self._arrays[key] = array
        return array

    def _tagged(self, atom: Atom, rows: Rows) -> npt.NDArray[np.bool_]:
        """Per row of ``rows``: whether its memory carries the tag of ``atom``.

        A tag on at least one row in :data:`_BITMAP_SHARE` is answered from a bool per
        row (one gather; the :data:`BITMAPS` most recently made are kept), a rarer one
        by binary search in its posting list.
        """
        key = (atom.kind, atom.value)
        posting = self.posting(atom)
        if len(posting) * _BITMAP_SHARE < len(self._table.ids):
            return member(rows, posting)
        capacity = len(self._table.cols["type"])
        bitmap = self._bitmaps.get(key)
        if bitmap is None or len(bitmap) != capacity:
            bitmap = np.zeros(capacity, dtype=np.bool_)
            bitmap[posting] = True
            if len(self._bitmaps) >= BITMAPS:
                self._bitmaps.pop(next(iter(self._bitmaps)), None)
            self._bitmaps[key] = bitmap
        found: npt.NDArray[np.bool_] = bitmap.take(rows)
        return found

    def mask(self, atom: Atom, rows: Rows) -> npt.NDArray[np.bool_]:
        """Per row of ``rows``: whether ``atom`` holds for it."""
        if atom.kind == "tag":
            return self._tagged(atom, rows)
        return self.test(atom, self._table.cols[ATOM_COLUMN[atom.kind]][rows])

    def test(self, atom: Atom, values: npt.NDArray[Any]) -> npt.NDArray[np.bool_]:
        """Per value of the column ``atom`` is about (:data:`ATOM_COLUMN`): whether
        ``atom`` holds for it."""
        kind, value = atom.kind, atom.value
        if kind == "type":
            return np.asarray(values == TYPE_CODE[value])
        if kind == "status":
            return np.asarray(values == STATUS_CODE[value])
        if kind == "ns":
            return np.asarray(values == self._table.ns_code.get(value, -1))
        if kind == "pinned":
            return np.asarray(values)
        if kind == "since":
            return np.asarray(values >= value)
        if kind == "until":
            return np.asarray(values < value)
        if kind == "min_confidence":
            return np.asarray(values >= value)
        if kind == "min_priority":
            return np.asarray(values >= value)
        raise AssertionError(f"unknown atom kind {kind!r}")  # pragma: no cover

    def select(self, plan: Plan) -> Rows:
        """The rows the plan matches, sorted, each once."""
        found: list[Rows] = []
        for step in plan.steps:
            rows = self.posting(step.driver)
            for atom in step.intersect:
                if not len(rows):
                    break
                rows = rows[self.mask(atom, rows)]
            for atom in step.subtract:
                rows = rows[~self.mask(atom, rows)]
            for atom, positive in step.residual:
                mask = self.mask(atom, rows)
                rows = rows[mask if positive else ~mask]
            found.append(rows)
        if not found:
            return np.zeros(0, dtype=np.int64)
        if len(found) == 1:
            return found[0]
        return np.unique(np.concatenate(found))

    def count(self, plan: Plan) -> int:
        """``len(self.select(plan))``, without making the rows (one mask per step); kept
        with the plan until the columns move to another seq."""
        seq = self._table.seq
        kept = self._counts.get(id(plan))
        if kept is not None and kept[0] is plan and kept[1] == seq:
            return kept[2]
        matched = self._count(plan)
        if len(self._counts) < _PLAN_CACHE:
            self._counts[id(plan)] = (plan, seq, matched)
        return matched

    def _count(self, plan: Plan) -> int:
        if len(plan.steps) != 1:
            return len(self.select(plan))
        step = plan.steps[0]
        rows = self.posting(step.driver)
        rest = literals(step)[1:]
        if not len(rows) or not rest:
            return len(rows)
        return int(np.count_nonzero(self.passing(rows, (rest,))))

    def passing(self, rows: Rows, conjuncts: Iterable[Conjunct]) -> npt.NDArray[np.bool_]:
        """Per row of ``rows``: whether some conjunct holds for it."""
        return holds(len(rows), conjuncts, lambda atom: self.mask(atom, rows))

    def filter(self, rows: Rows, dnf: DNF) -> Rows:
        """The rows that satisfy a predicate in normal form (with the status default)."""
        status = self._table.cols["status"]
        keep = np.zeros(len(rows), dtype=np.bool_)
        for conjunct in dnf:
            mask = np.ones(len(rows), dtype=np.bool_)
            for atom, positive in conjunct:
                hit = self.mask(atom, rows)
                mask &= hit if positive else ~hit
            if not any(atom.kind == "status" for atom, _ in conjunct):
                mask &= status[rows] == ACTIVE
            keep |= mask
        return rows[keep]


def literals(step: ConjunctPlan) -> Conjunct:
    """Every literal a row must pass for ``step``: its lists, then its residual."""
    return (
        (step.driver, True),
        *((atom, True) for atom in step.intersect),
        *((atom, False) for atom in step.subtract),
        *step.residual,
    )


def holds(
    size: int, conjuncts: Iterable[Conjunct], mask_of: Callable[[Atom], npt.NDArray[np.bool_]]
) -> npt.NDArray[np.bool_]:
    """Per row of ``size``: whether some conjunct holds, every literal ``(atom,
    positive)`` of it being ``mask_of(atom)`` (or its negation). Never writes into a mask
    ``mask_of`` returns (those may be views a walk keeps). No literals: all True; no
    conjuncts: all False."""
    keep: npt.NDArray[np.bool_] | None = None
    for conjunct in conjuncts:
        mask: npt.NDArray[np.bool_] | None = None
        for atom, positive in conjunct:
            hit = mask_of(atom)
            if not positive:
                hit = ~hit
            mask = hit if mask is None else mask & hit
        if mask is None:
            mask = np.ones(size, dtype=np.bool_)
        keep = mask if keep is None else keep | mask
    return np.zeros(size, dtype=np.bool_) if keep is None else keep


def member(rows: Rows, posting: Rows) -> npt.NDArray[np.bool_]:
    """Per row of ``rows``: whether it is in ``posting`` (sorted, each row once), by
    binary search (``np.isin`` sorts both arrays together, which costs more when
    ``rows`` is the shorter).

    >>> member(np.array([5, 1, 9, 3]), np.array([1, 3, 4])).tolist()
    [False, True, False, True]
    """
    if not len(posting):
        return np.zeros(len(rows), dtype=np.bool_)
    found: npt.NDArray[np.bool_] = posting.take(posting.searchsorted(rows), mode="clip") == rows
    return found
