"""Search over a persisted vector index (cosine) from 16-byte memory ids to vectors.

:class:`VectorIndex` answers cosine-similarity searches. While it holds at most
``full_scan_threshold`` live vectors (by default as many as fit in :data:`FULL_SCAN_BYTES`
of float32) every search is exact: one matrix product over the normalised vectors, the
rule Qdrant calls ``full_scan_threshold``. Above it, searches go through an HNSW graph
(hnswlib), built from the vectors in one bulk insert the first time it is needed and kept
up to date from then on, with ties put in id order and an exact search when the graph
cannot fill a request. Exact searches over a given set of ids are always available. It
keeps labels dense (V1) and removed ids labelled but never returned (V2). What it saves,
and what is checked before a saved index is used (the file layout, V1-V4), is in
:mod:`cortexgraph.vector.files`.
"""

from __future__ import annotations

import functools
import itertools
import operator
import os
import threading
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar, cast

import hnswlib
import numpy as np
import numpy.typing as npt

from ..errors import ValidationError
from . import files
from .files import ID_SIZE, INITIAL_CAPACITY, SPACE, IndexFiles, Status, Unusable, file_stem

__all__ = ["FULL_SCAN_BYTES", "INITIAL_CAPACITY", "VectorIndex", "full_scan_limit"]

#: Searches are exact while the live vectors fit in this many bytes of float32 (at 384
#: dimensions, 131,072 vectors): a matrix product over them takes about 8 ms at 100,000
#: of 384 dimensions on one core, and needs no graph, whose single-threaded build costs
#: about 0.35 ms a vector (docs/vector-index.md, "Exact search, then a graph")
FULL_SCAN_BYTES = 192 << 20
#: rows per hnswlib call in :meth:`VectorIndex.upsert_many`, between progress reports
BULK_CHUNK = 4096
MAX_DIM = 65536

_T = TypeVar("_T")
Vector = npt.NDArray[np.float32]


def _check_int(value: object, field: str, low: int, high: int) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise ValidationError(f"must be an int, not {type(value).__name__}", field=field)
    if not low <= value <= high:
        raise ValidationError(f"must be in {low}..{high}, got {value}", field=field)
    return value


def _check_id(memory_id: object) -> bytes:
    if not isinstance(memory_id, bytes) or len(memory_id) != ID_SIZE:
        raise ValidationError(f"must be {ID_SIZE} bytes", field="memory_id")
    return memory_id


def _runs(ties: list[int]) -> list[tuple[int, int]]:
    """The runs ``[start, end)`` of equal neighbours, from the positions ``i`` (ascending)
    where element ``i`` equals element ``i + 1``.

    >>> _runs([2, 3, 7]), _runs([])
    ([(2, 5), (7, 9)], [])
    """
    runs: list[tuple[int, int]] = []
    for i in ties:
        if runs and runs[-1][1] == i + 1:
            runs[-1] = (runs[-1][0], i + 2)
        else:
            runs.append((i, i + 2))
    return runs


def _tie_end(sims: Sequence[float], first: int, k: int) -> int:
    """How many of ``sims`` (best first) to keep: the first ``first``, then those tied
    with the ``first``-th, up to ``k``.

    >>> _tie_end([0.9, 0.8, 0.8, 0.8, 0.7], 2, 4), _tie_end([0.9], 3, 5)
    (4, 1)
    """
    end = min(first, len(sims))
    while first <= end < min(k, len(sims)) and sims[end] == sims[first - 1]:
        end += 1
    return end


def _pick(items: Sequence[_T], indexes: Sequence[int]) -> list[_T]:
    """``[items[i] for i in indexes]``, without a Python-level loop."""
    if len(indexes) <= 1:
        return [items[i] for i in indexes]
    return list(operator.itemgetter(*indexes)(items))


def _scores(matrix: Vector, q: Vector) -> Vector:
    """The float32 dot product of each row of ``matrix`` with ``q``.

    ``einsum`` computes each row alone, in one fixed order, so a vector's score does not
    depend on its row or on how many rows there are; a BLAS matrix product (``matrix @
    q``) blocks rows, and the same vector's score could differ in its last bit with its
    position, which would let the order of ties depend on the history of the index rather
    than on its contents. It is as fast: both read the matrix once.
    """
    out: Vector = np.einsum("ij,j->i", matrix, q)
    return out


def full_scan_limit(dim: int) -> int:
    """The default ``full_scan_threshold`` for vectors of ``dim`` components: as many as
    fit in :data:`FULL_SCAN_BYTES` of float32.

    >>> full_scan_limit(384), full_scan_limit(1536)
    (131072, 32768)
    """
    return FULL_SCAN_BYTES // (4 * dim)


