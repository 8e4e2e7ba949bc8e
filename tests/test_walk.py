"""The salience walk of ``find`` returns what selecting and sorting returns.

``ColumnIndex.walk_salience`` reads one type's rows best upper bound first and yields a
match once its exact score beats every bound not read yet; rows that changed since the
bound order was sorted are scored up front; past its budget it falls back to selecting.
On a real store it only runs for long posting lists (``_WALK_MIN`` rows), so these tests
lower that limit and the round size, and drive every path: several rounds, changed rows,
a re-sort, the fallback at any point, tags answered from bitmaps and by binary search.
"""

from __future__ import annotations

import itertools
import random
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

import cortexgraph as cg
from cortexgraph import Q
from cortexgraph.core.predicates import Predicate
from cortexgraph.index import KEY_ORDERS, ColumnIndex
from cortexgraph.index import filter as masks
from cortexgraph.index import order as columns
from cortexgraph.index.filter import member as _member
from cortexgraph.index.order import Orders
from signal_ops import SignalOps

T0 = 1_700_000_000_000
DAY = 86_400_000
KINDS = [cg.Fact, cg.Event, cg.Preference]
TAGS = ["a", "b", "c"]

#: predicates naming one type (walkable) and a few that are not
WALKABLE = [
    Q.type(cg.Fact),
    Q.type(cg.Event) & Q.tag("a"),
    Q.type(cg.Fact) & ~Q.tag("b"),
    Q.type(cg.Preference) & (Q.tag("a") | Q.tag("c")),
    Q.type(cg.Fact) & Q.tag("a") & Q.tag("b"),
    Q.type(cg.Event) & Q.min_priority(5),
    Q.type(cg.Fact) & Q.status("tombstoned"),
    Q.type(cg.Fact) & Q.pinned(),
    Q.type(cg.Event) & Q.ns("two"),
]
NOT_WALKABLE = [Q.tag("a"), Q.type(cg.Fact) | Q.type(cg.Event), Q.tag("a") | Q.type(cg.Fact)]

OPS = st.lists(
    st.one_of(
        st.tuples(st.just("write"), st.integers(0, 2), st.sets(st.sampled_from(TAGS)),
                  st.integers(1, 10), st.sampled_from([0.1, 0.5, 0.9]), st.integers(0, 60)),
        st.tuples(st.just("edge"), st.integers(0, 99), st.integers(0, 99)),
        st.tuples(st.just("access"), st.integers(0, 99)),
        st.tuples(st.just("pin"), st.integers(0, 99)),
        st.tuples(st.just("tombstone"), st.integers(0, 99)),
        st.tuples(st.just("attest"), st.integers(0, 99), st.sampled_from(["success", "failure"])),
    ),
    max_size=12,
)  # fmt: skip


def seed_store(cx: cg.Cortex, count: int, seed: int, *, tied: bool = False) -> list[cg.MemoryURI]:
    """``count`` random memories; ``tied``: few distinct priorities, confidences and days,
    and many pinned memories (scored at their bound), so that many scores are equal."""
    rng = random.Random(seed)
    uris = []
    with cx.batch() as batch:
        for i in range(count):
            kind = rng.choice(KINDS)
            memory = kind(text=f"memory {i}", tags=sorted(rng.sample(TAGS, rng.randint(0, 2))),
                          priority=rng.choice([3, 7]) if tied else rng.randint(1, 10),
                          confidence=rng.choice([0.2, 0.5, 0.8]),
                          pinned=rng.random() < (0.3 if tied else 0.05))
            day = rng.randint(0, 2 if tied else 60)
            uris.append(batch.write(memory, ns=rng.choice(["one", "two"]), at=T0 + day * DAY))
    return uris


def apply(cx: cg.Cortex, model: SignalOps, op: Any, at: int) -> None:
    def write(op: Any) -> cg.MemoryURI:
        _, kind, tags, priority, confidence, day = op
        memory = KINDS[kind](text="new", tags=sorted(tags), priority=priority,
                             confidence=confidence)
        return cx.write(memory, ns="two", at=T0 + day * DAY)

    if not model.carry_out(cx, op, at, write):  # an expected refusal changes nothing
        event(f"refused: {op[0]}")


