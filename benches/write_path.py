"""The write path against what a user would pick instead: SQLite (WAL, ``synchronous=FULL``)
with an FTS5 table and a tag index, on the same data, in the same run.

Usage::

    .venv/bin/python benches/write_path.py                  # every part, a table to stdout
    .venv/bin/python benches/write_path.py --json           # the figures as JSON
    .venv/bin/python benches/write_path.py --big 20000      # a smaller "big" store
    .venv/bin/python benches/write_path.py --million        # also verify a 1,000,000-entry journal
    .venv/bin/python benches/write_path.py --parts batched,single

Parts (``--parts``; each repeated 3 times, best and median reported):

``batched``  20 batches of 1,000 memories, one durable transaction each, into an empty
             store; SQLite inserts the same texts and tags, 1,000 to a transaction. The
             rows cortexgraph's transactions wrote per memory are counted (every put and
             delete; distinct rows per transaction), and the same operations replayed into
             bare LMDB give a diagnostic floor (our rows with none of our code).
``big``      5 batches of 1,000 into a store that already holds ``--big`` memories (100,000),
             each side into its own prefilled store.
``single``   200 single durable writes, cortexgraph's ``cx.write`` and SQLite's one-row
             transaction alternating write by write; p50 and p95.
``keyword``  top-10 keyword recall on the ``--big`` store against FTS5's ``bm25()`` on the
             same texts (words OR-ed), 1,000 queries, after one untimed pass; p50 and p95.
``rebuild``  ``cx.rebuild()`` and ``cortexgraph verify`` of a journal of ``--big`` entries
             with updates, head moves, tombstones and edges; entries/s. ``--million`` adds
             one timed verify of a 1,000,000-entry journal.

Nothing here fails on timing. Progress goes to stderr.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import cortexgraph as cg
from _report import markdown_table, percentile, progress
from _workload import (
    ACTOR,
    BASE_AT,
    NS,
    STEP_MS,
    RawStore,
    SqliteFts5,
    capture_batches,
    make_memories,
    rows_per_memory,
    write_cortex,
)

BATCH = 1_000
BATCHES = 20
BIG_BATCHES = 5
SINGLES = 200
QUERIES = 1_000
REPEATS = 3
PARTS = ("batched", "big", "single", "keyword", "rebuild")

TARGET_BATCH_RATIO = 0.3  # x SQLite+FTS5's batched throughput, at least
TARGET_SINGLE_RATIO = 1.0  # x SQLite+FTS5's single insert p50, at most
TARGET_REPLAY_RATE = 50_000  # entries/s, at least
TARGET_KEYWORD_RATIO = 1.0  # x FTS5 bm25() p95, at most
TARGET_ROWS = 8.0  # rows per memory of the batched workload, at most

_clock = time.perf_counter


def _best_median(values: Sequence[float], *, higher: bool) -> tuple[float, float]:
    best = max(values) if higher else min(values)
    return best, statistics.median(values)


# -- batched writes -----------------------------------------------------------------------


def measure_batched(root: Path) -> dict[str, Any]:
    memories = make_memories(BATCH * BATCHES, seed=1)
    progress(f"batched: capturing the operations of {len(memories):,} memories")
    batches = capture_batches(memories, batch_size=BATCH)
    rows = rows_per_memory(batches, len(memories))
    ours: list[float] = []
    sqlite: list[float] = []
    raw: list[float] = []
    for rep in range(REPEATS):
        with cg.open(root / f"batched-{rep}", ACTOR, sync=True) as cx:
            start = _clock()
            write_cortex(cx, memories, batch_size=BATCH)
            ours.append(len(memories) / (_clock() - start))
        sqlite.append(_sqlite_rate(SqliteFts5(root / f"batched-{rep}.sqlite"), memories))
        store = RawStore.create(root / f"batched-raw-{rep}", sync=True)
        try:
            raw.append(len(memories) / store.timed_replay(batches))
        finally:
            store.close()
        progress(
            f"batched: repeat {rep + 1}/{REPEATS}: cortexgraph {ours[-1]:,.0f}/s,"
            f" SQLite+FTS5 {sqlite[-1]:,.0f}/s, raw LMDB of our rows {raw[-1]:,.0f}/s"
        )
    return {"cortexgraph": ours, "sqlite": sqlite, "raw": raw, "rows": rows}


def _sqlite_rate(db: SqliteFts5, memories: Sequence[cg.Memory]) -> float:
    """Memories/s of SQLite inserting ``memories`` in batches (then ``db`` is closed)."""
    try:
        start = _clock()
        db.write_batches(memories, NS, BATCH)
        return len(memories) / (_clock() - start)
    finally:
        db.close()


def _prefill(root: Path, memories: Sequence[cg.Memory]) -> tuple[Path, Path]:
    """A cortexgraph store and a SQLite database holding ``memories`` (one transaction
    per 1,000 for both). The store is written durably, as the timed batches are: a store
    written with sync off has no journal log, and the first durable commit into it would
    write the whole log (about 0.25 s at 100,000 entries) inside the first timed repeat."""
    path = root / "big"
    with cg.open(path, ACTOR, sync=True) as cx:
        start = _clock()
        write_cortex(cx, memories, batch_size=BATCH)
        progress(f"big: prefilled {len(memories):,} memories in {_clock() - start:.1f} s")
    db = SqliteFts5(root / "big.sqlite")
    try:
        db.write_batches(memories, NS, BATCH)
    finally:
        db.close()
    return path, root / "big.sqlite"


def measure_big(path: Path, sqlite_path: Path, big: int) -> dict[str, Any]:
    ours: list[float] = []
    sqlite: list[float] = []
    added = 0
    for rep in range(REPEATS):
        extra = make_memories(BATCH * BIG_BATCHES, seed=100 + rep, start_at=BASE_AT)
        start_at = BASE_AT + (big + added) * STEP_MS
        with cg.open(path, ACTOR, sync=True) as cx:
            start = _clock()
            write_cortex(cx, extra, batch_size=BATCH, start_at=start_at)
            ours.append(len(extra) / (_clock() - start))
        sqlite.append(_sqlite_rate(SqliteFts5.reopen(sqlite_path), extra))
        added += len(extra)
        progress(
            f"big: repeat {rep + 1}/{REPEATS} at {big + added - len(extra):,}: cortexgraph"
            f" {ours[-1]:,.0f}/s, SQLite+FTS5 {sqlite[-1]:,.0f}/s"
        )
    return {"cortexgraph": ours, "sqlite": sqlite}


# -- single writes ------------------------------------------------------------------------


def measure_single(root: Path) -> dict[str, Any]:
    memories = make_memories(SINGLES, seed=2)
    runs: dict[str, list[list[float]]] = {"cortexgraph": [], "sqlite": []}
    for rep in range(REPEATS):
        ours: list[float] = []
        theirs: list[float] = []
        db = SqliteFts5(root / f"single-{rep}.sqlite")
        with cg.open(root / f"single-{rep}", ACTOR, sync=True) as cx:
            for i, memory in enumerate(memories):
                start = _clock()
                cx.write(memory, ns=NS, at=BASE_AT + i * STEP_MS)
                middle = _clock()
                db.write(memory, NS)
                end = _clock()
                ours.append((middle - start) * 1e6)
                theirs.append((end - middle) * 1e6)
        db.close()
        runs["cortexgraph"].append(ours)
        runs["sqlite"].append(theirs)
        progress(
            f"single: repeat {rep + 1}/{REPEATS}: p50 cortexgraph {statistics.median(ours):,.0f}"
            f" µs, SQLite+FTS5 {statistics.median(theirs):,.0f} µs"
        )
    return runs


# -- keyword recall -----------------------------------------------------------------------


def _queries(count: int, seed: int = 11) -> list[str]:
    from _workload import _WORDS
    from cortexgraph.core.text import STOPWORDS

    words = sorted({w for w in _WORDS if w not in STOPWORDS})
    rng = random.Random(seed)
    return [" ".join(rng.sample(words, rng.randint(1, 4))) for _ in range(count)]


def _time_each(call: Callable[[str], object], queries: Sequence[str]) -> list[float]:
    out = []
    for query in queries:
        start = _clock()
        call(query)
        out.append((_clock() - start) * 1e3)
    return out


def measure_keyword(path: Path, sqlite_path: Path) -> dict[str, Any]:
    queries = _queries(QUERIES)
    runs: dict[str, list[list[float]]] = {"cortexgraph": [], "sqlite": []}
    with cg.open(path, ACTOR, readonly=True) as cx:
        db = SqliteFts5.reopen(sqlite_path)
        try:

            def ours(query: str) -> object:
                return cx.recall(query, k=10, mode="keyword", expand=False)

            def theirs(query: str) -> object:
                return db.keyword(query, 10)

            start = _clock()
            ours(queries[0])
            first_ms = (_clock() - start) * 1e3
            _time_each(ours, queries)  # untimed: every term read once, as a warm process has
            _time_each(theirs, queries)
            for rep in range(REPEATS):
                runs["cortexgraph"].append(_time_each(ours, queries))
                runs["sqlite"].append(_time_each(theirs, queries))
                progress(
                    f"keyword: repeat {rep + 1}/{REPEATS}: p95 cortexgraph"
                    f" {percentile(runs['cortexgraph'][-1], 95):.2f} ms, FTS5"
                    f" {percentile(runs['sqlite'][-1], 95):.2f} ms"
                )
        finally:
            db.close()
    return {**runs, "first_ms": first_ms}


# -- rebuild and verify -------------------------------------------------------------------


def write_history(cx: cg.Cortex, entries: int, *, seed: int = 7) -> None:
    """A journal of ``entries`` entries: about 80% writes, then updates, head moves,
    tombstones and edges among them, in batches of 1,000."""
    rng = random.Random(seed)
    writes = entries * 8 // 10
    memories = make_memories(writes, seed=seed)
    uris = write_cortex(cx, memories, batch_size=BATCH)
    at = BASE_AT + writes * STEP_MS
    rest = entries - cx.seq
    ops = ["update"] * (rest * 5 // 10) + ["head"] * (rest // 10) + ["tombstone"] * (rest // 10)
    ops += ["edge"] * (rest - len(ops))
    rng.shuffle(ops)
    updated: list[int] = []
    gone: set[int] = set()
    for first in range(0, len(ops), BATCH):
        with cx.batch() as b:
            for op in ops[first : first + BATCH]:
                at += STEP_MS
                i = rng.randrange(writes)
                while i in gone:
                    i = rng.randrange(writes)
                if op == "update":
                    b.update(uris[i], text=f"{memories[i].text} (revised {at})", at=at)
                    updated.append(i)
                elif op == "head" and updated:
                    j = updated.pop()
                    if j in gone:
                        b.update(uris[i], text=f"{memories[i].text} (again {at})", at=at)
                    else:
                        b.update_head(uris[j], version=1, at=at)
                elif op == "tombstone":
                    b.tombstone(uris[i], reason="bench", at=at)
                    gone.add(i)
                else:
                    j = rng.randrange(writes)
                    while j == i or j in gone:
                        j = rng.randrange(writes)
                    b.add_edge(uris[i], uris[j], "relates_to", strength=0.5, at=at)
    while cx.seq < entries:  # head moves that found no update, made up by updates
        at += STEP_MS
        i = rng.randrange(writes)
        if i not in gone:
            cx.update(uris[i], text=f"{memories[i].text} (filled {at})", at=at)


def measure_rebuild(root: Path, entries: int, *, million: bool) -> dict[str, Any]:
    path = root / "history"
    with cg.open(path, ACTOR, sync=False) as cx:
        start = _clock()
        write_history(cx, entries)
        progress(f"rebuild: wrote a journal of {cx.seq:,} entries in {_clock() - start:.1f} s")
        total = cx.seq
    rebuild: list[float] = []
    verify: list[float] = []
    for rep in range(REPEATS):
        with cg.open(path, ACTOR, sync=False) as cx:
            start = _clock()
            cx.rebuild()
            rebuild.append(total / (_clock() - start))
        start = _clock()
        report = cg.verify(path, ACTOR)
        verify.append(total / (_clock() - start))
        if not report.ok:
            raise RuntimeError(f"verify failed on the bench store: {report.to_dict()}")
        progress(
            f"rebuild: repeat {rep + 1}/{REPEATS}: rebuild {rebuild[-1]:,.0f} entries/s,"
            f" verify {verify[-1]:,.0f} entries/s"
        )
    out: dict[str, Any] = {"entries": total, "rebuild": rebuild, "verify": verify}
    if million:
        big = root / "million"
        with cg.open(big, ACTOR, sync=False) as cx:
            start = _clock()
            write_history(cx, 1_000_000)
            progress(f"rebuild: wrote 1,000,000 entries in {_clock() - start:.1f} s")
        start = _clock()
        report = cg.verify(big, ACTOR)
        out["million_verify_s"] = _clock() - start
        if not report.ok:
            raise RuntimeError("verify failed on the million-entry store")
        progress(f"rebuild: verify of 1,000,000 entries took {out['million_verify_s']:.1f} s")
    return out


# -- the table ----------------------------------------------------------------------------


def build_rows(result: dict[str, Any]) -> list[list[str]]:
    rows: list[list[str]] = []

    def ratio_row(
        what: str,
        ours: Sequence[float],
        theirs: Sequence[float],
        unit: str,
        *,
        higher: bool,
        target: str,
        met: bool,
    ) -> None:
        ob, om = _best_median(ours, higher=higher)
        tb, tm = _best_median(theirs, higher=higher)
        rows.append(
            [
                what,
                f"{ob:,.1f} / {om:,.1f} {unit}",
                f"{tb:,.1f} / {tm:,.1f} {unit}",
                f"{om / tm:.2f}x",
                target,
                "yes" if met else "no",
            ]
        )

    if "batched" in result:
        part = result["batched"]
        ratio = statistics.median(part["cortexgraph"]) / statistics.median(part["sqlite"])
        ratio_row(
            "batched writes, empty store",
            part["cortexgraph"],
            part["sqlite"],
            "/s",
            higher=True,
            target=f">= {TARGET_BATCH_RATIO}x",
            met=ratio >= TARGET_BATCH_RATIO,
        )
        raw_best, raw_median = _best_median(part["raw"], higher=True)
        rows.append(
            [
                "  raw LMDB of the same rows (diagnostic)",
                f"{raw_best:,.1f} / {raw_median:,.1f} /s",
                "",
                "",
                "",
                "",
            ]
        )
        rows_per = part["rows"]["rows"]
        rows.append(
            [
                "  rows per memory (distinct per txn; all puts and deletes)",
                f"{rows_per:.2f}; {part['rows']['ops']:.2f}",
                "",
                "",
                f"<= {TARGET_ROWS:.0f}",
                "yes" if rows_per <= TARGET_ROWS else "no",
            ]
        )
        tables = ", ".join(
            f"{k.split('.', 1)[1]} {v:.2f}"
            for k, v in part["rows"].items()
            if k.startswith("rows.")
        )
        rows.append(["  rows per memory by table", tables, "", "", "", ""])
    if "big" in result:
        part = result["big"]
        ratio = statistics.median(part["cortexgraph"]) / statistics.median(part["sqlite"])
        ratio_row(
            f"batched writes into {result['big_n']:,}",
            part["cortexgraph"],
            part["sqlite"],
            "/s",
            higher=True,
            target=f">= {TARGET_BATCH_RATIO}x",
            met=ratio >= TARGET_BATCH_RATIO,
        )
    if "single" in result:
        part = result["single"]
        ours = [statistics.median(run) for run in part["cortexgraph"]]
        theirs = [statistics.median(run) for run in part["sqlite"]]
        ratio = statistics.median(ours) / statistics.median(theirs)
        ratio_row(
            "single durable write p50",
            ours,
            theirs,
            "µs",
            higher=False,
            target=f"<= {TARGET_SINGLE_RATIO}x",
            met=ratio <= TARGET_SINGLE_RATIO,
        )
    if "keyword" in result:
        part = result["keyword"]
        ours = [percentile(run, 95) for run in part["cortexgraph"]]
        theirs = [percentile(run, 95) for run in part["sqlite"]]
        ratio = statistics.median(ours) / statistics.median(theirs)
        ratio_row(
            f"keyword top-10 p95 at {result['big_n']:,}",
            ours,
            theirs,
            "ms",
            higher=False,
            target=f"<= {TARGET_KEYWORD_RATIO}x",
            met=ratio <= TARGET_KEYWORD_RATIO,
        )
        rows.append(
            [
                "  first keyword recall of a fresh handle",
                f"{part['first_ms']:.1f} ms",
                "",
                "",
                "",
                "",
            ]
        )
    if "rebuild" in result:
        part = result["rebuild"]
        for what in ("rebuild", "verify"):
            best, median = _best_median(part[what], higher=True)
            rows.append(
                [
                    f"{what}, {part['entries']:,}-entry journal",
                    f"{best:,.0f} / {median:,.0f} entries/s",
                    "",
                    "",
                    f">= {TARGET_REPLAY_RATE:,}/s",
                    "yes" if median >= TARGET_REPLAY_RATE else "no",
                ]
            )
        if "million_verify_s" in part:
            seconds = part["million_verify_s"]
            rows.append(
                [
                    "verify, 1,000,000-entry journal",
                    f"{seconds:.1f} s",
                    "",
                    "",
                    "< 60 s (goal)",
                    "yes" if seconds < 60 else "no",
                ]
            )
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--parts", default=",".join(PARTS), help=f"some of {', '.join(PARTS)}")
    parser.add_argument("--big", type=int, default=100_000, help="memories in the big store")
    parser.add_argument("--million", action="store_true", help="also verify 1,000,000 entries")
    parser.add_argument("--dir", type=Path, default=None, help="where the stores go")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    args = parser.parse_args(argv)
    parts = [p.strip() for p in args.parts.split(",") if p.strip()]
    unknown = sorted(set(parts) - set(PARTS))
    if unknown:
        parser.error(f"unknown parts: {', '.join(unknown)}")
    result: dict[str, Any] = {"big_n": args.big}
    with tempfile.TemporaryDirectory(prefix="cg-write-path-", dir=args.dir) as tmp:
        root = Path(tmp)
        if "batched" in parts:
            result["batched"] = measure_batched(root)
        if "single" in parts:
            result["single"] = measure_single(root)
        if "big" in parts or "keyword" in parts:
            path, sqlite_path = _prefill(root, make_memories(args.big, seed=3))
            if "keyword" in parts:
                result["keyword"] = measure_keyword(path, sqlite_path)
            if "big" in parts:
                result["big"] = measure_big(path, sqlite_path, args.big)
        if "rebuild" in parts:
            result["rebuild"] = measure_rebuild(root, args.big, million=args.million)
    if args.json:
        json.dump(result, sys.stdout, indent=1)
        print()
        return 0
    header = [
        "measure",
        "cortexgraph best / median",
        "SQLite+FTS5 best / median",
        "ratio (medians)",
        "target",
        "met",
    ]
    print(markdown_table(header, build_rows(result), numeric=set()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
