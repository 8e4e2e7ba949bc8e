"""The vector index's catch-up and its exact search: texts read from stored bodies, exact
search below the full-scan threshold and the graph above it, answers a function of the
journal."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import cortexgraph as cg
from cortexgraph.core.body import encode_body
from cortexgraph.core.codec import decode
from cortexgraph.core.fusion import embed_text, embed_text_of_body
from cortexgraph.embed import HashEmbedder
from cortexgraph.vector import VectorIndex
from cortexgraph.vector.files import IndexFiles
from cortexgraph.vector.hnsw import full_scan_limit
from cortexgraph.vector.state import cached_vectors, content_key
from strategies import memories

DIM = 16


def mid(i: int) -> bytes:
    return i.to_bytes(16, "big")


def unit_vectors(n: int, seed: int, dim: int = DIM) -> np.ndarray:
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, dim))
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


@settings(max_examples=200, deadline=None)
@given(memories(), st.sampled_from(["default", "chat", "ns with space"]))
def test_the_text_read_from_a_body_is_the_memorys_embed_text(
    memory: cg.Memory, ns: str
) -> None:
    """embed_text_of_body of a memory's stored body equals embed_text of the memory, for
    every type (Events with and without a speaker, summaries or none)."""
    body = decode(encode_body(memory)[1])
    assert embed_text_of_body(body, ns) == embed_text(memory, ns)


def test_a_body_with_fields_of_the_wrong_type_gives_none() -> None:
    """Fields a valid body never holds make embed_text_of_body answer None (the caller
    then rebuilds the memory, which raises naming the damage)."""
    assert embed_text_of_body({"type": "fact", "text": "x"}, "d") == "[fact] [d] x"
    for body in (
        {"text": "x"},
        {"type": 3, "text": "x"},
        {"type": "fact", "text": b"x"},
        {"type": "fact", "text": "x", "summary": 1},
        {"type": "fact", "text": "x", "speaker": "ann"},  # only Events have speakers
    ):
        assert embed_text_of_body(body, "d") is None


def test_the_default_threshold_is_192_mib_of_float32() -> None:
    """The default full-scan threshold: 131,072 vectors of 384 dimensions."""
    assert full_scan_limit(384) == 131_072
    index = VectorIndex.open(Path("/nonexistent/never-written"), name="e", dim=384)
    assert index.full_scan_threshold == 131_072


def test_below_the_threshold_searches_are_exact_and_no_graph_is_built(tmp_path: Path) -> None:
    """Up to the threshold, search (plain, filtered, with ties cut by first) equals exact
    search and no graph exists; the saved index holds only vectors (a .vec file) and
    loads as such."""
    index = VectorIndex.open(tmp_path, name="e", dim=DIM, full_scan_threshold=500)
    vectors = unit_vectors(500, seed=1)
    index.upsert_many([mid(i) for i in range(500)], vectors * 3.0)  # not unit: normalised
    for i in range(0, 500, 7):
        index.remove(mid(i))
    assert index.exact and not index.has_graph
    for q in unit_vectors(20, seed=2):
        assert index.search(q, 10) == index.exact_search(q, 10)
        keep = lambda m: m[-1] % 3 == 0  # noqa: E731
        assert index.search(q, 10, allowed=keep) == index.exact_search(q, 10, allowed=keep)
    index.save(9)
    assert [p.suffix for p in index.data_paths()] == [".vec", ".ids"]
    again = VectorIndex.open(tmp_path, name="e", dim=DIM, full_scan_threshold=500)
    assert (again.status, again.has_graph, len(again)) == ("loaded", False, len(index))
    q = unit_vectors(1, seed=3)[0]
    assert again.search(q, 10) == index.search(q, 10)


def test_ties_below_the_threshold_are_cut_by_id(tmp_path: Path) -> None:
    """Exact search puts equal similarities in id order and cuts the k-th place by id;
    with first=n it returns the first n and every label tied with the n-th."""
    index = VectorIndex.open(tmp_path, name="e", dim=4, full_scan_threshold=100)
    same = np.array([1.0, 0.0, 0.0, 0.0], dtype=np.float32)
    for i in (9, 3, 7, 1, 5):
        index.upsert(mid(i), same)
    index.upsert(mid(0), np.array([0.0, 1.0, 0.0, 0.0], dtype=np.float32))
    assert [m for m, _ in index.search(same, 3)] == [mid(1), mid(3), mid(5)]
    labels, _ = index.search_labels(same, 6, first=2)
    assert [index.id_of(label) for label in labels] == [mid(i) for i in (1, 3, 5, 7, 9)]


def test_the_upsert_past_the_threshold_builds_the_graph(tmp_path: Path) -> None:
    """The upsert that takes the live vectors past the threshold builds the graph from
    every vector (progress follows it); the graph then answers, and a removal back below
    the threshold makes searches exact again. The graph is the same, byte for byte, as
    one built by a single upsert of the same vectors into an index with threshold 0."""
    vectors = unit_vectors(1300, seed=4)
    index = VectorIndex.open(tmp_path / "a", name="e", dim=DIM, full_scan_threshold=1000)
    index.upsert_many([mid(i) for i in range(1000)], vectors[:1000])
    assert not index.has_graph
    calls: list[tuple[int, int]] = []
    index.upsert_many(
        [mid(i) for i in range(1000, 1300)],
        vectors[1000:],
        progress=lambda done, total: calls.append((done, total)),
    )
    assert index.has_graph and not index.exact and calls[-1] == (1300, 1300)
    for i in range(300):
        index.remove(mid(i))
    assert index.exact
    q = unit_vectors(1, seed=5)[0]
    assert index.search(q, 10) == index.exact_search(q, 10)
    index.save(1)
    graph = VectorIndex.open(tmp_path / "b", name="e", dim=DIM, full_scan_threshold=0)
    graph.upsert_many([mid(i) for i in range(1300)], vectors)
    for i in range(300):
        graph.remove(mid(i))
    graph.save(1)
    assert [p.suffix for p in index.data_paths()] == [".hnsw", ".ids"]
    assert [p.read_bytes() for p in index.data_paths()] == [
        p.read_bytes() for p in graph.data_paths()
    ]
    reloaded = VectorIndex.open(tmp_path / "a", name="e", dim=DIM, full_scan_threshold=0)
    assert reloaded.has_graph and reloaded.search(q, 10) == graph.search(q, 10)


def test_a_flat_index_loaded_above_the_threshold_builds_its_graph(tmp_path: Path) -> None:
    """An index saved without a graph and opened with a lower threshold builds the graph
    at its first search, and answers as a graph search."""
    index = VectorIndex.open(tmp_path, name="e", dim=DIM, full_scan_threshold=10_000)
    index.upsert_many([mid(i) for i in range(300)], unit_vectors(300, seed=6))
    index.save(1)
    low = VectorIndex.open(tmp_path, name="e", dim=DIM, full_scan_threshold=100)
    assert low.status == "loaded" and not low.has_graph
    q = unit_vectors(1, seed=7)[0]
    hits = low.search(q, 5)
    assert low.has_graph and len(hits) == 5


@pytest.mark.parametrize("threshold", [0, 10_000])
def test_bad_thresholds_are_refused(tmp_path: Path, threshold: int) -> None:
    """full_scan_threshold is a natural number; anything else is a ValidationError."""
    index = VectorIndex.open(tmp_path, name="e", dim=4, full_scan_threshold=threshold)
    assert index.full_scan_threshold == threshold
    for bad in (-1, 1.5, True, "10"):
        with pytest.raises(cg.ValidationError):
            VectorIndex.open(tmp_path, name="e", dim=4, full_scan_threshold=bad)  # type: ignore[arg-type]


@pytest.mark.parametrize("dim", [12, 384])
def test_a_vectors_exact_score_does_not_depend_on_its_row(tmp_path: Path, dim: int) -> None:
    """Exact search scores a vector the same, to the bit, whatever its label and however
    many vectors the index holds: two indexes given the same vectors in different orders
    (one holding more) return the same similarities for the same ids."""
    vectors = unit_vectors(3001, seed=8, dim=dim)
    order = np.random.default_rng(9).permutation(3001)
    forward = VectorIndex.open(tmp_path / "f", name="e", dim=dim)
    forward.upsert_many([mid(i) for i in range(3001)], vectors)
    shuffled = VectorIndex.open(tmp_path / "s", name="e", dim=dim)
    shuffled.upsert_many([mid(int(i)) for i in order[:2000]], vectors[order[:2000]])
    kept = {mid(int(i)) for i in order[:2000]}
    for q in unit_vectors(10, seed=10, dim=dim):
        expected = [(m, s) for m, s in forward.exact_search(q, 3001) if m in kept]
        assert shuffled.exact_search(q, 2000) == expected


def test_the_graph_finds_the_exact_top_10_of_a_deep_search(tmp_path: Path) -> None:
    """Above the threshold, recall's vector channel searches 100 deep and keeps the top
    of it: on 5,000 nearly structureless 384-dimensional vectors (noise three times the
    spread of 50 centres) the graph's top 10 of a 100-deep search holds at least 0.98 of
    the exact top 10 (measured 0.994: it searches with ef twice the depth; with ef equal
    to the depth, 0.959)."""
    rng = np.random.default_rng(7)
    centres = rng.standard_normal((50, 384))
    data = centres[rng.integers(0, 50, 5200)] + 3.0 * rng.standard_normal((5200, 384))
    data = (data / np.linalg.norm(data, axis=1, keepdims=True)).astype(np.float32)
    index = VectorIndex.open(tmp_path, name="e", dim=384, full_scan_threshold=0)
    index.upsert_many([mid(i) for i in range(5000)], data[:5000])
    found = 0
    for q in data[5000:]:
        labels, _ = index.search_labels(q, 100)
        top = {index.id_of(label) for label in labels[:10]}
        found += len(top & {m for m, _ in index.exact_search(q, 10)})
    assert found / (10 * 200) >= 0.98, found / 2000


def test_a_background_save_writes_what_a_foreground_save_writes(tmp_path: Path) -> None:
    """An index saved in the background counts as saved at once, writes the same files as
    a save that waits, and a change made after it waits for the write: the files on disk
    hold the index as it was when the save began."""
    vectors = unit_vectors(300, seed=4)
    indexes = []
    for name in ("fg", "bg"):
        index = VectorIndex.open(tmp_path / name, name="e", dim=DIM)
        index.upsert_many([mid(i) for i in range(300)], vectors)
        index.remove(mid(7))
        indexes.append(index)
    foreground, background = indexes
    foreground.save(11)
    background.save(11, background=True)
    assert not background.dirty and background.watermark == 11
    background.upsert(mid(1_000), vectors[0])  # waits for the write, then changes the index
    assert background.dirty
    on_disk = VectorIndex.open(tmp_path / "bg", name="e", dim=DIM)
    assert (on_disk.status, on_disk.watermark, len(on_disk)) == ("loaded", 11, 299)
    assert [p.read_bytes() for p in on_disk.data_paths()] == [
        p.read_bytes() for p in foreground.data_paths()
    ]
    assert on_disk.meta_path.read_bytes() == foreground.meta_path.read_bytes()


def test_a_failed_background_save_is_reported_and_leaves_the_index_dirty(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A background save that fails raises its OSError from wait() (or the next save),
    and a change made after it warns instead of failing; either way the index is dirty
    again, so the next save writes it."""

    def full_disk(*_: object, **__: object) -> int:
        raise OSError(28, "No space left on device")

    index = VectorIndex.open(tmp_path, name="e", dim=DIM)
    index.upsert_many([mid(i) for i in range(10)], unit_vectors(10, seed=5))
    with monkeypatch.context() as patch:
        patch.setattr(IndexFiles, "save", full_disk)
        index.save(3, background=True)
        with pytest.raises(OSError, match="No space left"):
            index.wait()
        assert index.dirty
        index.save(4, background=True)
        with pytest.warns(RuntimeWarning, match="No space left"):
            index.upsert(mid(99), unit_vectors(1, seed=6)[0])
    assert index.dirty
    index.save(5, background=True)
    index.wait()
    again = VectorIndex.open(tmp_path, name="e", dim=DIM)
    assert (again.status, again.watermark, len(again)) == ("loaded", 5, 11)


