"""The files of a persisted vector index: their layout, their checks, and saving and loading.

The index (:class:`~cortexgraph.vector.hnsw.VectorIndex`, which searches it) is derived
state. It records the journal seq it reflects (its ``watermark``); the
recall layer catches it up from there, and rebuilds it from the embedding cache whenever
:meth:`VectorIndex.open` reports anything but ``"loaded"``. Damage never raises: a file that
fails any check gives an empty index with ``watermark == 0``.

Files, in ``directory`` (the recall layer passes ``<root>/<actor>/vectors/``), named after
``stem = file_stem(name)`` of the embedder name, ``gen`` a decimal generation number::

    <stem>.json          metadata, canonical JSON, written last (the commit point)
    <stem>.<gen>.hnsw    kind "hnsw": hnswlib's own index file (``save_index``), or
    <stem>.<gen>.vec     kind "flat" (no graph built yet): the normalised vectors in label
                         order, ``dim`` little-endian float32 each, no header
    <stem>.<gen>.ids     memory ids in label order, 16 bytes each, no header:

        offset 0         16          32               16*(count-1)
               +---------+-----------+-- ... --+------------------+
               | label 0 | label 1   |         | label count-1    |
               +---------+-----------+-- ... --+------------------+

    metadata: {"M", "blake3", "capacity", "count", "deleted", "dim", "ef_construction",
               "files": {"ids": {"blake3", "size"}, "index": {"blake3", "size"}},
               "format", "generation", "kind", "name", "seed", "space", "watermark"}

``files.index`` names the ``.hnsw`` or the ``.vec`` file, as ``kind`` says.

``json.dumps(..., sort_keys=True, separators=(",", ":"))`` plus a newline is the only accepted
spelling; ``"blake3"`` is the BLAKE3 of that spelling of every other field.

Invariants:

- V1 labels are dense from 0 in the order ids were first upserted; label ``i``'s id is at
  offset ``16 * i`` of the ids file and every id appears once.
- V2 a removed id keeps its label, marked deleted; neither search returns it; upserting it
  again reuses its label and un-deletes it.
- V3 ``save`` writes a new generation of data files (temporary name, fsync, rename) and then
  the metadata (same), so a crash leaves the old or the new generation whole; ``open`` checks
  the metadata's own checksum, its parameters and each data file's size and BLAKE3 before
  hnswlib reads a byte, and yields an empty index (``"missing"`` / ``"damaged"``), never a
  partial one.
- V4 inserts are single-threaded with a fixed seed: the same history of upserts, removes,
  saves and opens gives the same data files, byte for byte, and the same search results.
- V5 with at most ``full_scan_threshold`` live vectors searches are exact and no graph
  exists (kind ``"flat"``: the ``.vec`` file); the upsert that passes it builds the graph
  from every vector in label order (kind ``"hnsw"`` from then on).

hnswlib does not persist the state of its level generator: an index reopened from disk draws
the levels of later inserts from a generator reseeded to a fixed default, so "build 1,000,
save, reopen, add 1,000" and "build 2,000" are each reproducible but not byte-identical to
each other (see ``docs/vector-index.md``).
"""

from __future__ import annotations

import itertools
import json
import os
import re
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Literal, TypeVar, cast

import attrs
import blake3
import hnswlib
import numpy as np
import numpy.typing as npt

from ..errors import ValidationError
from ..store.journal_log import fsync_dir

__all__ = ["FORMAT", "SPACE", "IndexFiles", "Loaded", "Status", "Unusable", "file_stem"]

FORMAT = 2  # 2: the "kind" field and flat indexes (format 1 had only hnswlib files)
SPACE = "cosine"
ID_SIZE = 16
INITIAL_CAPACITY = 1024
MAX_STEM = 160  # "<stem>.<gen>.hnsw.tmp" stays well inside a 255-byte file name
_META_KEYS = frozenset(
    {
        "M",
        "blake3",
        "capacity",
        "count",
        "deleted",
        "dim",
        "ef_construction",
        "files",
        "format",
        "generation",
        "kind",
        "name",
        "seed",
        "space",
        "watermark",
    }
)


_T = TypeVar("_T")
Status = Literal["new", "loaded", "missing", "damaged"]
Kind = Literal["flat", "hnsw"]
_SUFFIX: dict[str, str] = {"flat": "vec", "hnsw": "hnsw"}

