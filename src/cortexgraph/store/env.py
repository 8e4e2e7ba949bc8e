"""One LMDB environment per actor, its named tables, and guarded write transactions.

On disk: ``<root>/<actor>/data.mdb`` and ``lock.mdb`` (LMDB's own files). Tables are LMDB
named databases::

    journal    the source of truth (seq -> entry)
    snapshots  stored SnapshotManifests (not derived: replay verifies them)
    meta       identity (schema, actor, hash_name) and shell bookkeeping
    heads versions idx postings edges salience emb mmr smt
               derived from the journal; can be dropped and rebuilt (J4)

Invariants enforced here:

- J1 the journal is append-only: a write transaction appends at the next seq and never
  overwrites a key (``put(..., overwrite=False)`` is checked).
- J2 a transaction that changed a table but appended no entry refuses to commit
  (:class:`~cortexgraph.errors.BatchNoJournalError`) and rolls back.
- J3 everything a batch does is one LMDB write transaction: committed whole or not at all.

One process may hold an environment open once (LMDB's rule); a second ``open`` raises
:class:`~cortexgraph.errors.AlreadyOpenError`. Handles do not survive ``fork``: in a child
every inherited handle is marked unusable and must be reopened.
"""

from __future__ import annotations

import itertools
import os
import struct
import threading
import weakref
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import blake3
import lmdb

from ..core.codec import decode, encode
from ..core.keys import seq_from_key, seq_key
from ..errors import (
    AlreadyOpenError,
    BatchNoJournalError,
    CorruptionError,
    CortexError,
    NotFoundError,
    ReadOnlyError,
    ValidationError,
)

__all__ = [
    "CACHE_TABLES",
    "DERIVED_TABLES",
    "MapFull",
    "TABLES",
    "Environment",
    "ReadTxn",
    "WriteTxn",
]

TABLES = (
    "journal",
    "heads",
    "versions",
    "idx",
    "postings",
    "edges",
    "salience",
    "emb",
    "mmr",
    "smt",
    "meta",
    "snapshots",
)
DERIVED_TABLES = ("heads", "versions", "idx", "postings", "edges", "salience", "mmr", "smt")
#: caches: filled outside batches (no journal entry), kept by rebuild, not compared by verify
CACHE_TABLES = ("emb",)
SCHEMA = 1
DEFAULT_MAP_SIZE = 1 << 30  # 1 GiB of address space; the file grows only as it is used
MAX_MAP_SIZE = 1 << 40

_U32 = struct.Struct(">I")
_open_paths: dict[str, weakref.ref[Environment]] = {}
_registry_lock = threading.Lock()


def _forget_after_fork() -> None:
    for ref in list(_open_paths.values()):
        env = ref()
        if env is not None:
            env._forked = True
    _open_paths.clear()


os.register_at_fork(after_in_child=_forget_after_fork)


class MapFull(Exception):
    """The LMDB map is full; the writer grows it and replays the batch's entries."""


class ReadTxn:
    """A read-only view of the tables at one instant."""

    __slots__ = ("_dbs", "_txn")

    def __init__(self, txn: Any, dbs: dict[str, Any]) -> None:
        self._txn = txn
        self._dbs = dbs

    def get(self, table: str, key: bytes) -> bytes | None:
        # py-lmdb parses positional arguments much faster than keywords (this and the
        # puts below run several times per memory): get(key, default, db).
        value: bytes | None = self._txn.get(key, None, self._dbs[table])
        return value

    def cursor(self, table: str) -> Any:
        return self._txn.cursor(db=self._dbs[table])

    def last_seq(self) -> int:
        with self._txn.cursor(db=self._dbs["journal"]) as cur:
            return seq_from_key(cur.key()) if cur.last() else 0

    def iter_prefix(self, table: str, prefix: bytes) -> Iterator[bytes]:
        """Keys of ``table`` that start with ``prefix``, in byte order."""
        with self._txn.cursor(db=self._dbs[table]) as cur:
            if not cur.set_range(prefix):
                return
            for key in cur.iternext(keys=True, values=False):
                if not key.startswith(prefix):
                    return
                yield key


    def prefix_range(self, table: str, prefix: bytes) -> tuple[list[bytes], list[bytes]]:
        """The keys and the values of ``table`` whose key starts with ``prefix``, in key
        order, as two lists: :meth:`iter_items` in bulk, for long ranges (the cursor is
        walked by C code, about 0.1 µs a key instead of 1)."""
        end = _prefix_end(prefix)
        with self._txn.cursor(db=self._dbs[table]) as cur:
            if not cur.set_range(prefix):
                return [], []
            keys = cur.iternext(keys=True, values=False)
            if end is None:
                found = list(itertools.takewhile(lambda key: key.startswith(prefix), keys))
            else:
                found = list(itertools.takewhile(end.__gt__, keys))
            cur.set_range(prefix)
            values = list(itertools.islice(cur.iternext(keys=False, values=True), len(found)))
        return found, values

    def iter_items(self, table: str, prefix: bytes) -> Iterator[tuple[bytes, bytes]]:
        """``(key, value)`` pairs of ``table`` whose key starts with ``prefix``, in order."""
        with self._txn.cursor(db=self._dbs[table]) as cur:
            if not cur.set_range(prefix):
                return
            for key, value in cur:
                if not key.startswith(prefix):
                    return
                yield key, value