def _normalise_rows(matrix: Vector, *, overwrite: bool = False) -> Vector:
    """Each row scaled to unit length as :func:`_normalise` scales one vector, in blocks
    of :data:`BULK_CHUNK` rows (which stay in cache), into a new array or, with
    ``overwrite``, into ``matrix`` itself. One row's sum of squares does not depend on
    the other rows, so a vector gets the same bits alone or in any batch."""
    out = matrix if overwrite else np.empty_like(matrix, dtype=np.float32)
    for start in range(0, len(matrix), BULK_CHUNK):
        block = matrix[start : start + BULK_CHUNK]
        norms = np.sqrt((block * block).sum(axis=1, dtype=np.float32), dtype=np.float32)
        scale = np.float32(1.0) / (norms + np.float32(1e-30))
        np.multiply(block, scale[:, np.newaxis], out=out[start : start + BULK_CHUNK])
    return out


def _normalise(vector: Vector) -> Vector:
    # the same arithmetic as hnswlib's cosine space: v * (1 / (|v| + 1e-30)), in float32
    norm = np.float32(1.0) / (np.sqrt(np.dot(vector, vector), dtype=np.float32) + np.float32(1e-30))
    return cast(Vector, (vector * norm).astype(np.float32))


class VectorIndex:
    """An HNSW index over 16-byte memory ids, persisted in ``directory``.

    Build one with :meth:`open`. ``status`` says how the open went: ``"new"`` (nothing on
    disk for this embedder), ``"loaded"``, ``"missing"`` (some of the files are gone) or
    ``"damaged"`` (a file failed a check; ``reason`` says which). Every status but
    ``"loaded"`` leaves the index empty with ``watermark == 0``: the caller catches up from
    seq 0, i.e. rebuilds. Not thread-safe: one owner at a time.
    """

    directory: Path
    name: str
    dim: int
    M: int
    ef_construction: int
    ef_search: int
    seed: int
    status: Status
    reason: str | None
    watermark: int
    _files: IndexFiles
    _generation: int
    full_scan_threshold: int
    _index: Any  # hnswlib.Index (no type stubs), or None while no graph was needed
    _capacity: int  # rows the graph has room for (or would have: the same doubling)
    _ids: list[bytes]  # V1: label -> memory id
    _labels: dict[bytes, int]
    _deleted: set[int]
    # Invariant: the normalised vector of each label, rows 0 .. len(_ids) - 1 (a removed
    # label keeps its last vector); None only while a graph exists that holds them
    _matrix: Vector | None
    _dirty: bool
    _ef: int  # the ef hnswlib is set to now
    # a save running in the background (see save), and the error it ended with
    _saving: threading.Thread | None
    _save_error: Exception | None

    def __init__(self, *_: object, **__: object) -> None:
        raise TypeError("use VectorIndex.open(directory, name=..., dim=...)")

    # -- opening ---------------------------------------------------------------------------

    @classmethod
    def open(
        cls,
        directory: Path,
        *,
        name: str,
        dim: int,
        M: int = 32,
        ef_construction: int = 64,
        ef_search: int = 64,
        seed: int = 100,
        full_scan_threshold: int | None = None,
    ) -> VectorIndex:
        """Load the index for embedder ``name`` from ``directory``, or start an empty one.

        Never writes to disk. Damage is reported in ``status`` and ``reason``, not raised.
        The graph parameters' defaults (``M=32, ef_construction=64``) were chosen on the
        recall benchmark's HashEmbedder vectors, against ``M=16, ef_construction=200``:
        builds about 1.8x faster and finds more of the exact top 10 (docs/vector-index.md,
        "Quality and cost"). An index saved with other parameters does not load: the
        caller rebuilds it.

        ``full_scan_threshold`` is the most live vectors searched exactly (a matrix
        product) before the graph is used; by default :func:`full_scan_limit` of ``dim``
        (131,072 at 384 dimensions); 0 uses the graph from the first vector. Like
        ``ef_search`` it is a query setting: it is not saved, and an index saved with or
        without a graph loads under any threshold.

        Raises:
            ValidationError: an argument is out of range or of the wrong type.
        """
        if not isinstance(directory, (str, os.PathLike)):
            raise ValidationError("must be a path", field="directory")
        self = object.__new__(cls)
        self.directory = Path(directory)
        stem = file_stem(name)
        self.name = name
        self.dim = _check_int(dim, "dim", 1, MAX_DIM)
        self.M = _check_int(M, "M", 2, 2048)
        self.ef_construction = _check_int(ef_construction, "ef_construction", 1, 1 << 20)
        self.ef_search = _check_int(ef_search, "ef_search", 1, 1 << 20)
        self.seed = _check_int(seed, "seed", 0, (1 << 32) - 1)
        self.full_scan_threshold = (
            full_scan_limit(self.dim)
            if full_scan_threshold is None
            else _check_int(full_scan_threshold, "full_scan_threshold", 0, 1 << 40)
        )
        self._files = IndexFiles(
            directory=self.directory,
            name=name,
            stem=stem,
            dim=self.dim,
            M=self.M,
            ef_construction=self.ef_construction,
            seed=self.seed,
        )
        self._generation = 0
        self._saving, self._save_error = None, None
        try:
            loaded = self._files.load()
        except Unusable as why:
            self._reset()
            self.status = why.status
            self.reason = None if why.status == "new" else why.reason
        else:
            self._setup(loaded.index, loaded.matrix, loaded.capacity)
            self._generation = loaded.generation
            self._ids = loaded.ids
            self._labels = loaded.labels
            self._deleted = loaded.deleted
            self.watermark = loaded.watermark
            self._dirty = False
            self.status, self.reason = "loaded", None
        return self

    @staticmethod
    def saved_watermark(directory: Path, *, name: str) -> int | None:
        """The watermark the index saved for embedder ``name`` in ``directory`` records,
        read from its metadata alone (no data file is read or checked): what a writer
        needs to decide whether the saved index is fresh enough. None when there is no
        readable metadata; :meth:`open` still checks everything before using the files.
        """
        return files.saved_watermark(directory, name=name)

    def _reset(self) -> None:
        self._setup(None, np.zeros((0, self.dim), dtype=np.float32), INITIAL_CAPACITY)
        self._ids = []
        self._labels = {}
        self._deleted = set()
        self.watermark = 0
        self._generation = 0  # nothing usable on disk; save() picks a fresh generation
        self._dirty = False

    def _setup(self, index: Any, matrix: Vector | None, capacity: int) -> None:
        if index is not None:
            index.set_ef(self.ef_search)
            index.set_num_threads(1)
        self._ef = self.ef_search
        self._index = index
        self._matrix = matrix
        self._capacity = capacity

    # -- the graph -------------------------------------------------------------------------

    @property
    def exact(self) -> bool:
        """True while searches are exact: at most ``full_scan_threshold`` live vectors."""
        return len(self) <= self.full_scan_threshold

    @property
    def has_graph(self) -> bool:
        """True once the HNSW graph exists (built, or loaded from disk)."""
        return self._index is not None

    def _graph(self, progress: Callable[[int, int], None] | None = None) -> Any:
        """The hnswlib index, built from the matrix the first time it is asked for: by
        the upsert that takes the live vectors past ``full_scan_threshold``, or by the
        first graph search of an index loaded without a graph.

        Every label's vector goes in, in label order, with one thread (the same bytes
        in any process), removed labels then marked deleted; ``progress(done, total)``
        follows the insertion every :data:`BULK_CHUNK` vectors.
        """
        if self._index is not None:
            return self._index
        index = hnswlib.Index(space=SPACE, dim=self.dim)
        index.init_index(
            max_elements=self._capacity,
            M=self.M,
            ef_construction=self.ef_construction,
            random_seed=self.seed,
        )
        index.set_num_threads(1)
        matrix, total = self._vectors(), len(self._ids)
        for start in range(0, total, BULK_CHUNK):
            stop = min(start + BULK_CHUNK, total)
            index.add_items(matrix[start:stop], np.arange(start, stop), num_threads=1)
            if progress is not None:
                progress(stop, total)
        for label in sorted(self._deleted):
            index.mark_deleted(label)
        index.set_ef(self._ef)
        self._index = index
        return index


    @property
    def meta_path(self) -> Path:
        """The metadata file: the commit point of every save."""
        return self._files.meta_path

    def data_paths(self) -> tuple[Path, Path]:
        """The index (``.hnsw``, or ``.vec`` without a graph) and ids files of the
        generation this index was loaded from or saved to (a save running in the
        background is waited for)."""
        self._settle()
        data_path, generation = self._files.data_path, self._generation
        suffix = "vec" if self._index is None else "hnsw"
        return data_path(generation, suffix), data_path(generation, "ids")

    # -- reading ---------------------------------------------------------------------------

    def __len__(self) -> int:
        """The number of live (not removed) elements."""
        return len(self._ids) - len(self._deleted)

    def __contains__(self, memory_id: object) -> bool:
        label = self._labels.get(memory_id) if isinstance(memory_id, bytes) else None
        return label is not None and label not in self._deleted

    def __repr__(self) -> str:
        return (
            f"<VectorIndex {self.name!r} dim={self.dim} live={len(self)} "
            f"watermark={self.watermark} status={self.status!r}>"
        )

    @property
    def capacity(self) -> int:
        """Elements the graph has room for before the next (automatic) resize (with no
        graph, the room it would have: capacity doubles the same way)."""
        return self._capacity

    @property
    def dirty(self) -> bool:
        """True when the index changed since it was opened or last saved."""
        return self._dirty

    def ids(self) -> list[bytes]:
        """The live memory ids, in label order (the order they were first upserted)."""
        deleted = self._deleted
        return [mid for label, mid in enumerate(self._ids) if label not in deleted]

    def _check_vector(self, vector: object, field: str) -> Vector:
        if (
            type(vector) is np.ndarray
            and vector.dtype == np.float32
            and vector.shape == (self.dim,)
            and vector.flags.c_contiguous
        ):  # the common case (an embedder's row): only finiteness to check
            if not np.isfinite(vector).all():
                raise ValidationError("must be finite (no NaN or inf after float32)", field=field)
            return cast(Vector, vector)
        try:
            with np.errstate(over="ignore", invalid="ignore"):  # overflow becomes inf, below
                array = np.asarray(vector, dtype=np.float32)
        except (TypeError, ValueError) as exc:
            raise ValidationError(f"must be an array of numbers ({exc})", field=field) from None
        if array.shape != (self.dim,):
            raise ValidationError(f"must have shape ({self.dim},), got {array.shape}", field=field)
        if not np.isfinite(array).all():
            raise ValidationError("must be finite (no NaN or inf after float32)", field=field)
        return cast(Vector, np.ascontiguousarray(array))

    @staticmethod
    def _check_k(k: object) -> int:
        return _check_int(k, "k", 1, 1 << 31)

    @staticmethod
    def _check_allowed(allowed: object) -> Callable[[bytes], bool] | None:
        if allowed is not None and not callable(allowed):
            raise ValidationError("must be callable or None", field="allowed")
        return cast("Callable[[bytes], bool] | None", allowed)

    def search(
        self,
        query: Sequence[float] | npt.ArrayLike,
        k: int,
        *,
        allowed: Callable[[bytes], bool] | None = None,
    ) -> list[tuple[bytes, float]]:
        """The ``k`` approximate nearest live elements as ``(memory id, cosine similarity)``.

        Best first, ties broken by id; fewer than ``k`` only when fewer live elements pass
        ``allowed`` (called with a memory id; only ids it returns true for are returned).
        When hnswlib's graph search cannot fill the request (a selective filter, or parts of
        the graph cut off by removals) the answer comes from :meth:`exact_search` instead.

        Raises:
            ValidationError: a query of the wrong shape or not finite, ``k < 1``.
        """
        labels, sims = self.search_labels(query, k, allowed=allowed)
        return list(zip(_pick(self._ids, labels), sims, strict=True))

    def search_labels(
        self,
        query: Sequence[float] | npt.ArrayLike,
        k: int,
        *,
        allowed: Callable[[bytes], bool] | None = None,
        first: int | None = None,
        allowed_labels: Callable[[int], bool] | None = None,
    ) -> tuple[list[int], list[float]]:
        """:meth:`search`, answered with labels (see :meth:`id_of`) and similarities as
        two lists, for callers that map labels to something of their own.

        With ``first``, only the first ``first`` of the ``k`` are returned, followed by
        every other label tied with the ``first``-th (in id order, as all ties are), for a
        caller that wants fewer than the search found and breaks those ties its own way.
        ``allowed_labels`` is ``allowed`` asked of labels instead of ids (give one or
        neither): hnswlib calls it as it is, so a C-level callable such as a list's
        ``__getitem__`` keeps a filtered search from paying for Python calls.
        """
        q = self._check_vector(query, "query")
        k = self._check_k(k)
        allowed = self._check_allowed(allowed)
        if allowed_labels is not None:
            if allowed is not None:
                raise ValidationError("give allowed or allowed_labels, not both", field="allowed")
            if not callable(allowed_labels):
                raise ValidationError("must be callable or None", field="allowed_labels")
            by_label, labels_of = allowed_labels, self._labels

            def allowed(memory_id: bytes) -> bool:  # for exact_search, should it be needed
                return bool(by_label(labels_of[memory_id]))

        first = k if first is None else min(k, self._check_k(first))
        live = len(self)
        if live == 0:
            return [], []
        ids = self._ids
        test: Callable[[int], bool] | None = allowed_labels
        if allowed is not None and test is None:
            keep = allowed

            def test(label: int) -> bool:
                return bool(keep(ids[label]))

        if self.exact:
            return self._exact(_normalise(q), k, first, test)
        n = min(live, k + 1)
        found = self._knn(q, n, test)
        # ties running to the end of what came back: fetch more, so the cut at k is by id
        while found is not None and k < n < live and found[1][k - 1] == found[1][-1]:
            n = min(live, 2 * n)
            found = self._knn(q, n, test)
        if found is None and n > k:  # a filter may pass exactly k, or ties exhausted it
            found = self._knn(q, k, test)
        if found is None:
            return self._exact(_normalise(q), k, first, test)
        label_array, distances = found[0], found[1].tolist()  # float32 to float: exact
        if any(map(operator.gt, distances, itertools.islice(distances, 1, None))):
            # not ascending (never seen): sort it all by (-similarity, id)
            every, sims = label_array.tolist(), [1.0 - d for d in distances]
            order = sorted(range(len(every)), key=lambda i: (-sims[i], ids[every[i]]))
            labels, sims = [every[i] for i in order], [sims[i] for i in order]
            end = _tie_end(sims, first, k)
            return labels[:end], sims[:end]
        # hnswlib's order (distance ascending) is similarity descending; equal similarities
        # come out in no particular order, so each run of them is put in id order. Only the
        # first ``first`` and the whole run tied with the last of them are needed.
        end = min(first, len(distances))
        if end:
            last = 1.0 - distances[end - 1]
            while end < len(distances) and 1.0 - distances[end] == last:
                end += 1
        labels = label_array[:end].tolist()
        sims = [1.0 - d for d in itertools.islice(distances, end)]
        if any(map(operator.eq, sims, itertools.islice(sims, 1, None))):
            same = [i for i, equal in enumerate(map(operator.eq, sims, sims[1:])) if equal]
            for start, stop in _runs(same):
                labels[start:stop] = sorted(labels[start:stop], key=ids.__getitem__)
        del labels[k:], sims[k:]
        return labels, sims

    def id_of(self, label: int) -> bytes:
        """The memory id of a label :meth:`search_labels` returned."""
        return self._ids[label]

    def ids_of(self, start: int, stop: int) -> list[bytes]:
        """The memory ids of labels ``start .. stop - 1``, in label order (removed labels
        included: a label always names the same id)."""
        return self._ids[start:stop]

    def label_count(self) -> int:
        """How many labels have been given out (live or removed); labels are
        ``0 .. label_count() - 1`` and a label, once given, always names the same id."""
        return len(self._ids)

    def _knn(
        self, q: Vector, n: int, test: Callable[[int], bool] | None
    ) -> tuple[npt.NDArray[np.uint64], npt.NDArray[np.float32]] | None:
        """hnswlib's n nearest labels and distances (ascending), or None when it found
        fewer than n."""
        graph = self._graph()
        # twice the neighbours asked for: at 100,000 of the benches' vectors, the top 10 of
        # a search for 101 found 0.930 of the exact ones at ef 101 and 0.973 at ef 202
        # (0.38 -> 0.69 ms a query)
        ef = max(self.ef_search, 2 * n)
        if ef != self._ef:
            graph.set_ef(ef)
            self._ef = ef
        try:
            labels, distances = graph.knn_query(q, k=n, num_threads=1, filter=test)
        except RuntimeError:  # "Cannot return the results in a contiguous 2D array"
            return None
        return labels[0], distances[0]

    def search_among(
        self,
        query: Sequence[float] | npt.ArrayLike,
        k: int,
        ids: Sequence[bytes],
        *,
        first: int | None = None,
    ) -> tuple[list[int], list[float]]:
        """:meth:`search_labels` restricted to ``ids``, answered exactly: the stored
        vectors of those ids (the live ones; others are skipped) are scored against the
        query, best first, ties by id. For a filter that passes few memories, where a
        filtered graph search would visit most of the graph, or fail to fill ``k`` and
        scan every element. Similarities are float32 dot products of normalised vectors,
        as :meth:`exact_search` computes them. Reading a vector back from a loaded graph
        that no exact search has copied yet costs about 30 µs, so this pays up to about a
        thousand ids at 100,000 elements.

        Raises:
            ValidationError: a query of the wrong shape or not finite, ``k < 1``.
        """
        q = _normalise(self._check_vector(query, "query"))
        k = self._check_k(k)
        first = k if first is None else min(k, self._check_k(first))
        get, deleted = self._labels.get, self._deleted
        labels = [label for label in map(get, ids) if label is not None and label not in deleted]
        if not labels:
            return [], []
        if self._matrix is not None:  # the vectors, or exact_search's copy of the graph's
            vectors = self._matrix[labels]
        else:  # hnswlib's stored vectors, read back one by one (about 30 µs each)
            vectors = np.asarray(self._index.get_items(labels), dtype=np.float32)
        sims = _scores(vectors, q).tolist()
        ids_of = self._ids
        order = sorted(range(len(labels)), key=lambda i: (-sims[i], ids_of[labels[i]]))
        ranked = [sims[i] for i in order]
        end = _tie_end(ranked, first, k)
        return [labels[i] for i in order[:end]], ranked[:end]

    def exact_search(
        self,
        query: Sequence[float] | npt.ArrayLike,
        k: int,
        allowed: Callable[[bytes], bool] | None = None,
    ) -> list[tuple[bytes, float]]:
        """Brute-force cosine search over the stored vectors, same contract as :meth:`search`.

        The stored vectors are hnswlib's own (normalised, float32), read back with
        ``get_items`` the first time they are needed and kept up to date after that.

        Raises:
            ValidationError: a query of the wrong shape or not finite, ``k < 1``.
        """
        q = _normalise(self._check_vector(query, "query"))
        k = self._check_k(k)
        allowed = self._check_allowed(allowed)
        ids = self._ids
        test = None if allowed is None else (lambda label: bool(allowed(ids[label])))
        labels, sims = self._exact(q, k, k, test)
        return list(zip(_pick(ids, labels), sims, strict=True))

    def _exact(
        self, q: Vector, k: int, first: int, test: Callable[[int], bool] | None
    ) -> tuple[list[int], list[float]]:
        """The exact answer of :meth:`search_labels` for the normalised query ``q``: the
        ``k`` live labels passing ``test`` with the highest float32 dot products, best
        first, ties by id, cut as ``first`` says.

        One matrix product scores every label; ``test`` is asked only about the best
        ones, from the top down, looking four times as deep each round it falls short.
        """
        count, live = len(self._ids), len(self)
        if live == 0:
            return [], []
        sims = _scores(self._vectors(), q)
        if self._deleted:
            sims[np.fromiter(self._deleted, dtype=np.int64, count=len(self._deleted))] = -np.inf
        ids = self._ids
        look = min(live, max(2 * k, 64) if test is not None else k)
        while True:
            if look < count:
                threshold = np.partition(sims, count - look)[count - look]
                pool = np.flatnonzero(sims >= threshold)  # every label tied with the cut too
            else:
                threshold, pool = -np.inf, np.flatnonzero(sims > -np.inf)
            scores = sims[pool].tolist()
            chosen = [
                (-score, ids[label], label, score)
                for label, score in zip(pool.tolist(), scores, strict=True)
                if test is None or test(label)
            ]
            # labels outside the pool score below ``threshold``: with k chosen at or above
            # it, the first k are the exact answer; else look deeper
            if len(chosen) >= k or look >= live:
                break
            look = min(live, 4 * look)
        chosen.sort()
        ranked = [score for _, _, _, score in chosen[:k]]
        end = _tie_end(ranked, first, k)
        return [label for _, _, label, _ in chosen[:end]], ranked[:end]

    def _vectors(self) -> Vector:
        """The normalised vector of every label (a removed one's may be zeros), read back
        from a loaded graph the first time it is needed."""
        count = len(self._ids)
        if self._matrix is None:
            matrix = np.zeros((max(count, 1), self.dim), dtype=np.float32)
            live = [label for label in range(count) if label not in self._deleted]
            if live:
                matrix[live] = self._index.get_items(live)
            self._matrix = matrix
        return self._matrix[:count]

    def _store_rows(self, labels: npt.NDArray[np.int64], rows: Vector) -> None:
        """Write the normalised ``rows`` of ``labels`` into the matrix (if it exists: a
        loaded graph builds it when an exact search first needs it), growing it by
        doubling to hold every label given out."""
        if self._matrix is None:
            return
        count = len(self._ids)
        first, last = int(labels[0]), int(labels[-1])
        consecutive = last - first + 1 == len(labels) and bool((np.diff(labels) == 1).all())
        if self._matrix.shape[0] == 0 and consecutive and (first, last + 1) == (0, count):
            self._matrix = rows  # the first rows of an empty index (a fresh array): no copy
            return
        if count > self._matrix.shape[0]:
            grown = np.zeros((max(2 * self._matrix.shape[0], count), self.dim), dtype=np.float32)
            grown[: self._matrix.shape[0]] = self._matrix
            self._matrix = grown
        if consecutive:
            self._matrix[first : last + 1] = rows  # consecutive labels (new ids): a slice
        else:
            self._matrix[labels] = rows

    # -- writing ---------------------------------------------------------------------------

    def upsert(self, memory_id: bytes, vector: Sequence[float] | npt.ArrayLike) -> None:
        """Insert ``memory_id`` with ``vector``, or replace its vector (un-removing it).

        A new id takes the next label; capacity grows by doubling when full. hnswlib
        updates an existing label in place and repairs its neighbourhood, so searches see
        only the new vector. A zero vector is stored as is and has similarity 0 to all.

        Raises:
            ValidationError: an id that is not 16 bytes, a vector of the wrong shape or not
                finite.
        """
        mid = _check_id(memory_id)
        vec = self._check_vector(vector, "vector")
        self._insert([mid], vec[np.newaxis], None)

    def upsert_many(
        self,
        memory_ids: Sequence[bytes],
        vectors: Sequence[Vector] | npt.ArrayLike,
        *,
        progress: Callable[[int, int], None] | None = None,
        overwrite: bool = False,
    ) -> None:
        """:meth:`upsert` of each ``(memory_ids[i], vectors[i])`` in turn, in fewer calls.

        The index ends exactly as after the one-by-one upserts, byte for byte: hnswlib
        inserts the rows of one ``add_items`` call one after another, in order, when given
        one thread (more threads would make the graph depend on their timing), and the
        capacity is grown once, to what the doubling would reach. ``progress(done, total)``
        follows the insertion into the graph, every :data:`BULK_CHUNK` rows; without a
        graph, storing the rows is one step. When this call takes the live vectors past
        ``full_scan_threshold`` the graph is built from every vector, and ``progress``
        follows that build.

        With ``overwrite``, a caller that has no further use for ``vectors`` (a float32
        array) lets them be normalised in place, and the first rows of an empty index be
        that array itself: no second copy of them (150 MB at 100,000 vectors of 384
        dimensions, whose fresh pages alone cost about 0.3 s to touch).

        Raises:
            ValidationError: an id that is not 16 bytes, vectors of the wrong shape or not
                finite, or not one vector per id. Nothing is inserted then.
        """
        mids = [_check_id(memory_id) for memory_id in memory_ids]
        matrix = self._check_matrix(vectors, len(mids))
        if mids:
            self._insert(mids, matrix, progress, overwrite=overwrite and matrix is vectors)

    def _insert(
        self,
        mids: list[bytes],
        matrix: Vector,
        progress: Callable[[int, int], None] | None,
        *,
        overwrite: bool = False,
    ) -> None:
        """Upsert checked ids and vectors: labels for new ids, capacity doubled to hold
        them, the normalised vectors into the matrix and, if there is one, the graph.

        The graph is given the normalised vectors too, as when it is built from the
        matrix, so that every vector in it went through the same arithmetic whichever way
        it came in (hnswlib normalises them again, which is not exactly idempotent)."""
        self._settle()
        labels = self._labels
        fresh = dict.fromkeys(mid for mid in mids if mid not in labels)
        needed, capacity = len(self._ids) + len(fresh), self._capacity
        if needed > capacity:
            while capacity < needed:
                capacity = max(INITIAL_CAPACITY, capacity * 2)
            if self._index is not None:
                self._index.resize_index(capacity)
            self._capacity = capacity
        for mid in fresh:
            labels[mid] = len(self._ids)
            self._ids.append(mid)
        label_array = np.array([labels[mid] for mid in mids], dtype=np.int64)
        total = len(mids)
        normalised = _normalise_rows(matrix, overwrite=overwrite)
        if self._index is not None:
            for start in range(0, total, BULK_CHUNK):
                stop = min(start + BULK_CHUNK, total)
                self._index.add_items(
                    normalised[start:stop], label_array[start:stop], num_threads=1
                )
                if progress is not None:
                    progress(stop, total)
        # the last vector of an id given twice wins, as in the graph
        last = dict(zip(label_array.tolist(), range(total), strict=True))
        touched = np.fromiter(last, dtype=np.int64, count=len(last))
        if len(last) == total:  # no id twice: the rows in order
            self._store_rows(touched, normalised)
        else:
            rows = np.fromiter(last.values(), dtype=np.int64, count=len(last))
            self._store_rows(touched, normalised[rows])
        self._deleted.difference_update(last)
        self._dirty = True
        if self._index is None:
            if not self.exact:  # past the threshold: from now on, the graph
                self._graph(progress)
            elif progress is not None:
                progress(total, total)

    def _check_matrix(self, vectors: object, count: int) -> Vector:
        """``vectors`` as a C-contiguous float32 ``(count, dim)`` array of finite values."""
        try:
            with np.errstate(over="ignore", invalid="ignore"):  # overflow becomes inf, below
                matrix = np.ascontiguousarray(vectors, dtype=np.float32)
        except (TypeError, ValueError) as exc:
            raise ValidationError(f"must be arrays of numbers ({exc})", field="vectors") from None
        if count == 0 and matrix.size == 0:
            return cast(Vector, matrix.reshape(0, self.dim))
        if matrix.shape != (count, self.dim):
            raise ValidationError(
                f"must have shape ({count}, {self.dim}) (one vector per id), got {matrix.shape}",
                field="vectors",
            )
        if not np.isfinite(matrix).all():
            raise ValidationError("must be finite (no NaN or inf after float32)", field="vectors")
        return matrix

    def remove(self, memory_id: bytes) -> bool:
        """Mark ``memory_id`` removed; it keeps its label (V2). False if it was not live.

        Removing an unknown or already removed id is a no-op, so replaying a tombstone for a
        memory that was never embedded is harmless.

        Raises:
            ValidationError: an id that is not 16 bytes.
        """
        mid = _check_id(memory_id)
        label = self._labels.get(mid)
        if label is None or label in self._deleted:
            return False
        self._settle()
        if self._index is not None:
            self._index.mark_deleted(label)
        self._deleted.add(label)
        self._dirty = True
        return True

    def save(self, watermark: int, *, background: bool = False) -> None:
        """Persist the index as reflecting journal seq ``watermark``, atomically (V3).

        Writes ``<stem>.<gen>.vec`` (or ``.hnsw`` with a graph) and ``<stem>.<gen>.ids``
        for a new generation, then the metadata, each through a temporary file, fsync and
        rename; then deletes the older generations' files. Creates ``directory`` if needed.

        With ``background=True`` an index without a graph is written by a thread while the
        caller goes on (a catch-up answers its recall without waiting for 150 MB to reach
        the disk): the index counts as saved at once, and the next call that changes it,
        saves it or names its files, or :meth:`wait`, first waits for the write to end.
        The thread reads the vectors in place (the ids and removed labels are copied),
        which is why changes wait. Not with a graph: hnswlib's ``save_index`` holds the
        GIL, so there is nothing to gain.

        Raises:
            ValidationError: ``watermark`` is not a natural number.
            OSError: the files cannot be written (the previous save stays intact); for a
                background save, raised by :meth:`wait` or the next save.
        """
        watermark = _check_int(watermark, "watermark", 0, (1 << 63) - 1)
        self.wait()
        self.watermark = watermark
        # what is saved, taken now: a search may build the graph while a thread writes
        write = functools.partial(
            self._write,
            self._index,
            None if self._index is not None else self._vectors(),
            list(self._ids),
            set(self._deleted),
            self._capacity,
            watermark,
        )
        if not background or self._index is not None:
            write()
            return
        self._dirty = False  # a failed write makes it dirty again (wait)

        def in_background() -> None:
            try:
                write()
            except Exception as exc:  # handed to whoever waits
                self._save_error = exc

        self._saving = threading.Thread(target=in_background, name="cortexgraph-vector-save")
        self._saving.start()

    def _write(
        self,
        index: Any,
        matrix: Vector | None,
        ids: list[bytes],
        deleted: set[int],
        capacity: int,
        watermark: int,
    ) -> None:
        generation = self._files.save(
            index,
            matrix,
            ids,
            deleted,
            capacity=capacity,
            watermark=watermark,
            after=self._generation,
        )
        self._generation = generation
        self._dirty = False
        self._files.remove_other_generations(generation)

    def wait(self) -> None:
        """Wait for a save running in the background (if any) to end.

        Raises:
            OSError: the background save failed; the index is dirty again, so the next
                save writes it.
        """
        thread = self._saving
        if thread is None:
            return
        thread.join()
        self._saving = None
        error, self._save_error = self._save_error, None
        if error is not None:
            self._dirty = True
            raise error

    def _settle(self) -> None:
        """:meth:`wait`, before a change: a failed background save is a warning there,
        not an error of the change (the index is derived, and dirty again: the next
        save, at the latest on close, writes it and reports a failure)."""
        try:
            self.wait()
        except OSError as exc:
            warnings.warn(
                f"saving the vector index in the background failed ({exc}); it is saved"
                " again at the next save",
                RuntimeWarning,
                stacklevel=3,
            )
