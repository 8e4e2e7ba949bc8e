"""A structural check of an LMDB data file, read without LMDB.

LMDB trusts its pages: it does not checksum them, and it follows a page's node offsets and
sizes without checking that they stay inside the page or the file. One flipped byte in a
page header or a node header can therefore make LMDB read past the end of the file, and
the process dies of SIGBUS or SIGSEGV, which no exception handler can catch. ``verify``
runs :func:`check_pages` first, reading ``data.mdb`` as a plain file, and lets LMDB walk a
store only when every reachable page is well-formed.

The layout checked (LMDB 0.9, 64-bit, little-endian; ``psize`` is the page size)::

    page      pgno u64 | pad u16 | flags u16 | lower u16 | upper u16     (16 bytes)
              overflow pages hold ``pages u32`` where lower/upper are
    meta      pages 0 and 1: header | magic u32 = 0xBEEFC0DE | version u32 = 1
              | address u64 | mapsize u64 | db[free] | db[main] | last_pg u64 | txnid u64
    db        pad u32 (psize, in db[free]) | flags u16 | depth u16 | branch u64
              | leaf u64 | overflow u64 | entries u64 | root u64            (48 bytes)
    branch    node offsets u16 x n from byte 16; node = pgno lo u16 | hi u16 | high u16
              | ksize u16 | key
    leaf      node = dsize lo u16 | hi u16 | flags u16 | ksize u16 | key | data, where
              data is the value, a u64 overflow pgno (flag BIGDATA), or a db record
              naming a table (flag SUBDATA, main tree only)

The check follows LMDB's choice of meta page (the larger txnid), walks the free tree,
the main tree and every named table from their roots, and requires: each page inside the
file and ``last_pg``, labelled with its own number, of the kind its parent expects, reached
once; node offsets and every key and value inside their page (or overflow run); leaves all
at the tree's recorded depth and as many entries as the tree records. It does not compare
keys or values: replay verification checks contents.

This is shell code: it reads the file. It costs one pass over the reachable pages, with a
few Python operations per row.
"""

from __future__ import annotations

import mmap
import os
import struct
from pathlib import Path

__all__ = ["PageProblem", "check_pages"]

_P_BRANCH, _P_LEAF, _P_OVERFLOW, _P_META = 0x01, 0x02, 0x04, 0x08
_F_BIGDATA, _F_SUBDATA = 0x01, 0x02
_MAGIC, _VERSION = 0xBEEFC0DE, 1
_INVALID = (1 << 64) - 1
_HEADER = struct.Struct("<QHHHH")
_NODE = struct.Struct("<HHHH")
_DB = struct.Struct("<IHHQQQQQ")
_META = struct.Struct("<IIQQ")
_U64 = struct.Struct("<Q")
_HDR = 16
_NODE_HDR = 8
_MAX_TRIES = 3


class PageProblem(Exception):
    """A page is malformed; ``table`` names the tree it belongs to."""

    def __init__(self, table: str, message: str) -> None:
        self.table = table
        super().__init__(message)


def check_pages(path: Path) -> list[PageProblem]:
    """Check the page structure of ``path`` (an LMDB ``data.mdb``) without LMDB.

    Returns the problems found, empty when the structure is sound. A writer committing
    during the check could reuse pages the check is reading, so the check is repeated
    (up to three times) when the newest txnid changed while it ran; if it never settles,
    the last result is returned.

    Raises:
        OSError: the file cannot be read.
    """
    problems: list[PageProblem] = []
    with path.open("rb") as file:
        for _ in range(_MAX_TRIES):
            size = os.fstat(file.fileno()).st_size
            if size == 0:
                return [PageProblem("meta", "data.mdb is empty")]
            with mmap.mmap(file.fileno(), size, access=mmap.ACCESS_READ) as data:
                before = _newest_txnid(data)
                problems = _Walk(data).run()
                if not problems or _newest_txnid(data) == before:
                    return problems
    return problems


