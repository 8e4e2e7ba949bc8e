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

Errors. Every ``lmdb.Error`` is turned into a typed error here and nowhere else
(:func:`storage_error`): LMDB's corruption and page checks become ``CorruptionError``, a full
disk ``StorageFullError``, other I/O failures ``StorageError``, each naming the table and the
operation. A directory that holds an LMDB environment which is not a cortexgraph store is
refused (``StorageError``) before anything is written to it.

Map growth (see ``docs/reliability.md``):

- E1 the map is resized only while no transaction of this process is live:
  ``mdb_env_set_mapsize`` requires it, and py-lmdb invalidates every live transaction and
  cursor of the environment when it runs. Every transaction enters :class:`_MapGate` (shared)
  and a resize takes it alone, waiting for the live ones to end and holding new ones back.
- E2 a writer that runs out of map aborts, doubles the map and replays its batch
  (``MapFull``); a thread holding a transaction never resizes (it would wait for itself), so
  cache rows written from inside a read are deferred until that thread's last read ends.
- E3 a map grown by another process is adopted (``set_mapsize(0)``) when LMDB reports
  ``MDB_MAP_RESIZED`` at the start of a transaction, then the transaction is begun again;
  handles live for any number of growths.
- E4 one writer at a time across threads and processes, for a batch's whole life
  (:class:`_WriterLock`): a batch that grows the map re-applies its entries at the seqs it
  computed, which is only right if no other writer committed in between.

