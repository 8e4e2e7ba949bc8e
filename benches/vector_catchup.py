"""The first vector-using recall after many batched writes: the vector index's catch-up.

Usage::

    .venv/bin/python benches/vector_catchup.py                   # 20,000 memories
    .venv/bin/python benches/vector_catchup.py --n 100000 --json
    .venv/bin/python benches/vector_catchup.py --sweep           # also M, ef_construction
    .venv/bin/python benches/vector_catchup.py --runs 1          # one run (default 3)
    .venv/bin/python benches/vector_catchup.py --dir /mnt/disk   # stores there (default: TMPDIR)

A store of ``--n`` memories of the deterministic workload (``benches/_workload.py``) is
written in batches of 1,000 with ``sync=False`` and the default
:class:`~cortexgraph.embed.HashEmbedder` (384 dimensions), nothing embedded at write time
(with ``--embed-on-write``, the writer embeds after each batch and keeps the saved index
within 1,000 journal entries: the cost moves to the writes). Then the first
``recall(mode="hybrid")`` is timed, which catches the vector index up with what it lacks
(the whole journal, without ``--embed-on-write``), split into: reading each memory's text
(``live_texts``), their vectors (``VectorState._vectors``: the ``emb`` cache, embedding,
the cache writes; of which the embedder's own calls in this process, and how many texts
it embedded here: a catch-up of 16,384 texts or more embeds most of them in a helper
process on the second CPU, ``cortexgraph.vector.parallel``), inserting into the index
(``VectorIndex.upsert``/``upsert_many``), and the rest (the column index, the recall
itself). The catch-up saves the index (150 MB at 100,000) in the background, so the save
is not in that time; ``close()`` after the later recalls waits for it, and is timed too.
The split is measured by wrapping those calls, so the script runs as well on older code
(run it with another ``PYTHONPATH`` to compare). The
store is written once; each of ``--runs`` runs (default 3) times the first hybrid recall
on a fresh copy of it, and the best and the median are reported.

The baseline is hnswlib used directly on the same vectors, as a user would without
cortexgraph: one ``add_items`` call with one thread and the library's graph parameters
(M=32, ef_construction=64), best and median of ``--runs`` builds; with its recall@10 and
the time of one query, beside the time of one ``exact_search`` of the index (a float32
product over every vector, what its searches do while it holds at most
``full_scan_threshold`` of them).

Then recall@10 of ``VectorIndex.search`` (the store's index: exact below the threshold)
against exact search over 200 queries of the workload's words, and the baseline graph's at
the ``ef`` a plain ``search(k=10)`` uses (64) and at the depth recall's vector channel
searches (100); a hit tied in similarity with the exact 10th counts as found.
``--sweep`` builds graphs of the same vectors with other ``M`` and ``ef_construction``
(one thread, bulk ``add_items``) and reports their build time and recall, and checks
whether two builds with two threads give the same bytes.

Progress goes to stderr; the table (or JSON with ``--json``) to stdout.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import hnswlib
import numpy as np
import numpy.typing as npt

import cortexgraph as cg
from _report import TimedEmbedder, environment, markdown_table, progress
from _workload import _WORDS, ACTOR, make_memories, write_cortex
from cortexgraph.core.text import STOPWORDS
from cortexgraph.embed import HashEmbedder
from cortexgraph.vector import VectorIndex
from cortexgraph.vector import state as vector_state

BATCH = 1_000
QUERIES = 200
TARGET_FIRST_HYBRID_S = 2.0
TARGET_RECALL = 0.95
SWEEP = ((16, 200), (16, 100), (16, 64), (24, 100), (32, 100), (12, 100), (8, 100))

_clock = time.perf_counter


class MethodTimer:
    """Adds up the seconds spent in the named attributes of ``owner`` (methods of a
    class, functions of a module; those it lacks are skipped) while installed, wrapped
    on ``owner`` and restored by :meth:`remove`."""

    def __init__(self, owner: Any, *names: str) -> None:
        self.owner, self.names = owner, names
        self.seconds = 0.0
        self._saved: dict[str, Any] = {}

    def install(self) -> None:
        for name in self.names:
            method = getattr(self.owner, name, None)
            if method is None:
                continue
            self._saved[name] = method

            def timed(*args: Any, __method: Any = method, **kwargs: Any) -> Any:
                start = _clock()
                try:
                    return __method(*args, **kwargs)
                finally:
                    self.seconds += _clock() - start

            setattr(self.owner, name, timed)

    def remove(self) -> None:
        for name, method in self._saved.items():
            setattr(self.owner, name, method)


def median_key(key: str) -> str:
    """Where the median of the figure reported (at its best) under ``key`` goes."""
    return key[:-2] + "_median_s" if key.endswith("_s") else key + "_median"


def make_queries(count: int, seed: int = 11) -> list[str]:
    words = sorted({w for w in _WORDS if w not in STOPWORDS})
    rng = random.Random(seed)
    return [" ".join(rng.sample(words, rng.randint(1, 4))) for _ in range(count)]


def tie_aware_recall(
    found: list[list[int]], sims: npt.NDArray[np.float32], exact_tenth: npt.NDArray[np.float32]
) -> float:
    """Mean share of each query's 10 hits whose exact similarity reaches the exact 10th."""
    shares = [
        float(np.sum(sims[q, labels] >= exact_tenth[q] - 1e-6)) / 10
        for q, labels in enumerate(found)
    ]
    return sum(shares) / len(shares)


