"""Latency of ``Cortex.recall`` on a store of 100,000 memories, against hnswlib and FTS5.

Usage (``benches/run.py --suite recall`` runs the same measurements)::

    .venv/bin/python benches/recall.py
    .venv/bin/python benches/recall.py --n 20000 --queries 300 --json
    .venv/bin/python benches/recall.py --profile            # also cProfile both paths

The targets: keyword p95 <= 5 ms, vector p95 <= 3 ms excluding the query embedding, hybrid
p95 <= 10 ms, the vector channel within 1.5x of raw hnswlib ``knn_query`` and the keyword
channel within 1.5x of SQLite FTS5 ``bm25()``. The store holds ``--n`` memories of the
deterministic workload of ``benches/_workload.py`` (written with ``sync=False``). The vector
channel uses :class:`~cortexgraph.embed.HashEmbedder` (384 dimensions, bit-exact, pure
Python): embedding 100,000 texts with all-MiniLM-L6-v2 would take over an hour on two cores,
and the HNSW search costs the same for any 384-dimensional unit vectors. ``--minilm`` also
times MiniLM's query embedding on its own (:class:`~cortexgraph.embed.LocalEmbedder`, ONNX
Runtime, one thread, one query per call).

Queries are 1-4 distinct content words of the workload's vocabulary (no stopwords), drawn
with a seeded generator. The queries are taken in blocks of 100; each block is asked in
each of these ways in turn (every call timed on its own), so that each way runs with its own
data in the caches, while load drifts on the machine hit every way alike:

- ``recall(mode="keyword", k=10)``, and the baseline: SQLite FTS5 over the same indexed
  text (``core.postings.index_text`` of each memory, ``porter unicode61`` tokenizer), the
  query's words OR-ed, ``ORDER BY bm25(t) LIMIT 10``;
- ``recall(mode="vector", k=10)``, with the query-embedding time measured inside it (so
  "minus embedding" is the call less that); ``VectorIndex.search`` alone at the depth
  recall asks for (100) and at 10; and the baseline: raw hnswlib ``knn_query`` on the very
  hnswlib index object the store searches, with the same ``k`` and ``ef`` as
  ``VectorIndex.search`` uses. Also timed, for reference: ``knn_query`` on a second copy
  of the same graph, loaded from the same file with ``hnswlib.Index.load_index`` (the
  baseline of earlier runs). Two copies of one graph can differ by 10-40 % at p95 from run
  to run (where the allocator put them), which the same-object baseline leaves out;
- ``recall(mode="hybrid", k=10)`` (score fusion and graph expansion).

One untimed pass over the queries comes first (the column index caches each term's
posting list on first use). Also timed: building the vector index of the whole store (the
first vector recall: every memory embedded and inserted), the first recall of each mode
after reopening the store (the column index and posting scans; the vector index loaded
from disk), and the catch-up of the vector index after 1,000 more writes. And the recall@10
of ``VectorIndex.search`` against ``exact_search`` over every query (on HashEmbedder
vectors; ``benches/locomo.py`` measures it on MiniLM vectors).

Progress goes to stderr; the table (or JSON with ``--json``) to stdout. Nothing here fails
on timing: a missed target is reported as ``no``.
"""

from __future__ import annotations

import argparse
import cProfile
import importlib.metadata
import io
import json
import os
import pstats
import random
import sqlite3
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import hnswlib

import cortexgraph as cg
from _report import TimedEmbedder, environment, markdown_table, percentile, progress
from _workload import _WORDS, ACTOR, BASE_AT, STEP_MS, make_memories, write_cortex
from cortexgraph.core.fusion import CHANNEL_DEPTH
from cortexgraph.core.postings import index_text
from cortexgraph.core.text import STOPWORDS
from cortexgraph.embed import HashEmbedder

BATCH = 1_000
K = 10
CATCH_UP = 1_000
QUERIES = 1_000
#: queries per block: each way runs over a block of queries, then the next way over it
BLOCK = 100
TARGET_KEYWORD_P95 = 5.0  # ms
TARGET_VECTOR_P95 = 3.0  # ms, query embedding excluded
TARGET_HYBRID_P95 = 10.0  # ms
TARGET_VS_HNSWLIB = 1.5  # x raw knn_query, at most
TARGET_VS_FTS5 = 1.5  # x FTS5 bm25(), at most

_clock = time.perf_counter


