"""The journal log: an append-only file that makes a durable commit cost one flush.

LMDB makes a commit durable with two flushes in order: the data pages, then the meta page.
In log mode a write transaction first appends what it adds that cannot be derived from
anything else — its journal entries and its rows of ``meta`` and ``snapshots`` — to
``journal.log`` as one record and flushes that file once (``fdatasync``); then it commits to
LMDB without a flush. The log therefore holds, from the store's creation on, every journal
entry and every ``meta`` and ``snapshots`` row: everything but the derived tables and the
caches, which a rebuild makes again.

The rules that keep this as safe as LMDB's own durable commit (L1-L5):

- L1 a transaction is reported done only after its record is flushed, and LMDB commits
  after the flush; a commit that fails truncates the record away again.
- L2 ``meta`` ``log_end`` (in LMDB, written by the same transaction) records the offset the
  log reaches and the last seq it holds. The next writer writes its record at that offset:
  a record beyond it never reached LMDB (its process died between the flush and the commit)
  and is zeroed first, walked by its lengths, so that a shorter record leaves none of it
  behind.
- L3 ``journal.dirty`` holds the boot id of the running system while LMDB holds commits that
  were not flushed; a writer creates it (flushed) before its first unflushed commit, and a
  writable handle's ``close`` flushes LMDB and removes it, holding the writer lock. On open,
  a marker with this boot's id means only processes died: the kernel still holds every page
  they wrote, so LMDB is whole. A marker with another boot's id means the system went down
  with unflushed LMDB pages, which may have reached the disk in any order: LMDB is not
  trusted, it is set aside as ``data.mdb.untrusted`` and the store is made again from the
  log (the journal and rows loaded as they are, the derived tables rebuilt by the facade).
- L4 where no boot id can be read (systems other than Linux), log mode is off and LMDB
  flushes its own commits as before.
- L5 a transaction may write its record early, not flushed ("staged"): a batch does so
  once its entries are all appended, before its last work (the SMT and the keyword
  segment), and asks the kernel to start writing it back (:func:`start_writeback`); the
  commit then only flushes it. A staged transaction adds nothing more that the log
  carries (refused), and one that aborts zeroes its record again and flushes the zeros,
  so that no recovery brings it back; zeros that cannot be written are written before
  the next record.

The file: an 8-byte header (:data:`MAGIC`), then records, then zeros to the file's end (the
file grows by zeros a megabyte to 16 MiB at a time, so that an append overwrites zeros in
place and its flush writes no file metadata). A record is a 4-byte big-endian length ``n``
(never 0), ``n`` bytes of canonical CBOR ``[first_seq, [entry, ...], [[table, key,
value-or-null], ...]]`` and the 32-byte BLAKE3 of the length and the CBOR. A scan ends at a
length of 0 followed by zeros only. A record that runs past the file, or does not match its
hash and is followed by zeros only, is the last write torn by a crash, never reported done,
and the scan ends before it; a record that does not match its hash anywhere else, or a
length of 0 before the end, is damage, reported as such.
"""

from __future__ import annotations

import ctypes
import os
import struct
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from blake3 import blake3

from ..core.codec import decode, encode
from ..errors import CorruptionError, StorageError, StorageFullError
from .guards import FULL_ERRNOS

__all__ = [
    "DIRTY_NAME",
    "LOGGED_TABLES",
    "LOG_END_KEY",
    "LOG_NAME",
    "MAGIC",
    "JournalLog",
    "LogRecord",
    "boot_id",
    "clear_dirty",
    "dirty_boot",
    "encode_record",
    "fsync_dir",
    "mark_dirty",
    "start_writeback",
]

LOG_NAME = "journal.log"
DIRTY_NAME = "journal.dirty"
MAGIC = b"CGJLOG1\n"
#: the tables whose rows the log carries beside the journal: not derived, not caches
LOGGED_TABLES = frozenset({"meta", "snapshots"})
#: ``meta`` key of ``[offset the log reaches, last seq it holds]`` (L2); never logged itself
LOG_END_KEY = b"log_end"
_LEN = struct.Struct(">I")
_HASH = 32
_MAX_RECORD = 1 << 31  # a record's CBOR is at most this long: a bigger length is damage
_GROW = 1 << 20  # the file grows by zeros in steps of at least this
#: and of at most this (unless one record needs more): growing by an eighth of a large log
#: would make one commit write tens of megabytes of zeros
_GROW_MAX = 16 << 20
_BOOT_ID = Path("/proc/sys/kernel/random/boot_id")
#: ``fdatasync`` where the system has it (not macOS: a log written on Linux may be recovered
#: there), else ``fsync``
_datasync = getattr(os, "fdatasync", os.fsync)