def write_store(root: Path, n: int, *, embed_on_write: bool) -> float:
    """Write the workload's ``n`` memories in batches; the seconds it took."""
    memories = make_memories(n, seed=3)
    with cg.open(
        root, ACTOR, sync=False, embedder=HashEmbedder(), embed_on_write=embed_on_write
    ) as cx:
        progress(f"vector_catchup: writing {n:,} memories in batches of {BATCH:,}")
        start = _clock()
        write_cortex(cx, memories, batch_size=BATCH)
        return _clock() - start


def first_hybrid(root: Path) -> tuple[dict[str, Any], VectorIndex, list[str]]:
    """Open the written store, time the first hybrid recall and its parts."""
    embedder = TimedEmbedder(HashEmbedder())
    # what the store would be given: HashEmbedder's declaration that a helper process may
    # embed for it (the wrapper pickles; the worker's own time is not in ``seconds``)
    embedder.worker_safe = getattr(embedder.inner, "worker_safe", False)  # type: ignore[attr-defined]
    result: dict[str, Any] = {}
    cx = cg.open(root, ACTOR, sync=False, embedder=embedder)
    cx.recall("deploy", k=10, mode="keyword")  # the column index, built before the timing
    progress("vector_catchup: first hybrid recall (catches the vector index up)")
    timers = {
        "read_s": MethodTimer(vector_state, "live_texts"),
        "vectors_s": MethodTimer(vector_state.VectorState, "_vectors"),
        "insert_s": MethodTimer(VectorIndex, "upsert", "upsert_many"),
    }
    for timer in timers.values():
        timer.install()
    embedder.seconds, embedder.texts = 0.0, 0
    try:
        start = _clock()
        cx.recall("deploy the service", k=10, mode="hybrid")
        total = _clock() - start
    finally:
        for timer in timers.values():
            timer.remove()
    result["first_hybrid_s"] = total
    result["embed_s"] = embedder.seconds
    result["embedded_here"] = embedder.texts - 1  # the query aside
    for key, timer in timers.items():
        result[key] = timer.seconds
    result["rest_s"] = total - sum(timer.seconds for timer in timers.values())
    start = _clock()
    for query in make_queries(20, seed=5):
        cx.recall(query, k=10, mode="hybrid")
    result["later_hybrid_ms"] = (_clock() - start) / 20 * 1e3
    index = cx._vector_state().index
    queries = make_queries(QUERIES)
    vectors = HashEmbedder().embed(queries)
    start = _clock()
    cx.close()  # waits for the index save the catch-up left running in the background
    result["close_s"] = _clock() - start
    progress(
        f"vector_catchup: first hybrid {total:.2f} s (reading {result['read_s']:.2f} s, "
        f"vectors {result['vectors_s']:.2f} s of which embedding here "
        f"{embedder.seconds:.2f} s, inserting {result['insert_s']:.2f} s)"
    )
    return result, index, [vectors[i].tobytes().hex() for i in range(len(queries))]


def recall_of(index: Any, queries: npt.NDArray[np.float32], ef: int, exact: Any) -> float:
    sims, tenth = exact
    index.set_ef(ef)
    labels, _ = index.knn_query(queries, k=10, num_threads=1)
    return tie_aware_recall(labels.tolist(), sims, tenth)