def capacity_for(count: int) -> int:
    """The capacity of an index that has given out ``count`` labels: it starts at
    :data:`INITIAL_CAPACITY` and doubles whenever an upsert needs room.

    >>> capacity_for(0), capacity_for(1024), capacity_for(1025)
    (1024, 1024, 2048)
    """
    capacity = INITIAL_CAPACITY
    while capacity < count:
        capacity *= 2
    return capacity


def file_stem(name: str) -> str:
    """The file-system-safe stem of the embedder ``name``; distinct names, distinct stems.

    ``a``-``z``, ``0``-``9`` and ``-`` stay as they are; an upper-case letter becomes ``_``
    and its lower-case form (so case-insensitive file systems keep names apart); every other
    character becomes ``%xx`` per UTF-8 byte. ``_`` and ``%`` are never literal, so the
    mapping can be decoded and is one-to-one; ``.`` is always escaped, so the stem never
    contains the separator of the data file names.

    >>> file_stem("all-MiniLM-L6-v2"), file_stem("http:text-embedding-3-small")
    ('all-_mini_l_m-_l6-v2', 'http%3atext-embedding-3-small')

    Raises:
        ValidationError: ``name`` is not a non-empty string, or its stem is too long.
    """
    if not isinstance(name, str) or not name:
        raise ValidationError("must be a non-empty string", field="name")
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        raise ValidationError("must be valid Unicode (no lone surrogates)", field="name") from None
    parts: list[str] = []
    for ch in name:
        if "a" <= ch <= "z" or "0" <= ch <= "9" or ch == "-":
            parts.append(ch)
        elif "A" <= ch <= "Z":
            parts.append("_" + ch.lower())
        else:
            parts.extend(f"%{byte:02x}" for byte in ch.encode("utf-8"))
    stem = "".join(parts)
    if len(stem) > MAX_STEM:
        raise ValidationError(
            f"is too long for a file name ({len(stem)} > {MAX_STEM})", field="name"
        )
    return stem


class Unusable(Exception):
    """Why the files on disk cannot be loaded; carries the status to report."""

    def __init__(self, status: Status, reason: str) -> None:
        super().__init__(reason)
        self.status: Status = status
        self.reason = reason

