"""The persisted HNSW index: persistence, damage, deletions, filters, recall, determinism.

Invariants V1-V4 of ``cortexgraph.vector.files`` and ``cortexgraph.vector.hnsw`` (see
``docs/vector-index.md``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import textwrap
from collections.abc import Callable
from pathlib import Path

import blake3
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cortexgraph.errors import ValidationError
from cortexgraph.vector import VectorIndex
from cortexgraph.vector.files import file_stem
from cortexgraph.vector.hnsw import INITIAL_CAPACITY

DIM = 16


def mid(i: int) -> bytes:
    """A 16-byte memory id; byte order follows ``i``."""
    return i.to_bytes(16, "big")


def unit_vectors(n: int, dim: int = DIM, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, dim))
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


def clustered(n: int, dim: int, *, clusters: int, noise: float, seed: int) -> np.ndarray:
    """Unit vectors drawn around ``clusters`` random centres."""
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((clusters, dim))
    x = centres[rng.integers(0, clusters, n)] + noise * rng.standard_normal((n, dim))
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


def build(
    directory: Path, n: int = 300, *, removed: range = range(0), **kw: int | None
) -> VectorIndex:
    index = VectorIndex.open(directory, name="test-embedder", dim=DIM, **kw)
    for i, vec in enumerate(unit_vectors(n)):
        index.upsert(mid(i), vec)
    for i in removed:
        index.remove(mid(i))
    return index


def reopen(directory: Path, name: str = "test-embedder", dim: int = DIM) -> VectorIndex:
    return VectorIndex.open(directory, name=name, dim=dim)


def ids_of(hits: list[tuple[bytes, float]]) -> list[bytes]:
    return [memory_id for memory_id, _ in hits]


# -- names ---------------------------------------------------------------------------------


def decode_stem(stem: str) -> str:
    """The inverse of file_stem, written independently to prove it is one-to-one."""
    out = bytearray()
    i = 0
    while i < len(stem):
        if stem[i] == "_":
            out += stem[i + 1].upper().encode()
            i += 2
        elif stem[i] == "%":
            out.append(int(stem[i + 1 : i + 3], 16))
            i += 3
        else:
            out += stem[i].encode()
            i += 1
    return out.decode("utf-8")


def test_file_stem_examples() -> None:
    """Embedder names map to readable stems with no dot, slash or upper-case letter."""
    assert file_stem("hash-v1-384") == "hash-v1-384"
    assert file_stem("all-MiniLM-L6-v2") == "all-_mini_l_m-_l6-v2"
    assert file_stem("http:text-embedding-3-small") == "http%3atext-embedding-3-small"
    assert file_stem("../x.y") == "%2e%2e%2fx%2ey"
    assert file_stem("a_b") != file_stem("aB")


@given(st.text(min_size=1, max_size=40))
def test_file_stem_is_one_to_one(name: str) -> None:
    """file_stem can be decoded back to the name (so two names never share files), and
    the stem uses only characters that are safe in file names on every platform."""
    try:
        stem = file_stem(name)
    except ValidationError:
        return  # lone surrogates, too long
    assert decode_stem(stem) == name
    assert set(stem) <= set("abcdefghijklmnopqrstuvwxyz0123456789-_%")


@pytest.mark.parametrize(
    "kwargs",
    [
        {"name": ""},
        {"name": 3},
        {"name": "x" * 200},
        {"name": "\ud800"},
        {"dim": 0},
        {"dim": True},
        {"dim": "384"},
        {"M": 1},
        {"ef_construction": 0},
        {"ef_search": 0},
        {"seed": -1},
    ],
)
def test_open_rejects_bad_arguments(tmp_path: Path, kwargs: dict[str, object]) -> None:
    """Bad arguments raise ValidationError naming the field; they are not 'damage'."""
    args: dict[str, object] = {"name": "e", "dim": 4, **kwargs}
    with pytest.raises(ValidationError) as info:
        VectorIndex.open(tmp_path, **args)  # type: ignore[arg-type]
    assert info.value.field == next(iter(kwargs))


def test_bad_items_and_queries_are_rejected(tmp_path: Path) -> None:
    """Ids that are not 16 bytes, vectors of the wrong shape or not finite, k < 1 and a
    non-callable filter raise ValidationError and leave the index unchanged."""
    index = VectorIndex.open(tmp_path, name="e", dim=4)
    good = [1.0, 0.0, 0.0, 0.0]
    for bad_id in (b"short", "x" * 16, bytearray(16)):
        with pytest.raises(ValidationError, match="memory_id"):
            index.upsert(bad_id, good)  # type: ignore[arg-type]
    for bad_vec in ([1.0, 2.0], [[1.0] * 4], [float("nan")] * 4, [1e39] * 4, "abcd"):
        with pytest.raises(ValidationError, match="vector"):
            index.upsert(mid(1), bad_vec)
    index.upsert(mid(1), good)
    with pytest.raises(ValidationError, match="k"):
        index.search(good, 0)
    with pytest.raises(ValidationError, match="query"):
        index.exact_search([1.0], 1)
    with pytest.raises(ValidationError, match="allowed"):
        index.search(good, 1, allowed=3)  # type: ignore[arg-type]
    with pytest.raises(ValidationError, match="watermark"):
        index.save(-1)
    assert len(index) == 1
    assert index.ids() == [mid(1)]


# -- basics ---------------------------------------------------------------------------------


def test_new_index_is_empty_and_open_writes_nothing(tmp_path: Path) -> None:
    """A directory with nothing in it gives status 'new', an empty index and no files."""
    directory = tmp_path / "vectors"
    index = VectorIndex.open(directory, name="e", dim=4)
    assert (index.status, index.reason, index.watermark, len(index)) == ("new", None, 0, 0)
    assert index.search([1, 0, 0, 0], 5) == []
    assert index.exact_search([1, 0, 0, 0], 5) == []
    assert not directory.exists()


def test_k_larger_than_count(tmp_path: Path) -> None:
    """k beyond the number of live elements returns all of them, best first."""
    index = build(tmp_path, 5)
    query = unit_vectors(1, seed=9)[0]
    hits = index.search(query, 50)
    assert sorted(ids_of(hits)) == [mid(i) for i in range(5)]
    assert [s for _, s in hits] == sorted((s for _, s in hits), reverse=True)
    assert ids_of(hits) == ids_of(index.exact_search(query, 50))


def test_similarity_is_cosine(tmp_path: Path) -> None:
    """Scores are cosine similarities of the raw (unnormalised) vectors."""
    index = VectorIndex.open(tmp_path, name="e", dim=3)
    index.upsert(mid(1), [3.0, 0.0, 0.0])
    index.upsert(mid(2), [1.0, 1.0, 0.0])
    index.upsert(mid(3), [0.0, 0.0, 0.0])  # a zero vector is similar to nothing
    for hits in (index.search([2.0, 0, 0], 3), index.exact_search([2.0, 0, 0], 3)):
        assert ids_of(hits) == [mid(1), mid(2), mid(3)]
        assert [round(s, 5) for _, s in hits] == [1.0, round(2**-0.5, 5), 0.0]


def test_ties_are_broken_by_id(tmp_path: Path) -> None:
    """Equal vectors come back in id order, in both searches, whatever the insert order."""
    index = VectorIndex.open(tmp_path, name="e", dim=4)
    for i in (7, 3, 9, 1, 5):
        index.upsert(mid(i), [1.0, 1.0, 0.0, 0.0])
    index.upsert(mid(2), [0.0, 0.0, 1.0, 0.0])
    for search in (index.search, index.exact_search):
        assert ids_of(search([1.0, 1.0, 0.0, 0.0], 3)) == [mid(1), mid(3), mid(5)]


def test_update_replaces_the_vector(tmp_path: Path) -> None:
    """Upserting a known id replaces its vector: searches find it at the new place only,
    and its label and the count stay the same."""
    index = build(tmp_path, 400)
    old = unit_vectors(400)[17]
    target = unit_vectors(1, seed=42)[0]
    index.upsert(mid(17), target)
    assert len(index) == 400
    assert index.ids()[17] == mid(17)
    for search in (index.search, index.exact_search):
        assert search(target, 1)[0][0] == mid(17)
        assert search(target, 1)[0][1] == pytest.approx(1.0, abs=1e-5)
        assert mid(17) not in ids_of(search(old, 10))
    index.save(1)
    again = reopen(tmp_path)
    assert again.search(target, 1)[0][0] == mid(17)


def test_removed_ids_are_never_returned(tmp_path: Path) -> None:
    """Removed ids leave both searches and membership; removing twice or an unknown id is a
    no-op returning False; upserting a removed id brings it back under its old label."""
    index = build(tmp_path, 200, removed=range(0, 200, 2))
    vectors = unit_vectors(200)
    assert len(index) == 100
    assert mid(0) not in index and mid(1) in index
    assert index.remove(mid(0)) is False
    assert index.remove(mid(999)) is False
    for q in vectors[:20]:
        for search in (index.search, index.exact_search):
            got = ids_of(search(q, 200))
            assert len(got) == 100
            assert all(int.from_bytes(m, "big") % 2 == 1 for m in got)
    index.upsert(mid(4), vectors[4])
    assert mid(4) in index and len(index) == 101
    assert index.ids().index(mid(4)) == 2  # label 4 among live labels 1, 3, 4, 5, ...
    assert index.search(vectors[4], 1)[0][0] == mid(4)


def test_allowed_filter_is_respected(tmp_path: Path) -> None:
    """search(allowed=...) returns only allowed ids, agrees with exact search on a broad
    filter, and still returns every allowed id when the filter is very selective."""
    index = build(tmp_path, 600)
    queries = unit_vectors(20, seed=5)

    def odd(m: bytes) -> bool:
        return m[-1] % 2 == 1

    overlap = 0
    for q in queries:
        got = ids_of(index.search(q, 10, allowed=odd))
        assert len(got) == 10 and all(odd(m) for m in got)
        overlap += len(set(got) & set(ids_of(index.exact_search(q, 10, odd))))
    assert overlap >= 0.95 * 10 * len(queries)

    few = {mid(3), mid(300), mid(599)}
    hits = index.search(queries[0], 10, allowed=few.__contains__)
    assert set(ids_of(hits)) == few
    assert ids_of(hits) == ids_of(index.exact_search(queries[0], 10, few.__contains__))
    assert index.search(queries[0], 10, allowed=lambda m: False) == []


def test_capacity_grows_beyond_the_initial_size(tmp_path: Path) -> None:
    """More than INITIAL_CAPACITY upserts grow the index by doubling; every element stays
    findable, across a save and reopen, and growth continues after it."""
    n = INITIAL_CAPACITY * 2 + 100
    vectors = unit_vectors(n + 50, dim=8, seed=3)
    index = VectorIndex.open(tmp_path, name="e", dim=8)
    for i in range(n):
        index.upsert(mid(i), vectors[i])
    assert index.capacity == INITIAL_CAPACITY * 4
    index.exact_search(vectors[0], 1)  # materialise the matrix, then grow it further
    for i in range(n, n + 50):
        index.upsert(mid(i), vectors[i])
    assert len(index) == n + 50
    found = sum(index.search(v, 1)[0][0] == mid(i) for i, v in enumerate(vectors))
    assert found >= 0.99 * (n + 50)
    assert all(index.exact_search(v, 1)[0][0] == mid(i) for i, v in enumerate(vectors))
    index.save(9)
    again = VectorIndex.open(tmp_path, name="e", dim=8)
    assert (again.status, len(again), again.capacity) == ("loaded", n + 50, index.capacity)
    again.upsert(mid(10**6), vectors[0])
    assert len(again) == n + 51


# -- persistence ----------------------------------------------------------------------------


def test_round_trip(tmp_path: Path) -> None:
    """save then open gives status 'loaded', the watermark, the same ids, the same search
    and exact-search results, and the same bytes when saved again."""
    index = build(tmp_path, 500, removed=range(0, 500, 7))
    index.upsert(mid(3), unit_vectors(1, seed=77)[0])
    assert index.dirty
    index.save(42)
    assert not index.dirty
    again = reopen(tmp_path)
    assert (again.status, again.reason, again.watermark) == ("loaded", None, 42)
    assert (len(again), again.ids()) == (len(index), index.ids())
    assert mid(7) not in again and mid(8) in again
    for q in unit_vectors(30, seed=11):
        assert again.search(q, 10) == index.search(q, 10)
        assert again.exact_search(q, 10) == index.exact_search(q, 10)
    first = [p.read_bytes() for p in index.data_paths()]
    first_meta = json.loads(index.meta_path.read_bytes())
    again.save(42)
    assert [p.read_bytes() for p in again.data_paths()] == first
    second_meta = json.loads(again.meta_path.read_bytes())
    assert second_meta["generation"] == first_meta["generation"] + 1
    assert second_meta["files"] == first_meta["files"]


def test_save_replaces_the_previous_generation(tmp_path: Path) -> None:
    """Each save writes a new generation and deletes the old one's files, leaving exactly
    the metadata and two data files."""
    index = build(tmp_path, 50)
    index.save(1)
    old = index.data_paths()
    index.upsert(mid(999), unit_vectors(1, seed=1)[0])
    index.save(2)
    assert index.data_paths() != old
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        [index.meta_path.name, *(p.name for p in index.data_paths())]
    )
    assert reopen(tmp_path).watermark == 2


def test_interrupted_save_keeps_the_previous_generation(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A save that dies before the metadata is renamed leaves the previous save loadable
    (V3): the metadata is the commit point."""
    index = build(tmp_path, 50)
    index.save(1)
    before = index.search(unit_vectors(1, seed=2)[0], 5)
    index.upsert(mid(999), unit_vectors(1, seed=2)[0])
    real_replace = os.replace

    def crash_on_meta(src: str | Path, dst: str | Path) -> None:
        if str(dst).endswith(".json"):
            raise OSError("simulated crash")
        real_replace(src, dst)

    monkeypatch.setattr(os, "replace", crash_on_meta)
    with pytest.raises(OSError, match="simulated"):
        index.save(2)
    monkeypatch.undo()
    again = reopen(tmp_path)
    assert (again.status, again.watermark, len(again)) == ("loaded", 1, 50)
    assert again.search(unit_vectors(1, seed=2)[0], 5) == before
    again.save(3)  # a later save cleans up the orphaned generation
    assert len(list(tmp_path.iterdir())) == 3


