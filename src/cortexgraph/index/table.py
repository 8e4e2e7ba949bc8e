"""The columns and posting lists over every memory, and how they keep up with the store.

``find`` must answer "the 10 most salient Facts tagged deploy" on a store of 100,000
memories in a fraction of a millisecond. Walking LMDB posting keys one by one from Python
costs about half a microsecond a key, and ranking needs five signals per candidate, so the
query layer keeps, per open handle, a columnar copy of what it filters and ranks on:

- one row per memory, numbered in load order: type, status, pinned, priority,
  confidence, ``at`` of the head version, namespace, access count, in-degree, and the
  16 bytes of the id as two integers (for exact tie-breaks in numpy);
- posting lists (sets of rows) per type, per tag and per status other than "active";
- the store-wide maxima (access, in-degree) and the learned weights.

Invariants:

- The table is derived state of derived state: built from one scan of the ``salience``
  table's small rows (``core.signals``), never from memory bodies, and caught up from the
  journal by seq (only the memories the new entries touched are re-read), so after
  :meth:`Table.advance` it answers for the committed state of the read transaction it
  was given. It is never written to disk.
- Between two builds a row always names the same memory and rows are only appended; a
  build numbers them afresh (``builds`` counts builds).
- Rows below ``sorted_rows`` are in id order (a build loads them so).
- A catch-up reports what it moved (:class:`Change`) so that the parts built on the table
  (``filter``, ``score``, ``order``, ``keyword``, ``memo``) can drop or update what they
  derived; the table itself knows nothing of them.
"""

from __future__ import annotations

import threading
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt

from ..core.codec import decode_unchecked
from ..core.journal import head_ids
from ..core.keys import seq_key
from ..core.postings import FORWARD, read_forward
from ..core.salience import round_ppm
from ..core.signals import (
    ACCESS,
    ATTRS,
    DEGREE,
    MEMORY_STATUSES,
    AttrsRow,
    max_access,
    max_in_degree,
    read_access,
    read_in_degree,
    read_weights,
)
from ..core.taxonomy import MEMORY_TYPES
from ..errors import CorruptionError
from ..store.txn import ReadTxn
from .ppm import PRIORITY_PPM, ppm

__all__ = [
    "ACTIVE",
    "STATUS_CODE",
    "TYPE_CODE",
    "TYPE_COUNT",
    "TYPE_NAME",
    "Change",
    "PostingKey",
    "Rows",
    "Table",
    "type_name",
]

Rows = npt.NDArray[np.int64]
#: a posting list's key: ``("type", name)``, ``("tag", tag)`` or ``("status", name)``
PostingKey = tuple[str, Any]

TYPE_CODE = {t.type_name: t.type_code for t in MEMORY_TYPES}
TYPE_NAME = {code: name for name, code in TYPE_CODE.items()}
#: one more than the largest type code
TYPE_COUNT = max(TYPE_CODE.values()) + 1
STATUS_CODE = {name: code for code, name in enumerate(MEMORY_STATUSES, start=1)}
ACTIVE = STATUS_CODE["active"]

#: a catch-up longer than this many entries rebuilds from a scan instead
_CATCH_UP_LIMIT = 20_000

_COLUMNS: dict[str, Any] = {
    "type": np.uint8,
    "status": np.uint8,
    "pinned": np.bool_,
    "priority": np.int64,
    "confidence": np.float64,
    "at": np.int64,
    "updated": np.int64,
    "ns": np.int32,
    "access": np.int64,
    "indeg": np.int64,
    "idkey": np.uint64,
    "idlo": np.uint64,  # the last 8 bytes of the id
    "gen": np.int64,  # seq of the last entry that changed the memory's head (0: at build)
    "dlen": np.int64,  # keyword-index length of the memory (0: not indexed)
    "conf_ppm": np.int64,  # the confidence factor (core.salience.round_ppm(confidence))
    "prio_ppm": np.int64,  # the priority factor (round_ppm(priority / 10))
}