def make_queries(count: int, seed: int = 11) -> list[str]:
    """``count`` queries of 1-4 distinct content words of the workload vocabulary."""
    words = sorted({w for w in _WORDS if w not in STOPWORDS})
    rng = random.Random(seed)
    return [" ".join(rng.sample(words, rng.randint(1, 4))) for _ in range(count)]


def fts5_query(text: str) -> str:
    return " OR ".join(f'"{word}"' for word in text.split())


def timed(call: Callable[[], object]) -> float:
    """Milliseconds one call takes."""
    start = _clock()
    call()
    return (_clock() - start) * 1e3


# -- building -----------------------------------------------------------------------------------


def build(root: Path, n: int) -> tuple[dict[str, float], list[cg.Memory]]:
    """Write the store, build its vector index, build the FTS5 twin; return timings."""
    times: dict[str, float] = {}
    progress(f"recall: generating {n:,} memories")
    memories = make_memories(n, seed=3)
    embedder = TimedEmbedder(HashEmbedder())
    cx = cg.open(root, ACTOR, sync=False, embedder=embedder)
    try:
        progress(f"recall: writing {n:,} memories (sync off, batches of {BATCH:,})")
        start = _clock()
        write_cortex(cx, memories, batch_size=BATCH)
        times["write_s"] = _clock() - start
        progress(f"recall: written in {times['write_s']:.1f} s; first keyword recall")
        times["first_keyword_fresh_ms"] = timed(lambda: cx.recall("deploy", k=K, mode="keyword"))
        progress("recall: building the vector index (first vector recall: embed + insert all)")
        embedder.seconds = 0.0
        start = _clock()
        cx.recall("deploy", k=K, mode="vector")
        times["vector_build_s"] = _clock() - start
        times["vector_build_embed_s"] = embedder.seconds
        cx._vector_state().save()
        progress(
            f"recall: vector index built in {times['vector_build_s']:.1f} s"
            f" ({times['vector_build_embed_s']:.1f} s of it HashEmbedder)"
        )
    finally:
        cx.close()
    return times, memories


def build_fts5(path: Path, memories: Sequence[cg.Memory]) -> tuple[sqlite3.Connection, float]:
    db = sqlite3.connect(path)
    db.execute("PRAGMA journal_mode=OFF")
    db.execute("PRAGMA synchronous=OFF")
    db.execute("CREATE VIRTUAL TABLE t USING fts5(body, tokenize='porter unicode61')")
    start = _clock()
    with db:
        db.executemany("INSERT INTO t(body) VALUES (?)", ((index_text(m),) for m in memories))
    return db, _clock() - start


# -- measuring ----------------------------------------------------------------------------------