Files: ``data.mdb`` and ``lock.mdb`` (LMDB's), ``writer.lock`` (E4; empty, only locked).
"""

from __future__ import annotations

import errno
import fcntl
import itertools
import os
import struct
import threading
import weakref
from collections.abc import Callable, Iterator
from pathlib import Path
from threading import get_ident
from typing import Any, TypeVar

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
    StorageError,
    StorageFullError,
    ValidationError,
)

__all__ = [
    "CACHE_TABLES",
    "DERIVED_TABLES",
    "MAX_MAP_SIZE",
    "MapFull",
    "TABLES",
    "Environment",
    "ReadTxn",
    "WriteTxn",
    "storage_error",
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
#: an I/O error (EIO) with less than this free on the store's file system is a full disk:
#: LMDB turns a short write, which is how a full disk often shows, into EIO
FULL_DISK_MARGIN = 64 << 20

_T = TypeVar("_T")
_U32 = struct.Struct(">I")
_open_paths: dict[str, weakref.ref[Environment]] = {}
_registry_lock = threading.Lock()

#: LMDB errors that mean the bytes on disk are not what LMDB wrote
_CORRUPT = (
    lmdb.CorruptedError,
    lmdb.PageNotFoundError,
    lmdb.InvalidError,
    lmdb.VersionMismatchError,
    lmdb.IncompatibleError,
    lmdb.BadChecksumError,
)
_FULL_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG})


def _forget_after_fork() -> None:
    for ref in list(_open_paths.values()):
        env = ref()
        if env is not None:
            env._forked = True
    _open_paths.clear()


os.register_at_fork(after_in_child=_forget_after_fork)


class MapFull(Exception):
    """The LMDB map is full; the writer grows it and replays the batch's entries."""


def _free_bytes(path: Path) -> int | None:
    try:
        stat = os.statvfs(path)
    except OSError:
        return None
    return stat.f_bavail * stat.f_frsize


def storage_error(
    exc: lmdb.Error, path: Path, *, table: str | None = None, operation: str
) -> CortexError:
    """The typed error for an ``lmdb.Error`` raised by ``operation`` (on ``table``).

    The one place LMDB's errors are translated: corruption and failed page checks become
    :class:`CorruptionError`; a full disk (ENOSPC, a quota, a file size limit, or EIO with
    less than :data:`FULL_DISK_MARGIN` free) :class:`StorageFullError`; a write on a
    read-only file :class:`ReadOnlyError`; anything else :class:`StorageError`.
    """
    where = operation if table is None else f"{operation} on table {table!r}"
    code = getattr(exc, "code", 0)
    if isinstance(exc, _CORRUPT):
        return CorruptionError(
            f"{path}: the store is damaged ({where}): {exc}", table=table, operation=operation
        )
    if isinstance(exc, lmdb.BadTxnError):  # an earlier operation of the transaction failed
        return CorruptionError(
            f"{path}: the transaction failed earlier ({where}): {exc}",
            table=table,
            operation=operation,
        )
    if isinstance(exc, lmdb.ReadonlyError):
        return ReadOnlyError(f"{path}: cannot write ({where}): {exc}")
    if isinstance(exc, lmdb.DiskError) or code in _FULL_ERRNOS:
        full = True
    elif code == errno.EIO:
        free = _free_bytes(path)
        full = free is not None and free < FULL_DISK_MARGIN
    else:
        full = False
    if full:
        free = _free_bytes(path)
        left = "" if free is None else f" ({free:,} bytes free)"
        return StorageFullError(
            f"{path}: no space left on the device{left}; the operation ({where}) was rolled"
            f" back: free some space and retry ({exc})",
            table=table,
            operation=operation,
        )
    if isinstance(exc, lmdb.ReadersFullError):
        return StorageError(
            f"{path}: LMDB's reader table is full ({where}): too many threads and processes"
            " read this store at once",
            table=table,
            operation=operation,
        )
    if isinstance(exc, lmdb.PanicError):
        return StorageError(
            f"{path}: an earlier write failed half-way ({where}); close every handle of this"
            " store in this process and open it again",
            table=table,
            operation=operation,
        )
    return StorageError(f"{path}: {where} failed: {exc}", table=table, operation=operation)


class _MapGate:
    """Transactions of this process on one side, a map resize on the other (E1).

    Any number of transactions may be live at once; a resize waits until none is and holds
    new ones back while it runs. A thread that already holds a transaction may begin
    another even while a resize waits (it would otherwise wait for itself); such a thread
    may not resize.

    The common path takes no lock: each thread counts its own transactions in ``_counts``
    (keyed by thread, an entry only while non-zero; under the GIL each dict operation is
    atomic). A thread announces a transaction *before* it looks for a resize, and a resize
    announces itself *before* it looks for transactions, so one of the two always sees the
    other.
    """

    __slots__ = ("_cond", "_counts", "_resizing")

    def __init__(self) -> None:
        self._cond = threading.Condition(threading.Lock())
        self._counts: dict[int, int] = {}
        self._resizing = False

    def held(self) -> int:
        """How many transactions the calling thread holds."""
        return self._counts.get(get_ident(), 0)

    def enter(self) -> None:
        counts, me = self._counts, get_ident()
        held = counts.get(me, 0)
        counts[me] = held + 1
        if self._resizing and not held:
            self._wait_for_resize(me)

    def _wait_for_resize(self, me: int) -> None:
        counts = self._counts
        with self._cond:
            while self._resizing:
                del counts[me]
                self._cond.notify_all()  # the resize may be waiting for this thread
                self._cond.wait()
                counts[me] = 1

    def leave(self) -> None:
        counts, me = self._counts, get_ident()
        left = counts[me] - 1
        if left:
            counts[me] = left
            return
        del counts[me]
        if self._resizing:
            with self._cond:
                self._cond.notify_all()

    def exclusive(self, action: Callable[[], _T]) -> _T:
        """Run ``action`` while no transaction of this process is live."""
        if self.held():
            raise CortexError(
                "the LMDB map must be resized, but this thread holds a transaction of the"
                " same store (end it first)"
            )
        with self._cond:
            while self._resizing:
                self._cond.wait()
            self._resizing = True
            while self._counts:
                self._cond.wait(0.01)  # woken by the last leave; the timeout is a backstop
        try:
            return action()
        finally:
            with self._cond:
                self._resizing = False
                self._cond.notify_all()


class _WriterLock:
    """One writer at a time, across the threads of this process (a re-entrant lock) and
    across processes (``flock`` on ``writer.lock`` in the environment directory) (E4).

    LMDB's own writer lock is held only while a write transaction is live, but a batch that
    outgrows the map must end its transaction, grow the map and apply its entries again at
    the same seqs: this lock is held for the batch's whole life, so no other writer commits
    in between. Re-entrant: a write transaction begun by a thread that holds it (its batch)
    takes it again.
    """

    __slots__ = ("_depth", "_fd", "_lock")

    def __init__(self, path: Path) -> None:
        self._lock = threading.RLock()
        self._depth = threading.local()
        self._fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)

    def acquire(self, *, blocking: bool = True) -> bool:
        """Take the lock; with ``blocking=False`` return False at once if another thread
        or process holds it."""
        if not self._lock.acquire(blocking):
            return False
        depth: int = getattr(self._depth, "n", 0)
        if not depth:
            try:
                flags = fcntl.LOCK_EX if blocking else fcntl.LOCK_EX | fcntl.LOCK_NB
                fcntl.flock(self._fd, flags)
            except BlockingIOError:
                self._lock.release()
                return False
            except BaseException:
                self._lock.release()
                raise
        self._depth.n = depth + 1
        return True

    def release(self) -> None:
        depth: int = self._depth.n - 1
        self._depth.n = depth
        try:
            if not depth:
                fcntl.flock(self._fd, fcntl.LOCK_UN)
        finally:
            self._lock.release()

    def close(self) -> None:
        os.close(self._fd)


