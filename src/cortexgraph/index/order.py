"""Rows in order: by salience, recency, priority or confidence, best first, lazily.

Two ways to give a query's matches in order:

- *select and sort* (:meth:`Orders.ordered`): every match keyed (salience scored exactly,
  vectorised), then only a pool that must hold the first rows the caller reads sorted,
  growing 4 x each time the caller reads past it;
- *walk* (:meth:`Orders.walk_salience`, :meth:`Orders.walk_key`): one type's rows kept
  sorted by an upper bound of their key (:class:`BoundOrder`), read in growing rounds and
  tested against the predicate on the way, so that a top-10 over a long posting list
  reads a few hundred rows instead of scoring every match. :meth:`Orders.walk_budget`
  weighs which way is cheaper; a walk that reads past its budget falls back to selecting.

Invariants:

- Both ways give the same rows in the same order: key descending, ties by memory id
  ascending (the full 16 bytes), exactly.
- A bound order is only used for instants from the one its bounds were taken at; rows
  changed since it was sorted are marked and scored (or keyed) up front, never read from
  their stale place; it is dropped when its static terms are recomputed afresh, when too
  many rows changed (:data:`_WALK_CHANGED`) or when a build renumbers the rows.
- The walks add no Python call per row read: rows are tested per round with numpy, and
  only the matches a walk yields or scores are handled one by one.
"""

from __future__ import annotations

import heapq
import itertools
import math
from collections.abc import Callable, Iterator
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt

from ..core.predicates import Atom
from ..core.query import Conjunct, Plan
from .filter import ATOM_COLUMN, BITMAPS, RANGE_KINDS, Filter, holds, literals
from .ppm import ppm_one
from .score import Scores
from .table import TYPE_CODE, TYPE_COUNT, Change, Rows, Table

__all__ = ["KEY_ORDERS", "BoundOrder", "Orders"]

#: a salience walk (``walk_salience``) first reads this many rows of the bound order,
#: then twice as many each round
_WALK_FIRST = 512
#: ``walk_budget`` proposes a walk only when the posting lists a select would start from
#: hold at least this many rows together (below that, select and sort costs less)
_WALK_MIN = 2_048
#: a walk this long (ms) after the instant the bounds were taken at sorts them again
_WALK_FRESH = 86_400_000
#: the bound order is sorted anew once more rows than this (or a 16th of all) changed
_WALK_CHANGED = 1_024
#: the most plans whose walk shape is kept per seq
_SHAPES = 1_024

#: the column of each order ``walk_key`` walks
_KEY_COLUMN = {"recent": "at", "priority": "priority"}
#: the orders ``walk_key`` can walk (``find``'s other orders: salience, confidence)
KEY_ORDERS = frozenset(_KEY_COLUMN)
#: the column of each order ``ordered`` sorts by a column
_ORDER_COLUMN = {"recent": "at", "priority": "priority", "confidence": "confidence"}


class BoundOrder(NamedTuple):
    """Each type's rows by an upper bound of their salience score, for
    :meth:`Orders.walk_salience` (or by a column exactly, for :meth:`Orders.walk_key`).

    A row's bound is its exact score at the instant ``since`` plus 1 (recency only
    decays, so no later score is higher), and at most ``(static + recency weight x
    1,000,000) // 1,000,000`` (recency at its most, 1; exact for memories that do not
    decay). A walk at an instant before ``since`` cannot use the order and selects.
    Rows whose static terms moved since the order was sorted are *changed*: their place
    in ``rows`` is out of date, so a walk skips them there and scores them all up front
    instead.
    """

    #: every row that existed when the order was sorted, by type code, then by bound
    #: descending
    rows: Rows
    #: those rows' bounds, in the same order
    bounds: Rows
    #: where each type code's rows start in ``rows`` (one more entry: the end)
    starts: Rows
    #: per row: whether it changed since the sort (rows added since included)
    changed: npt.NDArray[np.bool_]
    #: the rows marked in ``changed``, ascending
    changed_rows: Rows
    #: the bounds hold at this instant (ms) and every later one
    since: int
    #: columns and atoms' tests taken in the order of ``rows`` (see ``_mask_in_order``)
    views: dict[Any, npt.NDArray[Any]]


