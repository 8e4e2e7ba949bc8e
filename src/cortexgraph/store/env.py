"""One LMDB environment per actor, its named tables, and guarded write transactions.

On disk: ``<root>/<actor>/data.mdb`` and ``lock.mdb`` (LMDB's own files). Tables are LMDB
named databases::

    journal    the source of truth (seq -> entry)
    snapshots  stored SnapshotManifests (not derived: replay verifies them)
    meta       identity (schema, actor, hash_name), shell bookkeeping, and the signed
               checkpoints (``checkpoint`` + u64be seq: C2SP signed notes; see trust.py)
    heads versions postings edges salience emb mmr smt
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
  cursor of the environment when it runs. Every transaction enters :class:`MapGate` (shared)
  and a resize takes it alone, waiting for the live ones to end and holding new ones back.
- E2 a writer that runs out of map aborts, doubles the map and replays its batch
  (``MapFull``); a thread holding a transaction never resizes (it would wait for itself), so
  cache rows written from inside a read are deferred until that thread's last read ends.
- E3 a map grown by another process is adopted (``set_mapsize(0)``) when LMDB reports
  ``MDB_MAP_RESIZED`` at the start of a transaction, then the transaction is begun again;
  handles live for any number of growths.
- E4 one writer at a time across threads and processes, for a batch's whole life
  (:class:`WriterLock`): a batch that grows the map re-applies its entries at the seqs it
  computed, which is only right if no other writer committed in between.

Durability: a durable handle on Linux writes in log mode (:mod:`.journal_log`, L1-L5):
each commit flushes one record of the journal log, and LMDB commits without flushing until
the handle closes. A batch writes its record ahead of its last work and flushes it at the
commit (L5). A store whose LMDB may have been left torn by a system stop is made again
from its log when it is opened.

Files: ``data.mdb`` and ``lock.mdb`` (LMDB's), ``writer.lock`` (E4; empty, only locked),
``journal.log`` and ``journal.dirty`` (log mode), ``data.mdb.untrusted`` (an LMDB file set
aside by a recovery).
"""

from __future__ import annotations

import contextlib
import itertools
import operator
import os
import struct
import threading
import weakref
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import blake3
import lmdb

from ..core.codec import decode, encode
from ..core.keys import seq_from_key, seq_key
from ..errors import (
    AlreadyOpenError,
    CorruptionError,
    CortexError,
    NotFoundError,
    ReadOnlyError,
    StorageError,
    StorageFullError,
    ValidationError,
)
from .guards import NO_WRITER, MapFull, MapGate, WriterLock, storage_error
from .journal_log import (
    DIRTY_NAME,
    LOG_END_KEY,
    LOG_NAME,
    LOGGED_TABLES,
    JournalLog,
    LogRecord,
    boot_id,
    clear_dirty,
    dirty_boot,
    encode_record,
    mark_dirty,
)
from .journal_log import MAGIC as LOG_MAGIC
from .txn import ReadTxn, WriteTxn

__all__ = [
    "CACHE_TABLES",
    "DERIVED_LAYOUT",
    "DERIVED_TABLES",
    "LAYOUT_KEY",
    "LEGACY_TABLES",
    "MAX_MAP_SIZE",
    "TABLES",
    "Environment",
    "WriteTxn",
]