def _encode_meta(meta: dict[str, Any]) -> bytes:
    text = json.dumps(meta, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return (text + "\n").encode("ascii")


def _digest(data: bytes | memoryview) -> str:
    return blake3.blake3(data).hexdigest()


def _read_file(path: Path, *, sync: bool = False) -> tuple[str, int, bytes]:
    """BLAKE3 hex digest, size and first 64 bytes of ``path``, streamed (fsynced if asked)."""
    hasher = blake3.blake3()
    size = 0
    head = b""
    with open(path, "rb+" if sync else "rb") as f:
        while chunk := f.read(1 << 20):
            if size < 64:
                head += chunk[: 64 - size]
            hasher.update(chunk)
            size += len(chunk)
        if sync:
            os.fsync(f.fileno())
    return hasher.hexdigest(), size, head


def _read_matrix(path: Path, count: int, dim: int) -> tuple[npt.NDArray[np.float32], str] | None:
    """A flat index's ``.vec`` file read straight into a float32 matrix of at least one
    row (``count`` vectors of ``dim`` floats, then zeros), without a copy of the file's
    bytes, and the BLAKE3 hex digest of those bytes. None when the file is not exactly
    that size: the caller then reads it as bytes, for its checks to name the damage."""
    size = 4 * dim * count
    if path.stat().st_size != size:
        return None
    matrix = np.zeros((max(count, 1), dim), dtype=np.float32)
    view = matrix.data.cast("B")[:size]
    with open(path, "rb", buffering=0) as f:
        done = 0
        while done < size:
            read = f.readinto(view[done:])
            if not read:
                return None  # the file shrank meanwhile
            done += read
    digest = _digest(view)
    if sys.byteorder != "little":  # the file's floats are little-endian
        matrix.byteswap(inplace=True)
    return matrix, digest


def _read_data(path: Path, kind: str, reader: Callable[[Path], _T]) -> _T:
    """``reader(path)``, with a missing or unreadable file turned into its status."""
    try:
        return reader(path)
    except FileNotFoundError:
        raise Unusable("missing", f"the {kind} file {path.name} is missing") from None
    except OSError as exc:
        raise Unusable("damaged", f"cannot read {path.name}: {exc}") from None


def _write_synced(path: Path, data: bytes | memoryview) -> None:
    """Write ``data`` (bytes, or a view of an array's bytes, not copied) to ``path`` and
    fsync it."""
    with open(path, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())



@attrs.frozen(kw_only=True)
class Loaded:
    """An index read from disk, every check passed (V1, V3)."""

    generation: int
    index: Any  # hnswlib.Index (no type stubs), None for a flat index
    matrix: npt.NDArray[np.float32] | None  # a flat index's vectors, None with a graph
    capacity: int
    ids: list[bytes]  # V1: label -> memory id
    labels: dict[bytes, int]
    deleted: set[int]
    watermark: int


@attrs.frozen(kw_only=True)
class IndexFiles:
    """The files of embedder ``name``'s index in ``directory`` (named after ``stem``, its
    :func:`file_stem`), and the parameters they must record: files saved with other
    parameters are ``"damaged"`` for this index."""

    directory: Path
    name: str
    stem: str
    dim: int
    M: int
    ef_construction: int
    seed: int

    @property
    def meta_path(self) -> Path:
        """The metadata file: the commit point of every save."""
        return self.directory / f"{self.stem}.json"

    def data_path(self, generation: int, kind: str) -> Path:
        """The ``kind`` (``"hnsw"``, ``"vec"`` or ``"ids"``) data file of ``generation``."""
        return self.directory / f"{self.stem}.{generation}.{kind}"

    def own_files(self) -> dict[Path, int | None]:
        """Files in ``directory`` that belong to this embedder, with their generation."""
        pattern = re.compile(re.escape(self.stem) + r"\.(?:(\d+)\.(?:hnsw|vec|ids)|json)(?:\.tmp)?")
        found: dict[Path, int | None] = {}
        try:
            entries = list(self.directory.iterdir())
        except (FileNotFoundError, NotADirectoryError):
            return found
        for path in entries:
            m = pattern.fullmatch(path.name)
            if m:
                found[path] = int(m.group(1)) if m.group(1) else None
        return found

    def load(self) -> Loaded:
        """Read and check the saved index (V3): the metadata's own checksum and parameters,
        then each data file's size and BLAKE3, before hnswlib reads a byte.

        Raises:
            Unusable: nothing is saved (``"new"``), a file is gone (``"missing"``) or fails
                a check (``"damaged"``); the reason names which.
        """
        try:
            raw = self.meta_path.read_bytes()
        except FileNotFoundError:
            if self.own_files():
                raise Unusable("missing", "the metadata file is missing") from None
            raise Unusable("new", "no index on disk for this embedder") from None
        except OSError as exc:
            raise Unusable("damaged", f"cannot read the metadata: {exc}") from None
        meta = self._check_meta(raw)
        generation, kind = meta["generation"], meta["kind"]
        count, capacity = meta["count"], meta["capacity"]
        index_path = self.data_path(generation, _SUFFIX[kind])
        ids_path = self.data_path(generation, "ids")
        matrix: npt.NDArray[np.float32] | None = None
        if kind == "flat":
            read = _read_data(
                index_path, "vectors", lambda path: _read_matrix(path, count, self.dim)
            )
            if read is not None:
                matrix, index_digest = read
                index_size = 4 * self.dim * count
            else:  # not one vector per label: the checks below say what is wrong
                blob = _read_data(index_path, "vectors", Path.read_bytes)
                index_digest, index_size = _digest(blob), len(blob)
            index_head = b""
        else:
            index_digest, index_size, index_head = _read_data(index_path, "index", _read_file)
        self._check_file(index_path, meta["files"]["index"], index_digest, index_size)
        ids_blob = _read_data(ids_path, "ids", Path.read_bytes)
        self._check_file(ids_path, meta["files"]["ids"], _digest(ids_blob), len(ids_blob))
        if len(ids_blob) != ID_SIZE * count:
            raise Unusable("damaged", "the ids file does not hold one id per label")
        ids = [ids_blob[i : i + ID_SIZE] for i in range(0, len(ids_blob), ID_SIZE)]
        labels = {mid: label for label, mid in enumerate(ids)}
        if len(labels) != count:
            raise Unusable("damaged", "the ids file repeats an id")
        index: Any = None
        if kind == "flat":
            matrix = self._vectors(index_path, matrix, count)
        else:
            index = self._graph(index_path, index_head, count, capacity)
        return Loaded(
            generation=generation,
            index=index,
            matrix=matrix,
            capacity=capacity,
            ids=ids,
            labels=labels,
            deleted=set(meta["deleted"]),
            watermark=meta["watermark"],
        )

    def _vectors(
        self, path: Path, matrix: npt.NDArray[np.float32] | None, count: int
    ) -> npt.NDArray[np.float32]:
        """A flat index's vectors from its checked ``.vec`` file (read into a matrix of at
        least one row, None when the file's size is not one vector per label)."""
        if matrix is None:
            raise Unusable("damaged", f"{path.name} does not hold one vector per label")
        if not np.isfinite(matrix).all():
            raise Unusable("damaged", f"{path.name} holds a value that is not finite")
        return matrix

    def _graph(self, path: Path, head: bytes, count: int, capacity: int) -> Any:
        """The hnswlib index from its checked ``.hnsw`` file, its header checked first."""
        # hnswlib's header starts with three size_t: level-0 offset, max_elements, count
        if len(head) < 24:
            raise Unusable("damaged", f"{path.name} is too short for hnswlib's header")
        header = np.frombuffer(head[:24], dtype="<u8").tolist()
        if header[1:] != [capacity, count]:
            raise Unusable("damaged", f"{path.name}'s header disagrees with the metadata")
        index = hnswlib.Index(space=SPACE, dim=self.dim)
        try:
            index.load_index(str(path), max_elements=capacity)
        except (RuntimeError, ValueError, OSError) as exc:
            raise Unusable("damaged", f"hnswlib cannot load {path.name}: {exc}") from None
        shape = (
            int(index.element_count),
            int(index.get_max_elements()),
            int(index.M),
            int(index.ef_construction),
            len(index.get_ids_list()),
        )
        if shape != (count, capacity, self.M, self.ef_construction, count):
            raise Unusable("damaged", f"{path.name} disagrees with the metadata")
        return index

    @staticmethod
    def _check_file(path: Path, want: dict[str, Any], digest: str, size: int) -> None:
        if size != want["size"]:
            raise Unusable("damaged", f"{path.name} has {size} bytes, expected {want['size']}")
        if digest != want["blake3"]:
            raise Unusable("damaged", f"{path.name} fails its BLAKE3 checksum")

    def _parameters(self) -> dict[str, Any]:
        """What the saved index was built with; a saved index with other values is not
        this index's (saved once, checked on every load)."""
        return {
            "name": self.name,
            "dim": self.dim,
            "space": SPACE,
            "M": self.M,
            "ef_construction": self.ef_construction,
            "seed": self.seed,
        }

    def _check_meta(self, raw: bytes) -> dict[str, Any]:
        def bad(why: str) -> Unusable:
            return Unusable("damaged", f"metadata: {why}")

        try:
            meta = json.loads(raw.decode("ascii"))
        except (UnicodeDecodeError, ValueError) as exc:
            raise bad(f"not JSON ({exc})") from None
        if not isinstance(meta, dict) or set(meta) != _META_KEYS:
            raise bad("wrong set of fields")
        if _encode_meta(meta) != raw:
            raise bad("not in canonical form")
        body = {key: value for key, value in meta.items() if key != "blake3"}
        if meta["blake3"] != _digest(_encode_meta(body)):
            raise bad("fails its BLAKE3 checksum")
        if meta["format"] != FORMAT or type(meta["format"]) is not int:
            raise bad(f"format {meta['format']!r} is not {FORMAT}")
        for key, value in self._parameters().items():
            if meta[key] != value or type(meta[key]) is not type(value):
                raise bad(f"{key} is {meta[key]!r}, this index wants {value!r}")

        def natural(key: str, value: object) -> int:
            if type(value) is not int or value < 0:
                raise bad(f"{key} is not a natural number")
            return value

        count = natural("count", meta["count"])
        capacity = natural("capacity", meta["capacity"])
        natural("watermark", meta["watermark"])
        natural("generation", meta["generation"])
        if meta["kind"] not in _SUFFIX:
            raise bad(f"kind {meta['kind']!r} is neither flat nor hnsw")
        if capacity != capacity_for(count):
            raise bad(f"capacity is {capacity}, {count} labels make it {capacity_for(count)}")
        deleted = meta["deleted"]
        if not isinstance(deleted, list) or any(
            type(label) is not int or not 0 <= label < count for label in deleted
        ):
            raise bad("deleted is not a list of labels")
        if any(a >= b for a, b in itertools.pairwise(deleted)):
            raise bad("deleted is not strictly increasing")
        files = meta["files"]
        if not isinstance(files, dict) or set(files) != {"index", "ids"}:
            raise bad("files must name index and ids")
        for kind, entry in files.items():
            if (
                not isinstance(entry, dict)
                or set(entry) != {"blake3", "size"}
                or not isinstance(entry["blake3"], str)
            ):
                raise bad(f"files.{kind} is malformed")
            natural(f"files.{kind}.size", entry["size"])
        return cast(dict[str, Any], meta)

    def save(
        self,
        index: Any,
        matrix: npt.NDArray[np.float32] | None,
        ids: Sequence[bytes],
        deleted: set[int],
        *,
        capacity: int,
        watermark: int,
        after: int,
    ) -> int:
        """Write ``index`` (hnswlib's) or, with no graph (``index`` None), the vectors
        ``matrix``, with label order ``ids`` and removed labels ``deleted`` as a new
        generation, atomically (V3); return that generation.

        Writes the data files of a generation above ``after`` and every one on disk, then
        the metadata, each through a temporary file, fsync and rename. Creates
        ``directory`` if needed. The older generations' files stay until
        :meth:`remove_other_generations`.

        Raises:
            OSError: the files cannot be written (the previous save stays intact).
        """
        self.directory.mkdir(parents=True, exist_ok=True)
        on_disk = [gen for gen in self.own_files().values() if gen is not None]
        generation = max([after, *on_disk]) + 1
        kind: Kind = "flat" if index is None else "hnsw"
        index_path = self.data_path(generation, _SUFFIX[kind])
        ids_path = self.data_path(generation, "ids")
        index_tmp = index_path.with_name(index_path.name + ".tmp")
        ids_tmp = ids_path.with_name(ids_path.name + ".tmp")
        meta_tmp = self.meta_path.with_name(self.meta_path.name + ".tmp")

        if index is None:
            if matrix is None:
                raise ValueError("a flat index is saved from its vectors")
            # the array's own buffer: a copy of 150 MB at 100,000 vectors of 384 dimensions
            # is saved (``matrix[:n]`` of a C-contiguous little-endian matrix is one)
            vectors = np.ascontiguousarray(matrix[: len(ids)], dtype="<f4").reshape(-1)
            raw = vectors.view(np.uint8).data
            _write_synced(index_tmp, raw)
            index_digest, index_size = _digest(raw), raw.nbytes
        else:
            index.save_index(str(index_tmp))
            index_digest, index_size, _ = _read_file(index_tmp, sync=True)
        ids_bytes = b"".join(ids)
        _write_synced(ids_tmp, ids_bytes)
        os.replace(index_tmp, index_path)
        os.replace(ids_tmp, ids_path)
        body: dict[str, Any] = {
            "format": FORMAT,
            **self._parameters(),
            "watermark": watermark,
            "generation": generation,
            "kind": kind,
            "capacity": capacity,
            "count": len(ids),
            "deleted": sorted(deleted),
            "files": {
                "index": {"blake3": index_digest, "size": index_size},
                "ids": {"blake3": _digest(ids_bytes), "size": len(ids_bytes)},
            },
        }
        meta = {**body, "blake3": _digest(_encode_meta(body))}
        _write_synced(meta_tmp, _encode_meta(meta))
        fsync_dir(self.directory)  # the data files' names are durable before the commit
        os.replace(meta_tmp, self.meta_path)
        fsync_dir(self.directory)
        return generation

    def remove_other_generations(self, generation: int) -> None:
        """Delete this embedder's data files of every generation but ``generation``."""
        for path, gen in self.own_files().items():
            if gen is not None and gen != generation:
                path.unlink(missing_ok=True)


def saved_watermark(directory: Path, *, name: str) -> int | None:
    """The watermark the index saved for embedder ``name`` in ``directory`` records, read
    from its metadata alone (no data file is read or checked). None when there is no
    readable metadata.
    """
    path = Path(directory) / f"{file_stem(name)}.json"
    try:
        meta = json.loads(path.read_bytes().decode("ascii"))
    except (OSError, UnicodeDecodeError, ValueError):
        return None
    watermark = meta.get("watermark") if isinstance(meta, dict) else None
    if type(watermark) is not int or watermark < 0 or meta.get("name") != name:
        return None
    return watermark
