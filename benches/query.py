"""Measure the query layer: ``find`` against SQLite, ``traverse``, ``attest``; print one table.

Usage (``benches/run.py --suite query`` runs the same measurements)::

    .venv/bin/python benches/query.py
    .venv/bin/python benches/query.py --n 20000 --json
    .venv/bin/python benches/query.py --dir /mnt/ssd/tmp     # where the stores live

These are the figures of the query layer's targets (``find`` by type and tag with limit 10,
ordered by salience: p50 <= 300 µs, p95 <= 1 ms, and no slower than SQLite answering the
same query over the same rows), on a store of ``--n`` memories (the workload of
``_workload.py``: Facts, Events and Preferences with 1-4 tags of 50, written with sync off
in batches of 1,000), plus ``n / 2`` seeded ``relates_to`` edges (a fifth of them into 1% of
the memories, so in-degree centrality has hubs), 1% of the memories tombstoned, and 30
rounds of access entries over a popular 2% (so frequency is not flat).
See ``benches/README.md`` for the figures on one machine.

1. ``find(Q.type(t) & Q.tag(g), limit=10, now=NOW)`` ordered by salience, recent and
   priority, 2,000 calls each cycling through every (type, tag) pair, against SQLite (WAL,
   indexed; schema in the README) answering the same query over the same rows in the same
   process, call by call, the side that goes first rotating: once with the join order
   forced to walk the order index (``CROSS JOIN``), once with the plan SQLite's planner
   picks (slow: every 5th query only). SQLite's ``salience`` column holds every memory's
   cold score precomputed at ``NOW`` from cortexgraph's own exact scores, so it does not
   compute recency at query time (cortexgraph does); before timing, every pair's answer is
   checked to be the same ids in the same order on all sides. For salience, the CPU time
   of the same calls is reported too (it leaves out waiting for a core on a busy machine).
2. ``find`` with ``budget_tokens=500`` instead of ``limit``; the first ``find`` after
   opening the store (the column index is built from the ``salience`` table); the first
   ``find`` after 1,000 new writes (the index catches up from the journal).
3. ``traverse(depth=2, direction="both")`` from random memories that have edges, against
   the same edge-prefix scans and ``heads`` reads in one raw py-lmdb read transaction.
4. ``attest`` of 3 cited memories (sync off: an Attest and a LearnWeights in one commit),
   against one ``cx.write`` (sync off), alternating.

Then ``find`` is profiled with cProfile and its time split into phases (the second table).

Progress goes to stderr; the tables (or JSON with ``--json``) to stdout. Nothing here fails
on timing: a missed target is reported as ``no``.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import pstats
import random
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import cortexgraph as cg
from _report import environment, markdown_table, percentile, progress
from _workload import ACTOR, BASE_AT, NS, STEP_MS, RawStore, chunks, make_memories, write_cortex
from cortexgraph import Q
from cortexgraph.core.signals import MEMORY_STATUSES
from cortexgraph.core.taxonomy import MEMORY_TYPES
from cortexgraph.index import ColumnIndex

BATCH = 1_000
#: edges per memory, and the share of them that point into the hub set (1% of memories)
EDGES_PER_MEMORY = 0.5
HUB_SHARE = 0.2
HUB_FRACTION = 0.01
TOMBSTONE_FRACTION = 0.01
#: rounds of access entries, each over 1,000 memories of a popular 2% of the store
ACCESS_ROUNDS = 30
POPULAR_FRACTION = 0.02
TYPES = ("fact", "event", "preference")
FIND_CALLS = 2_000
LIMIT = 10
BUDGET = 500
TRAVERSALS = 2_000
TRAVERSE_DEPTH = 2
ATTESTS = 500
REOPENS = 3
CATCH_UPS = 3
PROFILE_CALLS = 2_000

TARGET_FIND_P50_US = 300.0
TARGET_FIND_P95_US = 1_000.0
TARGET_VS_SQLITE = 1.0  # x SQLite's time, at most

_clock = time.perf_counter
TYPE_NAMES = {t.type_code: t.type_name for t in MEMORY_TYPES}

#: SQLite's side: the schema, and per order the query (``?`` = tag, type)
SQLITE_SCHEMA = """
CREATE TABLE memories(id BLOB PRIMARY KEY, type TEXT, ns TEXT, status TEXT, priority INT,
                      confidence REAL, at INT, salience INT);