def flip(path: Path, offset: int) -> None:
    data = bytearray(path.read_bytes())
    data[offset] ^= 0x01
    path.write_bytes(bytes(data))


def rewrite_meta(path: Path, **changes: object) -> None:
    """Change metadata fields and re-sign them, as a buggy writer (not bit rot) would."""
    meta = json.loads(path.read_bytes())
    meta.update(changes)
    del meta["blake3"]

    def encode(m: dict[str, object]) -> bytes:
        return (json.dumps(m, sort_keys=True, separators=(",", ":")) + "\n").encode()

    meta["blake3"] = blake3.blake3(encode(meta)).hexdigest()
    path.write_bytes(encode(meta))


def damage_cases() -> dict[str, tuple[Callable[[VectorIndex], None], str]]:
    def index_file(ix: VectorIndex) -> Path:
        return ix.data_paths()[0]

    def ids_file(ix: VectorIndex) -> Path:
        return ix.data_paths()[1]

    def truncate(path: Path) -> None:
        path.write_bytes(path.read_bytes()[:-100])

    return {
        "truncated index": (lambda ix: truncate(index_file(ix)), "damaged"),
        "empty index": (lambda ix: index_file(ix).write_bytes(b""), "damaged"),
        "flipped first index byte": (lambda ix: flip(index_file(ix), 0), "damaged"),
        "flipped middle index byte": (
            lambda ix: flip(index_file(ix), index_file(ix).stat().st_size // 2),
            "damaged",
        ),
        "flipped last index byte": (lambda ix: flip(index_file(ix), -1), "damaged"),
        "flipped ids byte": (lambda ix: flip(ids_file(ix), 100), "damaged"),
        "truncated ids": (lambda ix: truncate(ids_file(ix)), "damaged"),
        "deleted ids": (lambda ix: ids_file(ix).unlink(), "missing"),
        "deleted index": (lambda ix: index_file(ix).unlink(), "missing"),
        "deleted metadata": (lambda ix: ix.meta_path.unlink(), "missing"),
        "garbage metadata": (lambda ix: ix.meta_path.write_bytes(b"{not json"), "damaged"),
        "binary metadata": (lambda ix: ix.meta_path.write_bytes(b"\xff\xfe"), "damaged"),
        "metadata list": (lambda ix: ix.meta_path.write_bytes(b"[]\n"), "damaged"),
        "reformatted metadata": (
            lambda ix: ix.meta_path.write_text(json.dumps(json.loads(ix.meta_path.read_text()))),
            "damaged",
        ),
        "wrong dim in metadata": (lambda ix: rewrite_meta(ix.meta_path, dim=DIM + 1), "damaged"),
        "wrong name in metadata": (lambda ix: rewrite_meta(ix.meta_path, name="other"), "damaged"),
        "wrong M in metadata": (lambda ix: rewrite_meta(ix.meta_path, M=8), "damaged"),
        "wrong format": (lambda ix: rewrite_meta(ix.meta_path, format=1), "damaged"),
        "unknown kind": (lambda ix: rewrite_meta(ix.meta_path, kind="ivf"), "damaged"),
        "count disagrees": (lambda ix: rewrite_meta(ix.meta_path, count=10), "damaged"),
        "capacity disagrees": (lambda ix: rewrite_meta(ix.meta_path, capacity=5000), "damaged"),
        "deleted out of range": (
            lambda ix: rewrite_meta(ix.meta_path, deleted=[0, 10**6]),
            "damaged",
        ),
        "deleted unsorted": (lambda ix: rewrite_meta(ix.meta_path, deleted=[7, 0]), "damaged"),
        "negative watermark": (lambda ix: rewrite_meta(ix.meta_path, watermark=-1), "damaged"),
        "bool dim": (lambda ix: rewrite_meta(ix.meta_path, dim=True), "damaged"),
        "missing field": (lambda ix: rewrite_meta(ix.meta_path, extra=1), "damaged"),
        "all files deleted": (
            lambda ix: [p.unlink() for p in (ix.meta_path, *ix.data_paths())] and None,
            "new",
        ),
    }


@pytest.mark.parametrize("case", list(damage_cases()))
@pytest.mark.parametrize("threshold", [None, 0], ids=["flat", "graph"])
def test_damage_gives_an_empty_index(tmp_path: Path, case: str, threshold: int | None) -> None:
    """Every kind of damage, to a flat index (vectors only) or to one with a graph, opens
    as an empty index with watermark 0 and the expected status and a reason; rebuilding
    and saving then loads cleanly."""
    index = build(tmp_path, 300, removed=range(5), full_scan_threshold=threshold)
    index.search(unit_vectors(1)[0], 5)  # builds the graph when the threshold says so
    assert index.has_graph == (threshold == 0)
    index.save(17)
    spoil, status = damage_cases()[case]
    spoil(index)
    again = reopen(tmp_path)
    assert (again.status, again.watermark, len(again), again.ids()) == (status, 0, 0, [])
    assert (again.reason is None) == (status == "new")
    assert again.search(unit_vectors(1)[0], 5) == []
    for i, vec in enumerate(unit_vectors(300)):
        again.upsert(mid(i), vec)
    again.save(18)
    assert (reopen(tmp_path).status, reopen(tmp_path).watermark) == ("loaded", 18)


def test_every_metadata_byte_is_checked(tmp_path: Path) -> None:
    """Flipping any single bit of the metadata file is detected (canonical form plus its
    own BLAKE3), so no field, not even the watermark, can silently change."""
    index = build(tmp_path, 20)
    index.save(5)
    good = index.meta_path.read_bytes()
    for offset in range(len(good)):
        for bit in (0x01,):
            data = bytearray(good)
            data[offset] ^= bit
            index.meta_path.write_bytes(bytes(data))
            assert reopen(tmp_path).status == "damaged", (offset, bit)
    index.meta_path.write_bytes(good)
    assert reopen(tmp_path).status == "loaded"


def test_other_parameters_do_not_load(tmp_path: Path) -> None:
    """Opening with another dim or graph parameters reports the saved index damaged; an
    embedder with another name has its own files and starts 'new'; ef_search is a query
    setting and may change freely."""
    build(tmp_path, 30).save(3)
    assert reopen(tmp_path, dim=DIM * 2).status == "damaged"
    assert VectorIndex.open(tmp_path, name="test-embedder", dim=DIM, M=8).status == "damaged"
    assert VectorIndex.open(tmp_path, name="test-embedder", dim=DIM, seed=1).status == "damaged"
    assert reopen(tmp_path, name="Test-embedder").status == "new"
    tuned = VectorIndex.open(tmp_path, name="test-embedder", dim=DIM, ef_search=300)
    assert (tuned.status, len(tuned)) == ("loaded", 30)


# -- the model ------------------------------------------------------------------------------

operations = st.lists(
    st.one_of(
        st.tuples(
            st.just("upsert"),
            st.integers(0, 11),
            st.lists(st.integers(-4, 4), min_size=6, max_size=6).filter(any),
        ),
        st.tuples(st.just("remove"), st.integers(0, 11), st.none()),
        st.tuples(st.just("reopen"), st.none(), st.none()),
    ),
    max_size=40,
)


@given(operations, st.lists(st.integers(-4, 4), min_size=6, max_size=6).filter(any))
def test_agrees_with_a_dict_model(
    ops: list[tuple[str, int | None, list[int] | None]], query: list[int]
) -> None:
    """Random upsert / remove / save-and-reopen sequences agree with a dict model: the same
    live ids, removed ids never returned, and with k >= len both searches return exactly
    the live ids, with the model's cosine similarities."""
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp)
        index = VectorIndex.open(directory, name="model", dim=6)
        model: dict[bytes, np.ndarray] = {}
        for step, (op, key, values) in enumerate(ops):
            if op == "upsert":
                assert key is not None and values is not None
                index.upsert(mid(key), values)
                model[mid(key)] = np.array(values, dtype=np.float64)
            elif op == "remove":
                assert key is not None
                assert index.remove(mid(key)) == (mid(key) in model)
                model.pop(mid(key), None)
            else:
                index.save(step)
                index = VectorIndex.open(directory, name="model", dim=6)
                assert (index.status, index.watermark) == ("loaded", step)
        assert len(index) == len(model)
        assert set(index.ids()) == set(model)
        assert all((mid(i) in index) == (mid(i) in model) for i in range(12))
        q = np.array(query, dtype=np.float64)
        expected = {
            m: float(v @ q / (np.linalg.norm(v) * np.linalg.norm(q))) for m, v in model.items()
        }
        for k in (len(model) or 1, 12, 50):
            for hits in (index.search(query, k), index.exact_search(query, k)):
                assert set(ids_of(hits)) == set(model)
                for m, sim in hits:
                    assert sim == pytest.approx(expected[m], abs=1e-5)
        top = ids_of(index.search(query, 3))
        assert len(top) == min(3, len(model)) and set(top) <= set(model)