def test_catch_up_vectors_come_from_the_cache_or_the_embedder_once_each(tmp_path: Path) -> None:
    """_vectors gives each text its embedder row whether it was cached, embedded, or
    given twice; it embeds (and caches, with the
    embedder's bytes) each text not cached once, and finds nothing in a cache holding no
    vector of the embedder."""
    embedder = HashEmbedder(DIM)
    texts = ["deploy a", "roll back b", "deploy a", "queue c", "roll back b"]
    with cg.open(tmp_path, "a", sync=False, embedder=embedder) as cx:
        h = cx._handle
        state = h.vector_state()
        with h.env.read() as txn:
            key = content_key(embedder.name, texts[0])
            assert cached_vectors(txn, [key], embedder.name, DIM) == {}
            first, embedded = state._vectors(txn, texts[:2], None)
        assert embedded == 2
        assert first.tobytes() == embedder.embed(texts[:2]).tobytes()
        with h.env.read() as txn:
            vectors, embedded = state._vectors(txn, texts, None)
        with h.env.read() as txn:  # a snapshot taken after the rows were cached
            keys = [content_key(embedder.name, text) for text in texts]
            cached = cached_vectors(txn, keys, embedder.name, DIM)
            assert [cached[key].tobytes() for key in keys] == [
                row.tobytes() for row in embedder.embed(texts)
            ]
        assert embedded == 1  # "queue c"; the others were cached by the first call
        assert vectors.tobytes() == embedder.embed(texts).tobytes()