TABLES = (
    "journal",
    "heads",
    "versions",
    "postings",
    "edges",
    "salience",
    "emb",
    "mmr",
    "smt",
    "meta",
    "snapshots",
)
DERIVED_TABLES = ("heads", "versions", "postings", "edges", "salience", "mmr", "smt")
#: caches: filled outside batches (no journal entry), kept by rebuild, not compared by verify
CACHE_TABLES = ("emb",)
SCHEMA = 1
#: The layout of the derived tables: what a rebuild writes (``meta`` ``b"layout"``). A
#: store that records an older one (or none while its journal has entries: a store made
#: before layouts were recorded) is rebuilt from its journal on its first writable open.
#: 1: the releases that recorded none (an ``idx`` table, an ``mmr`` row per node, a
#: keyword row per term and memory); 2: no ``idx``, an ``mmr`` row per entry, keyword
#: segments from 16 entries up (the open one rewritten by each write); 3: keyword
#: segments from one entry up (level 0 is each entry's own, never rewritten).
DERIVED_LAYOUT = 3
#: Tables of earlier layouts that this one no longer has; a rebuild deletes them.
LEGACY_TABLES = ("idx",)
LAYOUT_KEY = b"layout"
#: journal entries a record holds when a whole journal is written to the log at once
_EXPORT_CHUNK = 10_000
DEFAULT_MAP_SIZE = 1 << 30  # 1 GiB of address space; the file grows only as it is used
MAX_MAP_SIZE = 1 << 40
_T = TypeVar("_T")
_U32 = struct.Struct(">I")
_open_paths: dict[str, weakref.ref[Environment]] = {}
_registry_lock = threading.Lock()


def open_generation(path: Path) -> int | None:
    """The last committed transaction id of the environment at ``path`` if this process
    has it open, else None (see :func:`cortexgraph.store.stamp.store_generation`)."""
    with _registry_lock:
        ref = _open_paths.get(os.path.realpath(path))
        env = ref() if ref is not None else None
        if env is None or env._closed:
            return None
        return int(env._env.info()["last_txnid"])



def _forget_after_fork() -> None:
    for ref in list(_open_paths.values()):
        env = ref()
        if env is not None:
            env._forked = True
    _open_paths.clear()


os.register_at_fork(after_in_child=_forget_after_fork)





#: how many times opening a table or beginning a transaction adopts a map that another
#: process grew before giving up: each adoption can meet a further growth by a writer that
#: keeps growing the map (E3)
ADOPT_ATTEMPTS = 8


