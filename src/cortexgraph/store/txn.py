"""Transactions over one environment's tables: :class:`ReadTxn` and :class:`WriteTxn`.

Every ``lmdb.Error`` they meet is translated by :func:`~cortexgraph.store.guards.storage_error`
(a full map becomes :class:`~cortexgraph.store.guards.MapFull`, which the writer handles).
A write transaction enforces J1 (the journal is append-only) and J2 (no mutation without a
journal entry); see :mod:`cortexgraph.store.env`.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import lmdb

from ..core.keys import seq_from_key, seq_key
from ..errors import BatchNoJournalError, CorruptionError, CortexError
from .guards import MapFull, storage_error
from .journal_log import LOGGED_TABLES

__all__ = ["ReadTxn", "WriteTxn"]


class ReadTxn:
    """A read-only view of the tables at one instant."""

    __slots__ = ("_dbs", "_path", "_txn")

    def __init__(self, txn: Any, dbs: dict[str, Any], path: Path) -> None:
        self._txn = txn
        self._dbs = dbs
        self._path = path

    def _error(self, exc: lmdb.Error, table: str | None, operation: str) -> CortexError:
        return storage_error(exc, self._path, table=table, operation=operation)

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

    def iter_items(
        self, table: str, prefix: bytes, start: bytes | None = None
    ) -> Iterator[tuple[bytes, bytes]]:
        """``(key, value)`` pairs of ``table`` whose key starts with ``prefix``, in order
        (from the first key at or above ``start``, when given)."""
        try:
            with self._txn.cursor(db=self._dbs[table]) as cur:
                if not cur.set_range(prefix if start is None else max(start, prefix)):
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

    It holds a place in the map gate, and the writer lock, from its start until it commits
    or aborts (once); ``on_end`` gives both back.
    """

    __slots__ = (
        "_on_end",
        "_prepare",
        "_stage",
        "_take_back",
        "entries",
        "live",
        "logged",
        "mutations",
        "replay",
        "staged",
    )

    def __init__(
        self,
        txn: Any,
        dbs: dict[str, Any],
        path: Path,
        *,
        on_end: Callable[[], None],
        replay: bool = False,
        prepare: Callable[[WriteTxn], Callable[[], None] | None] | None = None,
        stage: Callable[[WriteTxn], Callable[[], None] | None] | None = None,
    ) -> None:
        super().__init__(txn, dbs, path)
        self._on_end = on_end
        # In log mode (store/journal_log.py) what the journal log must carry, and the
        # environment's step that writes and flushes it before LMDB commits (L1); the step
        # returns what undoes it should the commit fail.
        self._prepare = prepare
        self.logged: tuple[list[bytes], list[tuple[str, bytes, bytes | None]]] | None = (
            None if prepare is None else ([], [])
        )
        # The step that writes the record ahead of the commit, unflushed (L5), and once it
        # ran, the record's place in the log and what takes it back on an abort.
        self._stage = stage
        self.staged: tuple[int, int] | None = None
        self._take_back: Callable[[], None] | None = None
        self.entries = 0
        self.mutations = 0
        self.live = True
        self.replay = replay  # rebuilding derived state from the journal itself (J2 exempt)

    def _write_error(self, exc: lmdb.Error, table: str | None, operation: str) -> Exception:
        if isinstance(exc, lmdb.MapFullError):
            return MapFull()
        return self._error(exc, table, operation)

    def _logging(self, what: str) -> None:
        """Refuse what the journal log carries once the record is staged (L5)."""
        if self.staged is not None:
            raise CortexError(
                f"cannot {what}: this transaction's journal log record is already written"
            )

    def put(self, table: str, key: bytes, value: bytes) -> None:
        if self.logged is not None and table in LOGGED_TABLES:
            self._logging(f"put a {table} row")
            self.logged[1].append((table, key, value))
        self.mutations += 1
        try:
            self._txn.put(key, value, True, True, False, self._dbs[table])
        except lmdb.Error as exc:
            raise self._write_error(exc, table, "put") from None

    def delete(self, table: str, key: bytes) -> None:
        if self.logged is not None and table in LOGGED_TABLES:
            self._logging(f"delete a {table} row")
            self.logged[1].append((table, key, None))
        self.mutations += 1
        try:
            self._txn.delete(key, b"", self._dbs[table])
        except lmdb.Error as exc:
            raise self._write_error(exc, table, "delete") from None

    def apply_mutations(self, mutations: list[tuple[str, bytes, bytes | None]]) -> None:
        """Put or delete each ``(table, key, value)`` of a derived table; ``None`` deletes.

        Only derived rows come this way (a write's and a replay's), so nothing here is for
        the journal log: rows of ``meta`` and ``snapshots`` go through :meth:`put`,
        :meth:`delete` and :meth:`put_snapshot`, which record them."""
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

    def put_sorted(self, table: str, items: list[tuple[bytes, bytes]]) -> None:
        """Append ``items`` (distinct keys in ascending byte order, all above the table's
        last key: an emptied table) page by page, as a bulk load does."""
        if not items:
            return
        self.mutations += len(items)
        try:
            with self._txn.cursor(db=self._dbs[table]) as cur:
                consumed, added = cur.putmulti(items, dupdata=False, overwrite=False, append=True)
        except lmdb.Error as exc:
            raise self._write_error(exc, table, "put") from None
        if consumed != len(items) or added != len(items):
            raise CorruptionError(
                f"a bulk load of {table!r} stored {added} of {len(items)} rows",
                table=table,
                operation="put",
            )

    def append_entry(self, seq: int, data: bytes) -> None:
        """Append one journal entry at ``seq`` (J1: never overwrites)."""
        self._logging("append a journal entry")
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
        if self.logged is not None:
            self.logged[0].append(data)

    def put_raw_meta(self, key: bytes, value: bytes) -> None:
        """Put a ``meta`` row the journal log does not carry (its own end, L2)."""
        try:
            self._txn.put(key, value, db=self._dbs["meta"])
        except lmdb.Error as exc:
            raise self._write_error(exc, "meta", "put") from None

    def delete_raw_meta(self, key: bytes) -> None:
        """Delete a ``meta`` row the journal log does not carry (its own end, L2)."""
        try:
            self._txn.delete(key, b"", self._dbs["meta"])
        except lmdb.Error as exc:
            raise self._write_error(exc, "meta", "delete") from None

    def put_snapshot(self, key: bytes, value: bytes) -> None:
        """Store a snapshot manifest. Snapshots are records *about* the journal, not
        mutations of memory state, so they need no journal entry (J2 does not apply)."""
        if self.logged is not None:
            self._logging("store a snapshot")
        try:
            self._txn.put(key, value, db=self._dbs["snapshots"])
        except lmdb.Error as exc:
            raise self._write_error(exc, "snapshots", "put") from None
        if self.logged is not None:
            self.logged[1].append(("snapshots", key, value))

    def drop(self, table: str) -> None:
        """Empty one table (used by rebuild, inside the rebuild's transaction)."""
        self.mutations += 1
        try:
            self._txn.drop(self._dbs[table], delete=False)
        except lmdb.Error as exc:
            raise self._write_error(exc, table, "drop") from None

    def stage_log(self) -> None:
        """Write this transaction's journal log record now, ahead of the commit that
        flushes it, so that the disk writes it while the transaction's last work runs
        (L5). After it the transaction appends no journal entry and puts no row the log
        carries. Nothing happens outside log mode, or when already staged."""
        if self._stage is not None and self.staged is None and self.live:
            self._take_back = self._stage(self)

    def commit(self) -> None:
        if self.mutations and not self.entries and not self.replay:
            self.abort()
            raise BatchNoJournalError(
                f"a batch made {self.mutations} store mutation(s) without a journal entry"
            )
        try:
            undo = self._prepare(self) if self._prepare is not None else None
        except BaseException:
            self.abort()  # the log's record was not flushed: LMDB must not commit either
            raise
        self._take_back = None  # from here on ``undo`` is what takes the record back
        try:
            self._txn.commit()
        except BaseException as exc:
            if undo is not None:
                undo()  # the record of a commit that failed must not outlive it (L1)
            if isinstance(exc, lmdb.Error):
                raise self._write_error(exc, None, "commit") from None
            raise
        finally:
            self._end()

    def abort(self) -> None:
        if self.live:
            try:
                self._txn.abort()
            finally:
                take_back, self._take_back = self._take_back, None
                try:
                    if take_back is not None:
                        take_back()  # a staged record, under the writer lock still (L5)
                finally:
                    self._end()

    def _end(self) -> None:
        if self.live:
            self.live = False
            self._on_end()
