"""The store's guards: LMDB error translation, the map gate and the writer lock.

- :func:`storage_error` is the one place an ``lmdb.Error`` becomes a typed error:
  LMDB's corruption and page checks become ``CorruptionError``, a full disk
  ``StorageFullError``, other I/O failures ``StorageError``, each naming the table and the
  operation.
- :class:`MapGate` keeps map resizes apart from live transactions (E1; see
  :mod:`cortexgraph.store.env` for E1-E4).
- :class:`WriterLock` lets one writer at a time work, across threads and processes, for a
  batch's whole life (E4).
"""

from __future__ import annotations

import errno
import fcntl
import os
import threading
from collections.abc import Callable
from pathlib import Path
from threading import get_ident
from typing import TypeVar

import lmdb

from ..errors import (
    CorruptionError,
    CortexError,
    ReadOnlyError,
    StorageError,
    StorageFullError,
)

__all__ = [
    "FULL_DISK_MARGIN",
    "FULL_ERRNOS",
    "NO_WRITER",
    "MapFull",
    "MapGate",
    "NoWriter",
    "WriterLock",
    "free_bytes",
    "storage_error",
]

#: an I/O error (EIO) with less than this free on the store's file system is a full disk:
#: LMDB turns a short write, which is how a full disk often shows, into EIO
FULL_DISK_MARGIN = 64 << 20

_T = TypeVar("_T")

#: LMDB errors that mean the bytes on disk are not what LMDB wrote
_CORRUPT = (
    lmdb.CorruptedError,
    lmdb.PageNotFoundError,
    lmdb.InvalidError,
    lmdb.VersionMismatchError,
    lmdb.IncompatibleError,
    lmdb.BadChecksumError,
)
#: errnos that mean the disk (or a quota, or a file size limit) is full
FULL_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG})


class MapFull(Exception):
    """The LMDB map is full; the writer grows it and replays the batch's entries."""


def free_bytes(path: Path) -> int | None:
    """The bytes free for this user on the file system of ``path`` (None: unknown)."""
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
    full = isinstance(exc, lmdb.DiskError) or code in FULL_ERRNOS or code == errno.EIO
    free = free_bytes(path) if full else None  # the file system is asked once
    if code == errno.EIO and not isinstance(exc, lmdb.DiskError):
        full = free is not None and free < FULL_DISK_MARGIN
    if full:
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


class MapGate:
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


class WriterLock:
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


class NoWriter(WriterLock):
    """The writer lock of a read-only handle, which never writes."""

    def __init__(self) -> None:
        pass

    def acquire(self, *, blocking: bool = True) -> bool:
        raise CortexError("a read-only handle takes no writer lock")

    def close(self) -> None:
        pass


NO_WRITER = NoWriter()
