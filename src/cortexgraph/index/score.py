"""Salience scores of rows, exactly as ``core.salience`` defines them, but fast.

A score is ``(static + recency weight x recency) // 1,000,000``, where ``static`` is the
weighted sum of the confidence, priority, centrality and frequency factors (in ppm) and
recency is ``round_ppm(0.5 ** (age / half-life))``. The terms that do not depend on
``now`` are kept per row (:meth:`Scores.parts`); the recency is computed per query, in
plain Python for a few rows and with numpy for more.

Invariants:

- Every score computed here equals :meth:`Scores.exact_score` (``core.salience``'s own
  arithmetic) row for row, at any instant: numpy's float results are used only where
  they cannot round differently (see ``ppm``), and other rows are scored exactly.
- The kept static terms are those of the table's current rows, maxima and weights: the
  catch-up recomputes the rows it touched, and a change of the maxima or weights drops
  them (:meth:`Scores.follow`). Arrays once published are never written into.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from ..core.salience import (
    HALF_LIFE_DAYS,
    HUB_ACCESS_COUNT,
    HUB_CENTRALITY,
    frequency,
    round_ppm,
    trusted_cold_score,
    trusted_salience_factors,
)
from .ppm import TIE_GUARD, ppm, ppm_one
from .table import TYPE_CODE, TYPE_COUNT, TYPE_NAME, Change, Rows, Table

__all__ = ["StaticParts", "Scores"]

_DAY_MS = 86_400_000
#: half-life in ms by type code (0: stable)
_HALF_LIFE = np.zeros(TYPE_COUNT, dtype=np.float64)
for _name, _code in TYPE_CODE.items():
    _HALF_LIFE[_code] = (HALF_LIFE_DAYS.get(_name) or 0) * _DAY_MS
#: ages from here on are not exact as float64
_EXACT_FLOAT = 2**53
#: up to this many rows, salience is scored one by one rather than with numpy
_ONE_BY_ONE = 16

#: per row: the static sum, the half-life in ms and the decay rate (see ``Scores.parts``)
StaticParts = tuple[npt.NDArray[np.int64], npt.NDArray[np.float64], npt.NDArray[np.float64]]


class Scores:
    """Exact salience scores of the rows of one :class:`Table`."""

    def __init__(self, table: Table) -> None:
        self._table = table
        #: per row, the salience terms that do not depend on ``now`` (see ``parts``);
        #: None: computed afresh when next needed
        self.kept: StaticParts | None = None

    def follow(self, change: Change) -> None:
        """Recompute or drop the static terms ``change`` moved (under the table's lock)."""
        if change.rebuilt or change.rescaled:
            self.kept = None  # every row's static part moved: recomputed on demand
        elif self.kept is not None and len(change.touched):
            self._update(change.touched)

    def parts(self) -> StaticParts:
        """:meth:`_static_parts` of every row, computed once per change of the store-wide
        maxima or weights and kept current row by row by the catch-up."""
        static = self.kept
        if static is None:
            with self._table.lock:
                static = self.kept
                if static is None:
                    static = self.kept = self._static_parts(self._table.all_rows())
        return static

    def _update(self, rows: Rows) -> None:
        """Recompute the static parts of ``rows`` (new rows included); under the lock."""
        assert self.kept is not None
        static, life, rate = self.kept
        size = len(self._table.ids)
        if len(static) < size:
            grow = size - len(static)
            static = np.concatenate((static, np.zeros(grow, dtype=np.int64)))
            life = np.concatenate((life, np.zeros(grow, dtype=np.float64)))
            rate = np.concatenate((rate, np.zeros(grow, dtype=np.float64)))
        else:  # readers may hold the old arrays: never write into them
            static, life, rate = static.copy(), life.copy(), rate.copy()
        static[rows], life[rows], rate[rows] = self._static_parts(rows)
        self.kept = (static, life, rate)

    def exact_score(self, row: int, now: int) -> int:
        """The salience score of a row, computed exactly as ``core.salience`` defines it."""
        table = self._table
        cols = table.cols
        factors = trusted_salience_factors(
            TYPE_NAME[int(cols["type"][row])],
            float(cols["confidence"][row]),
            int(cols["priority"][row]),
            bool(cols["pinned"][row]),
            int(cols["indeg"][row]),
            table.max_indeg,
            int(cols["access"][row]),
            table.max_access,
            now - int(cols["at"][row]),
        )
        return trusted_cold_score(factors, table.weights)

    def _static_parts(self, rows: Rows) -> StaticParts:
        """The salience terms of ``rows`` that do not depend on ``now``: the weighted sum
        of the confidence, priority, centrality and frequency factors (in ppm x weight,
        before the final division), the half-life in ms (0: no decay; doubled for hubs,
        as ``core.salience`` does), and the decay rate ``-1 / half-life`` (0: no decay),
        with which ``exp2(age * rate)`` is the recency factor (:meth:`vectorised`).

        Centrality is computed only for rows with an in-degree and frequency only for rows
        with accesses, in float64 as ``core.salience`` computes them (numpy's ``log1p``
        may differ from ``math.log`` in the last bits); ``ppm`` rounds them.
        """
        table = self._table
        cols, weights = table.cols, table.weights
        static: npt.NDArray[np.int64] = weights[0] * cols["conf_ppm"][rows]
        static += weights[1] * cols["prio_ppm"][rows]
        access = cols["access"][rows]
        hub = access > HUB_ACCESS_COUNT
        if table.max_indeg:
            indeg = cols["indeg"][rows]
            linked = np.flatnonzero(indeg)
            if len(linked):
                centrality = indeg[linked] / table.max_indeg
                static[linked] += weights[2] * ppm(centrality)
                hub[linked] |= centrality > HUB_CENTRALITY
        if table.max_access:
            read = np.flatnonzero(access)
            if len(read):
                counts = access[read]
                units = np.log1p(counts) / np.log1p(float(table.max_access))
                units[counts == table.max_access] = 1.0
                most = table.max_access

                def exactly(i: int) -> int:  # core.salience's math.log, near a half ppm
                    return round_ppm(frequency(int(counts[i]), most))

                static[read] += weights[3] * ppm(units, exactly)
        life = _HALF_LIFE[cols["type"][rows]]
        life[cols["pinned"][rows]] = 0.0
        life[hub] *= 2
        rate = np.zeros(len(life), dtype=np.float64)
        np.divide(-1.0, life, out=rate, where=life > 0)
        return static, life, rate

    def salience_bounds(self, rows: Rows) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
        """Bounds ``(lower, upper)`` of each row's salience score at any ``now``: exact
        for memories that do not decay (recency is 1), else recency 0 and 1.
        """
        static_all, life_all, _ = self.parts()
        full = self._table.weights[4] * 1_000_000
        static = static_all[rows]
        upper = (static + full) // 1_000_000
        lower = np.where(life_all[rows] > 0, static // 1_000_000, upper)
        return lower, upper

    def exact_scores(self, rows: Rows, now: int) -> npt.NDArray[np.int64]:
        """:meth:`exact_score` of every row, equal to it row for row.

        The terms that do not depend on ``now`` come from :meth:`parts`. A few rows are
        scored one by one (:meth:`one_by_one`: numpy's fixed cost per call would
        dominate); more are vectorised (:meth:`vectorised`).
        """
        if len(rows) <= _ONE_BY_ONE:
            return np.asarray(self.one_by_one(rows.tolist(), now), dtype=np.int64)
        return self.vectorised(rows, now)

    def scores_of(self, rows: list[int], now: int) -> list[int]:
        """:meth:`exact_scores` of a list of rows, as a list."""
        if len(rows) <= _ONE_BY_ONE:
            return self.one_by_one(rows, now)
        scores: list[int] = self.vectorised(np.asarray(rows, dtype=np.int64), now).tolist()
        return scores

    def one_by_one(self, rows: list[int], now: int) -> list[int]:
        """The scores of ``rows`` in plain Python: the kept static terms plus the weighted
        recency ``round_ppm(0.5 ** (age / half_life))``, the arithmetic of ``core.salience``
        (an age and a half-life in integer ms, divided as Python divides integers)."""
        static_all, life_all, _ = self.parts()
        weight = self._table.weights[4]
        scores = []
        for static, life, at in zip(
            map(static_all.item, rows),
            map(life_all.item, rows),
            map(self._table.cols["at"].item, rows),
            strict=True,
        ):
            age = now - at
            recency = ppm_one(0.5 ** (age / int(life))) if life and age > 0 else 1_000_000
            scores.append((static + weight * recency) // 1_000_000)
        return scores

    def vectorised(self, rows: Rows, now: int) -> npt.NDArray[np.int64]:
        """The scores of ``rows`` with numpy, every row alike: the recency factor is
        ``exp2(age * rate)`` (1 for a memory that does not decay, whose rate is 0, and for
        an age of 0 or less), rounded to ppm with ``rint``.

        That rounding is exact (the half-to-even rounding of ``core.salience``'s
        ``0.5 ** (age / half_life)``) unless the value lies within ``TIE_GUARD`` ppm of
        a half: up to ages of 50 half-lives (beyond, recency rounds to 0 either way) the
        float error of ``age * rate`` and ``exp2`` is below 1e-7 ppm. Rows near a half, and
        rows too old for their age to be exact as a float, are scored by
        :meth:`exact_score`.
        """
        static_all, _, rate_all = self.parts()
        age = now - self._table.cols["at"][rows]
        np.maximum(age, 0, out=age)
        scaled = np.exp2(age * rate_all[rows])
        scaled *= 1e6
        recency = np.rint(scaled)
        near = np.abs(scaled - recency) >= 0.5 - TIE_GUARD
        total = recency.astype(np.int64)
        total *= self._table.weights[4]
        total += static_all[rows]
        total //= 1_000_000
        if near.any() or age.max() >= _EXACT_FLOAT:
            for i in np.flatnonzero(near | (age >= _EXACT_FLOAT)).tolist():
                total[i] = self.exact_score(int(rows[i]), now)
        return total
