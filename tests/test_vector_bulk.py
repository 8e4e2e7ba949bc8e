"""Bulk insertion into the vector index (``VectorIndex.upsert_many``) and the catch-up that
uses it: the same bytes and answers as one upsert at a time, progress while it runs, bad
input refused with nothing changed, and a store's catch-up deterministic for its journal."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

import cortexgraph as cg
from cortexgraph.cortex import sync_vectors
from cortexgraph.embed import HashEmbedder
from cortexgraph.embedding import sync_vectors as sync_handle
from cortexgraph.errors import ValidationError
from cortexgraph.vector import VectorIndex
from cortexgraph.vector.hnsw import BULK_CHUNK, INITIAL_CAPACITY

DIM = 16


def mid(i: int) -> bytes:
    return i.to_bytes(16, "big")


def unit_vectors(n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, DIM))
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


def history(seed: int) -> list[tuple[str, list[int], np.ndarray]]:
    """Steps of ("upsert", ids, vectors) and ("remove", ids, _): new ids past the initial
    capacity, updates of live ids, ids upserted again after removal, and an id twice in
    one step."""
    rng = np.random.default_rng(seed)
    steps: list[tuple[str, list[int], np.ndarray]] = []
    steps.append(("upsert", list(range(1500)), unit_vectors(1500, seed)))
    steps.append(("remove", rng.choice(1500, 200, replace=False).tolist(), unit_vectors(0, 0)))
    again = rng.choice(1500, 300, replace=False).tolist() + list(range(1500, 2300)) + [7, 7]
    steps.append(("upsert", again, unit_vectors(len(again), seed + 1)))
    return steps


def replay(directory: Path, *, bulk: bool, seed: int, threshold: int | None) -> VectorIndex:
    index = VectorIndex.open(
        directory, name="test-embedder", dim=DIM, full_scan_threshold=threshold
    )
    for kind, ids, vectors in history(seed):
        if kind == "remove":
            for i in ids:
                index.remove(mid(i))
        elif bulk:
            index.upsert_many([mid(i) for i in ids], vectors)
        else:
            for i, vector in zip(ids, vectors, strict=True):
                index.upsert(mid(i), vector)
    return index


@pytest.mark.parametrize("seed", [1, 2])
@pytest.mark.parametrize("threshold", [None, 0], ids=["flat", "graph"])
def test_upsert_many_gives_the_bytes_and_answers_of_one_upsert_at_a_time(
    tmp_path: Path, seed: int, threshold: int | None
) -> None:
    """A history of bulk upserts (growing past the initial capacity, updating, un-removing,
    an id twice in one call) saves the same index files, byte for byte, and answers the same
    searches as the same upserts made one at a time, without a graph and with one."""
    one = replay(tmp_path / "one", bulk=False, seed=seed, threshold=threshold)
    bulk = replay(tmp_path / "bulk", bulk=True, seed=seed, threshold=threshold)
    assert one.has_graph == bulk.has_graph == (threshold == 0)
    assert bulk.capacity == one.capacity > INITIAL_CAPACITY
    one.save(9)
    bulk.save(9)
    assert [p.read_bytes() for p in bulk.data_paths()] == [p.read_bytes() for p in one.data_paths()]
    assert bulk.meta_path.read_bytes() == one.meta_path.read_bytes()
    for query in unit_vectors(30, seed + 7):
        assert bulk.search(query, 10) == one.search(query, 10)
        assert bulk.exact_search(query, 10) == one.exact_search(query, 10)


def test_upsert_many_keeps_the_exact_search_matrix_current(tmp_path: Path) -> None:
    """Once exact search has built its matrix of vectors, a bulk upsert of new and of
    updated ids updates it: exact search then agrees with a fresh index of the same items."""
    index = VectorIndex.open(tmp_path / "a", name="test-embedder", dim=DIM)
    index.upsert_many([mid(i) for i in range(100)], unit_vectors(100, 3))
    query = unit_vectors(1, 4)[0]
    index.exact_search(query, 5)  # builds the matrix
    changed = list(range(50, 250))
    index.upsert_many([mid(i) for i in changed], unit_vectors(200, 5))
    fresh = replay_plain(
        tmp_path / "b", [(range(100), unit_vectors(100, 3)), (changed, unit_vectors(200, 5))]
    )
    for q in unit_vectors(20, 6):
        assert index.exact_search(q, 20) == fresh.exact_search(q, 20)


def replay_plain(directory: Path, steps: list[tuple[Sequence[int], np.ndarray]]) -> VectorIndex:
    """An index of the given upserts, made one at a time."""
    index = VectorIndex.open(directory, name="test-embedder", dim=DIM)
    for ids, vectors in steps:
        for i, vector in zip(ids, vectors, strict=True):
            index.upsert(mid(i), vector)
    return index


def test_upsert_many_reports_progress(tmp_path: Path) -> None:
    """progress(done, total) is called after each chunk of rows inserted into the graph,
    ending at the total."""
    index = VectorIndex.open(tmp_path, name="test-embedder", dim=DIM, full_scan_threshold=0)
    calls: list[tuple[int, int]] = []
    count = 2 * BULK_CHUNK + 5
    index.upsert_many(
        [mid(i) for i in range(count)],
        unit_vectors(count, 8),
        progress=lambda done, total: calls.append((done, total)),
    )
    assert calls == [(BULK_CHUNK, count), (2 * BULK_CHUNK, count), (count, count)]
    assert len(index) == count


@pytest.mark.parametrize(
    ("ids", "vectors", "field"),
    [
        ([mid(1), b"short"], unit_vectors(2, 0), "memory_id"),
        ([mid(1), mid(2)], unit_vectors(3, 0), "vectors"),
        ([mid(1)], np.zeros((1, DIM + 1), dtype=np.float32), "vectors"),
        ([mid(1), mid(2)], np.array([[np.nan] * DIM, [0.0] * DIM]), "vectors"),
        ([mid(1)], [["x"] * DIM], "vectors"),
        ([mid(1)], np.full((1, DIM), 1e39), "vectors"),  # inf once float32
    ],
)
def test_upsert_many_refuses_bad_input_and_changes_nothing(
    tmp_path: Path, ids: list[bytes], vectors: object, field: str
) -> None:
    """A bad id, a count or shape that does not match, a non-finite or non-numeric vector:
    a ValidationError naming the field, and the index is as it was."""
    index = VectorIndex.open(tmp_path, name="test-embedder", dim=DIM)
    index.upsert(mid(9), unit_vectors(1, 1)[0])
    index.save(1)
    with pytest.raises(ValidationError) as info:
        index.upsert_many(ids, vectors)  # type: ignore[arg-type]
    assert info.value.field == field
    assert (len(index), index.label_count(), index.ids(), index.dirty) == (1, 1, [mid(9)], False)


def test_upsert_many_of_nothing_is_a_no_op(tmp_path: Path) -> None:
    """No ids and no vectors: nothing changes, the index stays clean."""
    index = VectorIndex.open(tmp_path, name="test-embedder", dim=DIM)
    index.upsert_many([], np.zeros((0, DIM), dtype=np.float32))
    index.upsert_many([], [])
    assert (len(index), index.dirty) == (0, False)


# -- a store's catch-up ---------------------------------------------------------------------

TEXTS = [
    f"{verb} the {thing} for {team} on {day}"
    for verb in ("deploy", "review", "test", "roll back")
    for thing in ("api", "billing service", "search index", "web app", "queue")
    for team in ("core", "payments", "infra")
    for day in ("monday", "friday")
]


def write_store(root: Path, *, sync_each_batch: bool) -> tuple[list[list[str]], list[bytes]]:
    """Write TEXTS in batches of 25; catch the vector index up after every batch or only
    at the end. Returns the hybrid and vector answers of some queries, and the index
    files' bytes once saved."""
    with cg.open(root, "tester", sync=False, embedder=HashEmbedder(64)) as cx:
        for start in range(0, len(TEXTS), 25):
            with cx.batch() as b:
                for offset, text in enumerate(TEXTS[start : start + 25]):
                    b.write(cg.Fact(text=text), at=1_700_000_000_000 + 1000 * (start + offset))
            if sync_each_batch:
                sync_vectors(cx)
        answers = [
            [str(hit.uri) for hit in cx.recall(query, k=10, mode=mode).hits]
            for query in ("deploy api", "billing friday", "roll back the queue")
            for mode in ("vector", "hybrid")
        ]
        state = cx._vector_state()
        state.save()
        files = [path.read_bytes() for path in state.index.data_paths()]
    return answers, files


