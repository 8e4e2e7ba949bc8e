""":class:`ColumnIndex`: the table and the parts that answer queries over it, as one object.

The query verbs hold one column index per open handle. It *is* the :class:`~.table.Table`
(so ``ids``, ``row_of``, ``cols``, ... are plain attributes), and it owns one of each
part built on the table: :class:`~.filter.Filter` (``filters``),
:class:`~.score.Scores` (``scores``), :class:`~.order.Orders` (``orders``),
:class:`~.keyword.Keywords` (``keywords``) and :class:`~.memo.Memos` (``memos``). Its
methods are the parts' public methods, so a caller needs one object.

Invariant: :meth:`ColumnIndex.refresh` moves the table and every part to a new seq under
the table's lock, in one step: no reader sees the table at one seq and a part's derived
state at another (each part checks the seq of what it computes lazily).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

import numpy as np
import numpy.typing as npt

from ..core.predicates import Predicate
from ..core.query import DNF, Plan
from ..core.text import Bm25Params
from ..store.txn import ReadTxn
from .filter import Filter
from .keyword import Keywords
from .memo import Memos
from .order import Orders
from .score import Scores
from .table import Rows, SnapshotSource, Table

__all__ = ["ColumnIndex"]


class ColumnIndex(Table):
    """Columns and posting lists over every memory, for one open handle, with filters,
    scores, orders and walks, keyword statistics and per-row memos over them."""

    def __init__(self, snapshot: SnapshotSource | None = None) -> None:
        super().__init__(snapshot)
        self.filters = Filter(self)
        self.scores = Scores(self)
        self.orders = Orders(self, self.filters, self.scores)
        self.keywords = Keywords(self)
        self.memos = Memos(self)

    def refresh(self, txn: ReadTxn) -> int:
        """Bring the columns, and what the parts derived from them, to the state ``txn``
        sees (thread-safe); returns its seq."""
        last = txn.last_seq()
        with self.lock:
            if last == self.seq:
                return last
            change = self.advance(txn, last, heads=self.keywords.following())
            self.filters.follow(change)
            self.scores.follow(change)
            self.orders.follow(change)
            self.keywords.follow(change)
            self.memos.follow(change)
            self.seq = last
        return last

    # -- filter ------------------------------------------------------------------------------

    def plan(self, predicate: Predicate) -> tuple[Plan, str]:
        """:meth:`Filter.plan <.filter.Filter.plan>`."""
        return self.filters.plan(predicate)

    def select(self, plan: Plan) -> Rows:
        """:meth:`Filter.select <.filter.Filter.select>`."""
        return self.filters.select(plan)

    def count(self, plan: Plan) -> int:
        """:meth:`Filter.count <.filter.Filter.count>`."""
        return self.filters.count(plan)

    def filter(self, rows: Rows, dnf: DNF) -> Rows:
        """:meth:`Filter.filter <.filter.Filter.filter>`."""
        return self.filters.filter(rows, dnf)

    # -- scores ------------------------------------------------------------------------------

    def exact_score(self, row: int, now: int) -> int:
        """:meth:`Scores.exact_score <.score.Scores.exact_score>`."""
        return self.scores.exact_score(row, now)

    def exact_scores(self, rows: Rows, now: int) -> npt.NDArray[np.int64]:
        """:meth:`Scores.exact_scores <.score.Scores.exact_scores>`."""
        return self.scores.exact_scores(rows, now)

    def scores_of(self, rows: list[int], now: int) -> list[int]:
        """:meth:`Scores.scores_of <.score.Scores.scores_of>`."""
        return self.scores.scores_of(rows, now)

    def salience_bounds(self, rows: Rows) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
        """:meth:`Scores.salience_bounds <.score.Scores.salience_bounds>`."""
        return self.scores.salience_bounds(rows)

    # -- orders and walks --------------------------------------------------------------------

    def ordered(
        self,
        rows: Rows,
        order_by: str,
        now: int,
        *,
        first: int = 16,
        scores: dict[int, int] | None = None,
    ) -> Iterator[int]:
        """:meth:`Orders.ordered <.order.Orders.ordered>`."""
        return self.orders.ordered(rows, order_by, now, first=first, scores=scores)

    def walk(
        self, plan: Plan, order_by: str, now: int, *, first: int, scores: dict[int, int]
    ) -> Iterator[int] | None:
        """:meth:`Orders.walk <.order.Orders.walk>`."""
        return self.orders.walk(plan, order_by, now, first=first, scores=scores)

    def walk_budget(self, plan: Plan, first: int, now: int) -> int | None:
        """:meth:`Orders.walk_budget <.order.Orders.walk_budget>`."""
        return self.orders.walk_budget(plan, first, now)

    def walk_key_budget(self, plan: Plan, first: int) -> int | None:
        """:meth:`Orders.walk_key_budget <.order.Orders.walk_key_budget>`."""
        return self.orders.walk_key_budget(plan, first)

    def walk_salience(
        self, plan: Plan, now: int, *, budget: int, first: int, scores: dict[int, int]
    ) -> Iterator[int]:
        """:meth:`Orders.walk_salience <.order.Orders.walk_salience>`."""
        return self.orders.walk_salience(plan, now, budget=budget, first=first, scores=scores)

    def walk_key(self, plan: Plan, order_by: str, *, budget: int, first: int) -> Iterator[int]:
        """:meth:`Orders.walk_key <.order.Orders.walk_key>`."""
        return self.orders.walk_key(plan, order_by, budget=budget, first=first)

    # -- keywords and memos ------------------------------------------------------------------

    def bm25(
        self, txn: ReadTxn, terms: Iterable[str], params: Bm25Params
    ) -> tuple[Rows, npt.NDArray[np.float64]]:
        """:meth:`Keywords.bm25 <.keyword.Keywords.bm25>`."""
        return self.keywords.bm25(txn, terms, params)

    def memo(self, row: int, seq: int) -> Any:
        """:meth:`Memos.memo <.memo.Memos.memo>`."""
        return self.memos.memo(row, seq)

    def remember(self, row: int, value: Any, seq: int) -> None:
        """:meth:`Memos.remember <.memo.Memos.remember>`."""
        self.memos.remember(row, value, seq)