def check_walks(cx: cg.Cortex, now: int, budgets: list[int], first: int) -> None:
    """Every walkable predicate, walked with each budget, gives the sorted selection:
    at ``now`` (the first walk sorts the bound order for it, unless it is sorted), at
    later instants (the bounds still hold) and at an earlier one (the walk selects)."""
    index = cx._column_index()
    with cx._env.read() as txn:
        index.refresh(txn)
        for instant in (now, now + 3 * DAY, now + 400 * DAY, now - 20 * DAY):
            for where in WALKABLE:
                plan, _ = index.plan(where)
                rows = index.select(plan)
                assert index.count(plan) == len(rows)
                expected = list(index.ordered(rows, "salience", instant))
                assert index.orders._walk_shape(plan) is not None
                for budget in budgets:
                    scores: dict[int, int] = {}
                    walk = index.walk_salience(
                        plan, instant, budget=budget, first=first, scores=scores
                    )
                    head = list(itertools.islice(walk, first))  # a caller that stops early
                    assert head == expected[:first]
                    walk = index.walk_salience(
                        plan, instant, budget=budget, first=first, scores=scores
                    )
                    walked = list(walk)
                    assert walked == expected
                    assert scores == {row: index.exact_score(row, instant) for row in walked}
            order = index.orders._order
            assert order is not None
            if instant < order.since:
                assert index.walk_budget(index.plan(WALKABLE[0])[0], first, instant) is None
        for where in WALKABLE:  # by a column, exactly: the instant does not matter
            plan, _ = index.plan(where)
            rows = index.select(plan)
            for order_by in KEY_ORDERS:
                expected = list(index.ordered(rows, order_by, now))
                for budget in budgets:
                    walk = index.walk_key(plan, order_by, budget=budget, first=first)
                    assert list(itertools.islice(walk, first)) == expected[:first]
                    walked = list(index.walk_key(plan, order_by, budget=budget, first=first))
                    assert walked == expected
        for where in NOT_WALKABLE:
            plan, _ = index.plan(where)
            assert index.walk_budget(plan, first, now) is None
            assert index.walk_key_budget(plan, first) is None


@settings(max_examples=40, deadline=None)
@given(
    ops=OPS,
    seed=st.integers(0, 2**16),
    round_size=st.sampled_from([1, 2, 7, 64]),
    share=st.sampled_from([1, 10**9]),
    changed=st.sampled_from([0, 3, 1024]),
    first=st.integers(1, 12),
    tied=st.booleans(),
)
def test_walk_equals_select_and_sort_across_changes(
    tmp_path_factory: pytest.TempPathFactory, ops: Any, seed: int, round_size: int, share: int,
    changed: int, first: int, tied: bool,
) -> None:
    """On one handle, before and after every operation (so with changed rows, a re-sort
    or an order dropped for new weights): walks with any budget (0: select at once;
    small: fall back midway; large: never) equal the select-and-sort order, with exact
    scores; walks by "recent" and "priority" equal their sorts too; ``count`` equals the
    selection's size; tags come from bitmaps (share 1) or
    binary search (share 10**9). ``tied`` stores have many equal scores, which a walk
    must not yield before an unread row that may tie with a smaller id."""
    root = tmp_path_factory.mktemp("walk")
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(columns, "_WALK_MIN", 0)
        patch.setattr(columns, "_WALK_FIRST", round_size)
        patch.setattr(masks, "_BITMAP_SHARE", share)
        patch.setattr(columns, "_WALK_CHANGED", changed)
        with cg.open(root, "agent", sync=False) as cx:
            model = SignalOps(seed_store(cx, 90, seed, tied=tied))
            now = T0 + 70 * DAY
            budgets = [0, 1, 5, 40, 10**9]
            check_walks(cx, now, budgets, first)
            for step, op in enumerate(ops):
                apply(cx, model, op, T0 + (61 + step) * DAY)
                check_walks(cx, now + step * DAY, budgets, first)


def test_a_changed_row_waits_for_unread_rows_that_tie_with_a_smaller_id(tmp_path: Path) -> None:
    """Pinned memories score exactly their bound. After the one with the largest id
    changes (scored up front, out of its place in the order), the walk must still read
    the unread rows of the same bound, which tie with it and come first by id."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(columns, "_WALK_MIN", 0)
        patch.setattr(columns, "_WALK_FIRST", 1)
        with cg.open(tmp_path, "agent", sync=False) as cx:
            uris = [cx.write(cg.Fact(text=f"same {i}", pinned=True), at=T0) for i in range(12)]
            now = T0 + DAY
            plan_of = Q.type(cg.Fact)
            expected = sorted(uri.id for uri in uris)
            assert [hit.uri.id for hit in cx.find(plan_of, limit=12, now=now)] == expected
            last = max(uris, key=lambda uri: uri.id)
            cx.update(last, text="changed, same score", at=T0 + 1)
            index = cx._column_index()
            with cx._env.read() as txn:
                index.refresh(txn)
                order = index.orders._bound_order(now)
                assert order.changed_rows.tolist() == [index.row_of[last.id]]
                plan, _ = index.plan(plan_of)
                walk = index.walk_salience(plan, now, budget=10**9, first=12, scores={})
                assert [index.ids[row] for row in walk] == expected


def test_bounds_a_day_old_are_taken_again(tmp_path: Path) -> None:
    """A walk more than a day after the instant the order's bounds were taken at sorts
    them again for its own instant; an earlier instant selects and keeps the order."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(columns, "_WALK_MIN", 0)
        with cg.open(tmp_path, "agent", sync=False) as cx:
            seed_store(cx, 200, 5)
            index = cx._column_index()
            where = Q.type(cg.Fact) & Q.tag("a")
            now = T0 + 70 * DAY
            for instant, since in ((now, now), (now + DAY, now), (now - DAY, now),
                                   (now + DAY + 1, now + DAY + 1)):
                result = cx.find(where, limit=5, now=instant)
                assert [hit.uri.id for hit in result] == brute_force(cx, where, instant)[:5]
                assert index.orders._order is not None and index.orders._order.since == since