def _prefix_end(prefix: bytes) -> bytes | None:
    """The least key above every key that starts with ``prefix`` (None: there is none).

    >>> _prefix_end(b"t|ab\\0"), _prefix_end(b"a\\xff"), _prefix_end(b"\\xff")
    (b't|ab\\x01', b'b', None)
    """
    stripped = prefix.rstrip(b"\xff")
    if not stripped:
        return None
    return stripped[:-1] + bytes((stripped[-1] + 1,))


class WriteTxn(ReadTxn):
    """An LMDB write transaction that counts what it does, for J1 and J2."""

    __slots__ = ("entries", "mutations", "replay")

    def __init__(self, txn: Any, dbs: dict[str, Any], *, replay: bool = False) -> None:
        super().__init__(txn, dbs)
        self.entries = 0
        self.mutations = 0
        self.replay = replay  # rebuilding derived state from the journal itself (J2 exempt)

    def put(self, table: str, key: bytes, value: bytes) -> None:
        self.mutations += 1
        try:
            self._txn.put(key, value, True, True, False, self._dbs[table])
        except lmdb.MapFullError:
            raise MapFull from None

    def delete(self, table: str, key: bytes) -> None:
        self.mutations += 1
        try:
            self._txn.delete(key, b"", self._dbs[table])
        except lmdb.MapFullError:
            raise MapFull from None

    def apply_mutations(self, mutations: list[tuple[str, bytes, bytes | None]]) -> None:
        """Put or delete each ``(table, key, value)``; ``None`` deletes."""
        self.mutations += len(mutations)
        dbs = self._dbs
        put, delete = self._txn.put, self._txn.delete
        try:
            for table, key, value in mutations:
                if value is None:
                    delete(key, b"", dbs[table])
                else:
                    put(key, value, True, True, False, dbs[table])  # dupdata, overwrite, append
        except lmdb.MapFullError:
            raise MapFull from None

    def append_entry(self, seq: int, data: bytes) -> None:
        """Append one journal entry at ``seq`` (J1: never overwrites)."""
        try:
            # put(key, value, dupdata, overwrite=False, append, db)
            added = self._txn.put(seq_key(seq), data, True, False, False, self._dbs["journal"])
        except lmdb.MapFullError:
            raise MapFull from None
        if not added:
            raise CorruptionError(f"journal seq {seq} already exists")
        self.entries += 1

    def put_snapshot(self, key: bytes, value: bytes) -> None:
        """Store a snapshot manifest. Snapshots are records *about* the journal, not
        mutations of memory state, so they need no journal entry (J2 does not apply)."""
        try:
            self._txn.put(key, value, db=self._dbs["snapshots"])
        except lmdb.MapFullError:
            raise MapFull from None

    def drop(self, table: str) -> None:
        """Empty one table (used by rebuild, inside the rebuild's transaction)."""
        self.mutations += 1
        self._txn.drop(self._dbs[table], delete=False)

    def commit(self) -> None:
        if self.mutations and not self.entries and not self.replay:
            self._txn.abort()
            raise BatchNoJournalError(
                f"a batch made {self.mutations} store mutation(s) without a journal entry"
            )
        try:
            self._txn.commit()
        except lmdb.MapFullError:
            raise MapFull from None

    def abort(self) -> None:
        self._txn.abort()