CREATE TABLE tags(id BLOB, tag TEXT);
"""
SQLITE_INDEXES = """
CREATE INDEX tags_tag_id ON tags(tag, id);
CREATE INDEX memories_type ON memories(type);
CREATE INDEX memories_type_status_salience ON memories(type, status, salience DESC, id);
CREATE INDEX memories_type_status_at ON memories(type, status, at DESC, id);
CREATE INDEX memories_type_status_priority ON memories(type, status, priority DESC, id);
ANALYZE;
"""
_SQL = (
    "SELECT m.id FROM memories m {join} tags t ON t.id = m.id"
    " WHERE t.tag = ? AND m.type = ? AND m.status = 'active'"
    " ORDER BY m.{column} DESC, m.id LIMIT {limit}"
)
ORDER_COLUMNS = {"salience": "salience", "recent": "at", "priority": "priority"}
#: the query written plainly (a ``JOIN``, no order forced): SQLite's planner picks the join
#: order (after ANALYZE it drives from the tag, looks each row up and sorts them)
SQLITE_QUERIES = {
    order: _SQL.format(join="JOIN", column=column, limit=LIMIT)
    for order, column in ORDER_COLUMNS.items()
}
#: the same query with the join order forced (``CROSS JOIN``): walk the (type, status,
#: order column) index in order and probe ``tags(tag, id)`` until 10 rows pass
SQLITE_INDEX_ORDER = {
    order: _SQL.format(join="CROSS JOIN", column=column, limit=LIMIT)
    for order, column in ORDER_COLUMNS.items()
}
#: the planner's plan is slow (milliseconds); it is timed on every PLANNER_EVERY-th query
PLANNER_EVERY = 5
SQLITE_COUNT = (
    "SELECT count(*) FROM memories m JOIN tags t ON t.id = m.id"
    " WHERE t.tag = ? AND m.type = ? AND m.status = 'active'"
)


# -- the store --------------------------------------------------------------------------------


class Workload:
    """What was written to the query store, kept for choosing queries and checking answers."""

    def __init__(self) -> None:
        self.uris: list[cg.MemoryURI] = []
        self.edges: list[tuple[int, int]] = []
        self.tombstoned: set[int] = set()
        self.tags: list[str] = []
        self.next_at = BASE_AT
        self.now = BASE_AT
        self.budget_hits = 0.0  # mean hits of a budget_tokens find (set by measure_find)

    def pairs(self) -> list[tuple[str, str]]:
        """Every (type, tag) pair, in a fixed order."""
        return [(t, g) for t in TYPES for g in self.tags]


def build_store(path: Path, n: int, *, seed: int = 3) -> Workload:
    """Memories, edges, tombstones and accesses, all with sync off; returns what it wrote."""
    work = Workload()
    memories = make_memories(n, seed=seed)
    work.tags = sorted({tag for memory in memories for tag in memory.tags})
    rng = random.Random(seed)
    cx = cg.open(path, ACTOR, sync=False)
    try:
        start = _clock()
        work.uris = [uri.head for uri in write_cortex(cx, memories, batch_size=BATCH)]
        progress(f"  wrote {n:,} memories at {n / (_clock() - start):,.0f}/s (sync off)")
        del memories
        at = BASE_AT + n * STEP_MS
        hubs = rng.sample(range(n), max(1, int(n * HUB_FRACTION)))
        wanted = int(n * EDGES_PER_MEMORY)
        seen: set[tuple[int, int]] = set()
        while len(work.edges) < wanted:
            src = rng.randrange(n)
            dst = rng.choice(hubs) if rng.random() < HUB_SHARE else rng.randrange(n)
            if src != dst and (src, dst) not in seen:
                seen.add((src, dst))
                work.edges.append((src, dst))
        start = _clock()
        for chunk in chunks(work.edges, BATCH):
            with cx.batch() as b:
                for src, dst in chunk:
                    b.add_edge(work.uris[src], work.uris[dst], "relates_to", at=at)
                    at += 1
        progress(
            f"  added {len(work.edges):,} edges at {len(work.edges) / (_clock() - start):,.0f}/s"
        )
        victims = rng.sample(range(n), int(n * TOMBSTONE_FRACTION))
        for chunk in chunks(victims, BATCH):
            with cx.batch() as b:
                for i in chunk:
                    b.tombstone(work.uris[i], reason="bench", at=at)
                    at += 1
        work.tombstoned = set(victims)
        popular = [i for i in rng.sample(range(n), int(n * POPULAR_FRACTION) or 1)]
        popular = [i for i in popular if i not in work.tombstoned]
        for _ in range(ACCESS_ROUNDS):
            readers = rng.sample(popular, min(BATCH, len(popular)))
            with cx.batch() as b:  # what find(late_binding=True) journals
                b.record_access([work.uris[i] for i in readers], at=at)
            at += 1
        progress(
            f"  tombstoned {len(victims):,}; {ACCESS_ROUNDS} access rounds over"
            f" {len(popular):,} popular memories; journal at seq {cx.seq:,}"
        )
        work.next_at = at + STEP_MS
        # Salience is computed a day after the last write: Events (7-day half-life) and
        # Preferences (180 days) have decayed a little, by different amounts.
        work.now = at + 86_400_000
    finally:
        cx.close()
    return work


def column_index(cx: cg.Cortex) -> ColumnIndex:
    """The handle's column index, brought up to date (internal)."""
    index = cx._column_index()
    with cx._env.read() as txn:
        index.refresh(txn)
    return index