class _WalkShape(NamedTuple):
    """What :meth:`Orders.walk_budget` weighs for a plan (kept per plan and seq)."""

    #: the type atom every step requires
    kind: Atom
    #: how many rows have that type (the walk reads at most these)
    segment: int
    #: the rows a select reads first (the steps' driving posting lists together)
    driven: int
    #: the matches expected, as if the atoms were independent
    expected: float
    #: each step's literals (see ``filter.literals``)
    conjuncts: tuple[Conjunct, ...]
    #: the same without the type atom: what a row of that type must still pass
    rest: tuple[Conjunct, ...]


class Orders:
    """Ordering and walks over one :class:`Table`, with its :class:`Filter` and
    :class:`Scores`."""

    def __init__(self, table: Table, filters: Filter, scores: Scores) -> None:
        self._table, self._filters, self._scores = table, filters, scores
        #: every row by an upper bound of its score (see ``BoundOrder``); None: not
        #: sorted since the static terms were last computed afresh
        self._order: BoundOrder | None = None
        #: per order by a column ("recent", "priority"), every row by that column exactly
        #: (a ``BoundOrder`` whose bounds are the keys); dropped when a build renumbers
        self._key_orders: dict[str, BoundOrder] = {}
        #: per plan (by id; the plan is kept to check it): the plan, the seq, its shape
        self._shapes: dict[int, tuple[Plan, int, _WalkShape | None]] = {}

    def follow(self, change: Change) -> None:
        """Drop or mark what ``change`` made stale (under the table's lock)."""
        self._shapes = {}
        if change.rebuilt:
            self._order, self._key_orders = None, {}
            return
        if change.rescaled:
            self._order = None  # sorted anew when a walk next needs it
        touched, size = change.touched, len(self._table.ids)
        if not len(touched):
            return
        if self._order is not None:
            self._order = _with_changed(self._order, touched, size)
        for name, kept in list(self._key_orders.items()):
            changed = _with_changed(kept, touched, size)
            if changed is None:
                del self._key_orders[name]
            else:
                self._key_orders[name] = changed

    # -- select and sort -------------------------------------------------------------------

    def ordered(
        self,
        rows: Rows,
        order_by: str,
        now: int,
        *,
        first: int = 16,
        scores: dict[int, int] | None = None,
    ) -> Iterator[int]:
        """The rows in the order ``order_by``, ties by memory id; lazily, best first.

        ``first`` is how many rows the caller expects to read (more cost a second, larger
        round). For ``"salience"``, the exact score of every row it computed is left in
        ``scores`` (row -> score at ``now``), so the caller need not compute it again.
        """
        if order_by == "salience":
            if len(rows):
                keys = self._scores.exact_scores(rows, now)
                found = {} if scores is None else scores
                yield from self._by_column(rows, keys, max(first, 1), found)
            return
        column = self._table.cols[_ORDER_COLUMN[order_by]]
        yield from self._by_column(rows, column[rows], max(first, 1))

    def _by_column(
        self,
        rows: Rows,
        key: npt.NDArray[Any],
        first: int,
        keys: dict[int, Any] | None = None,
    ) -> Iterator[int]:
        """Exact order by a key per row: sort only a pool that must hold the first
        ``first`` (then 4 x, 16 x, ... as the caller keeps reading). The key of every
        row yielded is left in ``keys`` when it is given."""
        want = first
        done = 0
        while done < len(rows):
            if want >= len(rows):
                pool, pool_key = rows, key
            else:
                threshold = np.partition(key, len(rows) - want)[len(rows) - want]
                keep = key >= threshold
                pool, pool_key = rows[keep], key[keep]
            ranked, ranked_key = self._exact_order(pool, pool_key)
            end = min(want, len(rows))
            if keys is not None:
                keys.update(zip(ranked[done:end], ranked_key[done:end], strict=True))
            yield from ranked[done:end]
            done = end
            want *= 4

    def _exact_order(self, pool: Rows, key: npt.NDArray[Any]) -> tuple[list[int], list[Any]]:
        """``pool`` sorted by key descending, then memory id ascending (exactly), and the
        keys in that order."""
        idkey = self._table.cols["idkey"][pool]
        order = np.lexsort((idkey, -key))
        ranked: list[int] = pool[order].tolist()
        ranked_key, ranked_id = key[order], idkey[order]
        values: list[Any] = ranked_key.tolist()
        same = (ranked_key[1:] == ranked_key[:-1]) & (ranked_id[1:] == ranked_id[:-1])
        if same.any():  # two ids share their first 8 bytes: settle it on the full ids
            by_row = dict(zip(ranked, values, strict=True))
            ids = self._table.ids
            ranked.sort(key=lambda r: (-by_row[r], ids[r]))
            values = [by_row[r] for r in ranked]
        return ranked, values

    def _selected(
        self,
        plan: Plan,
        key_of: Callable[[Rows], npt.NDArray[Any]],
        first: int,
        skip: int,
        keys: dict[int, Any] | None = None,
    ) -> Iterator[int]:
        """The rows ``plan`` selects by ``key_of(rows)`` descending, ties by id (as
        :meth:`ordered` gives them), without the first ``skip``: where a walk that gave
        up goes on. The key of every row yielded is left in ``keys`` when it is given."""
        rows = self._filters.select(plan)
        return itertools.islice(self._by_column(rows, key_of(rows), skip + first, keys), skip, None)

    # -- choosing a walk -------------------------------------------------------------------

    def walk(
        self, plan: Plan, order_by: str, now: int, *, first: int, scores: dict[int, int]
    ) -> Iterator[int] | None:
        """``plan``'s matches in the order ``order_by``, by :meth:`walk_salience` or
        :meth:`walk_key`; None when selecting is the better way (see :meth:`walk_budget`)."""
        if order_by == "salience":
            budget = self.walk_budget(plan, first, now)
            if budget is not None:
                return self.walk_salience(plan, now, budget=budget, first=first, scores=scores)
        elif order_by in _KEY_COLUMN:
            budget = self.walk_key_budget(plan, first)
            if budget is not None:
                return self.walk_key(plan, order_by, budget=budget, first=first)
        return None

    def walk_budget(self, plan: Plan, first: int, now: int) -> int | None:
        """How many rows :meth:`walk_salience` may read for ``plan`` before it gives up
        and selects, or None when selecting is the better way (or a walk cannot run).

        A walk reads one type's rows best bound first, so every alternative of the
        predicate must name the same type (``Q.type(Fact) & Q.tag("deploy")``, say).
        Selecting reads the rows of each alternative's driving posting list, then scores
        every match. A walk pays off when those lists are long and the matches not rare:
        it expects to read ``first x the type's rows / matches`` rows before it has
        ``first`` matches, where matches are estimated from the planned list sizes as if
        the atoms were independent. It walks when that is at most half its budget, twice
        the rows a select would read; a walk that runs past its budget falls back to
        selecting, so a bad estimate costs at most about three times a select. Nor does
        it walk at an instant before the one the order's bounds hold from; at an instant
        more than :data:`_WALK_FRESH` after it, the order is dropped, to be sorted again
        with bounds for that instant (about 10 ms at 100,000 memories).
        """
        order = self._order
        if order is not None and now < order.since:
            return None
        if order is not None and now - order.since > _WALK_FRESH:
            with self._table.lock:  # bounds a day old are loose: sorted again for ``now``
                if self._order is order:
                    self._order = None
        return self.walk_key_budget(plan, first)

    def walk_key_budget(self, plan: Plan, first: int) -> int | None:
        """:meth:`walk_budget` for :meth:`walk_key`: the same weighing, with no instant
        to check."""
        shape = self._shape_of(plan)
        if shape is None:
            return None
        budget = 2 * shape.driven
        if first * shape.segment > shape.expected * budget / 2:
            return None
        return budget

    def _shape_of(self, plan: Plan) -> _WalkShape | None:
        """:meth:`_walk_shape` of ``plan``, kept until the columns move to another seq."""
        seq = self._table.seq
        kept = self._shapes.get(id(plan))
        if kept is not None and kept[0] is plan and kept[1] == seq:
            return kept[2]
        shape = self._walk_shape(plan)
        if len(self._shapes) < _SHAPES:
            self._shapes[id(plan)] = (plan, seq, shape)
        return shape

    def _walk_shape(self, plan: Plan) -> _WalkShape | None:
        """What :meth:`walk_budget` weighs for ``plan``; None if it cannot be walked or
        selecting it reads too few rows to be worth a walk."""
        total = len(self._table.ids)
        driven = sum(step.sizes[0] for step in plan.steps)
        kind = _walk_type(plan)
        if driven < _WALK_MIN or not total or kind is None:
            return None
        expected = sum(
            math.prod(size / total for size in step.sizes[1:]) * step.sizes[0]
            for step in plan.steps
        )
        conjuncts = tuple(literals(step) for step in plan.steps)
        # rows of the walked type need not be tested for it again
        rest = tuple(tuple(lit for lit in step if lit != (kind, True)) for step in conjuncts)
        return _WalkShape(kind, self._filters.size(kind), driven, expected, conjuncts, rest)

    # -- the orders a walk reads -----------------------------------------------------------

    def _bound_order(self, now: int) -> BoundOrder:
        """The rows by an upper bound of their score (see :class:`BoundOrder`), sorted
        when first needed after the static terms were computed afresh, with bounds for
        every instant from ``now`` on."""
        table = self._table
        while True:
            order = self._order
            if order is not None:
                return order
            static_parts = self._scores.parts()
            static = static_parts[0]
            count = len(static)
            upper = static + table.weights[4] * 1_000_000
            upper //= 1_000_000
            # a score only falls as time passes (recency decays): the score at ``now``
            # bounds every later one; the 1 added covers a last-place difference in
            # ``0.5 ** x`` between two instants that could round a factor up by 1 ppm
            later = self._scores.exact_scores(np.arange(count, dtype=np.int64), now)
            later += 1
            np.minimum(upper, later, out=upper)
            types = table.cols["type"][:count]
            made = _sorted_order(types, upper, np.lexsort((-upper, types)), now)
            with table.lock:
                if self._scores.kept is static_parts and self._order is None:
                    self._order = made
                    return made
            # the static terms moved meanwhile (a refresh): sort again

    def _key_order(self, order_by: str) -> BoundOrder:
        """Each type's rows by the column of ``order_by`` descending, then id ascending:
        exactly the order ``ordered`` gives (sorted when first needed)."""
        table = self._table
        while True:
            kept = self._key_orders.get(order_by)
            if kept is not None:
                return kept
            size = len(table.ids)
            cols = table.cols
            types = cols["type"][:size]
            key = cols[_KEY_COLUMN[order_by]][:size]
            ranked = np.lexsort((cols["idlo"][:size], cols["idkey"][:size], -key, types))
            made = _sorted_order(types, key, ranked, 0)
            with table.lock:
                if len(table.ids) == size and order_by not in self._key_orders:
                    self._key_orders[order_by] = made
                    return made
            # rows came or a build renumbered them meanwhile: sort again

    def _mask_in_order(
        self, order: BoundOrder, atom: Atom, start: int, stop: int
    ) -> npt.NDArray[np.bool_]:
        """``Filter.mask`` of ``order.rows[start:stop]``, read from the order's views and
        never written into: an atom on a range (``since``, ``min_priority``, ...) tests
        its column taken in the order's row order once; any other atom is tested on
        every row once (at most ``filter.BITMAPS`` of those kept). A view is only right
        for rows that did not change since it was taken, which are the only ones a walk
        reads from the order."""
        views = order.views
        ranged = atom.kind in RANGE_KINDS
        key: Any = ATOM_COLUMN[atom.kind] if ranged else atom
        view = views.get(key)
        if view is None:
            if ranged:
                view = self._table.cols[key].take(order.rows)
            else:
                tested = [name for name in views if type(name) is Atom]
                if len(tested) >= BITMAPS:
                    views.pop(tested[0], None)
                view = self._filters.mask(atom, order.rows)
            views[key] = view
        part = view[start:stop]
        return self._filters.test(atom, part) if ranged else part

    def _changed_matches(self, order: BoundOrder, shape: _WalkShape) -> Rows:
        """The rows changed since ``order`` was sorted that the walked plan matches."""
        changed = order.changed_rows
        found: Rows = changed.compress(self._filters.passing(changed, shape.conjuncts))
        return found

    def _round(
        self, order: BoundOrder, shape: _WalkShape, start: int, stop: int
    ) -> tuple[Rows, list[int]]:
        """The rows of ``order.rows[start:stop]`` the walked plan matches, in order, but
        for changed rows (out of place there), and their bounds: tested on the order's
        views (see :meth:`_mask_in_order`)."""
        keep = holds(
            stop - start, shape.rest, lambda atom: self._mask_in_order(order, atom, start, stop)
        )
        rows = order.rows[start:stop]
        if len(order.changed_rows):
            keep = keep & ~order.changed.take(rows)
        bounds: list[int] = order.bounds[start:stop].compress(keep).tolist()
        return rows.compress(keep), bounds

    # -- the walks -------------------------------------------------------------------------

    def walk_salience(
        self, plan: Plan, now: int, *, budget: int, first: int, scores: dict[int, int]
    ) -> Iterator[int]:
        """The rows ``plan`` matches in exact salience order (ties by memory id), lazily:
        the same rows in the same order as ``ordered(select(plan), "salience", now)``.
        Only for a plan :meth:`walk_budget` gave a budget for.

        Rather than score every match, it reads the rows of the plan's type best bound
        first (see :class:`BoundOrder`), in rounds of :data:`_WALK_FIRST` rows then twice
        as many. A match it has read is scored only when its bound is the best left; the
        scored ones wait in a heap, and the best of them is yielded once its score beats
        the bound of every match not scored and every row not read (so at a tie it reads
        or scores on). Changed rows, out of place in the order, are scored up front.
        After ``budget`` rows it stops and falls back to selecting and sorting, skipping
        the rows it has already yielded. The score of every row yielded is left in
        ``scores``.
        """
        shape = self._shape_of(plan)
        assert shape is not None, "walk_salience needs a plan walk_budget accepts"
        order = self._bound_order(now)
        exact_scores = self._scores.exact_scores

        def salience(rows: Rows) -> npt.NDArray[np.int64]:
            return exact_scores(rows, now)

        if now < order.since:  # sorted meanwhile for a later instant (another thread)
            yield from self._selected(plan, salience, first, 0, scores)
            return
        table = self._table
        ids = table.ids
        static_all, life_all, _ = self._scores.parts()
        at_all, weight = table.cols["at"], table.weights[4]
        # the matches scored, as (-score, id, row): the best first, ties by id
        heap: list[tuple[int, bytes, int]] = []
        if len(order.changed_rows):
            found = self._changed_matches(order, shape).tolist()
            for row, score in zip(found, self._scores.scores_of(found, now), strict=True):
                heapq.heappush(heap, (-score, ids[row], row))
        # the matches read but not scored yet, by bound descending (as read), from
        # ``next_waiting`` on: row, bound, and what scoring it needs
        waiting: list[tuple[int, int, int, float, int]] = []
        next_waiting = 0
        code = TYPE_CODE[shape.kind.value]
        start, end = int(order.starts[code]), int(order.starts[code + 1])
        unread = int(order.bounds[start]) if start < end else -1  # the best unread bound
        size, read, yielded = _WALK_FIRST, 0, 0
        while True:
            pending = waiting[next_waiting][1] if next_waiting < len(waiting) else -1
            if heap and -heap[0][0] > max(unread, pending):
                # nothing unscored can reach this score (at a tie, it reads or scores on:
                # an unscored row might tie with a smaller id)
                negative, _, row = heapq.heappop(heap)
                scores[row] = -negative
                yielded += 1
                yield row
            elif pending >= 0 and pending >= unread:  # score the best unscored match
                row, _, static, life, at = waiting[next_waiting]
                next_waiting += 1
                age = now - at
                recency = ppm_one(0.5 ** (age / int(life))) if life and age > 0 else 1_000_000
                heapq.heappush(heap, (-((static + weight * recency) // 1_000_000), ids[row], row))
            elif start < end:  # read the next round
                if read >= budget:
                    yield from self._selected(plan, salience, first, yielded, scores)
                    return
                stop = min(start + size, end)
                found, bounds = self._round(order, shape, start, stop)
                # read after every waiting match, so no higher bound than theirs
                waiting += zip(
                    found.tolist(),
                    bounds,
                    static_all.take(found).tolist(),
                    life_all.take(found).tolist(),
                    at_all.take(found).tolist(),
                    strict=True,
                )
                read += stop - start
                start = stop
                unread = int(order.bounds[start]) if start < end else -1
                size *= 2
            else:
                return

    def walk_key(self, plan: Plan, order_by: str, *, budget: int, first: int) -> Iterator[int]:
        """The rows ``plan`` matches ordered by ``order_by`` (``"recent"`` or
        ``"priority"``), ties by memory id, lazily: the same rows in the same order as
        ``ordered(select(plan), order_by, now)``. Only for a plan
        :meth:`walk_key_budget` gave a budget for.

        It merges two sorted streams: the matches among the plan's type's rows in the
        key order (read in rounds, as :meth:`walk_salience` reads), and the changed rows
        that match, out of place in the order, in a heap by the same key. Past
        ``budget`` rows read it falls back to selecting and sorting.
        """
        shape = self._shape_of(plan)
        assert shape is not None, "walk_key needs a plan walk_key_budget accepts"
        order = self._key_order(order_by)
        ids, column = self._table.ids, self._table.cols[_KEY_COLUMN[order_by]]
        heap: list[tuple[int, bytes, int]] = []
        if len(order.changed_rows):
            found = self._changed_matches(order, shape)
            for row, key in zip(found.tolist(), column.take(found).tolist(), strict=True):
                heapq.heappush(heap, (-key, ids[row], row))
        waiting: list[tuple[int, bytes, int]] = []  # matches read, in order, from ``next``
        next_waiting = 0
        code = TYPE_CODE[shape.kind.value]
        start, end = int(order.starts[code]), int(order.starts[code + 1])
        size, read, yielded = _WALK_FIRST, 0, 0
        while True:
            if next_waiting == len(waiting) and start < end:  # read the next round
                if read >= budget:
                    yield from self._selected(plan, column.take, first, yielded)
                    return
                stop = min(start + size, end)
                found, keys = self._round(order, shape, start, stop)
                waiting = [
                    (-key, ids[row], row) for row, key in zip(found.tolist(), keys, strict=True)
                ]
                next_waiting = 0
                read += stop - start
                start = stop
                size *= 2
                continue
            if next_waiting < len(waiting) and (not heap or waiting[next_waiting] < heap[0]):
                row = waiting[next_waiting][2]
                next_waiting += 1
            elif heap:
                row = heapq.heappop(heap)[2]
            else:
                return
            yielded += 1
            yield row


def _walk_type(plan: Plan) -> Atom | None:
    """The type atom every step of ``plan`` requires, if they all require the same one."""
    found: Atom | None = None
    for step in plan.steps:
        kinds = [atom for atom in (step.driver, *step.intersect) if atom.kind == "type"]
        if not kinds or (found is not None and kinds[0] != found):
            return None
        found = kinds[0]
    return found


def _sorted_order(types: npt.NDArray[Any], bounds: Rows, rows: Rows, since: int) -> BoundOrder:
    """The order of ``rows`` (every row, sorted by type code first), with ``bounds``
    (per row) taken in that order, nothing changed yet."""
    starts = types.take(rows).searchsorted(np.arange(TYPE_COUNT + 1)).astype(np.int64)
    none = np.zeros(0, dtype=np.int64)
    changed = np.zeros(len(rows), dtype=np.bool_)
    return BoundOrder(rows, bounds.take(rows), starts, changed, none, since, {})


def _with_changed(order: BoundOrder, rows: Rows, size: int) -> BoundOrder | None:
    """``order`` with ``rows`` marked changed (``size`` rows in all now), or None once
    more than :data:`_WALK_CHANGED` rows (or a 16th of the order) changed."""
    changed_rows = np.union1d(order.changed_rows, rows)
    if len(changed_rows) > max(_WALK_CHANGED, len(order.rows) // 16):
        return None
    changed = np.zeros(size, dtype=np.bool_)
    changed[: len(order.changed)] = order.changed
    changed[rows] = True
    return order._replace(changed=changed, changed_rows=changed_rows)
