"""The vector state of one open store: its hnswlib index, caught up with the journal.

Vectors are cached in the ``emb`` table by (embedder name, content hash) (:func:`content_key`);
the index (:mod:`cortexgraph.vector.hnsw`) is persisted under ``<store>/vectors/`` and
catches up with the journal from its watermark (:meth:`VectorState.sync`), taking vectors
from the cache and embedding only what no one cached. Every call of an embedder goes
through ``embed.base.embed_checked``.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, cast

import blake3
import numpy as np
import numpy.typing as npt

from ..core.codec import decode_unchecked
from ..core.fusion import embed_text, embed_text_of_body
from ..core.journal import head_ids
from ..core.keys import seq_key, version_key
from ..core.state import HeadState, VersionState
from ..embed import Embedder
from ..embed.base import embed_checked
from ..errors import CorruptionError, CortexError
from ..index import ColumnIndex, Rows
from ..store.env import Environment
from ..store.txn import ReadTxn
from .parallel import EMBED_BATCH, EmbedWorker, worker_capacity

if TYPE_CHECKING:
    from .hnsw import VectorIndex

__all__ = [
    "CACHE_BATCH",
    "EMBED_BATCH",
    "READ_CHUNK",
    "SAVE_EVERY",
    "SAVE_FRACTION",
    "Progress",
    "VectorState",
    "any_cached",
    "cache_vectors",
    "cached_vector",
    "cached_vectors",
    "content_key",
    "embed_and_cache",
    "embed_pending",
    "index_directory",
    "live_texts",
    "save_due",
    "uncached",
]

#: ``progress(done, total)``, called as long work advances
Progress = Callable[[int, int], None]

#: a writer saves its vector index once the saved one lacks this many journal entries,
#: or a :data:`SAVE_FRACTION` of the entries it holds if that is more (at the next
#: recall, or after the batch with ``embed_on_write``); a reader loading it catches up
#: at most that many memories, from the cache (about 15 µs each without a graph)
SAVE_EVERY = 1_000
#: a save rewrites the whole index (150 MB at 100,000 vectors of 384 dimensions): with a
#: lag that grows with the index, n writes cost O(n) bytes of saves, not O(n^2)
SAVE_FRACTION = 4
#: a catch-up reads its texts this many memories at a time, handing each chunk to its
#: worker (if any) as soon as it is read
READ_CHUNK = 4096
#: a catch-up writes what it embedded to the cache this many rows at a time (a write
#: transaction for every 256 cost 0.4 s of commits at 100,000 memories)
CACHE_BATCH = 4096


def save_due(last: int, saved: int | None) -> bool:
    """Whether an index saved at journal seq ``saved`` (None: none saved) lags the
    journal's end ``last`` enough to save it again: by :data:`SAVE_EVERY` entries, or by
    ``1 / SAVE_FRACTION`` of ``saved`` when that is more.

    >>> save_due(999, None), save_due(1_000, None), save_due(41_000, 40_000)
    (False, True, False)
    >>> save_due(50_000, 40_000)
    True
    """
    base = saved or 0
    return last - base >= max(SAVE_EVERY, base // SAVE_FRACTION)


def content_key(name: str, text: str) -> bytes:
    """The ``emb`` cache key: embedder name, NUL, BLAKE3 of the embedded text."""
    return name.encode("utf-8") + b"\0" + blake3.blake3(text.encode("utf-8")).digest()


def index_directory(env: Environment) -> Path:
    """Where the store's vector index is saved."""
    return Path(env.path) / "vectors"


def live_texts(txn: ReadTxn, ids: Iterable[bytes]) -> tuple[list[bytes], list[str], set[bytes]]:
    """The active memories of ``ids``, in order, with the text to embed of each
    (:func:`core.fusion.embed_text`), and the set of those that are not active.

    The text is read from the fields of the stored body (:func:`embed_text_of_body`)
    rather than from the memory rebuilt and checked for canonical form (J6): that check
    belongs to reads that return records, and to ``verify``, and cost about 13 µs a
    memory, most of a catch-up's reading. A body whose fields are not what a valid one
    holds is rebuilt, which raises ``CorruptionError`` naming the damage. The answer is
    two lists rather than a list of pairs: 100,000 pairs are 100,000 objects for the
    garbage collector to walk, several times over as they pile up.
    """
    live: list[bytes] = []
    texts: list[str] = []
    inactive: set[bytes] = set()
    get, head_of, version_of = txn.get, HeadState.decode, VersionState.decode
    for memory_id in ids:
        raw = get("heads", memory_id)
        if raw is None:
            raise CortexError(f"memory {memory_id.hex()} vanished from the store")
        head = head_of(raw)
        if head.status != "active":
            inactive.add(memory_id)
            continue
        version = get("versions", version_key(memory_id, head.head))
        if version is None:
            raise CortexError(f"memory {memory_id.hex()} has no head version")
        state = version_of(version)
        body = decode_unchecked(state.body, what="a version record")
        text = embed_text_of_body(body, head.ns) if type(body) is dict else None
        if text is None:
            text = embed_text(state.memory(), head.ns)  # raises, naming the damage
        live.append(memory_id)
        texts.append(text)
    return live, texts, inactive