def exact_answers(
    index: VectorIndex, query_hex: list[str]
) -> tuple[npt.NDArray[np.float32], tuple[npt.NDArray[np.float32], npt.NDArray[np.float32]]]:
    """The queries, and every label's exact similarity to each with each query's 10th."""
    queries = np.stack([np.frombuffer(bytes.fromhex(h), dtype=np.float32) for h in query_hex])
    matrix = index._vectors()
    live = np.array([label not in index._deleted for label in range(len(index._ids))])
    unit = queries / np.maximum(np.linalg.norm(queries, axis=1, keepdims=True), 1e-30)
    sims = (unit @ matrix.T).astype(np.float32)
    sims[:, ~live] = -2.0
    return queries, (sims, np.sort(sims, axis=1)[:, -10])


def measure_recall(index: VectorIndex, query_hex: list[str]) -> dict[str, Any]:
    """Recall@10 of the store index's ``search`` (exact below the threshold) against
    exact search, and whether it searched exactly."""
    queries, (sims, tenth) = exact_answers(index, query_hex)
    found = [
        [index._labels[memory_id] for memory_id, _ in index.search(q, 10)] for q in queries
    ]
    return {
        "index_exact": getattr(index, "exact", False),  # False: code from before exact search
        "index_recall_at_10": tie_aware_recall(found, sims, tenth),
    }


def baseline(index: VectorIndex, query_hex: list[str], runs: int) -> dict[str, Any]:
    """hnswlib used directly on the same vectors: bulk build (one thread, the library's
    M and ef_construction), its recall@10 at ef 64 and 100 and the time of a query; and
    the time of an exact query (one float32 matrix product) over the same vectors."""
    queries, exact = exact_answers(index, query_hex)
    matrix = np.ascontiguousarray(index._vectors())
    count = matrix.shape[0]
    seconds = []
    for run in range(runs):
        graph = hnswlib.Index(space="cosine", dim=matrix.shape[1])
        graph.init_index(
            max_elements=count, M=index.M, ef_construction=index.ef_construction, random_seed=100
        )
        progress(f"vector_catchup: baseline hnswlib build {run + 1}/{runs} of {count:,}")
        start = _clock()
        graph.add_items(matrix, np.arange(count), num_threads=1)
        seconds.append(_clock() - start)
    result: dict[str, Any] = {
        "hnswlib_build_s": min(seconds),
        "hnswlib_build_median_s": statistics.median(seconds),
    }
    for ef in (64, 100):
        result[f"hnswlib_recall_at_10_ef{ef}"] = recall_of(graph, queries, ef, exact)
    start = _clock()
    for q in queries:
        graph.knn_query(q, k=100, num_threads=1)
    result["hnswlib_query_ms"] = (_clock() - start) / len(queries) * 1e3
    start = _clock()
    for q in queries:
        index.exact_search(q, 100)  # the index's exact search: one einsum over every row
    result["exact_query_ms"] = (_clock() - start) / len(queries) * 1e3
    return result


def sweep(
    index: VectorIndex, query_hex: list[str], configs: Sequence[tuple[int, ...]]
) -> list[dict[str, Any]]:
    """Build time and recall of graphs of the same vectors with other parameters."""
    queries = np.stack([np.frombuffer(bytes.fromhex(h), dtype=np.float32) for h in query_hex])
    matrix = index._vectors()
    count = matrix.shape[0]
    unit = queries / np.maximum(np.linalg.norm(queries, axis=1, keepdims=True), 1e-30)
    sims = (unit @ matrix.T).astype(np.float32)
    tenth = np.sort(sims, axis=1)[:, -10]
    rows: list[dict[str, Any]] = []
    for m, efc in configs:
        graph = hnswlib.Index(space="cosine", dim=matrix.shape[1])
        graph.init_index(max_elements=count, M=m, ef_construction=efc, random_seed=100)
        start = _clock()
        graph.add_items(matrix, np.arange(count), num_threads=1)
        seconds = _clock() - start
        row = {"M": m, "ef_construction": efc, "build_s": seconds, "per_s": count / seconds}
        for ef in (64, 100):
            row[f"recall_ef{ef}"] = recall_of(graph, queries, ef, (sims, tenth))
        rows.append(row)
        progress(f"vector_catchup: M={m} ef_construction={efc}: {seconds:.1f} s, {row}")
    return rows