def _put_cache_rows(txn: WriteTxn, table: str, items: list[tuple[bytes, bytes]]) -> None:
    """Put cache rows in key order: in order, LMDB fills pages one after another instead
    of splitting pages all over the table (a catch-up's 100,000 vectors went in 2.4 times
    as fast); rows whose keys all come after the table's last are appended, which also
    packs the pages full."""
    ordered = sorted(items, key=operator.itemgetter(0))
    keys = [key for key, _ in ordered]
    distinct = not any(map(operator.ge, keys, itertools.islice(keys, 1, None)))
    with txn.cursor(table) as cur:
        last = bytes(cur.key()) if cur.last() else None
    if distinct and keys and (last is None or keys[0] > last):
        txn.put_sorted(table, ordered)
        return
    for key, value in ordered:
        txn.put(table, key, value)

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
        self._gate = MapGate()
        self.dbs: dict[str, Any] = {}
        self._deferred: list[tuple[str, list[tuple[bytes, bytes]]]] = []
        self._deferred_lock = threading.Lock()
        # a store whose data.mdb a recovery set aside counts as one (it is recovered)
        exists = (path / "data.mdb").exists() or (path / LOG_NAME).exists()
        if not exists and (readonly or not create):
            raise NotFoundError(f"no cortexgraph environment at {path}")
        key = os.path.realpath(path) if exists else os.path.abspath(path)
        # Log mode (store/journal_log.py): a durable handle that can tell this boot from
        # another flushes the journal log once per commit and LMDB only at close (L1-L5).
        self._boot = boot_id() if sync and not readonly else None
        self._log: JournalLog | None = None
        #: the dirty marker's path, as a string: a logged commit checks it is there
        self._dirty = os.fspath(path / DIRTY_NAME)
        recover: list[LogRecord] | None = None
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
                self._writer = WriterLock(path / "writer.lock") if not readonly else NO_WRITER
            except OSError as exc:
                raise StorageError(
                    f"cannot open a store at {path}: {exc}", operation="open"
                ) from exc
            try:
                if exists:
                    recover = self._untrusted((path / "data.mdb").exists())
                self._env = lmdb.open(
                    str(path),
                    map_size=map_size,
                    max_dbs=len(TABLES) + 4,
                    subdir=True,
                    readonly=readonly,
                    create=not readonly,
                    sync=sync and self._boot is None,
                    metasync=sync and self._boot is None,
                    readahead=False,
                    meminit=False,
                    lock=True,
                )
            except lmdb.Error as exc:
                self._writer.close()
                raise storage_error(exc, path, operation="open") from exc
            except OSError as exc:
                self._writer.close()
                raise StorageError(
                    f"cannot open a store at {path}: {exc}", operation="open"
                ) from exc
            except BaseException:
                self._writer.close()
                raise
            self._key = os.path.realpath(path)
            _open_paths[self._key] = weakref.ref(self)
        try:
            if recover is not None:
                self._recover_from_log(recover)
            self.dbs, self.identity_meta = self._setup(actor, hash_name)
            if not readonly and (path / LOG_NAME).exists():
                self._drop_uncommitted_record()
        except BaseException:
            self.close()
            raise

    # -- the journal log (store/journal_log.py) -------------------------------------------

    def _untrusted(self, lmdb_exists: bool) -> list[LogRecord] | None:
        """The journal log's records when LMDB must be made again from them, else None.

        That is so when the system went down while LMDB held unflushed commits (a dirty
        marker from another boot, L3), or when ``data.mdb`` is missing beside a log that
        holds records (a recovery cut short after setting it aside). The whole log is
        read and checked first; then, holding the writer lock, ``data.mdb`` is renamed
        ``data.mdb.untrusted`` (replacing the file an earlier recovery set aside).

        Raises:
            StorageError: a read-only open of such a store (it cannot be recovered
                without writing).
            CorruptionError: there is no journal log to recover from, or it is damaged
                before its last record (nothing is moved then).
        """

        def needed() -> bool:
            marked = dirty_boot(self.path)
            if marked is not None and marked != boot_id():
                return True
            return not lmdb_exists and self._log_has_records()

        if not needed():
            return None
        if self.readonly:
            raise StorageError(
                f"{self.path}: the system stopped while this store held writes LMDB had not"
                " flushed; open it writable once to rebuild it from its journal log",
                operation="open",
            )
        self._writer.acquire()
        try:
            if not needed():  # another process recovered it meanwhile
                return None
            records: list[LogRecord] = []
            if self._log_has_records():
                log = JournalLog(self.path, readonly=True)
                try:
                    records = list(log.records())
                finally:
                    log.close()
            if not records:
                raise CorruptionError(
                    f"{self.path}: the system stopped while this store held writes LMDB had"
                    f" not flushed, and there is no journal log to rebuild it from. If"
                    f" data.mdb is known to be whole, delete {self.path / DIRTY_NAME}",
                    table="journal",
                    operation="open",
                )
            if (self.path / "data.mdb").exists():
                os.replace(self.path / "data.mdb", self.path / "data.mdb.untrusted")
        except OSError as exc:
            raise StorageError(f"cannot recover {self.path}: {exc}", operation="open") from exc
        finally:
            self._writer.release()
        return records

    def _log_has_records(self) -> bool:
        """Whether ``journal.log`` exists and a record starts where its header ends (the
        file's size says little: it grows by zeros ahead of its records)."""
        path = self.path / LOG_NAME
        if not path.exists() or path.stat().st_size <= len(LOG_MAGIC):  # no whole header
            return False
        log = JournalLog(self.path, readonly=True)
        try:
            return log.starts_record(log.header_end)
        finally:
            log.close()

    def _recover_from_log(self, records: list[LogRecord]) -> None:
        """Load the journal and the ``meta`` and ``snapshots`` rows of ``records`` into
        the fresh LMDB, in one transaction, flushed; the facade then rebuilds the derived
        tables (no layout is recorded, so the store reads as one to rebuild)."""
        entries: list[tuple[bytes, bytes]] = []
        rows: dict[tuple[str, bytes], bytes | None] = {}
        for record in records:
            for offset, entry in enumerate(record.entries):
                entries.append((seq_key(record.first_seq + offset), entry))
            for table, key, value in record.rows:
                rows[table, key] = value
        end = records[-1].end
        try:
            txn = self._begin_write("recover", replay=True, logged=False)
            try:
                txn._dbs = {
                    name: self._env.open_db(name.encode(), txn=txn._txn, create=True)
                    for name in TABLES
                }
                for (table, key), value in sorted(rows.items()):
                    if value is not None and (table, key) != ("meta", LAYOUT_KEY):
                        txn.put(table, key, value)
                txn.put_sorted("journal", entries)
                txn.put_raw_meta(LOG_END_KEY, encode([end, len(entries)]))
                txn.commit()
            except BaseException:
                txn.abort()
                raise
            log = JournalLog(self.path)
            try:
                log.clear_from(end)  # a torn last record, never reported done
            finally:
                log.close()
            self._env.sync(True)
            clear_dirty(self.path)
        except lmdb.Error as exc:
            raise storage_error(exc, self.path, operation="recover") from exc

    def _drop_uncommitted_record(self) -> None:
        """Cut off a record past ``log_end`` (its writer died between the log's flush and
        LMDB's commit: L2). Done at a writable open, so that a later recovery cannot bring
        back a transaction this store was seen without. Only when the writer lock is free
        at once: a writer holding it may be between its flush and its commit, and its
        commit clears any such record anyway (:meth:`_clear_leftover`)."""
        if not self._writer.acquire(blocking=False):
            return
        try:
            with self.read() as txn:
                mark = self._log_end(txn)
            if mark is not None:
                log = JournalLog(self.path)
                try:
                    self._clear_leftover(log, mark[0], flush=True)
                finally:
                    log.close()
        except OSError as exc:
            raise StorageError(
                f"cannot read {self.path / LOG_NAME}: {exc}", operation="open"
            ) from exc
        finally:
            self._writer.release()

    def _log_end(self, txn: ReadTxn) -> tuple[int, int] | None:
        """``meta`` ``log_end``: the offset the log reaches and the last seq it holds."""
        raw = txn.get("meta", LOG_END_KEY)
        if raw is None:
            return None
        value = decode(raw, what="the journal log's end")
        if type(value) is not list or len(value) != 2 or not all(type(v) is int for v in value):
            raise CorruptionError(
                f"{self.path} records a bad journal log end {value!r}",
                table="meta",
                operation="open",
            )
        return value[0], value[1]

    def _open_log(self) -> JournalLog:
        """The journal log, opened at this handle's first logged commit."""
        log = self._log
        if log is None:
            log = self._log = JournalLog(self.path)
        return log

    def _clear_leftover(self, log: JournalLog, offset: int, *, flush: bool = False) -> None:
        """Zero the records that lie at ``offset``, the log's end (L2): a writer that died
        between writing its record and LMDB's commit left them (or an abort that could not
        zero its staged record, L5). A writer does so before it writes its own record
        there, since a shorter record would leave their tail behind it, and the zeros are
        flushed with that record; a writable open does so at once, flushed
        (:meth:`_drop_uncommitted_record`)."""
        stop = log.leftover_end(offset)
        if stop > offset:
            log.clear_from(offset, stop, flush=flush)

    def _log_stage(self, txn: WriteTxn) -> Callable[[], None] | None:
        """Write ``txn``'s record where the log ends, without flushing it, and start its
        writeback (L5), so that the flush at the commit overlaps the work left. Only when
        the record is the transaction's alone (the log ends where ``log_end`` says and
        holds every entry before this transaction's); otherwise nothing is staged and
        :meth:`_log_prepare` writes the record as before. Returns what takes the record
        back if the transaction aborts (None: nothing was written)."""
        assert txn.logged is not None
        entries, rows = txn.logged
        if not entries and not rows:
            return None
        log = self._open_log()
        mark = self._log_end(txn)
        first_new = txn.last_seq() - len(entries) + 1
        if mark is None or mark[0] > log.size() or mark[1] + 1 != first_new:
            return None
        offset = mark[0]
        self._clear_leftover(log, offset)
        end = log.write(offset, encode_record(first_new, entries, rows))
        txn.staged = (offset, end)

        def take_back() -> None:
            # if the zeros cannot be written, the next record's write clears the record
            # first (:meth:`_clear_leftover`), and a writable open does (L2, L5)
            with contextlib.suppress(StorageError):
                log.clear_from(offset, end)

        return take_back

    def _log_prepare(self, txn: WriteTxn) -> Callable[[], None] | None:
        """Before LMDB commits ``txn`` (it will not flush): write and flush the
        transaction's record (L1), record where the log now ends (L2), and make sure the
        dirty marker is there (L3). Returns what takes the record back should LMDB's
        commit fail (None: nothing was written). A record staged by :meth:`_log_stage` is
        only flushed.

        The first logged commit of a store without a log (made by an earlier release or
        without log mode, or copied without it) writes the log whole instead: every
        journal entry and every ``meta`` and ``snapshots`` row, this transaction's
        included. Entries a handle without log mode committed after the log's end go
        into the record too.

        The marker comes after the log's flush, right before LMDB's unflushed commit (all
        L3 asks): a system stop while a store without a marker writes its log whole then
        leaves LMDB trusted, as flushed as it was, instead of a marker that sends the
        next open to a torn log."""
        assert txn.logged is not None
        log = self._open_log()
        last = txn.last_seq()
        if txn.staged is not None:
            offset, end = txn.staged
            log.flush(offset, end)
            txn.put_raw_meta(LOG_END_KEY, encode([end, last]))
            return self._marked(lambda: log.clear_from(offset, end))
        entries, rows = txn.logged
        if not entries and not rows:
            return self._marked(None)
        mark = self._log_end(txn)
        first_new = last - len(entries) + 1  # this transaction's first entry
        whole = mark is None or mark[0] > log.size() or mark[1] >= first_new
        if whole:
            offset, start = log.header_end, 1  # no log, or not this store's: written whole
            if os.path.exists(self._dirty):
                # LMDB holds unflushed commits, and the log about to be rewritten in place
                # is what a recovery would read: flush LMDB and drop the marker first, so
                # that a system stop during the rewrite leaves LMDB trusted instead
                self._checkpoint(operation="commit")
            rows = [
                (table, bytes(key), bytes(value))
                for table in sorted(LOGGED_TABLES)
                for key, value in txn.iter_items(table, b"")
                if not (table == "meta" and bytes(key) == LOG_END_KEY)
            ]
        else:
            assert mark is not None
            offset, start = mark[0], mark[1] + 1
            self._clear_leftover(log, offset)
        chunks: Iterator[list[bytes]]
        if start < first_new:  # entries the log lacks: read back, in records of a bound size
            journal = txn.iter_items("journal", b"", seq_key(start))
            chunks = iter(
                lambda: [bytes(v) for _, v in itertools.islice(journal, _EXPORT_CHUNK)], []
            )
        else:
            chunks = iter([entries])
        end, seq = offset, start
        for chunk in chunks:
            end = log.append(end, encode_record(seq, chunk, rows))
            seq, rows = seq + len(chunk), []
        if rows:
            end = log.append(end, encode_record(seq, [], rows))
        if whole:
            log.clear_from(end)  # what an earlier log held past the new one's end
        txn.put_raw_meta(LOG_END_KEY, encode([end, last]))
        return self._marked(lambda: log.clear_from(offset, None if whole else end))

    def _marked(self, undo: Callable[[], None] | None) -> Callable[[], None] | None:
        """Create the dirty marker if it is not there (L3), last before LMDB's unflushed
        commit; if that fails, take the flushed record back (``undo``) and raise."""
        boot = self._boot
        assert boot is not None
        if not os.path.exists(self._dirty):
            try:
                mark_dirty(self.path, boot)
            except BaseException:
                if undo is not None:
                    undo()
                raise
        return undo

    def _unlog_prepare(self, txn: WriteTxn) -> None:
        """Before a commit without log mode: one that adds what the log carries leaves the
        log behind, so its end goes (the next logged commit writes it whole again, and
        verify holds nothing against it meanwhile)."""
        assert txn.logged is not None
        entries, rows = txn.logged
        if (entries or rows) and txn.get("meta", LOG_END_KEY) is not None:
            txn.delete_raw_meta(LOG_END_KEY)

    def check_log(self, txn: ReadTxn) -> list[str]:
        """What is wrong with the journal log against the store as ``txn`` sees it (empty:
        nothing). Every entry must be the journal's, and the rows, applied in order, must
        be ``meta``'s and ``snapshots``' (``meta`` ``log_end`` and ``layout`` aside). A
        store never written in log mode (no ``log_end``), or a copy of ``data.mdb``
        without its log, has nothing to check: LMDB's journal is the one verified, and the
        next durable commit writes a missing log whole."""
        mark = self._log_end(txn)
        path = self.path / LOG_NAME
        if mark is None or not path.exists():
            return []
        problems: list[str] = []
        log = JournalLog(self.path, readonly=True)
        try:
            rows: dict[tuple[str, bytes], bytes | None] = {}
            journal = txn.iter_items("journal", b"")
            seq = 0
            for record in log.records(end=mark[0]):
                for entry in record.entries:
                    seq += 1
                    item = next(journal, None)
                    if item is None or seq_from_key(bytes(item[0])) != seq or item[1] != entry:
                        return [f"{path}: entry {seq} differs from the journal's"]
                for table, key, value in record.rows:
                    rows[table, key] = value
            if seq != mark[1] or next(journal, None) is not None:
                problems.append(f"{path} holds {seq} entries; the journal {txn.last_seq()}")
            stored: dict[tuple[str, bytes], bytes | None] = {
                (table, bytes(key)): bytes(value)
                for table in sorted(LOGGED_TABLES)
                for key, value in txn.iter_items(table, b"")
            }
            logged = {k: v for k, v in rows.items() if v is not None}
            for unlogged in (("meta", LOG_END_KEY), ("meta", LAYOUT_KEY)):
                stored.pop(unlogged, None)
                logged.pop(unlogged, None)
            for table, key in sorted(set(stored) | set(logged)):
                if stored.get((table, key)) != logged.get((table, key)):
                    problems.append(f"{path}: {table} row {key!r} differs from the store's")
        except CorruptionError as exc:
            problems.append(str(exc))
        finally:
            log.close()
        return problems

    def _checkpoint(self, *, operation: str = "close") -> None:
        """Flush LMDB and remove the dirty marker, holding the writer lock (L3)."""
        self._writer.acquire()
        try:
            self._env.sync(True)
            clear_dirty(self.path)
        except lmdb.Error as exc:
            raise storage_error(exc, self.path, operation=operation) from exc
        finally:
            self._writer.release()

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
                for attempt in range(ADOPT_ATTEMPTS):
                    try:
                        dbs[name] = self._env.open_db(name.encode(), create=False)
                        break
                    except lmdb.MapResizedError:  # that transaction met another's growth (E3)
                        if attempt == ADOPT_ATTEMPTS - 1:
                            raise
                        self._adopt_map()
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
            txn.put("meta", LAYOUT_KEY, encode(DERIVED_LAYOUT))
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
            for _ in range(ADOPT_ATTEMPTS - 1):
                self._adopt_map_outside(gate)
                try:
                    return self._env.begin(write=write, buffers=False)
                except lmdb.MapResizedError:  # grown again meanwhile: adopt again
                    continue
            self._adopt_map_outside(gate)
            return self._env.begin(write=write, buffers=False)  # the last attempt
        except lmdb.Error as exc:
            gate.leave()
            raise storage_error(exc, self.path, operation=operation) from exc
        except BaseException:
            gate.leave()
            raise

    def _adopt_map_outside(self, gate: Any) -> None:
        """Adopt a grown map with this thread's place in ``gate`` given up meanwhile (the
        resize waits for every live transaction of the process, this one's included)."""
        gate.leave()
        try:
            self._adopt_map()
        finally:
            gate.enter()

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

    def _begin_write(
        self, operation: str, *, replay: bool = False, logged: bool = True
    ) -> WriteTxn:
        writer = self._writer
        writer.acquire()
        try:
            txn = self._begin(write=True, operation=operation)
        except BaseException:
            writer.release()
            raise
        stage = None
        if not logged:
            prepare = None
        elif self._boot is not None:
            prepare, stage = self._log_prepare, self._log_stage
        else:
            prepare = self._unlog_prepare
        return WriteTxn(
            txn,
            self.dbs,
            self.path,
            on_end=self._end_write,
            replay=replay,
            prepare=prepare,
            stage=stage,
        )

    def _end_write(self) -> None:
        """What a write transaction gives back when it ends: its place in the map gate
        and the writer lock."""
        self._gate.leave()
        self._writer.release()

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
        last transaction ends (E2). Values may be memoryviews: they are copied before
        this returns.
        """
        if table not in CACHE_TABLES:
            raise CortexError(f"{table!r} is not a cache table")
        self._check_usable()
        if self.readonly or not items:
            return

        def put_all(txn: WriteTxn) -> None:
            _put_cache_rows(txn, table, items)

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
        # values may be views of a buffer the caller reuses once write_cache returns
        rows = [(key, bytes(value)) for key, value in items]
        with self._deferred_lock:
            self._deferred.append((table, rows))

    def _flush_deferred(self) -> None:
        """Write the cache rows deferred by :meth:`write_cache` (no transaction held)."""
        with self._deferred_lock:
            deferred, self._deferred = self._deferred, []
        for table, items in deferred:
            self.write_cache(table, items)

    def stored_layout(self) -> int | None:
        """The layout of the derived tables as ``meta`` records it: None when it records
        none and the journal is empty (a new store, or one made empty by an earlier
        release); 1 when it records none but has entries (it predates the record)."""
        with self.read() as txn:
            raw = txn.get("meta", LAYOUT_KEY)
            if raw is None:
                return 1 if txn.last_seq() else None
        layout = decode(raw, what="the layout record")
        if type(layout) is not int or layout < 1:
            raise CorruptionError(
                f"{self.path} records a bad layout {layout!r}", table="meta", operation="open"
            )
        return layout

    def drop_legacy_tables(self, txn: WriteTxn) -> None:
        """Delete the tables of earlier layouts (:data:`LEGACY_TABLES`) inside ``txn``."""
        present = self._main_keys(txn)
        for name in LEGACY_TABLES:
            if name.encode() in present:
                try:
                    db = self._env.open_db(name.encode(), txn=txn._txn, create=False)
                    txn._txn.drop(db, delete=True)
                except lmdb.Error as exc:
                    raise storage_error(exc, self.path, table=name, operation="drop") from exc

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
            try:
                if self._log is not None:
                    self._checkpoint()
            finally:
                if self._log is not None:
                    self._log.close()
                self._env.close()
        writer = getattr(self, "_writer", NO_WRITER)
        if writer is not NO_WRITER:
            writer.close()

    @property
    def closed(self) -> bool:
        return self._closed

    def table_entries(self, txn: ReadTxn, table: str) -> int:
        """How many keys ``table`` holds."""
        return txn.count(table)

    def table_digest(self, txn: ReadTxn, table: str) -> bytes:
        """BLAKE3 over every (key, value) of ``table`` in key order, length-prefixed.

        ``meta``'s ``log_end`` is left out: where the journal log ends depends on how the
        store was written (with or without log mode, in which records), not on what it
        holds."""
        h = blake3.blake3()
        parts: list[bytes] = []
        append, pack = parts.append, _U32.pack
        with txn.cursor(table) as cur:
            for key, value in cur:
                if table == "meta" and key == LOG_END_KEY:
                    continue
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
        gate = env._gate
        gate.enter()
        try:
            # begin(db, parent, write, buffers): positional, as py-lmdb parses them fastest
            self._txn = env._env.begin(None, None, False, False)
        except lmdb.Error:  # a map to adopt (E3) or a failure: the general path says which
            gate.leave()
            self._txn = env._begin(write=False, operation="read")
        except BaseException:
            gate.leave()
            raise
        return ReadTxn(self._txn, env.dbs, env.path)

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