def _sync_file_range() -> Callable[[int, int, int, int], int] | None:
    """Linux's ``sync_file_range`` from the C library (None where there is none)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        function = ctypes.CDLL(None, use_errno=True).sync_file_range
    except (OSError, AttributeError):
        return None
    function.argtypes = [ctypes.c_int, ctypes.c_int64, ctypes.c_int64, ctypes.c_uint]
    function.restype = ctypes.c_int
    return function


_SYNC_FILE_RANGE_WRITE = 2  # start writing the range's dirty pages; do not wait
_range_sync = _sync_file_range()


def start_writeback(fd: int, offset: int, count: int) -> None:
    """Ask the kernel to start writing ``count`` bytes of ``fd`` from ``offset`` to the
    disk, and return at once (``sync_file_range`` with ``SYNC_FILE_RANGE_WRITE``). A
    flush that follows after other work then mostly waits for the disk's cache flush,
    not for the write too: on this project's bench machine a record's ``fdatasync``
    took 96 µs after 50 µs of other work instead of 155 µs. Only a hint: it makes
    nothing durable, and where the call is missing or fails nothing is lost but time."""
    if _range_sync is not None:
        _range_sync(fd, offset, count, _SYNC_FILE_RANGE_WRITE)

Row = tuple[str, bytes, bytes | None]


def io_error(exc: OSError, path: Path, what: str) -> StorageError:
    """The typed error for an ``OSError`` met while doing ``what`` to ``path``: a full
    disk is a :class:`StorageFullError`."""
    if exc.errno in FULL_ERRNOS:
        return StorageFullError(f"{path}: no space left to {what} ({exc})", operation="log")
    return StorageError(f"cannot {what} {path}: {exc}", operation="log")


def boot_id() -> str | None:
    """This boot of the system, as Linux names it (None where it cannot be read: L4)."""
    try:
        text = _BOOT_ID.read_text(encoding="ascii").strip()
    except (OSError, UnicodeDecodeError):
        return None
    return text or None


def fsync_dir(directory: Path) -> None:
    """Flush ``directory``'s entries (a file created, renamed or removed in it)."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def dirty_boot(directory: Path) -> str | None:
    """The boot id in ``journal.dirty`` (None when there is no marker)."""
    try:
        return (directory / DIRTY_NAME).read_text(encoding="ascii").strip()
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        raise StorageError(
            f"cannot read {directory / DIRTY_NAME}: {exc}", operation="open"
        ) from exc


def mark_dirty(directory: Path, boot: str) -> None:
    """Create ``journal.dirty`` with ``boot``, flushed with its directory entry (L3)."""
    path = directory / DIRTY_NAME
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            os.write(fd, boot.encode("ascii") + b"\n")
            os.fsync(fd)
        finally:
            os.close(fd)
        fsync_dir(directory)
    except OSError as exc:
        raise io_error(exc, path, "write") from exc


def clear_dirty(directory: Path) -> None:
    """Remove ``journal.dirty`` (after LMDB was flushed), the removal flushed (L3)."""
    try:
        os.unlink(directory / DIRTY_NAME)
        fsync_dir(directory)
    except FileNotFoundError:
        return
    except OSError as exc:
        raise io_error(exc, directory / DIRTY_NAME, "remove") from exc


def encode_record(first_seq: int, entries: Sequence[bytes], rows: Sequence[Row]) -> bytes:
    """One log record: length, canonical CBOR of ``[first_seq, entries, rows]``, hash."""
    body = encode([first_seq, list(entries), [list(row) for row in rows]])
    head = _LEN.pack(len(body))
    return head + body + blake3(head + body).digest()


class LogRecord:
    """A record read back from the log: what one transaction added."""

    __slots__ = ("end", "entries", "first_seq", "rows")

    def __init__(self, first_seq: int, entries: list[bytes], rows: list[Row], end: int) -> None:
        self.first_seq = first_seq
        self.entries = entries
        self.rows = rows
        self.end = end  # the offset just past the record

    @property
    def last_seq(self) -> int:
        return self.first_seq + len(self.entries) - 1