def build_sqlite(path: Path, cx: cg.Cortex, now: int) -> sqlite3.Connection:
    """SQLite (WAL) holding every memory's row and tags, ``salience`` exact at ``now``."""
    index = column_index(cx)
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    mode = conn.execute("PRAGMA journal_mode=WAL").fetchone()[0]
    if mode != "wal":
        raise RuntimeError(f"SQLite refused WAL mode (got {mode!r})")
    conn.executescript(SQLITE_SCHEMA)
    cols = index.cols
    memories = []
    tags = []
    for row, memory_id in enumerate(index.ids):
        memories.append(
            (
                memory_id,
                TYPE_NAMES[int(cols["type"][row])],
                index.ns_names[int(cols["ns"][row])],
                MEMORY_STATUSES[int(cols["status"][row]) - 1],
                int(cols["priority"][row]),
                float(cols["confidence"][row]),
                int(cols["at"][row]),
                index.exact_score(row, now),
            )
        )
        tags.extend((memory_id, tag) for tag in index.tags[row])
    conn.execute("BEGIN")
    conn.executemany("INSERT INTO memories VALUES (?, ?, ?, ?, ?, ?, ?, ?)", memories)
    conn.executemany("INSERT INTO tags VALUES (?, ?)", tags)
    conn.execute("COMMIT")
    conn.executescript(SQLITE_INDEXES)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return conn


def query_plans(conn: sqlite3.Connection) -> dict[str, str]:
    """SQLite's plan for each order (``EXPLAIN QUERY PLAN``), one step per line."""
    plans = {}
    for kind, queries in (("planner", SQLITE_QUERIES), ("index order", SQLITE_INDEX_ORDER)):
        for order, sql in queries.items():
            rows = conn.execute("EXPLAIN QUERY PLAN " + sql, ("deploy", "fact")).fetchall()
            plans[f"{order}, {kind}"] = "; ".join(str(r[-1]) for r in rows)
    return plans


# -- 1. find against SQLite -----------------------------------------------------------------


def find_call(
    cx: cg.Cortex, now: int, order: str, **bound: Any
) -> Callable[[tuple[str, str]], Any]:
    """``cx.find`` of one (type, tag) pair, at ``now``, in ``order`` (``limit`` by default)."""
    if not bound:
        bound = {"limit": LIMIT}

    def call(pair: tuple[str, str]) -> Any:
        return cx.find(Q.type(pair[0]) & Q.tag(pair[1]), order_by=order, now=now, **bound)

    return call


def sqlite_call(
    conn: sqlite3.Connection, order: str, *, index_order: bool = False
) -> Callable[[tuple[str, str]], Any]:
    """SQLite's answer to the same query (with the join order forced if ``index_order``)."""
    sql = (SQLITE_INDEX_ORDER if index_order else SQLITE_QUERIES)[order]

    def call(pair: tuple[str, str]) -> Any:
        return conn.execute(sql, (pair[1], pair[0])).fetchall()

    return call


