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
  was given. The table writes nothing; its first build may instead load the image of a
  build at an earlier seq from a :class:`SnapshotSource` (``index.snapshot`` checks that
  it matches the store) and catch up from there, which gives the same table as a build
  at that seq followed by the same catch-up.
- Between two builds a row always names the same memory and rows are only appended; a
  build numbers them afresh (``builds`` counts builds).
- Rows below ``sorted_rows`` are in id order (a build loads them so).
- A catch-up reports what it moved (:class:`Change`) so that the parts built on the table
  (``filter``, ``score``, ``order``, ``keyword``, ``memo``) can drop or update what they
  derived; the table itself knows nothing of them.
"""

from __future__ import annotations

import itertools
import threading
from typing import Any, NamedTuple, Protocol

import numpy as np
import numpy.typing as npt

from ..core.codec import decode_unchecked
from ..core.journal import head_ids
from ..core.keys import ID_SIZE, seq_key
from ..core.postings import head_terms
from ..core.salience import round_ppm
from ..core.signals import (
    ACCESS,
    ATTRS,
    DEGREE,
    MEMORY_STATUSES,
    AttrsRow,
    decode_attrs_rows,
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
    "CATCH_UP_LIMIT",
    "STATUS_CODE",
    "STORED_COLUMNS",
    "TYPE_CODE",
    "TYPE_COUNT",
    "TYPE_NAME",
    "Change",
    "PostingKey",
    "Rows",
    "SnapshotSource",
    "Table",
    "TableImage",
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
CATCH_UP_LIMIT = 20_000

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
    "iseq": np.int64,  # index seq: the entry that last (re)indexed it (0: not indexed)
    "conf_ppm": np.int64,  # the confidence factor (core.salience.round_ppm(confidence))
    "prio_ppm": np.int64,  # the priority factor (round_ppm(priority / 10))
}

#: the columns copied from the attributes rows (the rest: access, in-degree, id key, ...)
_ATTR_COLUMNS = (
    "type", "status", "pinned", "priority", "confidence", "at", "updated", "ns", "dlen", "iseq",
)  # fmt: skip
#: the columns a build reads from the other rows of a memory (counters)
_SIGNAL_COLUMNS = ("access", "indeg")
#: the columns a :class:`TableImage` holds; a build derives the others from these and the
#: ids (``conf_ppm``, ``prio_ppm``, ``idkey``, ``idlo``) or starts them at 0 (``gen``)
STORED_COLUMNS = {name: _COLUMNS[name] for name in (*_ATTR_COLUMNS, *_SIGNAL_COLUMNS)}
_STATUS_NAME = {code: name for name, code in STATUS_CODE.items()}


def _attrs_row_by_row(
    values: list[bytes],
) -> tuple[dict[str, Any], tuple[tuple[str, ...], ...], Rows, tuple[str, ...]]:
    """The attribute columns of a build, decoding one row at a time (``AttrsRow.decode``
    raises on the row that is malformed): the columns, the tag sets, each row's tag set
    and the namespaces, numbered by first appearance."""
    tag_sets: dict[tuple[str, ...], int] = {}
    tag_of: list[int] = []
    ns_codes: dict[str, int] = {}
    values_of: dict[str, list[Any]] = {name: [] for name in _ATTR_COLUMNS}
    types, statuses, pinned, priorities, confidences, ats, updates, nss, dlens, iseqs = (
        values_of[name] for name in _ATTR_COLUMNS
    )
    for value in values:
        attrs = AttrsRow.decode(value)
        tag_of.append(tag_sets.setdefault(attrs.tags, len(tag_sets)))
        types.append(TYPE_CODE[attrs.type_name])
        statuses.append(STATUS_CODE[attrs.status])
        pinned.append(attrs.pinned)
        priorities.append(attrs.priority)
        confidences.append(attrs.confidence)
        ats.append(attrs.at)
        updates.append(attrs.updated_at)
        nss.append(ns_codes.setdefault(attrs.ns, len(ns_codes)))
        dlens.append(attrs.length)
        iseqs.append(attrs.index_seq)
    columns = {name: np.asarray(values_of[name], dtype=_COLUMNS[name]) for name in _ATTR_COLUMNS}
    tags = np.asarray(tag_of, dtype=np.int64)
    return columns, tuple(tag_sets), tags, tuple(ns_codes)


def _tag_rows(tag_sets: tuple[tuple[str, ...], ...], tag_of: Rows) -> list[tuple[str, Rows]]:
    """Each tag that some row carries, with its rows in ascending order: the rows whose
    tag list (``tag_of``, an index into ``tag_sets``) holds it. Tags come in the order
    they first appear in the tag lists that rows use.

    Done with array operations over the (row, tag) pairs, and C-level iteration over the
    tag lists, rather than a step per tag list: a store may hold tens of thousands of
    distinct tag lists.
    """
    used = (np.bincount(tag_of, minlength=len(tag_sets)) > 0).tolist()
    tags_used = dict.fromkeys(itertools.chain.from_iterable(itertools.compress(tag_sets, used)))
    if not tags_used:
        return []
    number = {tag: index for index, tag in enumerate(tags_used)}
    # every tag of every list, numbered (-1: a tag no row carries)
    flat = np.fromiter(
        map(number.get, itertools.chain.from_iterable(tag_sets), itertools.repeat(-1)),
        dtype=np.int64,
    )
    lengths = np.fromiter(map(len, tag_sets), dtype=np.int64, count=len(tag_sets))
    bounds = np.zeros(len(tag_sets) + 1, dtype=np.int64)
    np.cumsum(lengths, out=bounds[1:])
    sizes = lengths[tag_of]  # how many tags each row carries
    ends = np.cumsum(sizes)
    # the position in ``flat`` of each (row, tag) pair: its list's start, plus its place
    places = np.repeat(bounds[:-1][tag_of] - (ends - sizes), sizes) + np.arange(int(ends[-1]))
    pair_tag = flat[places]
    pair_row = np.repeat(np.arange(len(tag_of), dtype=np.int64), sizes)
    order = np.argsort(pair_tag, kind="stable")  # rows stay ascending within a tag
    cuts = np.searchsorted(pair_tag[order], np.arange(len(number) + 1)).tolist()
    rows = pair_row[order]
    return [(tag, rows[cuts[index] : cuts[index + 1]]) for tag, index in number.items()]


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
    #: per memory indexed anew (its index seq moved to a new seq other than 0): its row,
    #: its index seq and its indexed terms (term -> frequency); empty unless the
    #: catch-up was asked for them (``advance(..., heads=True)``)
    heads: tuple[tuple[int, int, dict[str, int] | None], ...]


class TableImage(NamedTuple):
    """What a build numbers its rows from (rows in id order): what a snapshot holds."""

    #: the journal seq the image reflects
    seq: int
    #: the ids of the rows, 16 bytes each, in row (= id) order
    ids: bytes
    #: the :data:`STORED_COLUMNS`, one entry per row
    columns: dict[str, npt.NDArray[Any]]
    #: the distinct tag tuples, numbered in order of their first row
    tag_sets: tuple[tuple[str, ...], ...]
    #: per row, its tag tuple's number
    tag_of: Rows
    #: the namespaces, numbered (the ``ns`` column) in order of their first row
    ns_names: tuple[str, ...]


class SnapshotSource(Protocol):
    """Where a table's first build can come from instead of a scan (``index.snapshot``)."""

    def load(self, txn: ReadTxn, last: int) -> TableImage | None:
        """An image of the store ``txn`` sees, at a seq at most ``last`` and close
        enough to it to catch up from; None when there is none that matches."""
        ...


