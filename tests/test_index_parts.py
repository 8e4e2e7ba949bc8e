"""The column index's parts follow the table through the ``Change`` each catch-up reports.

``index.table.Table.advance`` knows nothing of the parts built on it; it reports what it
moved (rows re-read, posting lists changed, memories indexed anew with their terms), and
``ColumnIndex.refresh`` hands that to each part. These tests pin the report and show a
part acting on it.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

import cortexgraph as cg
from cortexgraph.core.postings import index_terms
from cortexgraph.core.predicates import Q
from cortexgraph.index import ColumnIndex
from cortexgraph.index.table import Table

T0 = 1_700_000_000_000


def test_a_catch_up_reports_rows_postings_and_heads(tmp_path: Path) -> None:
    """A build reports itself as one; a catch-up names the rows it re-read (an updated
    memory, a new one, the target of a new edge), the posting lists whose rows changed,
    and per memory indexed anew its row, index seq and terms (recomputed from its head
    version); a memory that stops being indexed is not reported (its postings are dead)."""
    with cg.open(tmp_path, "agent", sync=False) as cx:
        first = cx.write(cg.Fact(text="alpha", tags=("a",)), at=T0)
        second = cx.write(cg.Fact(text="beta", tags=("a",)), at=T0 + 1)
        table = Table()
        with cx._env.read() as txn, table.lock:
            built = table.advance(txn, txn.last_seq())
            table.seq = txn.last_seq()
        assert built.rebuilt and not len(built.touched) and built.heads == ()
        cx.update(first, tags=("b",), text="gamma", at=T0 + 2)
        third = cx.write(cg.Pattern(text="delta"), at=T0 + 3)
        cx.add_edge(third, second, "relates_to", at=T0 + 4)
        cx.archive(second, at=T0 + 5)
        with cx._env.read() as txn, table.lock:
            change = table.advance(txn, txn.last_seq(), heads=True)
        rows = {uri.id: table.row_of[uri.id] for uri in (first, second, third)}
        assert not change.rebuilt
        assert sorted(change.touched.tolist()) == sorted(rows.values())
        assert {("tag", "a"), ("tag", "b"), ("type", "fact"), ("type", "pattern")} <= change.posted
        moved = {row: (seq, forward) for row, seq, forward in change.heads}
        assert set(moved) == {rows[first.id], rows[third.id]}  # an edge moves no head
        assert moved[rows[first.id]][1] is not None and "gamma" in moved[rows[first.id]][1]
        assert moved[rows[first.id]][0] < moved[rows[third.id]][0]
        assert table.cols["iseq"][rows[first.id]] == moved[rows[first.id]][0]
        assert moved[rows[third.id]][1] == index_terms(cg.Pattern(text="delta"))
        assert table.cols["iseq"][rows[second.id]] == 0


def test_the_filter_drops_a_posting_list_the_catch_up_changed(tmp_path: Path) -> None:
    """A tag's posting array, kept after one select, is dropped when a catch-up moves a
    memory out of that tag, so the next select no longer returns it."""
    with cg.open(tmp_path, "agent", sync=False) as cx:
        kept = cx.write(cg.Fact(text="stays", tags=("a",)), at=T0)
        moved = cx.write(cg.Fact(text="leaves", tags=("a",)), at=T0 + 1)
        index = ColumnIndex()
        with cx._env.read() as txn:
            index.refresh(txn)
        plan, _ = index.plan(Q.tag("a"))
        both = index.select(plan)
        assert sorted(index.ids[row] for row in both.tolist()) == sorted([kept.id, moved.id])
        cx.update(moved, tags=("b",), at=T0 + 2)
        with cx._env.read() as txn:
            index.refresh(txn)
        plan, _ = index.plan(Q.tag("a"))
        assert [index.ids[row] for row in index.select(plan).tolist()] == [kept.id]
        assert index.count(plan) == 1
        assert np.array_equal(index.filters.posting(plan.steps[0].driver), [index.row_of[kept.id]])