# -- quality --------------------------------------------------------------------------------


@pytest.mark.slow
def test_recall_at_10_against_exact_search(tmp_path: Path) -> None:
    """recall@10 of the HNSW search against exact search is at least 0.95 on 5,000 random
    384-dimensional unit vectors around 50 centres (measured: 1.000)."""
    data = clustered(5200, 384, clusters=50, noise=2.0, seed=7)
    index = VectorIndex.open(tmp_path, name="e", dim=384, full_scan_threshold=0)
    for i in range(5000):
        index.upsert(mid(i), data[i])
    queries = data[5000:]
    found = 0
    for q in queries:
        found += len(set(ids_of(index.search(q, 10))) & set(ids_of(index.exact_search(q, 10))))
    recall = found / (10 * len(queries))
    assert recall >= 0.95, recall


# -- determinism ----------------------------------------------------------------------------

SCRIPT = textwrap.dedent(
    """
    import json, sys
    from pathlib import Path
    import blake3, numpy as np
    from cortexgraph.vector import VectorIndex

    directory, threshold = Path(sys.argv[1]), int(sys.argv[2])
    rng = np.random.default_rng(1)
    vectors = rng.standard_normal((1200, 12)).astype(np.float32)
    key = lambda i: i.to_bytes(16, "big")
    index = VectorIndex.open(directory, name="det", dim=12, full_scan_threshold=threshold)
    for i in range(1100):
        index.upsert(key(i), vectors[i])
    for i in range(0, 1100, 9):
        index.remove(key(i))
    for i in range(0, 300, 5):
        index.upsert(key(i), vectors[1100 + i % 100])
    index.save(1)
    index = VectorIndex.open(directory, name="det", dim=12, full_scan_threshold=threshold)
    for i in range(1100, 1200):
        index.upsert(key(i), vectors[i - 1100] * 2)
    index.save(2)
    out = {
        "files": [blake3.blake3(p.read_bytes()).hexdigest() for p in index.data_paths()],
        "meta": blake3.blake3(index.meta_path.read_bytes()).hexdigest(),
        "search": [
            [(m.hex(), round(s, 6)) for m, s in index.search(q, 10)] for q in vectors[:40]
        ],
        "filtered": [
            [m.hex() for m, _ in index.search(q, 5, allowed=lambda m: m[-1] % 3 == 0)]
            for q in vectors[:10]
        ],
    }
    print(json.dumps(out))
    """
)