#: the columns copied from the attributes rows (the rest: access, in-degree, id key, ...)
_ATTR_COLUMNS = ("type", "status", "pinned", "priority", "confidence", "at", "updated", "ns")


def type_name(code: int) -> str:
    """The memory type name of a type code."""
    return TYPE_NAME[code]


class Change(NamedTuple):
    """What one :meth:`Table.advance` moved, for the parts that derive from the table."""

    #: the rows were numbered afresh: everything derived from them is stale
    rebuilt: bool
    #: the store-wide maxima or the learned weights moved: every row's salience did
    rescaled: bool
    #: the rows whose attributes or signals were re-read (new rows included), in the
    #: order they were re-read; empty after a build
    touched: Rows
    #: the posting lists whose rows changed
    posted: frozenset[PostingKey]
    #: per memory whose head changed: its row, the seq of the change, and its forward
    #: keyword posting (term -> frequency; None: not indexed); empty unless the
    #: catch-up was asked for them (``advance(..., heads=True)``)
    heads: tuple[tuple[int, int, dict[str, int] | None], ...]


class Table:
    """Columns and posting lists over every memory, for one open handle.

    ``lock`` guards every change of the table and of what the parts keep; a part that
    computes something lazily publishes it under this lock.
    """

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.seq = -1  # the journal seq the columns reflect; -1: not built
        #: how many times the rows were numbered afresh (a build); between two builds a
        #: row always names the same memory and rows are only appended
        self.builds = 0
        #: the seq of the last build (a ``gen`` of 0 means "at or before it")
        self.built_at = 0
        self._clear()

    def _clear(self) -> None:
        self.ids: list[bytes] = []
        self.row_of: dict[bytes, int] = {}
        #: per row, the memory's tags
        self.tags: list[tuple[str, ...]] = []
        self.cols: dict[str, npt.NDArray[Any]] = {
            name: np.zeros(1024, dtype=dtype) for name, dtype in _COLUMNS.items()
        }
        self.ns_code: dict[str, int] = {}
        self.ns_names: list[str] = []
        self.postings: dict[PostingKey, set[int]] = {}
        self.max_access = 0
        self.max_indeg = 0
        self.weights: tuple[int, ...] = ()
        #: rows below this are in id order (see ``_build``)
        self.sorted_rows = 0
        self._posted: set[PostingKey] = set()

    def all_rows(self) -> Rows:
        """Every row (every memory ever written, whatever its status)."""
        return np.arange(len(self.ids), dtype=np.int64)

    def active(self, rows: Rows) -> Rows:
        """The rows of active memories."""
        kept: Rows = rows[self.cols["status"][rows] == ACTIVE]
        return kept

    # -- keeping up with the store -------------------------------------------------------

    def advance(self, txn: ReadTxn, last: int, *, heads: bool = False) -> Change:
        """Bring the columns to the state ``txn`` sees, at journal seq ``last``: a build
        when none was made, the journal went back or is too far ahead, else a catch-up.
        Call it under :attr:`lock`; the caller sets :attr:`seq` once the parts followed.

        ``heads``: report the moved heads' forward postings (:attr:`Change.heads`). Only
        ask when a part will read them: keeping a decoded posting per moved head alive
        until the parts follow costs a catch-up of 1,000 writes about 5% (the garbage
        collector runs on what it keeps).
        """
        scale = (self.max_access, self.max_indeg, self.weights)
        rebuilt = self.seq < 0 or last < self.seq or last - self.seq > _CATCH_UP_LIMIT
        moved: tuple[tuple[int, int, dict[str, int] | None], ...] = ()
        if rebuilt:
            self._build(txn)
            self.built_at = last
            self.builds += 1
            touched: list[int] = []
        else:
            touched, moved = self._catch_up(txn, last, heads)
        self.max_access = max_access(txn)
        self.max_indeg = max_in_degree(txn)
        self.weights = read_weights(txn)
        posted, self._posted = frozenset(self._posted), set()
        return Change(
            rebuilt,
            scale != (self.max_access, self.max_indeg, self.weights),
            np.asarray(touched, dtype=np.int64),
            posted,
            moved,
        )

    def _build(self, txn: ReadTxn) -> None:
        """Load every attributes row: the state ``_set_attrs`` would leave, row by row.

        Built in bulk (Python lists, then one array per column, and posting lists made
        sets at the end) because numpy scalar stores cost about as much as decoding a row.
        """
        self._clear()
        ids, row_of, tags_of = self.ids, self.row_of, self.tags
        ns_code, ns_names = self.ns_code, self.ns_names
        values: dict[str, list[Any]] = {name: [] for name in _ATTR_COLUMNS}
        types, statuses, pinned, priorities, confidences, ats, updates, nss = (
            values[name] for name in _ATTR_COLUMNS
        )
        postings: dict[PostingKey, list[int]] = {}
        for key, value in txn.iter_items("salience", ATTRS):
            memory_id = bytes(key[1:])
            attrs = AttrsRow.decode(value)
            new = len(ids)
            ids.append(memory_id)
            row_of[memory_id] = new
            tags_of.append(attrs.tags)
            code = ns_code.get(attrs.ns)
            if code is None:
                code = ns_code[attrs.ns] = len(ns_names)
                ns_names.append(attrs.ns)
            types.append(TYPE_CODE[attrs.type_name])
            statuses.append(STATUS_CODE[attrs.status])
            pinned.append(attrs.pinned)
            priorities.append(attrs.priority)
            confidences.append(attrs.confidence)
            ats.append(attrs.at)
            updates.append(attrs.updated_at)
            nss.append(code)
            postings.setdefault(("type", attrs.type_name), []).append(new)
            for tag in attrs.tags:
                postings.setdefault(("tag", tag), []).append(new)
            if attrs.status != "active":
                postings.setdefault(("status", attrs.status), []).append(new)
        count = len(ids)
        capacity = len(self.cols["type"])
        while capacity < count:  # the capacity _set_attrs would have doubled to
            capacity *= 2
        cols = self.cols = {
            name: np.zeros(capacity, dtype=dtype) for name, dtype in _COLUMNS.items()
        }
        for name in _ATTR_COLUMNS:
            cols[name][:count] = np.asarray(values[name], dtype=_COLUMNS[name])
        self.derive_factors(count)
        heads = b"".join(memory_id[:8] for memory_id in ids)
        cols["idkey"][:count] = np.frombuffer(heads, dtype=">u8")
        tails = b"".join(memory_id[8:] for memory_id in ids)
        cols["idlo"][:count] = np.frombuffer(tails, dtype=">u8")
        # rows come in id order (the attributes rows' key order): up to here, a row can
        # be found from its id by a binary search (``keyword.Keywords``)
        self.sorted_rows = count
        self.postings = {key: set(rows) for key, rows in postings.items()}
        for prefix, column in ((ACCESS, self.cols["access"]), (DEGREE, self.cols["indeg"])):
            for key, value in txn.iter_items("salience", prefix):
                row = self.row_of.get(bytes(key[1:]))
                if row is None:
                    raise CorruptionError(
                        f"the salience table counts memory {bytes(key[1:]).hex()},"
                        " which has no attributes row"
                    )
                column[row] = int.from_bytes(value[:4], "big")
        dlen = self.cols["dlen"]
        for key, value in txn.iter_items("postings", FORWARD):
            row = self.row_of.get(bytes(key[1:]))
            if row is None:
                raise CorruptionError("the keyword index holds a memory without attributes")
            dlen[row] = int.from_bytes(value[1:5], "big")

    def derive_factors(self, count: int) -> None:
        """The confidence and priority factor columns of the first ``count`` rows, from
        their confidence and priority columns."""
        cols = self.cols
        cols["conf_ppm"][:count] = ppm(cols["confidence"][:count])
        cols["prio_ppm"][:count] = PRIORITY_PPM[cols["priority"][:count]]

    def _catch_up(
        self, txn: ReadTxn, last: int, report: bool
    ) -> tuple[list[int], tuple[tuple[int, int, dict[str, int] | None], ...]]:
        """Re-read the memories the journal entries after ``self.seq`` touched; returns
        their rows, and (if ``report``) per memory whose head changed its row, seq and
        forward posting."""
        touched: dict[bytes, None] = {}
        heads: dict[bytes, int] = {}
        with txn.cursor("journal") as cur:
            if not cur.set_range(seq_key(self.seq + 1)):
                raise CorruptionError(f"the journal lost entries after seq {self.seq}")
            for _, value in cur:
                entry = decode_unchecked(bytes(value), what="a journal entry")
                op = entry["op"]
                changed = head_ids(op, entry)
                if changed:
                    for memory_id in changed:
                        touched[memory_id] = None
                        heads[memory_id] = entry["seq"]
                else:
                    touched[entry["dst"]] = None
                if entry["seq"] >= last:
                    break
        rows: list[int] = []
        for memory_id in touched:
            raw = txn.get("salience", ATTRS + memory_id)
            if raw is None:
                raise CorruptionError(f"memory {memory_id.hex()} has no attributes row")
            row = self._set_attrs(memory_id, AttrsRow.decode(raw))
            rows.append(row)
            self.cols["access"][row] = read_access(txn, memory_id)[0]
            self.cols["indeg"][row] = read_in_degree(txn, memory_id)
        moved: list[tuple[int, int, dict[str, int] | None]] = []
        for memory_id, seq in heads.items():
            row = self.row_of[memory_id]
            self.cols["gen"][row] = seq
            forward = read_forward(txn, memory_id)
            self.cols["dlen"][row] = 0 if forward is None else forward[0]
            if report:
                moved.append((row, seq, None if forward is None else forward[1]))
        return rows, tuple(moved)

    def _set_attrs(self, memory_id: bytes, attrs: AttrsRow) -> int:
        row = self.row_of.get(memory_id)
        cols = self.cols
        if row is None:
            row = len(self.ids)
            if row == len(cols["type"]):
                for name, column in cols.items():
                    cols[name] = np.concatenate((column, np.zeros_like(column)))
            self.ids.append(memory_id)
            self.row_of[memory_id] = row
            self.tags.append(())
            cols["idkey"][row] = int.from_bytes(memory_id[:8], "big")
            cols["idlo"][row] = int.from_bytes(memory_id[8:], "big")
        else:
            self._unpost(row)
        ns = self.ns_code.get(attrs.ns)
        if ns is None:
            ns = self.ns_code[attrs.ns] = len(self.ns_names)
            self.ns_names.append(attrs.ns)
        cols["type"][row] = TYPE_CODE[attrs.type_name]
        cols["status"][row] = STATUS_CODE[attrs.status]
        cols["pinned"][row] = attrs.pinned
        cols["priority"][row] = attrs.priority
        cols["confidence"][row] = attrs.confidence
        cols["conf_ppm"][row] = round_ppm(attrs.confidence)
        cols["prio_ppm"][row] = PRIORITY_PPM[attrs.priority]
        cols["at"][row] = attrs.at
        cols["updated"][row] = attrs.updated_at
        cols["ns"][row] = ns
        self.tags[row] = attrs.tags
        self._post(("type", attrs.type_name), row)
        for tag in attrs.tags:
            self._post(("tag", tag), row)
        if attrs.status != "active":
            self._post(("status", attrs.status), row)
        return row

    def _post(self, key: PostingKey, row: int) -> None:
        self.postings.setdefault(key, set()).add(row)
        self._posted.add(key)

    def _unpost(self, row: int) -> None:
        cols = self.cols
        keys: list[PostingKey] = [("type", type_name(int(cols["type"][row])))]
        keys.extend(("tag", tag) for tag in self.tags[row])
        status = MEMORY_STATUSES[int(cols["status"][row]) - 1]
        if status != "active":
            keys.append(("status", status))
        for key in keys:
            self.postings[key].discard(row)
            self._posted.add(key)