def check_agreement(cx: cg.Cortex, conn: sqlite3.Connection, work: Workload) -> int:
    """Raise unless both sides give the same ids, in order, for every pair and order.

    Also checks that ``find``'s ``matched`` equals SQLite's count. Returns the pairs checked.
    """
    for order in SQLITE_QUERIES:
        ours_call = find_call(cx, work.now, order)
        sides = [sqlite_call(conn, order, index_order=flag) for flag in (False, True)]
        for pair in work.pairs():
            result = ours_call(pair)
            ours = [hit.uri.id for hit in result]
            for theirs_call in sides:
                theirs = [bytes(r[0]) for r in theirs_call(pair)]
                if ours != theirs:
                    raise RuntimeError(
                        f"find and SQLite disagree on {pair} ordered by {order}:"
                        f" {[i.hex()[:8] for i in ours]} vs {[i.hex()[:8] for i in theirs]}"
                    )
            if order == "salience":
                count = conn.execute(SQLITE_COUNT, (pair[1], pair[0])).fetchone()[0]
                if count != result.matched:
                    raise RuntimeError(f"{pair}: find matched {result.matched}, SQLite {count}")
    return len(work.pairs())


def rotate(
    calls: Sequence[Callable[[Any], object]],
    args: Sequence[Any],
    *,
    every: Sequence[int],
    cpu: list[list[float]] | None = None,
) -> list[list[float]]:
    """µs of each call on every side, call by call, the side that goes first rotating.

    Side ``k`` runs on every ``every[k]``-th argument only (1: on all of them). If ``cpu``
    is given, it receives the same calls' CPU time (``time.thread_time``), per side: on a
    busy machine wall time includes time the process waited for a core, CPU time does not.
    """
    out: list[list[float]] = [[] for _ in calls]
    if cpu is not None:
        cpu[:] = [[] for _ in calls]
    thread_time = time.thread_time
    for i, arg in enumerate(args):
        for j in range(len(calls)):
            k = (i + j) % len(calls)
            if i % every[k]:
                continue
            start_cpu = thread_time()
            start = _clock()
            calls[k](arg)
            end = _clock()
            if cpu is not None:
                cpu[k].append((thread_time() - start_cpu) * 1e6)
            out[k].append((end - start) * 1e6)
    return out


def alternate(
    ours: Callable[[Any], object], theirs: Callable[[Any], object], args: Sequence[Any]
) -> tuple[list[float], list[float]]:
    """µs of each call on both sides, call by call, the side that goes first alternating."""
    a, b = rotate((ours, theirs), args, every=(1, 1))
    return a, b


def time_calls(call: Callable[[Any], object], args: Sequence[Any]) -> list[float]:
    """µs of each ``call(arg)``, timed one by one."""
    out: list[float] = []
    for arg in args:
        start = _clock()
        call(arg)
        out.append((_clock() - start) * 1e6)
    return out


def query_order(work: Workload, calls: int, seed: int = 5) -> list[tuple[str, str]]:
    """``calls`` (type, tag) pairs: every pair in turn, each pass shuffled."""
    rng = random.Random(seed)
    pairs = work.pairs()
    out: list[tuple[str, str]] = []
    while len(out) < calls:
        out.extend(rng.sample(pairs, len(pairs)))
    return out[:calls]


def measure_find(
    cx: cg.Cortex, conn: sqlite3.Connection, work: Workload
) -> dict[str, list[list[float]]]:
    """µs per call for each order: cortexgraph, SQLite (index order), SQLite (planner)."""
    queries = query_order(work, FIND_CALLS)
    out: dict[str, list[list[float]]] = {}
    for order in SQLITE_QUERIES:
        sides = (
            find_call(cx, work.now, order),
            sqlite_call(conn, order, index_order=True),
            sqlite_call(conn, order),
        )
        for pair in queries[:20]:  # warm every side
            for call in sides:
                call(pair)
        cpu: list[list[float]] = []
        out[order] = rotate(sides, queries, every=(1, 1, PLANNER_EVERY), cpu=cpu)
        if order == "salience":
            out["salience_cpu"] = cpu
        progress(
            f"find by {order}: p50 cortexgraph {percentile(out[order][0], 50):,.0f} µs,"
            f" SQLite {percentile(out[order][1], 50):,.0f} µs (index order),"
            f" {percentile(out[order][2], 50):,.0f} µs (planner's plan)"
        )
    budget = find_call(cx, work.now, "salience", budget_tokens=BUDGET)
    sizes = [len(budget(pair)) for pair in queries[:200]]
    out["budget"] = [time_calls(budget, queries)]
    progress(
        f"find with budget_tokens={BUDGET}: p50 {percentile(out['budget'][0], 50):,.0f} µs,"
        f" {statistics.mean(sizes):.1f} hits on average"
    )
    work.budget_hits = statistics.mean(sizes)
    return out