def threads_identical(index: VectorIndex, threads: int) -> dict[str, Any]:
    """Two builds of the first 20,000 vectors with ``threads`` threads and the index's
    parameters: the same bytes?"""
    matrix = index._vectors()[:20_000]
    blobs, seconds = [], []
    for _ in range(2):
        graph = hnswlib.Index(space="cosine", dim=matrix.shape[1])
        graph.init_index(
            max_elements=len(matrix),
            M=index.M,
            ef_construction=index.ef_construction,
            random_seed=index.seed,
        )
        start = _clock()
        graph.add_items(matrix, np.arange(len(matrix)), num_threads=threads)
        seconds.append(_clock() - start)
        with tempfile.TemporaryDirectory() as tmp:
            graph.save_index(str(Path(tmp) / "g"))
            blobs.append((Path(tmp) / "g").read_bytes())
    return {
        "threads": threads,
        "n": len(matrix),
        "build_s": min(seconds),
        "same": blobs[0] == blobs[1],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=20_000)
    parser.add_argument("--runs", type=int, default=3, help="timed runs (best and median)")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--sweep", action="store_true", help="also M and ef_construction")
    parser.add_argument(
        "--embed-on-write",
        action="store_true",
        help="write with embed_on_write=True (the writer embeds and keeps the index saved)",
    )
    parser.add_argument(
        "--configs", nargs="*", help="the sweep's M,ef_construction pairs (e.g. 24,100)"
    )
    parser.add_argument("--dir", type=Path, default=None, help="where the stores go")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="cg-vector-catchup-", dir=args.dir) as tmp:
        written = Path(tmp) / "written"
        result: dict[str, Any] = {"n": args.n, "embed_on_write": args.embed_on_write}
        result["write_s"] = write_store(written, args.n, embed_on_write=args.embed_on_write)
        runs = []
        for run in range(args.runs):
            root = Path(tmp) / f"run{run}"
            shutil.copytree(written, root)
            timed, index, query_hex = first_hybrid(root)
            runs.append(timed)
            if run + 1 < args.runs:
                shutil.rmtree(root)
        result["runs"] = runs
        for key in (
            "first_hybrid_s",
            "read_s",
            "vectors_s",
            "embed_s",
            "embedded_here",
            "insert_s",
            "rest_s",
            "later_hybrid_ms",
            "close_s",
        ):
            values = [run[key] for run in runs]
            result[key] = min(values)
            result[median_key(key)] = statistics.median(values)
        result.update(measure_recall(index, query_hex))
        result.update(baseline(index, query_hex, args.runs))
        if args.sweep:
            configs = (
                [tuple(int(x) for x in pair.split(",")) for pair in args.configs]
                if args.configs
                else SWEEP
            )
            result["sweep"] = sweep(index, query_hex, configs)
            result["threads"] = [threads_identical(index, t) for t in (1, 2)]
        result["environment"] = environment(args.n, root)
    result["meets_first_hybrid"] = result["first_hybrid_s"] <= TARGET_FIRST_HYBRID_S
    result["meets_recall"] = result["index_recall_at_10"] >= TARGET_RECALL
    if args.json:
        json.dump(result, sys.stdout, indent=2)
        print()
        return
    def both(key: str, digits: int = 2) -> str:
        median = result[median_key(key)]
        return f"{result[key]:.{digits}f} ({median:.{digits}f})"

    cells = [
        ["batched writes (s)", f"{result['write_s']:.2f}"],
        ["first hybrid recall (s), best (median)", both("first_hybrid_s")],
        ["  reading the texts (s)", both("read_s")],
        ["  their vectors: cache, embedding, cache writes (s)", both("vectors_s")],
        ["    of which embedding in this process (s)", both("embed_s")],
        ["    texts embedded in this process (the rest: the worker)", both("embedded_here", 0)],
        ["  vector index inserts (s)", both("insert_s")],
        ["  the rest (s)", both("rest_s")],
        ["later hybrid recall (ms, mean of 20)", both("later_hybrid_ms", 1)],
        ["close after them (s): the index save, if still running", both("close_s")],
        ["searches exact (full scan)", str(result["index_exact"])],
        ["recall@10 of the index vs exact", f"{result['index_recall_at_10']:.3f}"],
        ["baseline: hnswlib bulk build (s)", both("hnswlib_build_s")],
        ["baseline: hnswlib recall@10, ef 64", f"{result['hnswlib_recall_at_10_ef64']:.3f}"],
        ["baseline: hnswlib recall@10, ef 100", f"{result['hnswlib_recall_at_10_ef100']:.3f}"],
        ["baseline: hnswlib query, k 100 (ms)", f"{result['hnswlib_query_ms']:.2f}"],
        ["exact query, k 100 (ms)", f"{result['exact_query_ms']:.2f}"],
    ]
    print(markdown_table(["after " + f"{args.n:,} batched writes", "value"], cells, {1}))
    for row in result.get("sweep", []):
        print(json.dumps(row))
    for row in result.get("threads", []):
        print(json.dumps(row))


if __name__ == "__main__":
    main()