def measure(root: Path, n: int, count: int, *, profile: bool, minilm: bool) -> dict[str, Any]:
    times, memories = build(root, n)
    progress(f"recall: building the FTS5 baseline over the same {n:,} texts")
    fts, times["fts5_build_s"] = build_fts5(root / "fts5.sqlite", memories)
    queries = make_queries(count)
    hash_embedder = HashEmbedder()
    vectors = hash_embedder.embed(queries)
    embedder = TimedEmbedder(HashEmbedder())
    progress("recall: reopening; first recall of each mode")
    start = _clock()
    cx = cg.open(root, ACTOR, sync=False, embedder=embedder)
    times["open_ms"] = (_clock() - start) * 1e3
    out: dict[str, Any] = {"times": times, "queries": len(queries)}
    try:
        times["first_keyword_ms"] = timed(lambda: cx.recall(queries[0], k=K, mode="keyword"))
        times["first_vector_ms"] = timed(lambda: cx.recall(queries[0], k=K, mode="vector"))
        times["first_hybrid_ms"] = timed(lambda: cx.recall(queries[1], k=K, mode="hybrid"))
        state = cx._vector_state()
        index = state.index
        times["index_status_loaded"] = float(index.status == "loaded")
        raw = hnswlib.Index(space="cosine", dim=index.dim)
        raw.load_index(str(index.data_paths()[0]), max_elements=index.capacity)
        raw.set_num_threads(1)
        progress(f"recall: warm-up pass over {len(queries):,} queries")
        for q in queries:
            for mode in ("keyword", "vector", "hybrid"):
                cx.recall(q, k=K, mode=mode)
            fts.execute(
                "SELECT rowid FROM t WHERE t MATCH ? ORDER BY bm25(t) LIMIT ?", (fts5_query(q), K)
            ).fetchall()
        samples: dict[str, list[float]] = {
            name: []
            for name in (
                "keyword", "fts5", "vector", "vector_embed", "vector_rest", "search100",
                "search10", "knn100", "knn10", "own100", "own10", "hybrid", "hybrid_embed",
                "hybrid_rest",
            )
        }  # fmt: skip
        depth = CHANNEL_DEPTH
        ef_deep, ef_10 = max(index.ef_search, depth + 1), max(index.ef_search, K + 1)
        progress(f"recall: timing {len(queries):,} queries, every way, in blocks of {BLOCK}")

        def fts5(match: str) -> None:
            fts.execute(
                "SELECT rowid FROM t WHERE t MATCH ? ORDER BY bm25(t) LIMIT ?", (match, K)
            ).fetchall()

        def recall_timed(q: str, mode: str, name: str) -> None:
            embedder.seconds = 0.0
            total = timed(lambda: cx.recall(q, k=K, mode=mode))
            samples[name].append(total)
            samples[f"{name}_embed"].append(embedder.seconds * 1e3)
            samples[f"{name}_rest"].append(total - embedder.seconds * 1e3)

        own = index._index
        for start in range(0, len(queries), BLOCK):
            block = list(
                zip(queries[start : start + BLOCK], vectors[start : start + BLOCK], strict=True)
            )
            for q, _ in block:
                samples["keyword"].append(timed(lambda q=q: cx.recall(q, k=K, mode="keyword")))
            for match in [fts5_query(q) for q, _ in block]:
                samples["fts5"].append(timed(lambda m=match: fts5(m)))
            for q, _ in block:
                recall_timed(q, "vector", "vector")
            for _, v in block:
                samples["search100"].append(timed(lambda v=v: index.search(v, depth)))
            for _, v in block:
                samples["search10"].append(timed(lambda v=v: index.search(v, K)))
            # knn_query at VectorIndex.search's own k and ef (it asks for one more than
            # k): on the second copy ("knn"), then on the store's own hnswlib object
            # ("own", internal; VectorIndex remembers the ef it set last, put back after)
            for name, hnsw in (("knn", raw), ("own", own)):
                for suffix, ef, want in (("100", ef_deep, depth + 1), ("10", ef_10, K + 1)):
                    hnsw.set_ef(ef)
                    for _, v in block:
                        samples[name + suffix].append(
                            timed(lambda v=v, h=hnsw, n=want: h.knn_query(v, k=n))
                        )
            own.set_ef(index._ef)
            for q, _ in block:
                recall_timed(q, "hybrid", "hybrid")
        progress("recall: HNSW against exact search, recall@10 over the queries")
        overlap = []
        for v in vectors:
            approx = {memory_id for memory_id, _ in index.search(v, K)}
            exact = {memory_id for memory_id, _ in index.exact_search(v, K)}
            overlap.append(len(approx & exact) / len(exact))
        times["hnsw_vs_exact_r10"] = sum(overlap) / len(overlap)
        out["samples"] = samples
        out["ef"] = {"depth": depth, "ef_deep": ef_deep, "ef_10": ef_10}
        if profile:
            out["profiles"] = {
                mode: profile_mode(cx, queries[: min(len(queries), 300)], mode)
                for mode in ("keyword", "hybrid")
            }
        progress(f"recall: writing {CATCH_UP:,} more memories; vector index catch-up")
        more = make_memories(CATCH_UP, seed=5)
        write_cortex(cx, more, batch_size=BATCH, start_at=BASE_AT + (n + 1) * STEP_MS)
        embedder.seconds = 0.0
        times["catch_up_keyword_ms"] = timed(lambda: cx.recall(queries[2], k=K, mode="keyword"))
        start = _clock()
        cx.recall(queries[2], k=K, mode="vector")
        times["catch_up_vector_ms"] = (_clock() - start) * 1e3
        times["catch_up_embed_ms"] = embedder.seconds * 1e3
    finally:
        cx.close()
        fts.close()
    if minilm:
        out["minilm_query_ms"] = minilm_query_times(queries[:200])
        times["minilm_query_p50_ms"] = percentile(out["minilm_query_ms"], 50)
        times["minilm_query_p95_ms"] = percentile(out["minilm_query_ms"], 95)
    return out


def profile_mode(cx: cg.Cortex, queries: Sequence[str], mode: str) -> str:
    """cProfile of ``recall`` over ``queries``: the top functions by cumulative time."""
    profiler = cProfile.Profile()
    profiler.enable()
    for q in queries:
        cx.recall(q, k=K, mode=mode)
    profiler.disable()
    buffer = io.StringIO()
    stats = pstats.Stats(profiler, stream=buffer)
    stats.sort_stats("cumulative").print_stats(22)
    stats.sort_stats("tottime").print_stats(12)
    return f"{len(queries)} recall(mode={mode!r}) calls\n" + buffer.getvalue()