class Environment:
    """An open LMDB environment with the cortexgraph tables.

    Args:
        path: the environment directory (``<root>/<actor>``).
        actor: the actor recorded in ``meta``; checked on every open.
        create: create the environment when it does not exist.
        readonly: open read-only; every write raises ``ReadOnlyError``.
        map_size: initial address-space size in bytes; the writer doubles it on
            ``MapFullError`` between transactions.
        hash_name: the hash to record at creation; on open it must match (or be None).
    """

    def __init__(
        self,
        path: Path,
        actor: str,
        *,
        create: bool,
        readonly: bool,
        map_size: int,
        sync: bool,
        hash_name: str | None,
    ) -> None:
        self.path = path
        self.readonly = readonly
        self._forked = False
        self._closed = False
        exists = (path / "data.mdb").exists()
        if not exists and (readonly or not create):
            raise NotFoundError(f"no cortexgraph environment at {path}")
        key = os.path.realpath(path) if exists else os.path.abspath(path)
        with _registry_lock:
            other = _open_paths.get(key)
            if other is not None and other() is not None and not other()._closed:  # type: ignore[union-attr]
                raise AlreadyOpenError(
                    f"{path} is already open in this process; reuse that Cortex handle"
                    " (LMDB allows one open per process)"
                )
            if not exists:
                path.mkdir(parents=True, exist_ok=True)
            try:
                self._env = lmdb.open(
                    str(path),
                    map_size=map_size,
                    max_dbs=len(TABLES) + 4,
                    subdir=True,
                    readonly=readonly,
                    create=not readonly,
                    sync=sync,
                    metasync=sync,
                    readahead=False,
                    meminit=False,
                    lock=True,
                )
            except lmdb.Error as exc:
                raise CortexError(f"cannot open the LMDB environment at {path}: {exc}") from exc
            self._key = os.path.realpath(path)
            _open_paths[self._key] = weakref.ref(self)
        try:
            self.dbs = self._open_tables(create=not readonly)
            self.identity_meta = self._init_meta(actor, hash_name, fresh=not exists)
        except BaseException:
            self.close()
            raise

    # -- setup ------------------------------------------------------------------------

    def _open_tables(self, *, create: bool) -> dict[str, Any]:
        dbs: dict[str, Any] = {}
        if create:
            with self._env.begin(write=True) as txn:
                for name in TABLES:
                    dbs[name] = self._env.open_db(name.encode(), txn=txn, create=True)
            return dbs
        for name in TABLES:
            # Without a txn argument py-lmdb opens the handle in a transaction of its own
            # that it commits, which is what keeps the handle valid in read-only mode.
            try:
                dbs[name] = self._env.open_db(name.encode(), create=False)
            except lmdb.NotFoundError:
                raise CorruptionError(f"{self.path} lacks the {name!r} table") from None
        return dbs

    def _init_meta(self, actor: str, hash_name: str | None, *, fresh: bool) -> dict[str, Any]:
        with self._env.begin() as txn:
            raw = txn.get(b"identity", db=self.dbs["meta"])
        if raw is None:
            if self.readonly:
                raise CorruptionError(f"{self.path} has no identity record")
            identity = {"schema": SCHEMA, "actor": actor, "hash_name": hash_name or "blake3"}
            with self._env.begin(write=True) as txn:
                txn.put(b"identity", encode(identity), db=self.dbs["meta"])
            return identity
        identity = decode(bytes(raw), what="the identity record")
        if type(identity) is not dict or identity.get("schema") != SCHEMA:
            raise CorruptionError(f"{self.path} has an unknown schema: {identity!r}")
        if identity.get("actor") != actor:
            raise CorruptionError(
                f"{self.path} belongs to actor {identity.get('actor')!r}, not {actor!r}"
            )
        if hash_name is not None and identity.get("hash_name") != hash_name:
            raise ValidationError(
                f"the environment was created with {identity.get('hash_name')!r}; it cannot"
                f" be opened with {hash_name!r}",
                field="hash_name",
            )
        return identity

    # -- transactions -----------------------------------------------------------------

    def _check_usable(self) -> None:
        if self._closed:
            raise CortexError(f"the environment at {self.path} is closed")
        if self._forked:
            raise CortexError(
                f"the environment at {self.path} was opened before fork(); open it again in"
                " the child process"
            )

    def read(self) -> _ReadContext:
        """A read transaction, as a context manager yielding a :class:`ReadTxn`."""
        self._check_usable()
        return _ReadContext(self)

    def begin_write(self, *, replay: bool = False) -> WriteTxn:
        """Begin a write transaction (the caller commits or aborts it).

        ``replay=True`` is for rebuilding derived tables from the journal already stored:
        such a transaction may change tables without appending entries.
        """
        self._check_usable()
        if self.readonly:
            raise ReadOnlyError(f"{self.path} is open read-only")
        return WriteTxn(self._env.begin(write=True), self.dbs, replay=replay)

    def write_cache(self, table: str, items: list[tuple[bytes, bytes]]) -> None:
        """Store rows of a cache table (``emb``) in a transaction of their own.

        A cache holds what is expensive to recompute and is keyed by its own inputs (the
        embedding cache by embedder name and content hash), so it is not memory state:
        it needs no journal entry (J2 does not apply), rebuild keeps it, and verify does
        not compare it. On a read-only handle nothing is written.
        """
        if table not in CACHE_TABLES:
            raise CortexError(f"{table!r} is not a cache table")
        self._check_usable()
        if self.readonly or not items:
            return
        while True:
            txn = self._env.begin(write=True)
            try:
                for key, value in items:
                    txn.put(key, value, db=self.dbs[table])
                txn.commit()
                return
            except lmdb.MapFullError:
                txn.abort()
                self.grow()
            except BaseException:
                txn.abort()
                raise

    def meta_value(self, key: bytes) -> Any:
        """A canonical-CBOR value from ``meta`` (None when absent)."""
        with self._env.begin() as txn:
            raw = txn.get(key, db=self.dbs["meta"])
        return None if raw is None else decode(bytes(raw), what=f"meta {key!r}")

    def set_meta_value(self, key: bytes, value: Any) -> None:
        """Record a configuration value in ``meta`` (like the identity: not memory state)."""
        self._check_usable()
        if self.readonly:
            raise ReadOnlyError(f"{self.path} is open read-only")
        with self._env.begin(write=True) as txn:
            txn.put(key, encode(value), db=self.dbs["meta"])

    def grow(self) -> None:
        """Double the map size (call with no write transaction open)."""
        size = self._env.info()["map_size"]
        if size >= MAX_MAP_SIZE:
            raise CortexError(f"the environment at {self.path} reached {MAX_MAP_SIZE} bytes")
        self._env.set_mapsize(min(size * 2, MAX_MAP_SIZE))

    def map_size(self) -> int:
        return int(self._env.info()["map_size"])

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        with _registry_lock:
            ref = _open_paths.get(getattr(self, "_key", ""))
            if ref is not None and ref() is self:
                del _open_paths[self._key]
        if not self._forked:
            self._env.close()

    @property
    def closed(self) -> bool:
        return self._closed

    def table_entries(self, txn: ReadTxn, table: str) -> int:
        """How many keys ``table`` holds."""
        return int(txn._txn.stat(self.dbs[table])["entries"])

    def table_digest(self, txn: ReadTxn, table: str) -> bytes:
        """BLAKE3 over every (key, value) of ``table`` in key order, length-prefixed."""
        h = blake3.blake3()
        parts: list[bytes] = []
        append, pack = parts.append, _U32.pack
        with txn.cursor(table) as cur:
            for key, value in cur:
                append(pack(len(key)))
                append(key)
                append(pack(len(value)))
                append(value)
                if len(parts) >= 4096:  # hash in slices of rows: fewer calls, same bytes
                    h.update(b"".join(parts))
                    parts.clear()
        h.update(b"".join(parts))
        return h.digest()


class _ReadContext:
    __slots__ = ("_env", "_txn")

    def __init__(self, env: Environment) -> None:
        self._env = env
        self._txn: Any = None

    def __enter__(self) -> ReadTxn:
        self._txn = self._env._env.begin(buffers=False)
        return ReadTxn(self._txn, self._env.dbs)

    def __exit__(self, *exc: object) -> None:
        self._txn.abort()