@pytest.fixture(scope="module")
def walked_store(tmp_path_factory: pytest.TempPathFactory) -> Any:
    root = tmp_path_factory.mktemp("walked")
    cx = cg.open(root, "agent", sync=False)
    uris = seed_store(cx, 300, 11)
    for i in range(0, 300, 7):
        cx.add_edge(uris[i], uris[(i * 13 + 1) % 300], "relates_to", at=T0 + 61 * DAY)
    for i in range(0, 300, 5):
        cx._record_access([uris[i].head], at=T0 + 62 * DAY)
    yield cx
    cx.close()


def brute_force(
    cx: cg.Cortex, where: Predicate, now: int, order_by: str = "salience"
) -> list[bytes]:
    """The ids ``where`` matches, by exact score (or by ``at`` or priority) then id, from
    every row of a fresh index."""
    index = ColumnIndex()
    with cx._env.read() as txn:
        index.refresh(txn)
    plan, _ = index.plan(where)
    rows = index.filter(index.all_rows(), plan.dnf)

    def key(row: int) -> int:
        if order_by == "salience":
            return index.exact_score(row, now)
        return int(index.cols["at" if order_by == "recent" else "priority"][row])

    keyed = sorted((-key(row), index.ids[row]) for row in rows.tolist())
    return [memory_id for _, memory_id in keyed]


@settings(max_examples=60, deadline=None)
@given(
    where=st.sampled_from(WALKABLE + NOT_WALKABLE),
    order_by=st.sampled_from(["salience", "salience", "recent", "priority"]),
    limit=st.sampled_from([1, 3, 10, 50, 400]),
    day=st.integers(55, 400),
    forced=st.booleans(),
)
def test_find_with_walks_equals_brute_force(
    walked_store: cg.Cortex, where: Predicate, order_by: str, limit: int, day: int,
    forced: bool,
) -> None:
    """``find`` gives the brute-force prefix and count whether it walks (forced: every
    walkable plan is walked, with a budget of 30 rows, so some fall back) or chooses for
    itself with the limits lowered, by salience, recency and priority."""
    now = T0 + day * DAY
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(columns, "_WALK_MIN", 0)
        patch.setattr(columns, "_WALK_FIRST", 4)
        if forced:
            def always(self: Orders, plan: Any, *_: Any) -> int | None:
                return None if self._walk_shape(plan) is None else 30

            patch.setattr(Orders, "walk_budget", always)
            patch.setattr(Orders, "walk_key_budget", always)
        result = walked_store.find(where, limit=limit, order_by=order_by, now=now)
    expected = brute_force(walked_store, where, now, order_by)
    assert [hit.uri.id for hit in result] == expected[:limit]
    assert result.matched == len(expected)


def test_a_long_posting_list_is_walked_on_a_real_store(tmp_path: Path) -> None:
    """With the default limits, a type-and-tag query over a few thousand memories walks
    (and reads far fewer rows than it matches), and a rare tag does not."""
    with cg.open(tmp_path, "agent", sync=False) as cx:
        seed_store(cx, 7_000, 3)
        with cx.batch() as batch:
            batch.write(cg.Fact(text="rare", tags=("rare",)), at=T0)
        index = cx._column_index()
        with cx._env.read() as txn:
            index.refresh(txn)
            common, _ = index.plan(Q.type(cg.Fact) & Q.tag("a"))
            rare, _ = index.plan(Q.type(cg.Fact) & Q.tag("rare"))
            now = T0 + 70 * DAY
            assert index.walk_budget(rare, 10, now) is None
            budget = index.walk_budget(common, 10, now)
            assert budget is not None
            calls = []
            passing = index.filters.passing

            def counting(rows: Any, conjuncts: Any) -> Any:
                calls.append(len(rows))
                return passing(rows, conjuncts)

            index.filters.passing = counting  # type: ignore[method-assign]
            scores: dict[int, int] = {}
            top = list(itertools.islice(
                index.walk_salience(common, T0 + 70 * DAY, budget=budget, first=10, scores=scores),
                10))
            del index.filters.passing
            rows = index.select(common)
            assert top == list(itertools.islice(index.ordered(rows, "salience", T0 + 70 * DAY), 10))
            assert sum(calls) < len(rows)


@settings(max_examples=200, deadline=None)
@given(
    posting=st.sets(st.integers(0, 300)),
    rows=st.lists(st.integers(0, 300), max_size=50),
)
def test_member_is_set_membership(posting: set[int], rows: list[int]) -> None:
    array = np.asarray(sorted(posting), dtype=np.int64)
    found = _member(np.asarray(rows, dtype=np.int64), array)
    assert found.tolist() == [row in posting for row in rows]