class _NoWriter(_WriterLock):
    """The writer lock of a read-only handle, which never writes."""

    def __init__(self) -> None:
        pass

    def acquire(self, *, blocking: bool = True) -> bool:
        raise CortexError("a read-only handle takes no writer lock")

    def close(self) -> None:
        pass


_NO_WRITER = _NoWriter()


class ReadTxn:
    """A read-only view of the tables at one instant."""

    __slots__ = ("_dbs", "_owner", "_txn")

    def __init__(self, txn: Any, dbs: dict[str, Any], owner: Environment) -> None:
        self._txn = txn
        self._dbs = dbs
        self._owner = owner

    def _error(self, exc: lmdb.Error, table: str | None, operation: str) -> CortexError:
        return storage_error(exc, self._owner.path, table=table, operation=operation)

    def get(self, table: str, key: bytes) -> bytes | None:
        # py-lmdb parses positional arguments much faster than keywords (this and the
        # puts below run several times per memory): get(key, default, db).
        try:
            value: bytes | None = self._txn.get(key, None, self._dbs[table])
        except lmdb.Error as exc:
            raise self._error(exc, table, "get") from exc
        return value

    def cursor(self, table: str) -> Any:
        """A raw LMDB cursor on ``table``; an ``lmdb.Error`` its use raises is translated
        when the transaction's context ends."""
        try:
            return self._txn.cursor(db=self._dbs[table])
        except lmdb.Error as exc:
            raise self._error(exc, table, "cursor") from exc

    def last_seq(self) -> int:
        try:
            with self._txn.cursor(db=self._dbs["journal"]) as cur:
                return seq_from_key(cur.key()) if cur.last() else 0
        except lmdb.Error as exc:
            raise self._error(exc, "journal", "last") from exc

    def count(self, table: str) -> int:
        """How many keys ``table`` holds."""
        try:
            return int(self._txn.stat(self._dbs[table])["entries"])
        except lmdb.Error as exc:
            raise self._error(exc, table, "stat") from exc

    def iter_prefix(self, table: str, prefix: bytes) -> Iterator[bytes]:
        """Keys of ``table`` that start with ``prefix``, in byte order."""
        try:
            with self._txn.cursor(db=self._dbs[table]) as cur:
                if not cur.set_range(prefix):
                    return
                for key in cur.iternext(keys=True, values=False):
                    if not key.startswith(prefix):
                        return
                    yield key
        except lmdb.Error as exc:
            raise self._error(exc, table, "scan") from exc

    def prefix_range(self, table: str, prefix: bytes) -> tuple[list[bytes], list[bytes]]:
        """The keys and the values of ``table`` whose key starts with ``prefix``, in key
        order, as two lists: :meth:`iter_items` in bulk, for long ranges (the cursor is
        walked by C code, about 0.1 µs a key instead of 1)."""
        end = _prefix_end(prefix)
        try:
            with self._txn.cursor(db=self._dbs[table]) as cur:
                if not cur.set_range(prefix):
                    return [], []
                keys = cur.iternext(keys=True, values=False)
                if end is None:
                    found = list(itertools.takewhile(lambda key: key.startswith(prefix), keys))
                else:
                    found = list(itertools.takewhile(end.__gt__, keys))
                cur.set_range(prefix)
                values = list(
                    itertools.islice(cur.iternext(keys=False, values=True), len(found))
                )
        except lmdb.Error as exc:
            raise self._error(exc, table, "scan") from exc
        return found, values

    def iter_items(self, table: str, prefix: bytes) -> Iterator[tuple[bytes, bytes]]:
        """``(key, value)`` pairs of ``table`` whose key starts with ``prefix``, in order."""
        try:
            with self._txn.cursor(db=self._dbs[table]) as cur:
                if not cur.set_range(prefix):
                    return
                for key, value in cur:
                    if not key.startswith(prefix):
                        return
                    yield key, value
        except lmdb.Error as exc:
            raise self._error(exc, table, "scan") from exc


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
    """An LMDB write transaction that counts what it does, for J1 and J2.

    It holds a place in the map gate from its start until it commits or aborts (once).
    """

    __slots__ = ("entries", "live", "mutations", "replay")

    def __init__(
        self, txn: Any, dbs: dict[str, Any], owner: Environment, *, replay: bool = False
    ) -> None:
        super().__init__(txn, dbs, owner)
        self.entries = 0
        self.mutations = 0
        self.live = True
        self.replay = replay  # rebuilding derived state from the journal itself (J2 exempt)

    def _write_error(self, exc: lmdb.Error, table: str | None, operation: str) -> Exception:
        if isinstance(exc, lmdb.MapFullError):
            return MapFull()
        return self._error(exc, table, operation)

    def put(self, table: str, key: bytes, value: bytes) -> None:
        self.mutations += 1
        try:
            self._txn.put(key, value, True, True, False, self._dbs[table])
        except lmdb.Error as exc:
            raise self._write_error(exc, table, "put") from None

    def delete(self, table: str, key: bytes) -> None:
        self.mutations += 1
        try:
            self._txn.delete(key, b"", self._dbs[table])
        except lmdb.Error as exc:
            raise self._write_error(exc, table, "delete") from None

    def apply_mutations(self, mutations: list[tuple[str, bytes, bytes | None]]) -> None:
        """Put or delete each ``(table, key, value)``; ``None`` deletes."""
        self.mutations += len(mutations)
        dbs = self._dbs
        put, delete = self._txn.put, self._txn.delete
        table = None
        try:
            for table, key, value in mutations:
                if value is None:
                    delete(key, b"", dbs[table])
                else:
                    put(key, value, True, True, False, dbs[table])  # dupdata, overwrite, append
        except lmdb.Error as exc:
            raise self._write_error(exc, table, "put") from None

    def append_entry(self, seq: int, data: bytes) -> None:
        """Append one journal entry at ``seq`` (J1: never overwrites)."""
        try:
            # put(key, value, dupdata, overwrite=False, append, db)
            added = self._txn.put(seq_key(seq), data, True, False, False, self._dbs["journal"])
        except lmdb.Error as exc:
            raise self._write_error(exc, "journal", "append") from None
        if not added:
            raise CorruptionError(
                f"journal seq {seq} already exists", table="journal", operation="append"
            )
        self.entries += 1

    def put_snapshot(self, key: bytes, value: bytes) -> None:
        """Store a snapshot manifest. Snapshots are records *about* the journal, not
        mutations of memory state, so they need no journal entry (J2 does not apply)."""
        try:
            self._txn.put(key, value, db=self._dbs["snapshots"])
        except lmdb.Error as exc:
            raise self._write_error(exc, "snapshots", "put") from None

    def drop(self, table: str) -> None:
        """Empty one table (used by rebuild, inside the rebuild's transaction)."""
        self.mutations += 1
        try:
            self._txn.drop(self._dbs[table], delete=False)
        except lmdb.Error as exc:
            raise self._write_error(exc, table, "drop") from None

    def commit(self) -> None:
        if self.mutations and not self.entries and not self.replay:
            self.abort()
            raise BatchNoJournalError(
                f"a batch made {self.mutations} store mutation(s) without a journal entry"
            )
        try:
            self._txn.commit()
        except lmdb.Error as exc:
            raise self._write_error(exc, None, "commit") from None
        finally:
            self._end()

    def abort(self) -> None:
        if self.live:
            try:
                self._txn.abort()
            finally:
                self._end()

    def _end(self) -> None:
        if self.live:
            self.live = False
            owner = self._owner
            owner._gate.leave()
            owner._writer.release()


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

    Raises:
        NotFoundError: no store at ``path`` and ``create`` is false (or read-only).
        StorageError: ``path`` holds an LMDB environment that is not a cortexgraph store,
            or it cannot be opened (permissions, I/O).
        CorruptionError: the store's identity or tables are damaged or missing.
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
        self._gate = _MapGate()
        self.dbs: dict[str, Any] = {}
        self._deferred: list[tuple[str, list[tuple[bytes, bytes]]]] = []
        self._deferred_lock = threading.Lock()
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
            try:
                if not exists:
                    path.mkdir(parents=True, exist_ok=True)
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
                raise storage_error(exc, path, operation="open") from exc
            except OSError as exc:
                raise StorageError(
                    f"cannot open a store at {path}: {exc}", operation="open"
                ) from exc
            self._key = os.path.realpath(path)
            _open_paths[self._key] = weakref.ref(self)
        try:
            self._writer = _WriterLock(path / "writer.lock") if not readonly else _NO_WRITER
        except OSError as exc:
            self.close()
            raise StorageError(
                f"cannot open {path / 'writer.lock'}: {exc}", operation="open"
            ) from exc
        try:
            self.dbs, self.identity_meta = self._setup(actor, hash_name)
        except BaseException:
            self.close()
            raise

    # -- setup ------------------------------------------------------------------------

    def _setup(self, actor: str, hash_name: str | None) -> tuple[dict[str, Any], dict[str, Any]]:
        """Open the tables and check the identity; on a new store create both in one
        transaction, so a crash during creation leaves an empty LMDB file, never half a
        store."""
        self.dbs = {}
        names = self._main_keys()
        if not names and not self.readonly:
            created = self._create(actor, hash_name)
            if created is not None:
                return created
            names = self._main_keys()  # another process created it first
        if not names:
            raise NotFoundError(f"no cortexgraph store at {self.path} (its LMDB file is empty)")
        if b"meta" not in names or b"journal" not in names:
            raise StorageError(
                f"{self.path} holds an LMDB environment that is not a cortexgraph store"
                f" (its tables: {', '.join(sorted(repr(n) for n in names))}); refusing to"
                " use it",
                operation="open",
            )
        dbs = {}
        for name in TABLES:
            if name.encode() not in names:
                raise CorruptionError(
                    f"{self.path} lacks the {name!r} table", table=name, operation="open"
                )
            # Without a txn argument py-lmdb opens the handle in a transaction of its own
            # that it commits, which is what keeps the handle valid in read-only mode.
            try:
                try:
                    dbs[name] = self._env.open_db(name.encode(), create=False)
                except lmdb.MapResizedError:  # that transaction met another's growth (E3)
                    self._adopt_map()
                    dbs[name] = self._env.open_db(name.encode(), create=False)
            except lmdb.Error as exc:
                raise storage_error(exc, self.path, table=name, operation="open") from exc
        self.dbs = dbs
        return dbs, self._check_identity(actor, hash_name)

    def _create(
        self, actor: str, hash_name: str | None
    ) -> tuple[dict[str, Any], dict[str, Any]] | None:
        """Create every table and the identity in one write transaction; None when the
        environment turns out not to be empty once the writer's lock is held."""
        identity = {"schema": SCHEMA, "actor": actor, "hash_name": hash_name or "blake3"}
        txn = self._begin_write("create", replay=True)  # no journal entry: not memory state
        try:
            if self._main_keys(txn):
                txn.abort()
                return None
            dbs = {
                name: self._env.open_db(name.encode(), txn=txn._txn, create=True)
                for name in TABLES
            }
            txn._dbs = dbs
            txn.put("meta", b"identity", encode(identity))
            txn.commit()
        except lmdb.Error as exc:
            txn.abort()
            raise storage_error(exc, self.path, operation="create") from exc
        except BaseException:
            txn.abort()
            raise
        return dbs, identity

    def _main_keys(self, txn: ReadTxn | None = None) -> set[bytes]:
        """The keys of LMDB's main database: the names of the named tables."""
        if txn is None:
            with self.read() as txn:
                return self._main_keys(txn)
        try:
            with txn._txn.cursor() as cur:
                return {bytes(key) for key in cur.iternext(keys=True, values=False)}
        except lmdb.Error as exc:
            raise storage_error(exc, self.path, operation="open") from exc

    def _check_identity(self, actor: str, hash_name: str | None) -> dict[str, Any]:
        raw = self.meta_raw(b"identity")
        if raw is None:
            raise CorruptionError(
                f"{self.path} has no identity record", table="meta", operation="open"
            )
        identity = decode(raw, what="the identity record")
        if type(identity) is not dict or identity.get("schema") != SCHEMA:
            raise CorruptionError(
                f"{self.path} has an unknown schema: {identity!r}", table="meta", operation="open"
            )
        if identity.get("actor") != actor:
            raise CorruptionError(
                f"{self.path} belongs to actor {identity.get('actor')!r}, not {actor!r}",
                table="meta",
                operation="open",
            )
        if identity.get("hash_name") not in ("blake3", "sha256"):
            raise CorruptionError(
                f"{self.path} records an unknown hash {identity.get('hash_name')!r}",
                table="meta",
                operation="open",
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

    def _begin(self, *, write: bool, operation: str) -> Any:
        """Begin an LMDB transaction holding a place in the map gate (the caller leaves
        it when the transaction ends). A map another process grew is adopted first (E3)."""
        self._check_usable()
        gate = self._gate
        gate.enter()
        try:
            try:
                return self._env.begin(write=write, buffers=False)
            except lmdb.MapResizedError:
                if gate.held() > 1:
                    raise StorageError(
                        f"{self.path}: another process grew the store while this thread"
                        " held a transaction of it; end that transaction and retry",
                        operation=operation,
                    ) from None
                gate.leave()
                try:
                    self._adopt_map()
                finally:
                    gate.enter()
                return self._env.begin(write=write, buffers=False)
        except lmdb.Error as exc:
            gate.leave()
            raise storage_error(exc, self.path, operation=operation) from exc
        except BaseException:
            gate.leave()
            raise

    def _adopt_map(self) -> None:
        """Take up the map size another process set (E3)."""

        def adopt() -> None:
            try:
                self._env.set_mapsize(0)
            except lmdb.Error as exc:
                raise storage_error(exc, self.path, operation="resize") from exc

        self._gate.exclusive(adopt)

    def read(self) -> _ReadContext:
        """A read transaction, as a context manager yielding a :class:`ReadTxn`."""
        self._check_usable()
        return _ReadContext(self)

    def _begin_write(self, operation: str, *, replay: bool = False) -> WriteTxn:
        writer = self._writer
        writer.acquire()
        try:
            txn = self._begin(write=True, operation=operation)
        except BaseException:
            writer.release()
            raise
        return WriteTxn(txn, self.dbs, self, replay=replay)

    def hold_writer(self) -> None:
        """Take the writer lock for longer than one transaction (a batch that may have to
        grow the map and begin again, E4); pair with :meth:`release_writer`."""
        self._check_usable()
        if self.readonly:
            raise ReadOnlyError(f"{self.path} is open read-only")
        self._writer.acquire()

    def release_writer(self) -> None:
        self._writer.release()

    def begin_write(self, *, replay: bool = False) -> WriteTxn:
        """Begin a write transaction (the caller commits or aborts it).

        ``replay=True`` is for rebuilding derived tables from the journal already stored:
        such a transaction may change tables without appending entries.
        """
        self._check_usable()
        if self.readonly:
            raise ReadOnlyError(f"{self.path} is open read-only")
        return self._begin_write("begin", replay=replay)

    def write_small(self, action: Callable[[WriteTxn], _T], *, replay: bool = True) -> _T:
        """Run ``action`` in a write transaction of its own and commit it, growing the map
        and running it again as often as it runs out (for small writes outside batches)."""
        while True:
            txn = self.begin_write(replay=replay)
            try:
                result = action(txn)
                if txn.live:
                    txn.commit()
                return result
            except MapFull:
                txn.abort()
                self.grow()
            except BaseException:
                txn.abort()
                raise

    def write_cache(self, table: str, items: list[tuple[bytes, bytes]]) -> None:
        """Store rows of a cache table (``emb``) in a transaction of their own.

        A cache holds what is expensive to recompute and is keyed by its own inputs (the
        embedding cache by embedder name and content hash), so it is not memory state:
        it needs no journal entry (J2 does not apply), rebuild keeps it, and verify does
        not compare it. On a read-only handle nothing is written. Called by a thread that
        holds a read transaction when the map is full, the rows wait until that thread's
        last transaction ends (E2).
        """
        if table not in CACHE_TABLES:
            raise CortexError(f"{table!r} is not a cache table")
        self._check_usable()
        if self.readonly or not items:
            return

        def put_all(txn: WriteTxn) -> None:
            for key, value in items:
                txn.put(table, key, value)

        if not self._gate.held():
            self.write_small(put_all)
            return
        # This thread reads: it must not wait for the writer lock (a batch holding it may
        # be waiting for this read to end so it can grow the map), nor grow the map itself.
        if not self._writer.acquire(blocking=False):
            self._defer(table, items)
            return
        try:
            txn = self._begin_write("cache", replay=True)
        except StorageError:  # e.g. another process's growth to adopt: not under a read
            self._defer(table, items)
            return
        finally:
            self._writer.release()  # the transaction took it again
        try:
            put_all(txn)
            txn.commit()
        except MapFull:
            txn.abort()
            self._defer(table, items)
        except BaseException:
            txn.abort()
            raise

    def _defer(self, table: str, items: list[tuple[bytes, bytes]]) -> None:
        with self._deferred_lock:
            self._deferred.append((table, list(items)))

    def _flush_deferred(self) -> None:
        """Write the cache rows deferred by :meth:`write_cache` (no transaction held)."""
        with self._deferred_lock:
            deferred, self._deferred = self._deferred, []
        for table, items in deferred:
            self.write_cache(table, items)

    def meta_raw(self, key: bytes) -> bytes | None:
        """A raw value of ``meta`` (None when absent)."""
        with self.read() as txn:
            return txn.get("meta", key)

    def meta_value(self, key: bytes) -> Any:
        """A canonical-CBOR value from ``meta`` (None when absent)."""
        raw = self.meta_raw(key)
        return None if raw is None else decode(raw, what=f"meta {key!r}")

    def set_meta_value(self, key: bytes, value: Any) -> None:
        """Record a configuration value in ``meta`` (like the identity: not memory state)."""
        self._check_usable()
        if self.readonly:
            raise ReadOnlyError(f"{self.path} is open read-only")
        self.write_small(lambda txn: txn.put("meta", key, encode(value)))

    def grow(self) -> None:
        """Double the map size (call with no transaction of this thread open).

        Raises:
            StorageFullError: the map is at its largest size (``MAX_MAP_SIZE``).
        """
        seen = self.map_size()

        def double() -> None:
            size = self.map_size()
            if size > seen:
                return  # another thread grew it meanwhile
            if size >= MAX_MAP_SIZE:
                raise StorageFullError(
                    f"{self.path}: the store reached its largest map size ({MAX_MAP_SIZE:,}"
                    " bytes)",
                    operation="grow",
                )
            try:
                self._env.set_mapsize(min(size * 2, MAX_MAP_SIZE))
            except lmdb.Error as exc:
                raise storage_error(exc, self.path, operation="grow") from exc

        self._check_usable()
        self._gate.exclusive(double)

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
        if not self._forked and hasattr(self, "_env"):
            self._env.close()
        writer = getattr(self, "_writer", _NO_WRITER)
        if writer is not _NO_WRITER:
            writer.close()

    @property
    def closed(self) -> bool:
        return self._closed

    def table_entries(self, txn: ReadTxn, table: str) -> int:
        """How many keys ``table`` holds."""
        return txn.count(table)

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
    """A read transaction as a context manager; ``lmdb.Error`` leaving it is translated."""

    __slots__ = ("_env", "_txn")

    def __init__(self, env: Environment) -> None:
        self._env = env
        self._txn: Any = None

    def __enter__(self) -> ReadTxn:
        env = self._env
        self._txn = env._begin(write=False, operation="read")
        return ReadTxn(self._txn, env.dbs, env)

    def __exit__(self, exc_type: object, exc: BaseException | None, tb: object) -> None:
        env = self._env
        try:
            self._txn.abort()
        finally:
            env._gate.leave()
        if env._deferred and not env._gate.held():
            env._flush_deferred()
        if isinstance(exc, lmdb.Error):
            raise storage_error(exc, env.path, operation="read") from exc