def test_the_same_journal_and_catch_ups_give_the_same_index_and_answers(tmp_path: Path) -> None:
    """Two stores given the same batches and caught up at the same points hold the same
    index, byte for byte, and answer the same: the bulk catch-up is deterministic."""
    for schedule in (True, False):
        first = write_store(tmp_path / f"a{schedule}", sync_each_batch=schedule)
        second = write_store(tmp_path / f"b{schedule}", sync_each_batch=schedule)
        assert all(len(hits) == 10 for hits in first[0])
        assert first == second


def test_catching_up_once_or_after_every_batch_gives_the_same_answers(tmp_path: Path) -> None:
    """Catching up after every batch or once at the end gives the same vector and hybrid
    answers: the labels are given in another order (one catch-up inserts in id order, the
    others in journal order), but below the full-scan threshold searches are exact, so the
    answers are a function of the journal alone."""
    each, _ = write_store(tmp_path / "each", sync_each_batch=True)
    once, _ = write_store(tmp_path / "once", sync_each_batch=False)
    assert each == once


def test_the_catch_up_reports_indexing_progress(tmp_path: Path) -> None:
    """sync_vectors' indexing callback follows the insertion, ending at the number of
    memories inserted; it is not called when nothing changed."""
    calls: list[tuple[int, int]] = []
    with cg.open(tmp_path, "tester", sync=False, embedder=HashEmbedder(64)) as cx:
        with cx.batch() as b:
            for i, text in enumerate(TEXTS):
                b.write(cg.Fact(text=text), at=1_700_000_000_000 + 1000 * i)
        sync_handle(cx._handle, indexing=lambda done, total: calls.append((done, total)))
        assert calls[-1] == (len(TEXTS), len(TEXTS))
        calls.clear()
        sync_handle(cx._handle, indexing=lambda done, total: calls.append((done, total)))
        assert calls == []