def measure_first_find(path: Path, work: Workload) -> tuple[list[float], list[float]]:
    """µs of the first ``find`` after opening the store, and of the same call again."""
    first: list[float] = []
    warm: list[float] = []
    pair = ("fact", work.tags[0])
    for rep in range(REOPENS):
        with cg.open(path, ACTOR, sync=False) as cx:
            call = find_call(cx, work.now, "salience")
            first.extend(time_calls(call, [pair]))
            warm.extend(time_calls(call, [pair]))
        progress(
            f"first find after open: {rep + 1}/{REOPENS}: {first[-1] / 1000:,.1f} ms,"
            f" then {warm[-1]:,.0f} µs"
        )
    return first, warm


def measure_catch_up(cx: cg.Cortex, work: Workload) -> tuple[list[float], list[float]]:
    """µs of the first ``find`` after 1,000 new writes, and of the same call again."""
    first: list[float] = []
    warm: list[float] = []
    call = find_call(cx, work.now, "salience")
    for rep in range(CATCH_UPS):
        pair = ("fact", work.tags[rep % len(work.tags)])
        call(pair)
        memories = make_memories(BATCH, seed=100 + rep, start_at=work.next_at)
        write_cortex(cx, memories, batch_size=BATCH, start_at=work.next_at)
        work.next_at += BATCH * STEP_MS
        first.extend(time_calls(call, [pair]))
        warm.extend(time_calls(call, [pair]))
        progress(
            f"find after {BATCH:,} writes: {rep + 1}/{CATCH_UPS}: {first[-1] / 1000:,.1f} ms,"
            f" then {warm[-1]:,.0f} µs"
        )
    return first, warm


# -- 2. traverse ------------------------------------------------------------------------------


class RawGraph:
    """Depth-limited BFS over the store's ``edges`` table with bare py-lmdb.

    The same reads ``cx.traverse(direction="both")`` makes: per node, a cursor over the
    ``o`` + id and ``i`` + id prefixes of ``edges``; per newly reached node, its ``heads``
    row. What it leaves out is cortexgraph's work: decoding edge and head values (the
    tombstone test uses a precomputed set instead) and building the result records.
    """

    def __init__(self, cx: cg.Cortex, tombstoned: set[bytes]) -> None:
        self.raw = RawStore.borrow(cx)
        self.tombstoned = tombstoned

    def traverse(self, start: bytes, depth: int = TRAVERSE_DEPTH) -> list[list[bytes]]:
        env, dbs = self.raw.env, self.raw.dbs
        txn = env.begin(buffers=False)
        try:
            heads, dead = dbs["heads"], self.tombstoned
            txn.get(start, db=heads)
            cur = txn.cursor(db=dbs["edges"])
            seen = {start}
            frontier = [start]
            levels: list[list[bytes]] = []
            for _ in range(depth):
                found: set[bytes] = set()
                for node in frontier:
                    for prefix in (b"o" + node, b"i" + node):
                        if not cur.set_range(prefix):
                            continue
                        for key in cur.iternext(keys=True, values=False):
                            if not key.startswith(prefix):
                                break
                            cur.value()
                            other = key[18:]
                            if other in seen or other in found:
                                continue
                            txn.get(other, db=heads)
                            if other not in dead:
                                found.add(other)
                if not found:
                    break
                frontier = sorted(found)
                levels.append(frontier)
                seen.update(found)
            return levels
        finally:
            txn.abort()


def measure_traverse(cx: cg.Cortex, work: Workload) -> tuple[list[float], list[float], float]:
    """µs per ``traverse`` from random memories with edges, and per raw BFS; mean reached."""
    rng = random.Random(8)
    ends = sorted({i for edge in work.edges for i in edge} - work.tombstoned)
    starts = [work.uris[i] for i in rng.choices(ends, k=TRAVERSALS)]
    raw = RawGraph(cx, {work.uris[i].id for i in work.tombstoned})
    reached = []
    for uri in starts:  # the same memories, level by level, on both sides
        ours = cx.traverse(uri, depth=TRAVERSE_DEPTH, direction="both")
        mine = [[n.uri.id for n in level] for level in ours.levels]
        if mine != raw.traverse(uri.id):
            raise RuntimeError(f"traverse and the raw BFS disagree from {uri}")
        reached.append(len(ours))

    def ours_call(uri: cg.MemoryURI) -> object:
        return cx.traverse(uri, depth=TRAVERSE_DEPTH, direction="both")

    def raw_call(uri: cg.MemoryURI) -> object:
        return raw.traverse(uri.id)

    ours_us, raw_us = alternate(ours_call, raw_call, starts)
    mean = statistics.mean(reached)
    progress(
        f"traverse depth {TRAVERSE_DEPTH}: p50 {percentile(ours_us, 50):,.0f} µs,"
        f" raw {percentile(raw_us, 50):,.0f} µs; {mean:.1f} memories reached on average"
        f" (max {max(reached)})"
    )
    return ours_us, raw_us, mean