def test_cache_rows_go_in_whatever_their_keys_order(tmp_path: Path) -> None:
    """write_cache stores rows given in any key order: appended to a table whose keys are
    all below theirs, put among the existing ones otherwise, duplicates included (the
    last value of a key wins, as with puts one by one)."""
    with cg.open(tmp_path, "a", sync=False) as cx:
        env = cx._handle.env
        env.write_cache("emb", [(b"m", b"1"), (b"c", b"2"), (b"x", b"3")])  # empty: appended
        env.write_cache("emb", [(b"z", b"4"), (b"y", b"5")])  # above the last: appended
        env.write_cache("emb", [(b"d", b"6"), (b"a", b"7"), (b"d", b"8"), (b"zz", b"9")])
        with env.read() as txn, txn.cursor("emb") as cur:
            rows = [(bytes(key), bytes(value)) for key, value in cur]
    assert rows == [
        (b"a", b"7"), (b"c", b"2"), (b"d", b"8"), (b"m", b"1"),
        (b"x", b"3"), (b"y", b"5"), (b"z", b"4"), (b"zz", b"9"),
    ]  # fmt: skip


@pytest.mark.parametrize("threshold", [0, 1_000])
def test_upsert_many_overwriting_its_vectors_gives_the_same_index(
    tmp_path: Path, threshold: int
) -> None:
    """upsert_many(..., overwrite=True) normalises the caller's array in place and leaves
    the index (files included) exactly as without it, with and without a graph, into an
    empty index and into one that holds vectors; vectors it had to convert are not
    touched."""
    vectors = unit_vectors(60, seed=8) * 2.0
    ids = [mid(i) for i in range(60)]
    plain = VectorIndex.open(tmp_path / "p", name="e", dim=DIM, full_scan_threshold=threshold)
    mine = VectorIndex.open(tmp_path / "m", name="e", dim=DIM, full_scan_threshold=threshold)
    for part in (slice(0, 40), slice(30, 60)):
        plain.upsert_many(ids[part], vectors[part])
        given = vectors[part].copy()
        mine.upsert_many(ids[part], given, overwrite=True)
        assert not np.array_equal(given, vectors[part])  # normalised in place
    as_list = vectors[:3].tolist()
    mine.upsert_many(ids[:3], as_list, overwrite=True)
    plain.upsert_many(ids[:3], vectors[:3])
    assert as_list == vectors[:3].tolist()
    plain.save(1)
    mine.save(1)
    assert [p.read_bytes() for p in mine.data_paths()] == [
        p.read_bytes() for p in plain.data_paths()
    ]