def minilm_query_times(queries: Sequence[str]) -> list[float]:
    from cortexgraph.embed import LocalEmbedder

    progress(f"recall: MiniLM query embedding, {len(queries)} queries")
    # one ONNX Runtime thread, as benches/locomo.py: more spin on a shared machine
    model = LocalEmbedder(threads=1)
    model.embed(queries[:4])
    return [timed(lambda q=q: model.embed([q])) for q in queries]


# -- report -------------------------------------------------------------------------------------


def build_rows(result: dict[str, Any]) -> list[dict[str, Any]]:
    s = result["samples"]

    def p(name: str, q: float) -> float:
        return percentile(s[name], q)

    def row(
        operation: str,
        name: str,
        q: float,
        baseline: str | None = None,
        baseline_is: str = "-",
        target: str = "-",
        met: bool | None = None,
    ) -> dict[str, Any]:
        figure = p(name, q)
        base = None if baseline is None else p(baseline, q)
        return {
            "operation": operation,
            "ms": figure,
            "baseline_ms": base,
            "baseline_is": baseline_is,
            "ratio": None if base is None else figure / base,
            "target": target,
            "met": met,
        }

    rows = []
    for q in (50, 95):
        kw = row(f"recall keyword p{q}", "keyword", q, "fts5", "FTS5 bm25()")
        fast = kw["ratio"] <= TARGET_VS_FTS5
        if q == 95:
            kw.update(
                target=f"<= {TARGET_KEYWORD_P95:g} ms, <= {TARGET_VS_FTS5}x",
                met=kw["ms"] <= TARGET_KEYWORD_P95 and fast,
            )
        else:
            kw.update(target=f"<= {TARGET_VS_FTS5}x", met=fast)
        rows.append(kw)
    for q in (50, 95):
        rows.append(row(f"recall vector p{q} (whole call)", "vector", q))
    for q in (50, 95):
        r = row(
            f"recall vector p{q} minus query embedding",
            "vector_rest",
            q,
            "own100",
            f"knn_query k={result['ef']['depth'] + 1}",
        )
        close = r["ratio"] <= TARGET_VS_HNSWLIB
        if q == 95:
            r.update(
                target=f"<= {TARGET_VECTOR_P95:g} ms, <= {TARGET_VS_HNSWLIB}x",
                met=r["ms"] <= TARGET_VECTOR_P95 and close,
            )
        else:
            r.update(target=f"<= {TARGET_VS_HNSWLIB}x", met=close)
        rows.append(r)
    for q in (50, 95):
        rows.append(row(f"  query embedding p{q} (HashEmbedder)", "vector_embed", q))
    for q in (50, 95):
        r = row(
            f"VectorIndex.search k={result['ef']['depth']} p{q}",
            "search100",
            q,
            "own100",
            f"knn_query k={result['ef']['depth'] + 1}",
        )
        r.update(target=f"<= {TARGET_VS_HNSWLIB}x", met=r["ratio"] <= TARGET_VS_HNSWLIB)
        rows.append(r)
    for q in (50, 95):
        rows.append(
            row(f"VectorIndex.search k={K} p{q}", "search10", q, "own10", f"knn_query k={K + 1}")
        )
    for q in (50, 95):
        rows.append(
            row(
                f"  knn_query k={result['ef']['depth'] + 1} on a second copy p{q}",
                "knn100",
                q,
                "own100",
                "the store's own",
            )
        )
    for q in (50, 95):
        r = row(f"recall hybrid p{q}", "hybrid", q)
        if q == 95:
            r.update(target=f"<= {TARGET_HYBRID_P95:g} ms", met=r["ms"] <= TARGET_HYBRID_P95)
        rows.append(r)
    for q in (50, 95):
        rows.append(row(f"  hybrid p{q} minus query embedding", "hybrid_rest", q))
    return rows


def format_table(rows: Sequence[dict[str, Any]]) -> str:
    header = ("operation", "ms", "baseline ms", "baseline is", "x baseline", "target", "met")
    cells = [
        (
            r["operation"],
            f"{r['ms']:.3f}",
            "-" if r["baseline_ms"] is None else f"{r['baseline_ms']:.3f}",
            r["baseline_is"],
            "-" if r["ratio"] is None else f"{r['ratio']:.2f}x",
            r["target"],
            "-" if r["met"] is None else ("yes" if r["met"] else "no"),
        )
        for r in rows
    ]
    return markdown_table(header, cells, {1, 2, 4})