# -- 3. attest --------------------------------------------------------------------------------


def measure_attest(cx: cg.Cortex, work: Workload) -> tuple[list[float], list[float]]:
    """µs per ``attest`` of 3 cited memories and per single ``cx.write``, alternating."""
    rng = random.Random(9)
    live = [uri for i, uri in enumerate(work.uris) if i not in work.tombstoned]
    memories = make_memories(ATTESTS, seed=10, start_at=work.next_at)
    ours: list[float] = []
    base: list[float] = []
    for i in range(ATTESTS):
        cited = rng.sample(live, 3)
        outcome = "success" if i % 3 else "failure"
        at = work.next_at
        work.next_at += STEP_MS
        for k in (0, 1) if i % 2 == 0 else (1, 0):
            start = _clock()
            if k == 0:
                cx.attest(cited, outcome=outcome, at=at)
            else:
                cx.write(memories[i], ns=NS, at=at)
            (ours if k == 0 else base).append((_clock() - start) * 1e6)
    progress(
        f"attest: p50 {percentile(ours, 50):,.0f} µs, single write {percentile(base, 50):,.0f} µs"
        f"; weights now {cx.weights()}"
    )
    return ours, base


# -- 4. profile of find -----------------------------------------------------------------------

#: phases of ``find``: (label, [(file suffix, function, only under calls from)]), summing
#: cumulative times; what none of them covers is reported as the rest
PHASES: tuple[tuple[str, tuple[tuple[str, str, str | None], ...]], ...] = (
    ("checks, plan and count (kept per plan and seq)", (
        ("core/predicates.py", "check_predicate", None), ("core/query.py", "check_bounded", None),
        ("core/query.py", "check_order", None), ("index/columns.py", "plan", None),
        ("index/order.py", "walk_budget", None), ("index/columns.py", "count", None))),
    ("refresh (catch-up check)", (("index/columns.py", "refresh", None),)),
    ("selection, when not walking (postings, masks)", (
        ("index/columns.py", "select", "run_find"),)),
    ("ordering (salience walk, or scores then sort)", (
        ("index/order.py", "walk_salience", None), ("index/order.py", "ordered", None))),
    ("record reads (memo, else heads, version, decode)", (("reading.py", "row_memo", None),)),
    ("rendering and token estimate (memo)", (("reading.py", "shown", "run_find"),)),
)  # fmt: skip


def profile_find(cx: cg.Cortex, work: Workload) -> dict[str, Any]:
    """cProfile ``PROFILE_CALLS`` salience finds; the phases' share and the top functions."""
    call = find_call(cx, work.now, "salience")
    queries = query_order(work, PROFILE_CALLS, seed=12)
    profiler = cProfile.Profile()
    profiler.enable()
    for pair in queries:
        call(pair)
    profiler.disable()
    stats = pstats.Stats(profiler)
    table: dict[tuple[str, int, str], Any] = stats.stats  # type: ignore[attr-defined]
    total = next(
        value[3] for (file, _, name), value in table.items()
        if name == "find" and file.endswith("cortex.py")
    )  # fmt: skip

    def cumulative(file_suffix: str, name: str, *, caller: str | None = None) -> float:
        seconds = 0.0
        for (file, _, func), (_, _, _, cum, callers) in table.items():
            if func != name or not file.endswith(file_suffix):
                continue
            if caller is None:
                seconds += cum
            else:  # only the time spent under calls from ``caller``
                seconds += sum(v[3] for (_, _, f), v in callers.items() if f == caller)
        return seconds

    phases = []
    for label, funcs in PHASES:
        seconds = sum(cumulative(f, name, caller=caller) for f, name, caller in funcs)
        phases.append(
            {"phase": label, "us_per_call": seconds / PROFILE_CALLS * 1e6, "share": seconds / total}
        )
    rest = total - sum(p["us_per_call"] for p in phases) * PROFILE_CALLS / 1e6
    phases.append({"phase": "rest (txn, Hit/FindResult, loop)",
                   "us_per_call": rest / PROFILE_CALLS * 1e6, "share": rest / total})  # fmt: skip
    top = sorted(table.items(), key=lambda item: -item[1][3])[:20]
    lines = [
        f"{v[1]:>8} {v[2]:8.3f} {v[3]:8.3f}  {Path(f).name}:{line}({name})"
        for (f, line, name), v in top
    ]
    return {
        "calls": PROFILE_CALLS,
        "us_per_call_profiled": total / PROFILE_CALLS * 1e6,
        "phases": phases,
        "top": ["  ncalls  tottime  cumtime  function", *lines],
    }