def _newest_txnid(data: mmap.mmap) -> int:
    psize = _page_size(data)
    ids = [0]
    for page in range(2):
        start = page * psize + _HDR + _META.size + 2 * _DB.size + 8
        if start + 8 <= len(data):
            ids.append(_U64.unpack_from(data, start)[0])
    return max(ids)


def _page_size(data: mmap.mmap) -> int:
    """The page size meta page 0 records (4096 when it is unreadable)."""
    if len(data) >= _HDR + _META.size + 4:
        psize = int.from_bytes(data[_HDR + _META.size : _HDR + _META.size + 4], "little")
        if psize >= 512 and psize & (psize - 1) == 0:
            return psize
    return 4096


class _Walk:
    """One walk over the trees of the newest meta page."""

    def __init__(self, data: mmap.mmap) -> None:
        self.data = data
        self.psize = _page_size(data)
        self.pages = len(data) // self.psize
        self.seen: set[int] = set()
        self.last_pg = 0

    def run(self) -> list[PageProblem]:
        metas = []
        problems = []
        for page in range(2):
            try:
                metas.append(self.meta(page))
            except PageProblem as exc:
                problems.append(exc)
        if problems:  # LMDB refuses to open a file with a bad meta page
            return problems
        txnid, last_pg, dbs = max(metas)
        self.last_pg = last_pg
        if (last_pg + 1) * self.psize > len(self.data):
            return [
                PageProblem(
                    "meta",
                    f"meta page (txnid {txnid}) ends the file at page {last_pg},"
                    f" beyond its {self.pages} pages",
                )
            ]
        self.seen.update((0, 1))
        free, main = dbs
        for name, db in (("free", free), ("main", main)):
            try:
                tables = self.tree(name, db, main=name == "main")
            except PageProblem as exc:
                problems.append(exc)
                continue
            for table, record in tables:
                try:
                    self.tree(table, record, main=False)
                except PageProblem as exc:
                    problems.append(exc)
        return problems

    def meta(self, page: int) -> tuple[int, int, tuple[bytes, bytes]]:
        start = page * self.psize
        if start + self.psize > len(self.data):
            raise PageProblem("meta", f"meta page {page} is beyond the end of the file")
        _, _, flags, _, _ = _HEADER.unpack_from(self.data, start)
        magic, version, _, _ = _META.unpack_from(self.data, start + _HDR)
        if flags != _P_META or magic != _MAGIC or version != _VERSION:
            raise PageProblem("meta", f"meta page {page} is malformed (flags, magic or version)")
        dbs_at = start + _HDR + _META.size
        free = bytes(self.data[dbs_at : dbs_at + _DB.size])
        main = bytes(self.data[dbs_at + _DB.size : dbs_at + 2 * _DB.size])
        last_pg, txnid = struct.unpack_from("<QQ", self.data, dbs_at + 2 * _DB.size)
        return txnid, last_pg, (free, main)

    def page(self, table: str, pgno: int, what: str) -> int:
        """The offset of page ``pgno``, checked to be inside the file and reached once."""
        if not 2 <= pgno <= self.last_pg:
            raise PageProblem(
                table, f"{table}: {what} points to page {pgno}, outside 2..{self.last_pg}"
            )
        if pgno in self.seen:
            raise PageProblem(table, f"{table}: page {pgno} is reached twice")
        self.seen.add(pgno)
        start = pgno * self.psize
        label = _U64.unpack_from(self.data, start)[0]
        if label != pgno:
            raise PageProblem(table, f"{table}: page {pgno} is labelled {label}")
        return start

    def tree(self, table: str, record: bytes, *, main: bool) -> list[tuple[str, bytes]]:
        """Walk one tree; return the (name, db record) of the tables a main tree names."""
        _, _, depth, branches, leaves, overflows, entries, root = _DB.unpack(record)
        if root == _INVALID:
            if entries or depth:
                raise PageProblem(table, f"{table}: an empty tree records {entries} entries")
            return []
        counted = [0, 0, 0, 0]  # branch pages, leaf pages, overflow pages, entries
        tables: list[tuple[str, bytes]] = []
        stack = [(root, 1)]
        data, psize = self.data, self.psize
        while stack:
            pgno, level = stack.pop()
            start = self.page(table, pgno, "a tree")
            _, _, flags, lower, upper = _HEADER.unpack_from(data, start)
            if flags not in (_P_BRANCH, _P_LEAF) or level > depth:
                raise PageProblem(
                    table, f"{table}: page {pgno} has flags {flags:#x} at level {level}"
                )
            count = (lower - _HDR) >> 1
            if lower < _HDR + 2 or lower & 1 or not lower <= upper <= psize:
                raise PageProblem(
                    table, f"{table}: page {pgno} has bounds lower={lower} upper={upper}"
                )
            leaf = flags == _P_LEAF
            if leaf != (level == depth):
                raise PageProblem(table, f"{table}: page {pgno} is at level {level} of {depth}")
            counted[leaf] += 1
            offsets = struct.unpack_from(f"<{count}H", data, start + _HDR)
            for offset in offsets:
                if offset < upper or offset + _NODE_HDR > psize:
                    raise PageProblem(table, f"{table}: page {pgno} has a node at {offset}")
                lo, hi, nflags, ksize = _NODE.unpack_from(data, start + offset)
                end = offset + _NODE_HDR + ksize
                if not leaf:
                    if end > psize:
                        raise PageProblem(table, f"{table}: page {pgno} has a key past its end")
                    stack.append((lo | hi << 16 | nflags << 32, level + 1))
                    continue
                dsize = lo | hi << 16
                if nflags == _F_BIGDATA:
                    if end + 8 > psize:
                        raise PageProblem(table, f"{table}: page {pgno} has a key past its end")
                    counted[2] += self.overflow(
                        table, _U64.unpack_from(data, start + end)[0], dsize
                    )
                elif nflags in (0, _F_SUBDATA):
                    if end + dsize > psize:
                        raise PageProblem(table, f"{table}: page {pgno} has a value past its end")
                    if nflags == _F_SUBDATA:
                        if not main or dsize != _DB.size:
                            raise PageProblem(table, f"{table}: page {pgno} names a bad table")
                        name = bytes(data[start + offset + _NODE_HDR : start + end])
                        body = bytes(data[start + end : start + end + dsize])
                        tables.append((name.decode("utf-8", "replace"), body))
                else:
                    raise PageProblem(table, f"{table}: page {pgno} has node flags {nflags:#x}")
                counted[3] += 1
        if counted != [branches, leaves, overflows, entries]:
            raise PageProblem(
                table,
                f"{table}: the tree records {branches}/{leaves}/{overflows} branch/leaf/overflow"
                f" pages and {entries} entries, its pages hold {counted[0]}/{counted[1]}/"
                f"{counted[2]} and {counted[3]}",
            )
        return tables

    def overflow(self, table: str, pgno: int, dsize: int) -> int:
        """Check an overflow run holding ``dsize`` bytes; return its page count."""
        start = self.page(table, pgno, "a large value")
        flags = _HEADER.unpack_from(self.data, start)[2]
        pages = int.from_bytes(self.data[start + 12 : start + 16], "little")
        if flags != _P_OVERFLOW or not pages >= 1 or _HDR + dsize > pages * self.psize:
            raise PageProblem(table, f"{table}: overflow page {pgno} is malformed")
        if pgno + pages - 1 > self.last_pg:
            raise PageProblem(table, f"{table}: overflow run at page {pgno} passes the file's end")
        run = range(pgno + 1, pgno + pages)
        if not self.seen.isdisjoint(run):
            raise PageProblem(table, f"{table}: overflow run at page {pgno} overlaps another page")
        self.seen.update(run)
        return pages