def any_cached(txn: ReadTxn, name: str) -> bool:
    """Whether the ``emb`` cache holds any vector of embedder ``name``."""
    prefix = name.encode("utf-8") + b"\0"
    with txn.cursor("emb") as cur:
        return bool(cur.set_range(prefix)) and bytes(cur.key()).startswith(prefix)


def cached_vector(txn: ReadTxn, key: bytes, dim: int) -> npt.NDArray[np.float32] | None:
    """The cached vector under ``key``, or None (a row of the wrong size counts as none)."""
    raw = txn.get("emb", key)
    if raw is None or len(raw) != 4 * dim:
        return None
    return np.frombuffer(raw, dtype="<f4")


def cached_vectors(
    txn: ReadTxn, keys: Iterable[bytes], name: str, dim: int
) -> dict[bytes, npt.NDArray[np.float32]]:
    """The cached vectors of ``keys`` (cache keys of embedder ``name``) that the ``emb``
    cache holds; rows of the wrong size count as missing. Nothing is looked up past a
    first look when the cache holds no vector of ``name`` (a store whose writers never
    embedded)."""
    if not any_cached(txn, name):
        return {}
    found: dict[bytes, npt.NDArray[np.float32]] = {}
    for key in keys:
        vector = cached_vector(txn, key, dim)
        if vector is not None:
            found[key] = vector
    return found


def uncached(txn: ReadTxn, ids: Iterable[bytes], embedder: Embedder) -> dict[bytes, str]:
    """Cache key -> text of the active memories of ``ids`` whose vector is not cached."""
    name, dim = embedder.name, embedder.dim
    pending: dict[bytes, str] = {}
    for text in live_texts(txn, ids)[1]:
        key = content_key(name, text)
        if key not in pending and cached_vector(txn, key, dim) is None:
            pending[key] = text
    return pending


def embed_pending(
    embedder: Embedder, pending: Mapping[bytes, str]
) -> dict[bytes, npt.NDArray[np.float32]]:
    """Cache key -> vector of the texts of ``pending`` (cache key -> text)."""
    keys = list(pending)
    matrix = embed_checked(embedder, [pending[key] for key in keys])
    return dict(zip(keys, matrix, strict=True))


def cache_vectors(env: Environment, vectors: Mapping[bytes, npt.NDArray[np.float32]]) -> None:
    """Store ``vectors`` (cache key -> vector) in the ``emb`` cache, in a write
    transaction of their own (nothing is cached on a read-only handle)."""
    env.write_cache("emb", [(key, vector.tobytes()) for key, vector in vectors.items()])


def embed_and_cache(
    env: Environment, embedder: Embedder, pending: Mapping[bytes, str]
) -> dict[bytes, npt.NDArray[np.float32]]:
    """Embed the texts of ``pending`` (cache key -> text) and cache the vectors."""
    vectors = embed_pending(embedder, pending)
    cache_vectors(env, vectors)
    return vectors


def _rows(
    matrix: npt.NDArray[np.float32], keys: list[bytes], rows: list[int]
) -> list[tuple[bytes, bytes]]:
    """Cache rows: each key with the bytes of its row of ``matrix`` (C-contiguous), as
    views (LMDB copies them into its pages; copying them into bytes first cost 0.13 s at
    100,000)."""
    raw = matrix.reshape(-1).view(np.uint8).data  # rows one after another
    size = matrix.shape[1] * matrix.itemsize
    views = [raw[row * size : row * size + size] for row in rows]
    # LMDB takes a memoryview wherever it takes bytes
    return list(zip(keys, cast("list[bytes]", views), strict=True))