# -- report -----------------------------------------------------------------------------------


def row(
    operation: str,
    unit: str,
    figure: float,
    baseline: float | None,
    baseline_is: str,
    *,
    target: str = "",
    met: Sequence[bool] = (),
) -> dict[str, Any]:
    """One table row; ``ratio`` is the figure as a multiple of the baseline (times)."""
    return {
        "operation": operation,
        "unit": unit,
        "figure": figure,
        "baseline": baseline,
        "baseline_is": baseline_is,
        "ratio": None if baseline is None else figure / baseline,
        "target": target,
        "met": all(met) if met else None,
        "met_each": list(met),
    }


def build_rows(
    finds: dict[str, list[list[float]]],
    first: tuple[list[float], list[float]],
    catch_up: tuple[list[float], list[float]],
    traverse: tuple[list[float], list[float], float],
    attest: tuple[list[float], list[float]],
    budget_hits: float,
) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for order in ORDER_COLUMNS:
        ours, index_order, planner = finds[order]
        for p, absolute in ((50, TARGET_FIND_P50_US), (95, TARGET_FIND_P95_US)):
            figure = percentile(ours, p)
            label = f"find type & tag, limit {LIMIT}, by {order} p{p}"
            for base_label, times in (
                ("SQLite, index order", index_order),
                ("SQLite, planner's plan", planner),
            ):
                base = percentile(times, p)
                if order == "salience":
                    rows.append(
                        row(
                            label, "µs", figure, base, base_label,
                            target=f"<= {absolute:,.0f} µs; <= {TARGET_VS_SQLITE:g}x",
                            met=(figure <= absolute, figure <= base * TARGET_VS_SQLITE),
                        )
                    )  # fmt: skip
                else:
                    rows.append(row(label, "µs", figure, base, base_label))
    ours, index_order, planner = finds["salience_cpu"]
    for p in (50, 95):
        for base_label, times in (
            ("SQLite, index order", index_order),
            ("SQLite, planner's plan", planner),
        ):
            rows.append(
                row(
                    f"find type & tag, limit {LIMIT}, by salience p{p}, CPU time",
                    "µs",
                    percentile(ours, p),
                    percentile(times, p),
                    base_label,
                )
            )
    budget = finds["budget"][0]
    for p in (50, 95):
        rows.append(
            row(
                f"find type & tag, budget_tokens {BUDGET} ({budget_hits:.1f} hits) p{p}",
                "µs",
                percentile(budget, p),
                percentile(finds["salience"][0], p),
                f"limit {LIMIT}, same run",
            )
        )
    for label, (cold, warm) in (
        (f"first find after open (index build, median of {REOPENS})", first),
        (f"first find after {BATCH:,} writes (catch-up, median of {CATCH_UPS})", catch_up),
    ):
        rows.append(
            row(label, "ms", statistics.median(cold) / 1000, statistics.median(warm) / 1000,
                "the same find again")
        )  # fmt: skip
    ours, raw, reached = traverse
    for p in (50, 95):
        rows.append(
            row(
                f"traverse depth {TRAVERSE_DEPTH}, both ways ({reached:.1f} reached) p{p}",
                "µs",
                percentile(ours, p),
                percentile(raw, p),
                "raw LMDB BFS",
            )
        )
    ours, base = attest
    for p in (50, 95):
        rows.append(
            row(f"attest, 3 cited (sync off) p{p}", "µs", percentile(ours, p),
                percentile(base, p), "1 cx.write, sync off")
        )  # fmt: skip
    return rows


def _number(value: float) -> str:
    return f"{value:,.0f}" if value >= 1000 else f"{value:,.1f}"


