"""pytest-benchmark benchmarks of ``recall``, each next to the baseline ``recall.py`` uses.

Run them with::

    .venv/bin/python -m pytest benches/bench_recall.py --benchmark-only

They are not tests (``testpaths`` is ``tests/``) and assert nothing about time. The store
holds 20,000 workload memories (``benches/recall.py`` uses 100,000: building its HNSW index
takes minutes), with HashEmbedder vectors; one round is one query, cycling through 1,000
queries of workload words:

- ``recall-keyword``: ``recall(mode="keyword", k=10)`` against SQLite FTS5 ``bm25()`` over
  the same indexed text (``ORDER BY bm25(t) LIMIT 10``).
- ``recall-vector``: ``VectorIndex.search`` at recall's channel depth (100) against raw
  hnswlib ``knn_query`` on the same index file, same ``k`` and ``ef``; and the whole
  ``recall(mode="vector", k=10)``.
- ``recall-hybrid``: ``recall(mode="hybrid", k=10)``.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from typing import Any

import hnswlib
import pytest

import cortexgraph as cg
from _workload import ACTOR, make_memories, write_cortex
from cortexgraph.core.fusion import CHANNEL_DEPTH
from recall import build_fts5, fts5_query, make_queries

STORE_SIZE = 20_000
K = 10


@pytest.fixture(scope="session")
def recall_store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    root = tmp_path_factory.mktemp("recall-store")
    memories = make_memories(STORE_SIZE, seed=3)
    cx = cg.open(root, ACTOR, sync=False)
    fts, _ = build_fts5(root / "fts5.sqlite", memories)
    try:
        write_cortex(cx, memories, batch_size=1_000)
        queries = make_queries(1_000)
        for q in queries:  # build the vector index, cache every term's postings
            cx.recall(q, k=K, mode="hybrid")
        state = cx._vector_state()
        state.save()
        index = state.index
        raw = hnswlib.Index(space="cosine", dim=index.dim)
        raw.load_index(str(index.data_paths()[0]), max_elements=index.capacity)
        raw.set_num_threads(1)
        raw.set_ef(max(index.ef_search, CHANNEL_DEPTH + 1))
        vectors = state.embedder.embed(queries)
        yield {"cx": cx, "fts": fts, "queries": queries, "vectors": vectors, "raw": raw}
    finally:
        cx.close()
        fts.close()


def cycling(items: Any, call: Callable[[Any], object]) -> Callable[[], object]:
    it = itertools.cycle(items)
    return lambda: call(next(it))


@pytest.mark.benchmark(group="recall-keyword")
def test_recall_keyword(benchmark: Any, recall_store: dict[str, Any]) -> None:
    cx = recall_store["cx"]
    benchmark(cycling(recall_store["queries"], lambda q: cx.recall(q, k=K, mode="keyword")))


@pytest.mark.benchmark(group="recall-keyword")
def test_fts5_bm25(benchmark: Any, recall_store: dict[str, Any]) -> None:
    fts = recall_store["fts"]
    sql = "SELECT rowid FROM t WHERE t MATCH ? ORDER BY bm25(t) LIMIT ?"
    matches = [fts5_query(q) for q in recall_store["queries"]]
    benchmark(cycling(matches, lambda m: fts.execute(sql, (m, K)).fetchall()))


@pytest.mark.benchmark(group="recall-vector")
def test_vector_index_search(benchmark: Any, recall_store: dict[str, Any]) -> None:
    index = recall_store["cx"]._vector_state().index
    benchmark(cycling(recall_store["vectors"], lambda v: index.search(v, CHANNEL_DEPTH)))


@pytest.mark.benchmark(group="recall-vector")
def test_hnswlib_knn_query(benchmark: Any, recall_store: dict[str, Any]) -> None:
    raw = recall_store["raw"]
    benchmark(cycling(recall_store["vectors"], lambda v: raw.knn_query(v, k=CHANNEL_DEPTH + 1)))


@pytest.mark.benchmark(group="recall-vector")
def test_recall_vector(benchmark: Any, recall_store: dict[str, Any]) -> None:
    cx = recall_store["cx"]
    benchmark(cycling(recall_store["queries"], lambda q: cx.recall(q, k=K, mode="vector")))


@pytest.mark.benchmark(group="recall-hybrid")
def test_recall_hybrid(benchmark: Any, recall_store: dict[str, Any]) -> None:
    cx = recall_store["cx"]
    benchmark(cycling(recall_store["queries"], lambda q: cx.recall(q, k=K, mode="hybrid")))
