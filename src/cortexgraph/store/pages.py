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
few Python operations per page; the nodes of a table's leaf pages are checked with array
operations, thousands of pages at a time.
"""

from __future__ import annotations

import mmap
import os
import struct
from pathlib import Path

import numpy as np
import numpy.typing as npt

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
_BULK_PAGES = 4096  # leaf pages whose nodes are checked in one set of array operations


def _u16(data: npt.NDArray[np.uint8], at: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    """The little-endian u16 at each offset of ``at`` in ``data``."""
    return data[at].astype(np.int64) | data[at + 1].astype(np.int64) << 8


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
        """Walk one tree; return the (name, db record) of the tables a main tree names.

        A table's leaf nodes are checked in bulk (:meth:`leaf_nodes`). Should anything be
        wrong, the tree is walked again node by node from the same state, so the problem
        reported is the first one in walking order, whichever way the tree was read."""
        if main:
            return self.walk(table, record, main=True, bulk=False)
        seen = set(self.seen)
        try:
            return self.walk(table, record, main=False, bulk=True)
        except PageProblem:
            self.seen = seen
            return self.walk(table, record, main=False, bulk=False)

    def walk(
        self, table: str, record: bytes, *, main: bool, bulk: bool
    ) -> list[tuple[str, bytes]]:
        """:meth:`tree`'s walk: with ``bulk``, leaf pages are gathered as they are reached
        and their nodes checked together at the end instead of one by one."""
        _, _, depth, branches, leaves, overflows, entries, root = _DB.unpack(record)
        if root == _INVALID:
            if entries or depth:
                raise PageProblem(table, f"{table}: an empty tree records {entries} entries")
            return []
        counted = [0, 0, 0, 0]  # branch pages, leaf pages, overflow pages, entries
        tables: list[tuple[str, bytes]] = []
        gathered: list[tuple[int, int, int]] = []  # leaf pages: (start, nodes, upper)
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
            if leaf and bulk:
                gathered.append((start, count, upper))
                continue
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
        for at in range(0, len(gathered), _BULK_PAGES):
            nodes, runs = self.leaf_nodes(table, gathered[at : at + _BULK_PAGES])
            counted[2] += runs
            counted[3] += nodes
        if counted != [branches, leaves, overflows, entries]:
            raise PageProblem(
                table,
                f"{table}: the tree records {branches}/{leaves}/{overflows} branch/leaf/overflow"
                f" pages and {entries} entries, its pages hold {counted[0]}/{counted[1]}/"
                f"{counted[2]} and {counted[3]}",
            )
        return tables

    def leaf_nodes(self, table: str, pages: list[tuple[int, int, int]]) -> tuple[int, int]:
        """Check the nodes of leaf pages of a table's tree (``(start, nodes, upper)`` each)
        as :meth:`walk` does one by one, with array operations; return the number of nodes
        and of overflow pages their large values take.

        Raises:
            PageProblem: some node is out of bounds or has flags a table's leaf cannot
                have (the caller walks again node by node to name the first such node).
        """
        psize = self.psize
        arr = np.frombuffer(self.data, dtype=np.uint8)
        try:
            starts = np.array([page[0] for page in pages], dtype=np.int64)
            counts = np.array([page[1] for page in pages], dtype=np.int64)
            uppers = np.array([page[2] for page in pages], dtype=np.int64)
            which = np.repeat(np.arange(len(pages)), counts)  # each node's page
            firsts = np.cumsum(counts) - counts
            base = starts[which]
            slots = base + _HDR + 2 * (np.arange(len(which)) - firsts[which])
            offsets = _u16(arr, slots)
            if np.any((offsets < uppers[which]) | (offsets + _NODE_HDR > psize)):
                raise PageProblem(table, f"{table}: a node offset is out of its page")
            at = base + offsets
            flags = _u16(arr, at + 4)
            end = offsets + _NODE_HDR + _u16(arr, at + 6)
            dsize = _u16(arr, at) | _u16(arr, at + 2) << 16
            big = flags == _F_BIGDATA
            if np.any((flags != 0) & ~big):
                raise PageProblem(table, f"{table}: a leaf node has flags a table cannot have")
            if np.any(np.where(big, end + 8, end + dsize) > psize):
                raise PageProblem(table, f"{table}: a key or value passes its page's end")
            runs = 0
            for node in np.flatnonzero(big).tolist():
                pgno = _U64.unpack_from(self.data, int(base[node] + end[node]))[0]
                runs += self.overflow(table, pgno, int(dsize[node]))
            return len(which), runs
        finally:
            del arr  # the mmap cannot close while an array views it

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