def format_table(rows: list[dict[str, Any]]) -> str:
    header = ("operation", "unit", "figure", "baseline", "baseline is", "x base", "target", "met")
    cells = [
        (
            r["operation"],
            r["unit"],
            _number(r["figure"]),
            "-" if r["baseline"] is None else _number(r["baseline"]),
            r["baseline_is"] or "-",
            "-" if r["ratio"] is None else f"{r['ratio']:.2f}x",
            r["target"] or "-",
            "-" if not r["met_each"] else "; ".join("yes" if m else "no" for m in r["met_each"]),
        )
        for r in rows
    ]
    return markdown_table(header, cells, {2, 3, 5})


def format_profile(profile: dict[str, Any]) -> str:
    header = ("phase of find (cProfile)", "µs per call", "share")
    cells = [
        (p["phase"], f"{p['us_per_call']:,.1f}", f"{p['share']:.0%}") for p in profile["phases"]
    ]
    cells.append(("total, under the profiler", f"{profile['us_per_call_profiled']:,.1f}", "100%"))
    return markdown_table(header, cells, {1, 2})


# -- driver -----------------------------------------------------------------------------------


def measure(root: Path, n: int) -> dict[str, Any]:
    """Run every measurement with stores under ``root`` (which must exist).

    Returns ``{"rows", "profile", "sqlite_plans", "store"}``.
    """
    store = root / "query"
    progress(f"building the query store: {n:,} memories, edges, tombstones, accesses")
    work = build_store(store, n)
    cx = cg.open(store, ACTOR, sync=False)
    try:
        progress("SQLite: loading the same rows, salience exact at now")
        start = _clock()
        conn = build_sqlite(root / "query.sqlite", cx, work.now)
        plans = query_plans(conn)
        progress(f"SQLite: loaded and indexed in {_clock() - start:,.1f} s; plans: {plans}")
        pairs = check_agreement(cx, conn, work)
        progress(f"find and SQLite agree on all {pairs} (type, tag) pairs, in all 3 orders")
        finds = measure_find(cx, conn, work)
        conn.close()
        traverse = measure_traverse(cx, work)
        profile = profile_find(cx, work)
        progress(f"profile: {profile['us_per_call_profiled']:,.0f} µs per find under cProfile")
    finally:
        cx.close()
    first = measure_first_find(store, work)
    with cg.open(store, ACTOR, sync=False) as cx:
        attest = measure_attest(cx, work)
        catch_up = measure_catch_up(cx, work)
    rows = build_rows(finds, first, catch_up, traverse, attest, work.budget_hits)
    info = {
        "memories": n,
        "edges": len(work.edges),
        "tombstoned": len(work.tombstoned),
        "sqlite": sqlite3.sqlite_version,
    }
    return {"rows": rows, "profile": profile, "sqlite_plans": plans, "store": info}


def header_lines(info: dict[str, Any], result: dict[str, Any]) -> list[str]:
    store = result["store"]
    return [
        f"cortexgraph {info['cortexgraph']}, Python {info['python']}, LMDB {info['lmdb']}"
        f" (py-lmdb {info['py_lmdb']}), SQLite {sqlite3.sqlite_version}, {info['cpus']} CPUs,"
        f" {info['platform']}",
        f"query suite: {store['memories']:,} memories, {store['edges']:,} edges,"
        f" {store['tombstoned']:,} tombstoned; 1-min load average"
        f" {info['load_avg_1min_start']} at start, {info['load_avg_1min_end']} at end",
    ]


def print_result(result: dict[str, Any]) -> None:
    print(format_table(result["rows"]))
    print()
    print(format_profile(result["profile"]))
    print()
    print("\n".join(result["profile"]["top"]))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--n", type=int, default=100_000, help="memories in the query store (default 100000)"
    )
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.add_argument(
        "--dir", type=Path, default=None, help="parent of the temporary stores (default: TMPDIR)"
    )
    args = parser.parse_args(argv)
    if args.n < 1_000:
        parser.error("--n must be at least 1000")
    with tempfile.TemporaryDirectory(prefix="cortexgraph-bench-query-", dir=args.dir) as tmp:
        root = Path(tmp)
        info = environment(args.n, root)
        info["sqlite"] = sqlite3.sqlite_version
        progress(f"stores under {root}")
        result = measure(root, args.n)
    info["load_avg_1min_end"] = round(os.getloadavg()[0], 2)
    progress("done")
    if args.json:
        print(json.dumps({"environment": info, **result}, indent=2, ensure_ascii=False))
    else:
        print("\n".join(header_lines(info, result)))
        print_result(result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