def _record(body: bytes, end: int, path: Path) -> LogRecord:
    value: Any = decode(body, what=f"a record of {path}")
    if (
        type(value) is not list
        or len(value) != 3
        or type(value[0]) is not int
        or value[0] < 1
        or type(value[1]) is not list
        or type(value[2]) is not list
        or not all(type(entry) is bytes for entry in value[1])
    ):
        raise CorruptionError(
            f"{path}: a record that is not [first_seq, entries, rows]", operation="log"
        )
    rows: list[Row] = []
    for row in value[2]:
        if (
            type(row) is not list
            or len(row) != 3
            or row[0] not in LOGGED_TABLES
            or type(row[1]) is not bytes
            or not (row[2] is None or type(row[2]) is bytes)
        ):
            raise CorruptionError(f"{path}: a record with a bad row {row!r}", operation="log")
        rows.append((row[0], row[1], row[2]))
    return LogRecord(value[0], value[1], rows, end)


class JournalLog:
    """The log file of one store, open for reading and writing (L1, L2).

    Args:
        directory: the store's directory; the file is ``journal.log`` in it, created (with
            its header, flushed) when absent.
        readonly: only read it (it must exist).

    Raises:
        StorageError: the file cannot be opened or created.
        CorruptionError: the file does not start with the log's header.
    """

    def __init__(self, directory: Path, *, readonly: bool = False) -> None:
        self.path = directory / LOG_NAME
        flags = os.O_RDONLY if readonly else os.O_RDWR | os.O_CREAT
        try:
            self._fd = os.open(self.path, flags | os.O_CLOEXEC, 0o644)
        except OSError as exc:
            raise io_error(exc, self.path, "open") from exc
        try:
            head = os.pread(self._fd, len(MAGIC), 0)
            if len(head) < len(MAGIC) and MAGIC.startswith(head) and not readonly:
                self._write_at(0, MAGIC)  # new, or its creation was cut short
                os.fsync(self._fd)
                fsync_dir(directory)
            elif head != MAGIC:
                raise CorruptionError(f"{self.path} is not a journal log", operation="log")
        except OSError as exc:
            os.close(self._fd)
            raise io_error(exc, self.path, "create") from exc
        except BaseException:
            os.close(self._fd)
            raise

    @property
    def header_end(self) -> int:
        """The offset of the first record."""
        return len(MAGIC)

    def size(self) -> int:
        return os.fstat(self._fd).st_size

    def _write_at(self, offset: int, data: bytes) -> None:
        view = memoryview(data)
        while view:
            written = os.pwrite(self._fd, view, offset)
            view, offset = view[written:], offset + written

    def _reserve(self, end: int) -> None:
        """Make the file at least ``end`` bytes long, growing it by zeros in steps, so that
        most appends overwrite zeros in place: a flush then writes the record's blocks and
        no file metadata (measured 196 -> 139 µs a commit beside LMDB's writes)."""
        size = self.size()
        if end <= size:
            return
        grown = max(end, size + min(max(_GROW, size // 8), _GROW_MAX))
        grown += -grown % _GROW
        self._write_at(size, bytes(grown - size))

    def append(self, offset: int, record: bytes) -> int:
        """Write ``record`` at ``offset`` and flush (L1, L2). The bytes from ``offset`` on
        must be zeros (the log's end), or be cleared by :meth:`clear_from` after.

        Returns:
            The offset just past the record.

        Raises:
            StorageError: the write or the flush failed (what was written is cleared
                again when possible).
        """
        end = self.write(offset, record, writeback=False)  # flushed at once: no head start
        self.flush(offset, end)
        return end

    def write(self, offset: int, record: bytes, *, writeback: bool = True) -> int:
        """Write ``record`` at ``offset`` without waiting for the disk, and start writing
        it back (:func:`start_writeback`, unless ``writeback`` is false): the first half of
        :meth:`append`, which a commit does ahead of its last work so that :meth:`flush`
        then finds the record on its way (L5). Returns the offset just past the record.

        Raises:
            StorageError: the write failed (what was written is cleared again when
                possible).
        """
        end = offset + len(record)
        try:
            self._reserve(end)
            self._write_at(offset, record)
        except OSError as exc:
            self.clear_from(offset, end)
            raise io_error(exc, self.path, "append to") from exc
        if writeback:
            start_writeback(self._fd, offset, len(record))
        return end

    def flush(self, offset: int, end: int) -> None:
        """Flush the record :meth:`write` wrote from ``offset`` to ``end`` (L1).

        Raises:
            StorageError: the flush failed (the record is cleared again when possible).
        """
        try:
            _datasync(self._fd)
        except OSError as exc:
            self.clear_from(offset, end)
            raise io_error(exc, self.path, "append to") from exc

    def clear_from(self, end: int, stop: int | None = None, *, flush: bool = True) -> None:
        """Zero the log from ``end`` (to ``stop``, default the file's end) and flush: the
        log ends at ``end`` (a record whose commit failed, L1; one never committed, L2).
        With ``flush=False`` the zeros wait for the flush of the record written next."""
        try:
            limit = self.size() if stop is None else min(stop, self.size())
            offset = end
            while offset < limit:
                count = min(_GROW, limit - offset)
                self._write_at(offset, bytes(count))
                offset += count
            if limit > end and flush:
                _datasync(self._fd)
        except OSError as exc:
            raise io_error(exc, self.path, "clear") from exc

    def leftover_end(self, offset: int) -> int:
        """Where the records that lie at ``offset``, past the log's end, stop: records a
        writer wrote and never committed (it died between its write and LMDB's commit,
        L2), walked by their lengths (the file's end if a length is damaged); ``offset``
        when the log's zeros start there, as they do but after such a death. One small
        read in the common case."""
        try:
            position = offset
            size = -1  # read once a record is found
            while True:
                head = os.pread(self._fd, _LEN.size, position)
                if len(head) < _LEN.size:  # the file ends here
                    return position + len(head)
                (length,) = _LEN.unpack(head)
                if length == 0:
                    return position
                if size < 0:
                    size = self.size()
                following = position + _LEN.size + length + _HASH
                if length > _MAX_RECORD or following > size:
                    return size
                position = following
        except OSError as exc:
            raise io_error(exc, self.path, "read") from exc

    def starts_record(self, offset: int) -> bool:
        """Whether anything but the zeros of the log's end lies at ``offset``."""
        try:
            return os.pread(self._fd, _LEN.size, offset).strip(b"\0") != b""
        except OSError as exc:
            raise io_error(exc, self.path, "read") from exc

    def records(self, *, end: int | None = None) -> Iterator[LogRecord]:
        """The records in order, up to ``end`` (default: the first torn or damaged one).

        Raises:
            CorruptionError: a record before ``end`` is damaged, or a record's seqs do not
                follow the one before it.
        """
        try:
            yield from self._records(end)
        except OSError as exc:
            raise io_error(exc, self.path, "read") from exc

    def _records(self, end: int | None) -> Iterator[LogRecord]:
        limit = self.size() if end is None else end
        offset = self.header_end
        next_seq = 1
        while offset < limit:
            head = os.pread(self._fd, _LEN.size, offset)
            length = _LEN.unpack(head)[0] if len(head) == _LEN.size else -1
            start = offset + _LEN.size
            stop = start + length + _HASH
            if length == 0 and end is None:  # the zeros of the log's end (no record is empty)
                if self._zeros_from(offset, limit):
                    return
                raise CorruptionError(
                    f"{self.path}: a record of length 0 at offset {offset}, before its end",
                    operation="log",
                )
            if length < 0 or length > _MAX_RECORD or stop > limit:
                if end is None:
                    return  # a torn last record: never reported done
                raise CorruptionError(
                    f"{self.path}: the record at offset {offset} runs past {limit}",
                    operation="log",
                )
            data = os.pread(self._fd, length + _HASH, start)
            body, digest = data[:length], data[length:]
            if blake3(head + body).digest() != digest:
                if end is None and self._zeros_from(stop, limit):
                    return  # the last write, torn: only the log's zeros follow it
                raise CorruptionError(
                    f"{self.path}: the record at offset {offset} does not match its hash",
                    operation="log",
                )
            record = _record(body, stop, self.path)
            if record.first_seq != next_seq:
                raise CorruptionError(
                    f"{self.path}: the record at offset {offset} starts at seq"
                    f" {record.first_seq}, after seq {next_seq - 1}",
                    operation="log",
                )
            next_seq += len(record.entries)
            yield record
            offset = stop

    def _zeros_from(self, offset: int, limit: int) -> bool:
        """Whether every byte from ``offset`` to ``limit`` is zero."""
        while offset < limit:
            chunk = os.pread(self._fd, min(1 << 20, limit - offset), offset)
            if not chunk or chunk.count(0) != len(chunk):
                return not chunk
            offset += len(chunk)
        return True

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