class VectorState:
    """One handle's vector index and the embedder that fills it.

    The index is loaded from ``<store>/vectors/`` when first needed and kept for the
    handle's life; :meth:`sync` catches it up with the journal, taking vectors from the
    ``emb`` cache and embedding only what no one cached. A read-only handle cannot cache
    what it embeds nor save the index: what it embeds lives in its in-memory index only.
    """

    def __init__(self, env: Environment, embedder: Embedder) -> None:
        from .hnsw import VectorIndex  # here, not above: hnswlib loads on first use

        self.env = env
        self.embedder = embedder
        self.index: VectorIndex = VectorIndex.open(
            index_directory(env), name=embedder.name, dim=embedder.dim
        )
        #: the watermark of the index saved on disk (None: none saved)
        self.saved: int | None = self.index.watermark if self.index.status == "loaded" else None
        #: column-index row of each vector label (-1: none), for the numbering of the
        #: column index's build ``_rows_build``
        self._rows: npt.NDArray[np.int64] = np.zeros(0, dtype=np.int64)
        self._rows_build = -1

    def _label_rows(self, columns: ColumnIndex) -> npt.NDArray[np.int64]:
        """The column-index row of every label given out so far (-1: none known)."""
        count = self.index.label_count()
        if self._rows_build != columns.builds:
            self._rows, self._rows_build = np.zeros(0, dtype=np.int64), columns.builds
        if len(self._rows) < count:
            ids = self.index.ids_of(len(self._rows), count)
            fresh = np.fromiter(
                map(columns.row_of.get, ids, itertools.repeat(-1)), dtype=np.int64, count=len(ids)
            )
            self._rows = np.concatenate((self._rows, fresh))
        return self._rows

    def label_filter(self, columns: ColumnIndex, passing: Rows) -> Callable[[int], bool]:
        """Whether a label's memory is among the column-index rows ``passing``, as a
        C-level callable (a bool array's ``item``) for hnswlib's filter: a filtered
        search asks it about hundreds to thousands of labels."""
        rows = self._label_rows(columns)
        passes = np.zeros(len(columns.ids), dtype=np.bool_)
        passes[passing] = True
        ok = np.zeros(len(rows), dtype=np.bool_)
        known = rows >= 0
        ok[known] = passes[rows[known]]
        test: Callable[[int], bool] = ok.item
        return test

    def rows_of(self, labels: list[int], columns: ColumnIndex) -> list[int]:
        """The column-index rows of the memories vector ``labels`` name."""
        rows = self._label_rows(columns)
        found: list[int] = list(map(rows.item, labels))
        if -1 in found:  # not mapped yet when first seen
            for i, row in enumerate(found):
                if row < 0:
                    memory_id = self.index.id_of(labels[i])
                    mapped = columns.row_of.get(memory_id)
                    if mapped is None:
                        raise CorruptionError(
                            f"the vector index holds memory {memory_id.hex()}, which the "
                            "store lacks"
                        )
                    rows[labels[i]] = found[i] = mapped
        return found

    def sync(
        self,
        txn: ReadTxn,
        columns: ColumnIndex,
        progress: Progress | None = None,
        *,
        indexing: Progress | None = None,
    ) -> int:
        """Bring the index to the journal's end: index what changed, drop what left.

        Vectors come from the ``emb`` cache; the rest are embedded (and cached, on a
        read-write handle). ``progress(done, total)`` follows the embedding, if any, and
        ``indexing(done, total)`` the insertion into the graph (in steps of
        :data:`~cortexgraph.vector.hnsw.BULK_CHUNK`), if there is anything to insert.

        Returns:
            How many texts were embedded (0 when the cache held every vector).
        """
        last = txn.last_seq()
        index = self.index
        if index.watermark == last:
            return 0
        if index.watermark > last or index.watermark == 0:
            todo = {columns.ids[row]: None for row in columns.active(columns.all_rows())}
            gone: set[bytes] = set(index.ids()) - set(todo)
        else:
            todo, gone = self._changed(txn, index.watermark), set()
        worker = self._worker(txn, len(todo))
        try:
            ids, texts, inactive = self._read_texts(txn, list(todo), worker)
            gone |= inactive
            vectors, embedded = self._vectors(txn, texts, progress, worker)
        finally:
            if worker is not None:
                worker.end()
        index.upsert_many(ids, vectors, progress=indexing, overwrite=True)
        for memory_id in sorted(gone):
            if memory_id in index:
                index.remove(memory_id)
        index.watermark = last
        if save_due(last, self.saved):
            self.save(background=True)  # the recall need not wait for the disk
        return embedded

    def _changed(self, txn: ReadTxn, since: int) -> dict[bytes, None]:
        """The memories whose head changed after journal seq ``since``."""
        todo: dict[bytes, None] = {}
        with txn.cursor("journal") as cur:
            if cur.set_range(seq_key(since + 1)):
                for _, value in cur:
                    entry = decode_unchecked(bytes(value), what="a journal entry")
                    todo.update(dict.fromkeys(head_ids(entry["op"], entry)))
        return todo

    def _worker(self, txn: ReadTxn, count: int) -> EmbedWorker | None:
        """A worker to embed part of the ``count`` texts of a catch-up, when they are
        enough and none is cached (a store whose writers never embedded: a cache that
        holds some has most, and a worker would embed what the cache holds)."""
        capacity = worker_capacity(self.embedder, count)
        if not capacity or any_cached(txn, self.embedder.name):
            return None
        return EmbedWorker.start(self.embedder, capacity)

    def _read_texts(
        self, txn: ReadTxn, todo: list[bytes], worker: EmbedWorker | None
    ) -> tuple[list[bytes], list[str], set[bytes]]:
        """:func:`live_texts` of ``todo``, giving ``worker`` (if any) each chunk of
        :data:`READ_CHUNK` texts as soon as it is read, until it has its fill."""
        if worker is None:
            return live_texts(txn, todo)
        ids: list[bytes] = []
        texts: list[str] = []
        inactive: set[bytes] = set()
        for start in range(0, len(todo), READ_CHUNK):
            chunk_ids, chunk_texts, chunk_inactive = live_texts(
                txn, todo[start : start + READ_CHUNK]
            )
            worker.send(chunk_texts)
            ids += chunk_ids
            texts += chunk_texts
            inactive |= chunk_inactive
        worker.flush()  # what it has yet to take, before this process embeds its part
        return ids, texts, inactive

    def _vectors(
        self,
        txn: ReadTxn,
        texts: list[str],
        progress: Progress | None,
        worker: EmbedWorker | None = None,
    ) -> tuple[npt.NDArray[np.float32], int]:
        """Vectors for ``texts``, one row each: from the ``emb`` cache, else embedded (and
        cached); and how many texts were embedded.

        The texts are keyed (:func:`content_key`) and each distinct key is looked up
        once (none when the cache holds no vector of this embedder). ``worker`` (if any)
        embeds the first ``worker.sent`` texts meanwhile
        (:mod:`~cortexgraph.vector.parallel`); this process embeds the other texts not
        cached, then the worker's last rows while it has not reached them, and takes the
        rest from it (:meth:`~cortexgraph.vector.parallel.EmbedWorker.collect`). The rows
        embedded go into the cache in key order, :data:`CACHE_BATCH` to a transaction
        (see ``Environment.write_cache``), read from the answer itself: one matrix of the
        answer's size is all that is allocated (at 100,000 texts of 384 dimensions,
        150 MB, whose fresh pages alone cost about 0.3 s to touch).
        """
        name, dim = self.embedder.name, self.embedder.dim
        keys = [content_key(name, text) for text in texts]
        place = {key: row for row, key in enumerate(keys)}  # a row of each distinct text
        out = np.empty((len(keys), dim), dtype=np.float32)
        cached = cached_vectors(txn, place, name, dim)
        for key, vector in cached.items():
            out[place[key]] = vector
        missing = sorted(key for key in place if key not in cached)
        if missing:
            sent = worker.sent if worker is not None else 0  # texts[:sent]: the worker's
            total = len(missing)
            here = [row for row in map(place.__getitem__, missing) if row >= sent]
            embedded, shown = 0, -1  # texts embedded by this process; the last count shown

            def report(by_worker: int) -> None:
                nonlocal shown
                done = min(total, embedded + by_worker)
                if progress is not None and done != shown:
                    progress(done, total)
                    shown = done

            report(0)
            for start in range(0, len(here), EMBED_BATCH):
                rows = here[start : start + EMBED_BATCH]
                out[rows] = embed_checked(self.embedder, [texts[row] for row in rows])
                embedded += len(rows)
                report(worker.poll() if worker is not None else 0)
            if worker is not None:
                helper = worker

                def embed_here(start: int, stop: int) -> None:
                    nonlocal embedded
                    out[start:stop] = embed_checked(self.embedder, texts[start:stop])
                    embedded += stop - start
                    report(helper.done)

                helper.collect(out[:sent], embed_here, report)
            rows_of = [place[key] for key in missing]
            for start in range(0, total, CACHE_BATCH):
                stop = min(start + CACHE_BATCH, total)
                self.env.write_cache("emb", _rows(out, missing[start:stop], rows_of[start:stop]))
            report(total)  # the bar ends full, whichever process embedded the last rows
        if len(place) != len(keys):  # a text given twice: its other rows
            for row, key in enumerate(keys):
                if place[key] != row:
                    out[row] = out[place[key]]
        return out, len(missing)

    def save(self, *, background: bool = False) -> None:
        """Save the index if it changed since it was loaded or saved (never on a read-only
        handle: what a reader embedded is kept in memory only), waiting for a save left
        running in the background, or, with ``background``, leaving this one running
        (see :meth:`VectorIndex.save`).

        Raises:
            OSError: the index could not be saved (now, or by the background save).
        """
        index = self.index
        index.wait()
        if not self.env.readonly and (index.dirty or index.watermark != self.saved):
            if background:
                index.save(index.watermark, background=True)
            else:
                index.save(index.watermark)
            self.saved = index.watermark

    def query(self, text: str) -> npt.NDArray[np.float32]:
        """A query's vector: the text embedded as it is, without the ``[type] [ns]`` prefix
        memories get (measured: prefixing questions lowered vector recall on LoCoMo)."""
        first: npt.NDArray[np.float32] = embed_checked(self.embedder, [text])[0]
        return first
