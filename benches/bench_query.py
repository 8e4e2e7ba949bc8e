"""pytest-benchmark benchmarks of ``find`` against SQLite, ``traverse`` and ``attest``.

Run them with::

    .venv/bin/python -m pytest benches/bench_query.py --benchmark-only

They are not tests (``testpaths`` is ``tests/``) and assert nothing about time. Each group
pairs a cortexgraph operation with its baseline (``benches/query.py`` describes them):

- ``query-find-salience`` / ``query-find-recent`` / ``query-find-priority``:
  ``find(Q.type(t) & Q.tag(g), limit=10)`` at a fixed ``now``, cycling through every
  (type, tag) pair, against SQLite (WAL, indexed) answering the same query over the same
  rows, once with the join order forced to walk the order index (``sqlite-index-order``)
  and once with the plan SQLite's planner picks (``sqlite-planner``); the sides are checked
  to agree on every pair before anything is timed.
- ``query-find-budget``: the same finds with ``budget_tokens=500`` instead of ``limit``.
- ``query-first-find``: one round opens a copy of the store and runs its first ``find``
  (the column index is built); against a round of the same find on a handle already open.
- ``query-traverse``: ``traverse(depth=2, direction="both")`` from random memories with
  edges, against the same reads in a raw py-lmdb BFS.
- ``query-attest``: ``attest`` of 3 cited memories (sync off), against one ``cx.write``
  (sync off), on a copy of the store.

STORE_SIZE is 20,000 here (``benches/query.py`` defaults to 100,000) so that the whole file
runs in about a minute.
"""

from __future__ import annotations

import itertools
import random
import sqlite3
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

import cortexgraph as cg
from _workload import ACTOR, NS, STEP_MS, make_memories
from merkle import copy_store
from query import (
    BUDGET,
    TRAVERSE_DEPTH,
    RawGraph,
    Workload,
    build_sqlite,
    build_store,
    check_agreement,
    find_call,
    query_order,
    sqlite_call,
)

STORE_SIZE = 20_000
QUERIES = 1_000
STARTS = 1_000
FIRST_FIND_ROUNDS = 5


@pytest.fixture(scope="session")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Workload]:
    """A closed query store of STORE_SIZE memories (with edges, tombstones, accesses)."""
    root = tmp_path_factory.mktemp("query")
    return root, build_store(root, STORE_SIZE)


@pytest.fixture(scope="session")
def opened(
    tmp_path_factory: pytest.TempPathFactory, built: tuple[Path, Workload]
) -> Iterator[tuple[cg.Cortex, sqlite3.Connection, Workload]]:
    """The query store open (sync off), and SQLite holding the same rows; checked to agree."""
    root, work = built
    cx = cg.open(root, ACTOR, sync=False)
    conn = build_sqlite(tmp_path_factory.mktemp("sqlite") / "query.sqlite", cx, work.now)
    try:
        check_agreement(cx, conn, work)
        yield cx, conn, work
    finally:
        conn.close()
        cx.close()


def _cycle(items: Sequence[Any]) -> Callable[[], Any]:
    return itertools.cycle(items).__next__


# -- find against SQLite ------------------------------------------------------------------------


def _find_group(order: str) -> Any:
    @pytest.mark.benchmark(group=f"query-find-{order}")
    @pytest.mark.parametrize("side", ["cortexgraph", "sqlite-index-order", "sqlite-planner"])
    def bench(
        benchmark: Any, opened: tuple[cg.Cortex, sqlite3.Connection, Workload], side: str
    ) -> None:
        cx, conn, work = opened
        if side == "cortexgraph":
            call = find_call(cx, work.now, order)
        else:
            call = sqlite_call(conn, order, index_order=side == "sqlite-index-order")
        nxt = _cycle(query_order(work, QUERIES))
        benchmark(lambda: call(nxt()))

    return bench


test_find_salience = _find_group("salience")
test_find_recent = _find_group("recent")
test_find_priority = _find_group("priority")


@pytest.mark.benchmark(group="query-find-budget")
def test_find_budget(
    benchmark: Any, opened: tuple[cg.Cortex, sqlite3.Connection, Workload]
) -> None:
    cx, _, work = opened
    call = find_call(cx, work.now, "salience", budget_tokens=BUDGET)
    nxt = _cycle(query_order(work, QUERIES))
    benchmark(lambda: call(nxt()))


# -- first find after open --------------------------------------------------------------------


@pytest.mark.benchmark(group="query-first-find")
def test_first_find_after_open(
    benchmark: Any, tmp_path: Path, built: tuple[Path, Workload]
) -> None:
    source, work = built
    copy_store(source, tmp_path)
    handles: list[cg.Cortex] = []

    def reopen() -> tuple[tuple[cg.Cortex], dict[str, Any]]:
        while handles:
            handles.pop().close()
        handles.append(cg.open(tmp_path, ACTOR, sync=False))
        return (handles[0],), {}

    pair = ("fact", work.tags[0])

    def first_find(cx: cg.Cortex) -> None:
        find_call(cx, work.now, "salience")(pair)

    try:
        benchmark.pedantic(first_find, setup=reopen, rounds=FIRST_FIND_ROUNDS)
    finally:
        while handles:
            handles.pop().close()


@pytest.mark.benchmark(group="query-first-find")
def test_first_find_warm(
    benchmark: Any, opened: tuple[cg.Cortex, sqlite3.Connection, Workload]
) -> None:
    cx, _, work = opened
    call = find_call(cx, work.now, "salience")
    pair = ("fact", work.tags[0])
    benchmark(lambda: call(pair))


# -- traverse ---------------------------------------------------------------------------------


def _starts(work: Workload) -> list[cg.MemoryURI]:
    ends = sorted({i for edge in work.edges for i in edge} - work.tombstoned)
    return [work.uris[i] for i in random.Random(8).choices(ends, k=STARTS)]


@pytest.mark.benchmark(group="query-traverse")
def test_traverse(benchmark: Any, opened: tuple[cg.Cortex, sqlite3.Connection, Workload]) -> None:
    cx, _, work = opened
    nxt = _cycle(_starts(work))
    benchmark(lambda: cx.traverse(nxt(), depth=TRAVERSE_DEPTH, direction="both"))


@pytest.mark.benchmark(group="query-traverse")
def test_traverse_raw_lmdb(
    benchmark: Any, opened: tuple[cg.Cortex, sqlite3.Connection, Workload]
) -> None:
    cx, _, work = opened
    raw = RawGraph(cx, {work.uris[i].id for i in work.tombstoned})
    nxt = _cycle(_starts(work))
    benchmark(lambda: raw.traverse(nxt().id))


# -- attest -----------------------------------------------------------------------------------


@pytest.mark.benchmark(group="query-attest")
@pytest.mark.parametrize("side", ["attest", "single-write"])
def test_attest(benchmark: Any, tmp_path: Path, built: tuple[Path, Workload], side: str) -> None:
    source, work = built
    copy_store(source, tmp_path)
    rng = random.Random(9)
    live = [uri for i, uri in enumerate(work.uris) if i not in work.tombstoned]
    at = itertools.count(work.next_at, STEP_MS)
    with cg.open(tmp_path, ACTOR, sync=False) as cx:
        if side == "attest":
            outcomes = _cycle(("failure", "success", "success"))
            benchmark(lambda: cx.attest(rng.sample(live, 3), outcome=outcomes(), at=next(at)))
        else:
            memories = _cycle(make_memories(1_000, seed=10, start_at=work.next_at))
            benchmark(lambda: cx.write(memories(), ns=NS, at=next(at)))