@pytest.mark.slow
@pytest.mark.parametrize("threshold", [0, 1_000_000], ids=["graph", "flat"])
def test_same_history_same_bytes_across_processes(tmp_path: Path, threshold: int) -> None:
    """The same upserts, removes, updates, saves and reopens in two processes with
    different hash seeds give byte-identical data and metadata files and identical search
    results (V4), with a graph and with exact search over the vectors alone."""
    outputs = []
    for hash_seed in ("1", "2"):
        directory = tmp_path / hash_seed
        env = {**os.environ, "PYTHONHASHSEED": hash_seed}
        run = subprocess.run(
            [sys.executable, "-c", SCRIPT, str(directory), str(threshold)],
            env=env,
            capture_output=True,
            text=True,
            check=True,
        )
        outputs.append(json.loads(run.stdout))
    assert outputs[0] == outputs[1]
    assert len(outputs[0]["search"]) == 40


def test_same_history_same_bytes_in_process(tmp_path: Path) -> None:
    """Two indexes built by the same history save byte-identical data files."""
    first = build(tmp_path / "a", 700, removed=range(0, 700, 3))
    second = build(tmp_path / "b", 700, removed=range(0, 700, 3))
    first.save(1)
    second.save(1)
    assert [p.read_bytes() for p in first.data_paths()] == [
        p.read_bytes() for p in second.data_paths()
    ]
    assert first.meta_path.read_bytes() == second.meta_path.read_bytes()


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.integers(0, 2), min_size=2, max_size=30),
    st.permutations(list(range(30))),
    st.integers(0, 2),
    st.integers(1, 12),
)
def test_runs_of_equal_distances_come_back_in_id_order(
    tmp_path_factory: pytest.TempPathFactory,
    kinds: list[int],
    order: list[int],
    query: int,
    k: int,
) -> None:
    """Many elements share one of three vectors: search returns them best first, each
    run of equal similarity in id order, as a sort by (-similarity, id) of every element
    does, whatever the insertion order (on so few elements the graph search is exhaustive)."""
    vectors = ([1.0, 0.0, 0.0, 0.0], [1.0, 1.0, 0.0, 0.0], [0.0, 0.0, 1.0, 0.0])
    index = VectorIndex.open(tmp_path_factory.mktemp("runs"), name="e", dim=4)
    inserted = [i for i in order if i < len(kinds)]
    for i in inserted:
        index.upsert(mid(i), vectors[kinds[i]])
    hits = index.search(vectors[query], k)
    similarity = {
        kind: round(float(np.dot(_unit(vectors[kind]), _unit(vectors[query]))), 5)
        for kind in range(3)
    }
    ranked = sorted(inserted, key=lambda i: (-similarity[kinds[i]], mid(i)))
    assert ids_of(hits) == [mid(i) for i in ranked[:k]]
    # with first=f, the first f of the k and everything among the k tied with the f-th
    first = max(1, k // 2)
    end = min(first, len(ranked))
    while first <= end < min(k, len(ranked)) and similarity[kinds[ranked[end]]] == similarity[
        kinds[ranked[first - 1]]
    ]:
        end += 1
    labels, sims = index.search_labels(vectors[query], k, first=first)
    assert [index.id_of(label) for label in labels] == [mid(i) for i in ranked[:end]]
    assert sims == sorted(sims, reverse=True)
    # and exact search among given ids (all of them, and one unknown) says the same
    among, _ = index.search_among(vectors[query], k, [mid(99), *map(mid, inserted)], first=first)
    assert [index.id_of(label) for label in among] == [mid(i) for i in ranked[:end]]


def _unit(vector: list[float]) -> np.ndarray:
    array = np.asarray(vector, dtype=np.float64)
    return array / np.linalg.norm(array)



def test_search_among_is_exact_search_over_the_given_ids(tmp_path: Path) -> None:
    """search_among scores only the given ids (removed and unknown ones skipped), as
    exact_search does with a filter passing exactly those ids."""
    index = build(tmp_path, 300, removed=range(0, 300, 7))
    rng = np.random.default_rng(4)
    for q in unit_vectors(20, seed=5):
        chosen = [mid(int(i)) for i in rng.choice(300, 40, replace=False)] + [mid(999)]
        labels, sims = index.search_among(q, 10, chosen)
        expected = index.exact_search(q, 10, allowed=set(chosen).__contains__)
        assert [index.id_of(label) for label in labels] == [m for m, _ in expected]
        assert sims == pytest.approx([s for _, s in expected], abs=1e-6)
    assert index.search_among(unit_vectors(1)[0], 5, [mid(0), mid(999)]) == ([], [])


def test_a_filter_on_labels_equals_the_filter_on_ids(tmp_path: Path) -> None:
    """allowed_labels asks the same question as allowed, of labels; giving both is an
    error. A filter passing fewer than k falls back to exact search either way."""
    index = build(tmp_path, 400, removed=range(0, 400, 9))
    odd_labels = [index._labels[mid(i)] % 2 == 1 for i in range(400)]
    by_label = [False] * index.label_count()
    for i, ok in enumerate(odd_labels):
        by_label[index._labels[mid(i)]] = ok
    few = {mid(i) for i in (3, 5, 7)}
    few_labels = [index.id_of(label) in few for label in range(index.label_count())]
    for q in unit_vectors(10, seed=6):
        by_id = index.search_labels(q, 10, allowed=lambda m: index._labels[m] % 2 == 1, first=4)
        assert index.search_labels(q, 10, allowed_labels=by_label.__getitem__, first=4) == by_id
        sparse = index.search_labels(q, 10, allowed=few.__contains__)
        assert index.search_labels(q, 10, allowed_labels=few_labels.__getitem__) == sparse
        assert {index.id_of(label) for label in sparse[0]} == few
    with pytest.raises(ValidationError):
        index.search_labels(unit_vectors(1)[0], 5, allowed=few.__contains__,
                            allowed_labels=few_labels.__getitem__)


def test_search_among_gives_the_same_answer_once_exact_search_built_its_matrix(
    tmp_path: Path,
) -> None:
    """An index loaded with a graph has no copy of the vectors: search_among reads
    hnswlib's vectors until exact_search has built the copy, then that copy; the answers
    are identical either way, upserts after the build included."""
    build(tmp_path, 200, full_scan_threshold=0).save(1)
    index = VectorIndex.open(tmp_path, name="test-embedder", dim=DIM, full_scan_threshold=0)
    queries = unit_vectors(8, seed=11)
    chosen = [mid(i) for i in range(0, 260, 3)]
    for i, vec in enumerate(unit_vectors(60, seed=12)):
        index.upsert(mid(200 + i), vec)
    without_matrix = [index.search_among(q, 10, chosen) for q in queries]
    index.exact_search(queries[0], 5)  # builds the copy
    assert [index.search_among(q, 10, chosen) for q in queries] == without_matrix