class Table:
    """Columns and posting lists over every memory, for one open handle.

    ``lock`` guards every change of the table and of what the parts keep; a part that
    computes something lazily publishes it under this lock.
    """

    def __init__(self, snapshot: SnapshotSource | None = None) -> None:
        self.lock = threading.Lock()
        #: where the first build may load an image from (then catch up) instead of a scan
        self.snapshot = snapshot
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

        ``heads``: report the terms of the memories indexed anew (:attr:`Change.heads`),
        recomputed from their head versions. Only ask when a part will read them: they
        cost a catch-up the tokenizing of every memory indexed anew.
        """
        scale = (self.max_access, self.max_indeg, self.weights)
        rebuilt = self.seq < 0 or last < self.seq or last - self.seq > CATCH_UP_LIMIT
        moved: tuple[tuple[int, int, dict[str, int] | None], ...] = ()
        if rebuilt:
            image = None
            if self.seq < 0 and self.snapshot is not None:
                image = self.snapshot.load(txn, last)
            if image is None:
                self._build(txn)
                self.built_at = last
            else:
                # the image is the build at its seq; the entries since are caught up
                # (rebuilt: the parts drop everything, so what moved is not reported)
                self._fill(image)
                self.built_at = image.seq
                if image.seq < last:
                    self._catch_up(txn, image.seq, last, False)
            self.builds += 1
            touched: list[int] = []
        else:
            touched, moved = self._catch_up(txn, self.seq, last, heads)
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

        Built in bulk: the rows are read in one cursor walk and decoded column by column
        (``core.signals.decode_attrs_rows``), and the posting lists are made from the
        columns at the end (:meth:`_fill`). A row that does not decode so is decoded
        again one row at a time, which names what is wrong.
        """
        keys, values = txn.prefix_range("salience", ATTRS)
        ids = [key[1:] for key in keys]  # rows come in id order (the rows' key order)
        decoded = decode_attrs_rows(values)
        if decoded is None:
            columns, tag_sets, tag_of, ns_names = _attrs_row_by_row(values)
        else:
            columns = {
                "type": decoded.type_code,
                "status": decoded.status_code,
                "pinned": decoded.pinned,
                "priority": decoded.priority,
                "confidence": decoded.confidence,
                "at": decoded.at,
                "updated": decoded.updated_at,
                "ns": decoded.ns_of.astype(_COLUMNS["ns"]),
                "dlen": decoded.length,
                "iseq": decoded.index_seq,
            }
            tag_sets, tag_of, ns_names = decoded.tag_sets, decoded.tag_of, decoded.ns_names
        for name in _SIGNAL_COLUMNS:  # read below, once the rows are numbered
            columns[name] = np.zeros(len(ids), dtype=_COLUMNS[name])
        image = TableImage(-1, b"".join(ids), columns, tag_sets, tag_of, ns_names)
        self._fill(image, ids)
        for prefix, column in ((ACCESS, self.cols["access"]), (DEGREE, self.cols["indeg"])):
            for key, value in txn.iter_items("salience", prefix):
                row = self.row_of.get(bytes(key[1:]))
                if row is None:
                    raise CorruptionError(
                        f"the salience table counts memory {bytes(key[1:]).hex()},"
                        " which has no attributes row"
                    )
                column[row] = int.from_bytes(value[:4], "big")

    def _fill(self, image: TableImage, ids: list[bytes] | None = None) -> None:
        """Number the rows of ``image`` (rows in id order) afresh: the ids and their map,
        the columns, the tags, the namespaces and every posting list, as a build leaves
        them. ``ids``: the ids already split (else split from ``image.ids``)."""
        self._clear()
        blob = image.ids
        count = len(blob) // ID_SIZE
        if ids is None:
            ids = [blob[start : start + ID_SIZE] for start in range(0, len(blob), ID_SIZE)]
        self.ids = ids
        self.row_of = dict(zip(ids, range(count), strict=True))
        tag_sets = image.tag_sets
        self.tags = [tag_sets[index] for index in image.tag_of.tolist()]
        self.ns_names = list(image.ns_names)
        self.ns_code = {name: code for code, name in enumerate(self.ns_names)}
        capacity = len(self.cols["type"])
        while capacity < count:  # the capacity _set_attrs would have doubled to
            capacity *= 2
        cols = self.cols = {
            name: np.zeros(capacity, dtype=dtype) for name, dtype in _COLUMNS.items()
        }
        for name in STORED_COLUMNS:
            cols[name][:count] = image.columns[name]
        self.derive_factors(count)
        cols["idkey"][:count] = np.frombuffer(blob, dtype=">u8")[0::2]
        cols["idlo"][:count] = np.frombuffer(blob, dtype=">u8")[1::2]
        # up to here, a row can be found from its id by a binary search (``keyword``)
        self.sorted_rows = count
        postings = self.postings
        for kind, column, names in (
            ("type", cols["type"][:count], TYPE_NAME),
            ("status", cols["status"][:count], _STATUS_NAME),
        ):
            # (bincount, not np.unique: that imports numpy.ma, 13 ms, on first use)
            for code in np.flatnonzero(np.bincount(column)).tolist():
                if kind == "type" or code != ACTIVE:
                    postings[kind, names[code]] = set(np.flatnonzero(column == code).tolist())
        if count:
            for tag, rows in _tag_rows(tag_sets, image.tag_of):
                postings["tag", tag] = set(rows.tolist())

    def export(self) -> TableImage:
        """The table as a build at :attr:`seq` would number it (rows in id order; what
        a snapshot holds): loading it with :meth:`_fill` gives that build, row for row.

        The rows are sorted by id, the namespaces numbered by first row and the tag sets
        by first row, as a build numbers them. Call it under :attr:`lock`.
        """
        count = len(self.ids)
        cols = self.cols
        order = np.lexsort((cols["idlo"][:count], cols["idkey"][:count]))
        blob = np.frombuffer(b"".join(self.ids), dtype=np.uint8).reshape(count, ID_SIZE)
        columns = {name: cols[name][:count][order] for name in STORED_COLUMNS}
        # namespaces: numbered in the order their first row comes (a fancy assignment
        # keeps the last write, so writing the rows backwards leaves each code's first)
        first = np.full(len(self.ns_names), count, dtype=np.int64)
        first[columns["ns"][::-1]] = np.arange(count - 1, -1, -1, dtype=np.int64)
        renumbered = np.argsort(first, kind="stable")[: int((first < count).sum())]
        code_map = np.zeros(len(self.ns_names), dtype=np.int32)
        code_map[renumbered] = np.arange(len(renumbered), dtype=np.int32)
        columns["ns"] = code_map[columns["ns"]]
        tag_sets: dict[tuple[str, ...], int] = {}
        tags = self.tags
        tag_of = [tag_sets.setdefault(tags[row], len(tag_sets)) for row in order.tolist()]
        return TableImage(
            self.seq,
            blob[order].tobytes(),
            columns,
            tuple(tag_sets),
            np.asarray(tag_of, dtype=np.int64),
            tuple(self.ns_names[code] for code in renumbered.tolist()),
        )

    def derive_factors(self, count: int) -> None:
        """The confidence and priority factor columns of the first ``count`` rows, from
        their confidence and priority columns."""
        cols = self.cols
        cols["conf_ppm"][:count] = ppm(cols["confidence"][:count])
        cols["prio_ppm"][:count] = PRIORITY_PPM[cols["priority"][:count]]

    def _catch_up(
        self, txn: ReadTxn, since: int, last: int, report: bool
    ) -> tuple[list[int], tuple[tuple[int, int, dict[str, int] | None], ...]]:
        """Re-read the memories the journal entries after ``since`` (up to ``last``)
        touched; returns their rows, and (if ``report``) per memory indexed anew its row,
        index seq and terms."""
        touched: dict[bytes, None] = {}
        heads: dict[bytes, int] = {}
        with txn.cursor("journal") as cur:
            if not cur.set_range(seq_key(since + 1)):
                raise CorruptionError(f"the journal lost entries after seq {since}")
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
        indexed: list[int] = []
        for memory_id in touched:
            raw = txn.get("salience", ATTRS + memory_id)
            if raw is None:
                raise CorruptionError(f"memory {memory_id.hex()} has no attributes row")
            attrs = AttrsRow.decode(raw)
            known = self.row_of.get(memory_id)
            anew = known is None or self.cols["iseq"][known] != attrs.index_seq
            row = self._set_attrs(memory_id, attrs)
            rows.append(row)
            if report and attrs.index_seq and anew:
                indexed.append(row)
            self.cols["access"][row] = read_access(txn, memory_id)[0]
            self.cols["indeg"][row] = read_in_degree(txn, memory_id)
        for memory_id, seq in heads.items():
            self.cols["gen"][self.row_of[memory_id]] = seq
        iseq = self.cols["iseq"]  # (after the rows above: a new row may have grown it)
        moved = tuple(
            (row, int(iseq[row]), head_terms(txn, self.ids[row])) for row in indexed
        )
        return rows, moved

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
        cols["dlen"][row] = attrs.length
        cols["iseq"][row] = attrs.index_seq
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