def format_times(result: dict[str, Any], n: int) -> str:
    t = result["times"]
    cells = [
        (f"write {n:,} memories (batches of {BATCH:,}, sync off)", f"{t['write_s']:.1f} s"),
        (
            "first keyword recall after the writes (column index + postings)",
            f"{t['first_keyword_fresh_ms']:.0f} ms",
        ),
        (
            f"vector index build: first vector recall, {n:,} memories embedded + inserted",
            f"{t['vector_build_s']:.1f} s",
        ),
        ("  of which HashEmbedder", f"{t['vector_build_embed_s']:.1f} s"),
        ("FTS5 baseline: insert the same texts", f"{t['fts5_build_s']:.1f} s"),
        ("cg.open of the store", f"{t['open_ms']:.1f} ms"),
        (
            "first keyword recall after open (column index + posting scans)",
            f"{t['first_keyword_ms']:.0f} ms",
        ),
        (
            "then first vector recall (vector index loaded from disk)",
            f"{t['first_vector_ms']:.0f} ms",
        ),
        ("then first hybrid recall", f"{t['first_hybrid_ms']:.1f} ms"),
        (
            "HNSW vs exact search, recall@10 over the queries (HashEmbedder vectors)",
            f"{t['hnsw_vs_exact_r10']:.4f}",
        ),
        (
            f"{CATCH_UP:,} more writes, then keyword recall (column catch-up)",
            f"{t['catch_up_keyword_ms']:.1f} ms",
        ),
        ("  then vector recall (vector index catch-up)", f"{t['catch_up_vector_ms']:.0f} ms"),
        ("    of which HashEmbedder", f"{t['catch_up_embed_ms']:.0f} ms"),
    ]
    if "minilm_query_ms" in result:
        m = result["minilm_query_ms"]
        cells.append(
            (
                "MiniLM query embedding p50 / p95 (LocalEmbedder, 1 thread, batch of 1)",
                f"{percentile(m, 50):.1f} / {percentile(m, 95):.1f} ms",
            )
        )
    return markdown_table(("one-off", "time"), cells, {1})


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=100_000, help="memories (default 100000)")
    parser.add_argument("--queries", type=int, default=QUERIES, help="queries (default 1000)")
    parser.add_argument("--json", action="store_true", help="print JSON instead of tables")
    parser.add_argument("--profile", action="store_true", help="cProfile keyword and hybrid")
    parser.add_argument("--minilm", action="store_true", help="time MiniLM query embedding")
    parser.add_argument(
        "--dir", type=Path, default=None, help="parent of the temporary stores (default: TMPDIR)"
    )
    args = parser.parse_args(argv)
    if args.n < 100 or args.queries < 10:
        parser.error("--n must be at least 100 and --queries at least 10")
    with tempfile.TemporaryDirectory(prefix="cortexgraph-recall-", dir=args.dir) as tmp:
        info = environment(args.n, Path(tmp))
        result = measure(Path(tmp), args.n, args.queries, profile=args.profile, minilm=args.minilm)
    info["load_avg_1min_end"] = round(os.getloadavg()[0], 2)
    rows = build_rows(result)
    progress("recall: done")
    if args.json:
        out = {"environment": info, "rows": rows, "times": result["times"]}
        if "profiles" in result:
            out["profiles"] = result["profiles"]
        print(json.dumps(out, indent=2, ensure_ascii=False))
        return 0
    print(report(info, result, rows, args.n))
    return 0


def report(
    info: dict[str, Any], result: dict[str, Any], rows: Sequence[dict[str, Any]], n: int
) -> str:
    lines = [
        f"cortexgraph {info['cortexgraph']}, Python {info['python']}, hnswlib"
        f" {importlib.metadata.version('hnswlib')}, SQLite {sqlite3.sqlite_version},"
        f" {info['cpus']} CPUs, {info['platform']}",
        f"1-min load average {info['load_avg_1min_start']} at start,"
        f" {info['load_avg_1min_end']} at end",
        "",
        f"recall suite: {n:,} memories, HashEmbedder (384 dims), {result['queries']:,} queries,"
        f" k={K}",
        format_table(rows),
        "",
        format_times(result, n),
    ]
    for mode, text in result.get("profiles", {}).items():
        lines += ["", f"cProfile, {mode}:", "```text", text.rstrip(), "```"]
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
