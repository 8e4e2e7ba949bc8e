"""The in-memory column index that ``find`` runs on.

``find`` must answer "the 10 most salient Facts tagged deploy" on a store of 100,000
memories in a fraction of a millisecond. Walking LMDB posting keys one by one from Python
costs about half a microsecond a key, and ranking needs five signals per candidate, so the
query layer keeps, per open handle, a columnar copy of what it filters and ranks on:

- one row per memory, numbered in load order: type, status, pinned, priority,
  confidence, ``at`` of the head version, namespace, access count, in-degree, and the
  first 8 bytes of the id (for exact tie-breaks in numpy);
- posting lists (sets of rows) per type, per tag and per status other than "active";
- the store-wide maxima (access, in-degree) and the learned weights.

It is derived state of derived state: built from one scan of the ``salience`` table's
small rows (``core.signals``), never from memory bodies, and caught up from the journal
by seq before every query (only the memories the new entries touched are re-read), so it
always answers for the committed state of the read transaction it is given. It is never
written to disk and never trusted for anything but choosing *which* memories a query
returns; what ``find`` returns is then read from LMDB.
"""

from __future__ import annotations

import heapq
import itertools
import math
import threading
from collections.abc import Callable, Iterable, Iterator
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt

from ..core.codec import decode_unchecked
from ..core.journal import head_ids
from ..core.keys import seq_key
from ..core.postings import FORWARD, posting_prefix, read_forward, read_stats
from ..core.predicates import Atom, Predicate
from ..core.query import DNF, Conjunct, ConjunctPlan, Plan, plan
from ..core.salience import (
    HALF_LIFE_DAYS,
    HUB_ACCESS_COUNT,
    HUB_CENTRALITY,
    frequency,
    round_ppm,
    trusted_cold_score,
    trusted_salience_factors,
)
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
from ..core.text import Bm25Params, bm25_idf
from ..errors import CorruptionError
from .env import ReadTxn

__all__ = ["KEY_ORDERS", "ColumnIndex"]

Rows = npt.NDArray[np.int64]

_DAY_MS = 86_400_000
_TYPE_CODE = {t.type_name: t.type_code for t in MEMORY_TYPES}
_TYPE_NAME = {code: name for name, code in _TYPE_CODE.items()}
_STATUS_CODE = {name: code for code, name in enumerate(MEMORY_STATUSES, start=1)}
_ACTIVE = _STATUS_CODE["active"]
#: half-life in ms by type code (0: stable)
_HALF_LIFE = np.zeros(max(_TYPE_CODE.values()) + 1, dtype=np.float64)
for _name, _code in _TYPE_CODE.items():
    _HALF_LIFE[_code] = (HALF_LIFE_DAYS.get(_name) or 0) * _DAY_MS
#: a factor is scored in Python when ``factor * 1e6`` is this close to a rounding tie
_TIE_GUARD = 1e-6
#: ages from here on are not exact as float64
_EXACT_FLOAT = 2**53
#: up to this many rows, salience is scored one by one rather than with numpy
_ONE_BY_ONE = 16
#: the priority factor of each priority
_PRIORITY_PPM = np.asarray([round_ppm(p / 10) for p in range(11)], dtype=np.int64)
#: a catch-up longer than this many entries rebuilds from a scan instead
_CATCH_UP_LIMIT = 20_000
#: the most query plans kept per seq
_PLAN_CACHE = 1_024
#: a salience walk (``walk_salience``) first reads this many rows of the bound order,
#: then twice as many each round
_WALK_FIRST = 512
#: ``walk_budget`` proposes a walk only when the posting lists a select would start from
#: hold at least this many rows together (below that, select and sort costs less)
_WALK_MIN = 2_048
#: a tag on at least one row in this many gets a bool per row (``_tagged``) ...
_BITMAP_SHARE = 256
#: ... and the most recently made of those are kept, at most this many
_BITMAPS = 64
#: a walk this long (ms) after the instant the bounds were taken at sorts them again
_WALK_FRESH = 86_400_000
#: the bound order is sorted anew once more rows than this (or a 16th of all) changed
_WALK_CHANGED = 1_024

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
#: per-row memos kept at most (see ``ColumnIndex.memo``); at the limit, the older half go
_MEMO_LIMIT = 32_768
#: cached term posting lists beyond this many are dropped (and rescanned on demand)
_MAX_CACHED_TERMS = 50_000


class _Terms:
    """One term's postings as arrays, with the generation each entry was valid for."""

    __slots__ = ("gen", "pending", "rows", "tf")

    def __init__(self, rows: Rows, tf: Rows, gen: Rows) -> None:
        self.rows, self.tf, self.gen = rows, tf, gen
        self.pending: list[tuple[int, int, int]] = []

    def settle(self) -> None:
        if self.pending:
            rows, tf, gen = zip(*self.pending, strict=True)
            self.rows = np.concatenate((self.rows, np.asarray(rows, dtype=np.int64)))
            self.tf = np.concatenate((self.tf, np.asarray(tf, dtype=np.int64)))
            self.gen = np.concatenate((self.gen, np.asarray(gen, dtype=np.int64)))
            self.pending = []


class _BoundOrder(NamedTuple):
    """Each type's rows by an upper bound of their salience score, for
    :meth:`ColumnIndex.walk_salience`.

    A row's bound is its exact score at the instant ``since`` plus 1 (recency only
    decays, so no later score is higher), and at most ``(static + recency weight x
    1,000,000) // 1,000,000`` (recency at its most, 1; exact for memories that do not
    decay). A walk at an instant before ``since`` cannot use the order and selects.
    Rows whose static terms moved since the order was sorted are *changed*: their place
    in ``rows`` is out of date, so a walk skips them there and scores them all up front
    instead.
    """

    #: every row that existed when the order was sorted, by type code, then by bound
    #: descending
    rows: Rows
    #: those rows' bounds, in the same order
    bounds: Rows
    #: where each type code's rows start in ``rows`` (one more entry: the end)
    starts: Rows
    #: per row: whether it changed since the sort (rows added since included)
    changed: npt.NDArray[np.bool_]
    #: the rows marked in ``changed``, ascending
    changed_rows: Rows
    #: the bounds hold at this instant (ms) and every later one
    since: int
    #: columns and atoms' tests taken in the order of ``rows`` (see ``_mask_in_order``)
    views: dict[Any, npt.NDArray[Any]]


#: the column each atom kind but "tag" tests
_ATOM_COLUMN = {
    "type": "type",
    "status": "status",
    "ns": "ns",
    "pinned": "pinned",
    "since": "at",
    "until": "at",
    "min_confidence": "confidence",
    "min_priority": "priority",
}

#: the column of each order ``walk_key`` walks
_KEY_COLUMN = {"recent": "at", "priority": "priority"}
#: the orders ``walk_key`` can walk (``find``'s other orders: salience, confidence)
KEY_ORDERS = frozenset(_KEY_COLUMN)

#: the atom kinds that compare a column with a bound rather than test a value
_RANGE_KINDS = frozenset({"since", "until", "min_confidence", "min_priority"})

#: the columns copied from the attributes rows (the rest: access, in-degree, id key, ...)
_ATTR_COLUMNS = ("type", "status", "pinned", "priority", "confidence", "at", "updated", "ns")


class ColumnIndex:
    """Columns and posting lists over every memory, for one open handle."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.seq = -1  # the journal seq the columns reflect; -1: not built
        #: how many times the rows were numbered afresh (a build); between two builds a
        #: row always names the same memory and rows are only appended
        self.builds = 0
        self._reset()

    def _reset(self) -> None:
        self.ids: list[bytes] = []
        self.row_of: dict[bytes, int] = {}
        self._tags: list[tuple[str, ...]] = []
        self.cols: dict[str, npt.NDArray[Any]] = {
            name: np.zeros(1024, dtype=dtype) for name, dtype in _COLUMNS.items()
        }
        self.ns_code: dict[str, int] = {}
        self.ns_names: list[str] = []
        self.postings: dict[tuple[str, Any], set[int]] = {}
        self._arrays: dict[tuple[str, Any], Rows] = {}
        #: per long posting list, a bool per row (see ``_tagged``), dropped with the array
        self._bitmaps: dict[tuple[str, Any], npt.NDArray[np.bool_]] = {}
        self._plans: dict[Predicate, tuple[int, Plan, str]] = {}
        #: per plan (by id; the plan is kept to check it), its walk shape and match count
        self._facts: dict[int, _PlanFacts] = {}
        self.max_access = 0
        self.max_indeg = 0
        self.weights: tuple[int, ...] = ()
        self._terms: dict[str, _Terms] = {}
        self._memos: dict[int, tuple[int, int, Any]] = {}
        #: per row, the salience terms that do not depend on ``now`` (see ``_static_parts``)
        self._static: (
            tuple[npt.NDArray[np.int64], npt.NDArray[np.float64], npt.NDArray[np.float64]] | None
        ) = None
        #: every row by an upper bound of its score (see ``_BoundOrder``); None: not
        #: sorted since ``_static`` was last computed afresh
        self._order: _BoundOrder | None = None
        #: per order by a column ("recent", "priority"), every row by that column exactly
        #: (a ``_BoundOrder`` whose bounds are the keys); dropped when a build renumbers
        self._key_orders: dict[str, _BoundOrder] = {}
        self._built_at = 0  # the seq of the last build (gen 0 means "at or before it")
        self._sorted_rows = 0  # rows below this are in id order (see ``_build``)

    # -- keeping up with the store -------------------------------------------------------

    def refresh(self, txn: ReadTxn) -> int:
        """Bring the columns to the state ``txn`` sees (thread-safe); returns its seq."""
        last = txn.last_seq()
        with self._lock:
            if last == self.seq:
                return last
            scale = (self.max_access, self.max_indeg, self.weights)
            touched: list[int] = []
            if self.seq < 0 or last < self.seq or last - self.seq > _CATCH_UP_LIMIT:
                self._build(txn)
                self._built_at = last
                self.builds += 1
            else:
                touched = self._catch_up(txn, last)
            self.max_access = max_access(txn)
            self.max_indeg = max_in_degree(txn)
            self.weights = read_weights(txn)
            if scale != (self.max_access, self.max_indeg, self.weights):
                self._static = None  # every row's static part moved: recomputed on demand
                self._order = None
            elif self._static is not None and touched:
                self._update_static(np.asarray(touched, dtype=np.int64))
            if touched and self._key_orders:
                moved = np.asarray(touched, dtype=np.int64)
                for name, kept in list(self._key_orders.items()):
                    changed = _with_changed(kept, moved, len(self.ids))
                    if changed is None:
                        del self._key_orders[name]
                    else:
                        self._key_orders[name] = changed
            self._plans = {}
            self._facts = {}
            self.seq = last
        return last

    def _build(self, txn: ReadTxn) -> None:
        """Load every attributes row: the state ``_set_attrs`` would leave, row by row.

        Built in bulk (Python lists, then one array per column, and posting lists made
        sets at the end) because numpy scalar stores cost about as much as decoding a row.
        """
        self._reset()
        ids, row_of, tags_of = self.ids, self.row_of, self._tags
        ns_code, ns_names = self.ns_code, self.ns_names
        values: dict[str, list[Any]] = {name: [] for name in _ATTR_COLUMNS}
        types, statuses, pinned, priorities, confidences, ats, updates, nss = (
            values[name] for name in _ATTR_COLUMNS
        )
        postings: dict[tuple[str, Any], list[int]] = {}
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
            types.append(_TYPE_CODE[attrs.type_name])
            statuses.append(_STATUS_CODE[attrs.status])
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
        self._derive_factors(count)
        heads = b"".join(memory_id[:8] for memory_id in ids)
        cols["idkey"][:count] = np.frombuffer(heads, dtype=">u8")
        tails = b"".join(memory_id[8:] for memory_id in ids)
        cols["idlo"][:count] = np.frombuffer(tails, dtype=">u8")
        # rows come in id order (the attributes rows' key order): up to here, a row can
        # be found from its id by a binary search (``_rows_of``)
        self._sorted_rows = count
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

    def _derive_factors(self, count: int) -> None:
        """The confidence and priority factor columns of the first ``count`` rows."""
        cols = self.cols
        cols["conf_ppm"][:count] = _ppm(cols["confidence"][:count])
        cols["prio_ppm"][:count] = _PRIORITY_PPM[cols["priority"][:count]]

    def _catch_up(self, txn: ReadTxn, last: int) -> list[int]:
        """Re-read the memories the journal entries after ``self.seq`` touched; returns
        their rows."""
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
        for memory_id, seq in heads.items():
            row = self.row_of[memory_id]
            self.cols["gen"][row] = seq
            forward = read_forward(txn, memory_id)
            self.cols["dlen"][row] = 0 if forward is None else forward[0]
            if forward is not None:
                for term, tf in forward[1].items():
                    cached = self._terms.get(term)
                    if cached is not None:
                        cached.pending.append((row, tf, seq))
        return rows

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
            self._tags.append(())
            cols["idkey"][row] = int.from_bytes(memory_id[:8], "big")
            cols["idlo"][row] = int.from_bytes(memory_id[8:], "big")
        else:
            self._unpost(row)
        ns = self.ns_code.get(attrs.ns)
        if ns is None:
            ns = self.ns_code[attrs.ns] = len(self.ns_names)
            self.ns_names.append(attrs.ns)
        cols["type"][row] = _TYPE_CODE[attrs.type_name]
        cols["status"][row] = _STATUS_CODE[attrs.status]
        cols["pinned"][row] = attrs.pinned
        cols["priority"][row] = attrs.priority
        cols["confidence"][row] = attrs.confidence
        cols["conf_ppm"][row] = round_ppm(attrs.confidence)
        cols["prio_ppm"][row] = _PRIORITY_PPM[attrs.priority]
        cols["at"][row] = attrs.at
        cols["updated"][row] = attrs.updated_at
        cols["ns"][row] = ns
        self._tags[row] = attrs.tags
        self._post(("type", attrs.type_name), row)
        for tag in attrs.tags:
            self._post(("tag", tag), row)
        if attrs.status != "active":
            self._post(("status", attrs.status), row)
        return row

    def _post(self, key: tuple[str, Any], row: int) -> None:
        self.postings.setdefault(key, set()).add(row)
        self._arrays.pop(key, None)
        self._bitmaps.pop(key, None)

    def _unpost(self, row: int) -> None:
        cols = self.cols
        keys: list[tuple[str, Any]] = [("type", _type_name(int(cols["type"][row])))]
        keys.extend(("tag", tag) for tag in self._tags[row])
        status = MEMORY_STATUSES[int(cols["status"][row]) - 1]
        if status != "active":
            keys.append(("status", status))
        for key in keys:
            self.postings[key].discard(row)
            self._arrays.pop(key, None)
            self._bitmaps.pop(key, None)

    # -- per-row memos ----------------------------------------------------------------------

    def memo(self, row: int, seq: int) -> Any:
        """What :meth:`remember` kept for ``row``, if it holds for the state at journal
        seq ``seq`` (the memory's head, status and versions unchanged since it was
        kept, and not changed after ``seq``); else None."""
        kept = self._memos.get(row)
        if kept is None:
            return None
        gen, since, value = kept
        return value if since <= seq and gen == self.cols["gen"].item(row) else None

    def remember(self, row: int, value: Any, seq: int) -> None:
        """Keep ``value``, derived from ``row``'s memory as a read transaction at journal
        seq ``seq`` saw it (a decoded record, say), until the memory changes. Kept only
        when the columns stand at that same seq, so that the row's generation is the one
        the value was read at."""
        with self._lock:
            if self.seq != seq:
                return
            memos = self._memos
            if len(memos) >= _MEMO_LIMIT:  # forget the older half (dicts keep insertion order)
                for old in list(itertools.islice(memos, _MEMO_LIMIT // 2)):
                    del memos[old]
            gen = int(self.cols["gen"][row])
            self._memos[row] = (gen, gen or self._built_at, value)

    # -- answering ---------------------------------------------------------------------------

    def size(self, atom: Atom) -> int:
        """How many memories the posting list of an indexed atom holds."""
        return len(self.postings.get((atom.kind, atom.value), ()))

    def plan(self, predicate: Predicate) -> tuple[Plan, str]:
        """``core.query.plan`` of ``predicate`` against these posting lists, and its
        ``explain()`` text.

        Plans are a function of the predicate and the posting-list sizes, so they are kept
        until the columns move to another seq (at most ``_PLAN_CACHE`` of them).
        """
        seq = self.seq
        cached = self._plans.get(predicate)
        if cached is not None and cached[0] == seq:
            return cached[1], cached[2]
        made = plan(predicate, self.size)
        text = made.explain()
        if len(self._plans) < _PLAN_CACHE:
            self._plans[predicate] = (seq, made, text)
        return made, text

    def _posting(self, atom: Atom) -> Rows:
        key = (atom.kind, atom.value)
        array = self._arrays.get(key)
        if array is None:
            array = np.fromiter(sorted(self.postings.get(key, ())), dtype=np.int64)
            self._arrays[key] = array
        return array

    def _tagged(self, atom: Atom, rows: Rows) -> npt.NDArray[np.bool_]:
        """Per row of ``rows``: whether its memory carries the tag of ``atom``.

        A tag on at least one row in :data:`_BITMAP_SHARE` is answered from a bool per
        row (one gather; the :data:`_BITMAPS` most recently made are kept), a rarer one
        by binary search in its posting list.
        """
        key = (atom.kind, atom.value)
        posting = self._posting(atom)
        if len(posting) * _BITMAP_SHARE < len(self.ids):
            return _member(rows, posting)
        capacity = len(self.cols["type"])
        bitmap = self._bitmaps.get(key)
        if bitmap is None or len(bitmap) != capacity:
            bitmap = np.zeros(capacity, dtype=np.bool_)
            bitmap[posting] = True
            if len(self._bitmaps) >= _BITMAPS:
                self._bitmaps.pop(next(iter(self._bitmaps)), None)
            self._bitmaps[key] = bitmap
        found: npt.NDArray[np.bool_] = bitmap.take(rows)
        return found

    def _mask(self, atom: Atom, rows: Rows) -> npt.NDArray[np.bool_]:
        """Per row of ``rows``: whether ``atom`` holds for it."""
        if atom.kind == "tag":
            return self._tagged(atom, rows)
        return self._test(atom, self.cols[_ATOM_COLUMN[atom.kind]][rows])

    def _test(self, atom: Atom, values: npt.NDArray[Any]) -> npt.NDArray[np.bool_]:
        """Per value of the column ``atom`` is about: whether ``atom`` holds for it."""
        kind, value = atom.kind, atom.value
        if kind == "type":
            return np.asarray(values == _TYPE_CODE[value])
        if kind == "status":
            return np.asarray(values == _STATUS_CODE[value])
        if kind == "ns":
            return np.asarray(values == self.ns_code.get(value, -1))
        if kind == "pinned":
            return np.asarray(values)
        if kind == "since":
            return np.asarray(values >= value)
        if kind == "until":
            return np.asarray(values < value)
        if kind == "min_confidence":
            return np.asarray(values >= value)
        if kind == "min_priority":
            return np.asarray(values >= value)
        raise AssertionError(f"unknown atom kind {kind!r}")  # pragma: no cover

    def _mask_in_order(
        self, order: _BoundOrder, atom: Atom, start: int, stop: int
    ) -> npt.NDArray[np.bool_]:
        """:meth:`_mask` of ``order.rows[start:stop]``, read from the order's views and
        never written into: an atom on a range (``since``, ``min_priority``, ...) tests
        its column taken in the order's row order once; any other atom is tested on
        every row once (at most :data:`_BITMAPS` of those kept). A view is only right
        for rows that did not change since it was taken, which are the only ones a walk
        reads from the order."""
        views = order.views
        ranged = atom.kind in _RANGE_KINDS
        key: Any = _ATOM_COLUMN[atom.kind] if ranged else atom
        view = views.get(key)
        if view is None:
            if ranged:
                view = self.cols[key].take(order.rows)
            else:
                tested = [name for name in views if type(name) is Atom]
                if len(tested) >= _BITMAPS:
                    views.pop(tested[0], None)
                view = self._mask(atom, order.rows)
            views[key] = view
        part = view[start:stop]
        return self._test(atom, part) if ranged else part

    def select(self, plan: Plan) -> Rows:
        """The rows the plan matches, sorted, each once."""
        found: list[Rows] = []
        for step in plan.steps:
            rows = self._posting(step.driver)
            for atom in step.intersect:
                if not len(rows):
                    break
                rows = rows[self._mask(atom, rows)]
            for atom in step.subtract:
                rows = rows[~self._mask(atom, rows)]
            for atom, positive in step.residual:
                mask = self._mask(atom, rows)
                rows = rows[mask if positive else ~mask]
            found.append(rows)
        if not found:
            return np.zeros(0, dtype=np.int64)
        if len(found) == 1:
            return found[0]
        return np.unique(np.concatenate(found))

    def count(self, plan: Plan) -> int:
        """``len(self.select(plan))``, without making the rows (one mask per step); kept
        with the plan until the columns move to another seq."""
        facts = self._facts_of(plan)
        if facts.matched < 0:
            facts.matched = self._count(plan)
        return facts.matched

    def _count(self, plan: Plan) -> int:
        if len(plan.steps) != 1:
            return len(self.select(plan))
        step = plan.steps[0]
        rows = self._posting(step.driver)
        literals = _literals(step)[1:]
        if not len(rows) or not literals:
            return len(rows)
        return int(np.count_nonzero(self._conjunct_mask(rows, literals)))

    def _facts_of(self, plan: Plan) -> _PlanFacts:
        """What the index keeps of ``plan`` at its current seq (made on first use)."""
        facts = self._facts.get(id(plan))
        if facts is None or facts.plan is not plan or facts.seq != self.seq:
            facts = _PlanFacts(plan, self.seq, self._walk_shape(plan))
            if len(self._facts) < _PLAN_CACHE:
                self._facts[id(plan)] = facts
        return facts

    def _conjunct_mask(self, rows: Rows, literals: Conjunct) -> npt.NDArray[np.bool_]:
        """Per row of ``rows``: whether every literal ``(atom, positive)`` holds."""
        return _holds(len(rows), (literals,), lambda atom: self._mask(atom, rows))

    def _passing(self, rows: Rows, conjuncts: Iterable[Conjunct]) -> npt.NDArray[np.bool_]:
        """Per row of ``rows``: whether some conjunct holds for it."""
        return _holds(len(rows), conjuncts, lambda atom: self._mask(atom, rows))

    # -- the walks ---------------------------------------------------------------------------

    def walk(
        self, plan: Plan, order_by: str, now: int, *, first: int, scores: dict[int, int]
    ) -> Iterator[int] | None:
        """``plan``'s matches in the order ``order_by``, by :meth:`walk_salience` or
        :meth:`walk_key`; None when selecting is the better way (see :meth:`walk_budget`)."""
        if order_by == "salience":
            budget = self.walk_budget(plan, first, now)
            if budget is not None:
                return self.walk_salience(plan, now, budget=budget, first=first, scores=scores)
        elif order_by in _KEY_COLUMN:
            budget = self.walk_key_budget(plan, first)
            if budget is not None:
                return self.walk_key(plan, order_by, budget=budget, first=first)
        return None

    def _changed_matches(self, order: _BoundOrder, shape: _WalkShape) -> Rows:
        """The rows changed since ``order`` was sorted that the walked plan matches."""
        changed = order.changed_rows
        found: Rows = changed.compress(self._passing(changed, shape.conjuncts))
        return found

    def _round(
        self, order: _BoundOrder, shape: _WalkShape, start: int, stop: int
    ) -> tuple[Rows, list[int]]:
        """The rows of ``order.rows[start:stop]`` the walked plan matches, in order, but
        for changed rows (out of place there), and their bounds: tested on the order's
        views (see :meth:`_mask_in_order`)."""
        keep = _holds(
            stop - start, shape.rest, lambda atom: self._mask_in_order(order, atom, start, stop)
        )
        rows = order.rows[start:stop]
        if len(order.changed_rows):
            keep = keep & ~order.changed.take(rows)
        bounds: list[int] = order.bounds[start:stop].compress(keep).tolist()
        return rows.compress(keep), bounds

    def walk_budget(self, plan: Plan, first: int, now: int) -> int | None:
        """How many rows :meth:`walk_salience` may read for ``plan`` before it gives up
        and selects, or None when selecting is the better way (or a walk cannot run).

        A walk reads one type's rows best bound first, so every alternative of the
        predicate must name the same type (``Q.type(Fact) & Q.tag("deploy")``, say).
        Selecting reads the rows of each alternative's driving posting list, then scores
        every match. A walk pays off when those lists are long and the matches not rare:
        it expects to read ``first x the type's rows / matches`` rows before it has
        ``first`` matches, where matches are estimated from the planned list sizes as if
        the atoms were independent. It walks when that is at most half its budget, twice
        the rows a select would read; a walk that runs past its budget falls back to
        selecting, so a bad estimate costs at most about three times a select. Nor does
        it walk at an instant before the one the order's bounds hold from; at an instant
        more than :data:`_WALK_FRESH` after it, the order is dropped, to be sorted again
        with bounds for that instant (about 10 ms at 100,000 memories).
        """
        order = self._order
        if order is not None and now < order.since:
            return None
        if order is not None and now - order.since > _WALK_FRESH:
            with self._lock:  # bounds a day old are loose: sorted again for ``now``
                if self._order is order:
                    self._order = None
        return self.walk_key_budget(plan, first)

    def _walk_shape(self, plan: Plan) -> _WalkShape | None:
        """What :meth:`walk_budget` weighs for ``plan``; None if it cannot be walked or
        selecting it reads too few rows to be worth a walk."""
        total = len(self.ids)
        driven = sum(step.sizes[0] for step in plan.steps)
        kind = _walk_type(plan)
        if driven < _WALK_MIN or not total or kind is None:
            return None
        expected = sum(
            math.prod(size / total for size in step.sizes[1:]) * step.sizes[0]
            for step in plan.steps
        )
        conjuncts = tuple(_literals(step) for step in plan.steps)
        # rows of the walked type need not be tested for it again
        rest = tuple(tuple(lit for lit in step if lit != (kind, True)) for step in conjuncts)
        return _WalkShape(kind, self.size(kind), driven, expected, conjuncts, rest)

    def walk_salience(
        self, plan: Plan, now: int, *, budget: int, first: int, scores: dict[int, int]
    ) -> Iterator[int]:
        """The rows ``plan`` matches in exact salience order (ties by memory id), lazily:
        the same rows in the same order as ``ordered(select(plan), "salience", now)``.
        Only for a plan :meth:`walk_budget` gave a budget for.

        Rather than score every match, it reads the rows of the plan's type best bound
        first (see :class:`_BoundOrder`), in rounds of :data:`_WALK_FIRST` rows then twice
        as many. A match it has read is scored only when its bound is the best left; the
        scored ones wait in a heap, and the best of them is yielded once its score beats
        the bound of every match not scored and every row not read (so at a tie it reads
        or scores on). Changed rows, out of place in the order, are scored up front.
        After ``budget`` rows it stops and falls back to selecting and sorting, skipping
        the rows it has already yielded. The score of every row yielded is left in
        ``scores``.
        """
        shape = self._facts_of(plan).shape
        assert shape is not None, "walk_salience needs a plan walk_budget accepts"
        order = self._bound_order(now)
        def salience(rows: Rows) -> npt.NDArray[np.int64]:
            return self.exact_scores(rows, now)

        if now < order.since:  # sorted meanwhile for a later instant (another thread)
            yield from self._selected(plan, salience, first, 0, scores)
            return
        ids = self.ids
        static_all, life_all, _ = self._static_all()
        at_all, weight = self.cols["at"], self.weights[4]
        # the matches scored, as (-score, id, row): the best first, ties by id
        heap: list[tuple[int, bytes, int]] = []
        if len(order.changed_rows):
            found = self._changed_matches(order, shape).tolist()
            for row, score in zip(found, self.scores_of(found, now), strict=True):
                heapq.heappush(heap, (-score, ids[row], row))
        # the matches read but not scored yet, by bound descending (as read), from
        # ``next_waiting`` on: row, bound, and what scoring it needs
        waiting: list[tuple[int, int, int, float, int]] = []
        next_waiting = 0
        code = _TYPE_CODE[shape.kind.value]
        start, end = int(order.starts[code]), int(order.starts[code + 1])
        unread = int(order.bounds[start]) if start < end else -1  # the best unread bound
        size, read, yielded = _WALK_FIRST, 0, 0
        while True:
            pending = waiting[next_waiting][1] if next_waiting < len(waiting) else -1
            if heap and -heap[0][0] > max(unread, pending):
                # nothing unscored can reach this score (at a tie, it reads or scores on:
                # an unscored row might tie with a smaller id)
                negative, _, row = heapq.heappop(heap)
                scores[row] = -negative
                yielded += 1
                yield row
            elif pending >= 0 and pending >= unread:  # score the best unscored match
                row, _, static, life, at = waiting[next_waiting]
                next_waiting += 1
                age = now - at
                recency = _ppm_one(0.5 ** (age / int(life))) if life and age > 0 else 1_000_000
                heapq.heappush(heap, (-((static + weight * recency) // 1_000_000), ids[row], row))
            elif start < end:  # read the next round
                if read >= budget:
                    yield from self._selected(plan, salience, first, yielded, scores)
                    return
                stop = min(start + size, end)
                found, bounds = self._round(order, shape, start, stop)
                # read after every waiting match, so no higher bound than theirs
                waiting += zip(
                    found.tolist(),
                    bounds,
                    static_all.take(found).tolist(),
                    life_all.take(found).tolist(),
                    at_all.take(found).tolist(),
                    strict=True,
                )
                read += stop - start
                start = stop
                unread = int(order.bounds[start]) if start < end else -1
                size *= 2
            else:
                return

    def walk_key_budget(self, plan: Plan, first: int) -> int | None:
        """:meth:`walk_budget` for :meth:`walk_key`: the same weighing, with no instant
        to check."""
        shape = self._facts_of(plan).shape
        if shape is None:
            return None
        budget = 2 * shape.driven
        if first * shape.segment > shape.expected * budget / 2:
            return None
        return budget

    def _key_order(self, order_by: str) -> _BoundOrder:
        """Each type's rows by the column of ``order_by`` descending, then id ascending:
        exactly the order ``ordered`` gives (sorted when first needed)."""
        while True:
            kept = self._key_orders.get(order_by)
            if kept is not None:
                return kept
            size = len(self.ids)
            cols = self.cols
            types = cols["type"][:size]
            key = cols[_KEY_COLUMN[order_by]][:size]
            ranked = np.lexsort((cols["idlo"][:size], cols["idkey"][:size], -key, types))
            made = _sorted_order(types, key, ranked, 0)
            with self._lock:
                if len(self.ids) == size and order_by not in self._key_orders:
                    self._key_orders[order_by] = made
                    return made
            # rows came or a build renumbered them meanwhile: sort again

    def walk_key(self, plan: Plan, order_by: str, *, budget: int, first: int) -> Iterator[int]:
        """The rows ``plan`` matches ordered by ``order_by`` (``"recent"`` or
        ``"priority"``), ties by memory id, lazily: the same rows in the same order as
        ``ordered(select(plan), order_by, now)``. Only for a plan
        :meth:`walk_key_budget` gave a budget for.

        It merges two sorted streams: the matches among the plan's type's rows in the
        key order (read in rounds, as :meth:`walk_salience` reads), and the changed rows
        that match, out of place in the order, in a heap by the same key. Past
        ``budget`` rows read it falls back to selecting and sorting.
        """
        shape = self._facts_of(plan).shape
        assert shape is not None, "walk_key needs a plan walk_key_budget accepts"
        order = self._key_order(order_by)
        ids, column = self.ids, self.cols[_KEY_COLUMN[order_by]]
        heap: list[tuple[int, bytes, int]] = []
        if len(order.changed_rows):
            found = self._changed_matches(order, shape)
            for row, key in zip(found.tolist(), column.take(found).tolist(), strict=True):
                heapq.heappush(heap, (-key, ids[row], row))
        waiting: list[tuple[int, bytes, int]] = []  # matches read, in order, from ``next``
        next_waiting = 0
        code = _TYPE_CODE[shape.kind.value]
        start, end = int(order.starts[code]), int(order.starts[code + 1])
        size, read, yielded = _WALK_FIRST, 0, 0
        while True:
            if next_waiting == len(waiting) and start < end:  # read the next round
                if read >= budget:
                    yield from self._selected(plan, column.take, first, yielded)
                    return
                stop = min(start + size, end)
                found, keys = self._round(order, shape, start, stop)
                waiting = [
                    (-key, ids[row], row) for row, key in zip(found.tolist(), keys, strict=True)
                ]
                next_waiting = 0
                read += stop - start
                start = stop
                size *= 2
                continue
            if next_waiting < len(waiting) and (not heap or waiting[next_waiting] < heap[0]):
                row = waiting[next_waiting][2]
                next_waiting += 1
            elif heap:
                row = heapq.heappop(heap)[2]
            else:
                return
            yielded += 1
            yield row

    def _selected(
        self,
        plan: Plan,
        key_of: Callable[[Rows], npt.NDArray[Any]],
        first: int,
        skip: int,
        keys: dict[int, Any] | None = None,
    ) -> Iterator[int]:
        """The rows ``plan`` selects by ``key_of(rows)`` descending, ties by id (as
        :meth:`ordered` gives them), without the first ``skip``: where a walk that gave
        up goes on. The key of every row yielded is left in ``keys`` when it is given."""
        rows = self.select(plan)
        return itertools.islice(self._by_column(rows, key_of(rows), skip + first, keys), skip, None)

    # -- keywords ----------------------------------------------------------------------------

    def term_postings(self, txn: ReadTxn, term: str) -> tuple[Rows, Rows]:
        """``(rows, term frequencies)`` of the memories whose indexed version holds
        ``term``, read from LMDB once and then kept current by the catch-up."""
        cached = self._terms.get(term)
        if cached is None:
            prefix = posting_prefix(term)
            keys, values = txn.prefix_range("postings", prefix)
            count = len(keys)
            width = len(prefix) + 16
            joined_keys, joined_values = b"".join(keys), b"".join(values)
            if len(joined_keys) != count * width or len(joined_values) != 4 * count:
                raise CorruptionError(f"a posting of {term!r} is malformed")
            ids = np.frombuffer(joined_keys, dtype=np.uint8).reshape(count, width)
            rows_array = self._rows_of(ids[:, len(prefix) :], term)
            tf = np.frombuffer(joined_values, dtype=">u4").astype(np.int64)
            if len(self._terms) >= _MAX_CACHED_TERMS:
                self._terms.clear()
            cached = self._terms[term] = _Terms(rows_array, tf, self.cols["gen"][rows_array])
        cached.settle()
        valid = cached.gen == self.cols["gen"][cached.rows]
        if valid.all():
            return cached.rows, cached.tf
        return cached.rows[valid], cached.tf[valid]

    def _rows_of(self, ids: npt.NDArray[np.uint8], term: str) -> Rows:
        """The rows of memory ids (one 16-byte id per row of ``ids``): a binary search
        over the rows a build loaded in id order, the id map for the rest."""
        count = len(ids)
        high = np.ascontiguousarray(ids[:, :8]).view(">u8").ravel().astype(np.uint64)
        low = np.ascontiguousarray(ids[:, 8:]).view(">u8").ravel().astype(np.uint64)
        rows = np.zeros(count, dtype=np.int64)
        found = np.zeros(count, dtype=np.bool_)
        sorted_rows = self._sorted_rows
        if sorted_rows and count:
            cols = self.cols
            at = np.searchsorted(cols["idkey"][:sorted_rows], high)
            inside = np.flatnonzero(at < sorted_rows)
            match = inside[
                (cols["idkey"][at[inside]] == high[inside])
                & (cols["idlo"][at[inside]] == low[inside])
            ]
            rows[match] = at[match]
            found[match] = True
        for i in np.flatnonzero(~found).tolist():
            row = self.row_of.get(ids[i].tobytes())
            if row is None:
                raise CorruptionError(f"a posting of {term!r} names an unknown memory")
            rows[i] = row
        return rows

    def bm25(
        self, txn: ReadTxn, terms: Iterable[str], params: Bm25Params
    ) -> tuple[Rows, npt.NDArray[np.float64]]:
        """BM25 scores of every memory matching any of ``terms``: ``(rows, scores)``.

        Per term, the same float operations in the same order as ``core.text.bm25_scores``
        (the reference the tests compare against), summed over terms in the given order.
        """
        n_docs, total = read_stats(txn)
        if not n_docs:
            return np.zeros(0, dtype=np.int64), np.zeros(0)
        avg = total / n_docs
        k1, b = params.k1, params.b
        found_rows: list[Rows] = []
        found_scores: list[npt.NDArray[np.float64]] = []
        for term in terms:
            rows, tf = self.term_postings(txn, term)
            if not len(rows):
                continue
            idf = bm25_idf(n_docs, len(rows))
            dl = self.cols["dlen"][rows]
            tf_f = tf.astype(np.float64)
            found_rows.append(rows)
            found_scores.append(idf * tf_f * (k1 + 1.0) / (tf_f + k1 * (1.0 - b + b * dl / avg)))
        if not found_rows:
            return np.zeros(0, dtype=np.int64), np.zeros(0)
        all_rows = np.concatenate(found_rows)
        # Dense accumulators over every row: bincount adds each row's scores in input
        # order (term by term), as the sum over np.unique's inverse did, without a sort.
        size = len(self.ids)
        matched = np.flatnonzero(np.bincount(all_rows, minlength=size))
        totals = np.bincount(all_rows, weights=np.concatenate(found_scores), minlength=size)
        return matched, np.asarray(totals[matched], dtype=np.float64)

    def filter(self, rows: Rows, dnf: DNF) -> Rows:
        """The rows that satisfy a predicate in normal form (with the status default)."""
        keep = np.zeros(len(rows), dtype=np.bool_)
        for conjunct in dnf:
            mask = np.ones(len(rows), dtype=np.bool_)
            for atom, positive in conjunct:
                hit = self._mask(atom, rows)
                mask &= hit if positive else ~hit
            if not any(atom.kind == "status" for atom, _ in conjunct):
                mask &= self.cols["status"][rows] == _ACTIVE
            keep |= mask
        return rows[keep]

    def all_rows(self) -> Rows:
        """Every row (every memory ever written, whatever its status)."""
        return np.arange(len(self.ids), dtype=np.int64)

    def active(self, rows: Rows) -> Rows:
        """The rows of active memories."""
        kept: Rows = rows[self.cols["status"][rows] == _ACTIVE]
        return kept

    # -- ordering ----------------------------------------------------------------------------

    def ordered(
        self,
        rows: Rows,
        order_by: str,
        now: int,
        *,
        first: int = 16,
        scores: dict[int, int] | None = None,
    ) -> Iterator[int]:
        """The rows in the order ``order_by``, ties by memory id; lazily, best first.

        ``first`` is how many rows the caller expects to read (more cost a second, larger
        round). For ``"salience"``, the exact score of every row it computed is left in
        ``scores`` (row -> score at ``now``), so the caller need not compute it again.
        """
        if order_by == "salience":
            yield from self._by_salience(rows, now, max(first, 1), {} if scores is None else scores)
            return
        column = {"recent": "at", "priority": "priority", "confidence": "confidence"}[order_by]
        yield from self._by_column(rows, self.cols[column][rows], max(first, 1))

    def _by_column(
        self,
        rows: Rows,
        key: npt.NDArray[Any],
        first: int,
        keys: dict[int, Any] | None = None,
    ) -> Iterator[int]:
        """Exact order by a key per row: sort only a pool that must hold the first
        ``first`` (then 4 x, 16 x, ... as the caller keeps reading). The key of every
        row yielded is left in ``keys`` when it is given."""
        want = first
        done = 0
        while done < len(rows):
            if want >= len(rows):
                pool, pool_key = rows, key
            else:
                threshold = np.partition(key, len(rows) - want)[len(rows) - want]
                keep = key >= threshold
                pool, pool_key = rows[keep], key[keep]
            ranked, ranked_key = self._exact_order(pool, pool_key)
            end = min(want, len(rows))
            if keys is not None:
                keys.update(zip(ranked[done:end], ranked_key[done:end], strict=True))
            yield from ranked[done:end]
            done = end
            want *= 4

    def _exact_order(self, pool: Rows, key: npt.NDArray[Any]) -> tuple[list[int], list[Any]]:
        """``pool`` sorted by key descending, then memory id ascending (exactly), and the
        keys in that order."""
        idkey = self.cols["idkey"][pool]
        order = np.lexsort((idkey, -key))
        ranked: list[int] = pool[order].tolist()
        ranked_key, ranked_id = key[order], idkey[order]
        values: list[Any] = ranked_key.tolist()
        same = (ranked_key[1:] == ranked_key[:-1]) & (ranked_id[1:] == ranked_id[:-1])
        if same.any():  # two ids share their first 8 bytes: settle it on the full ids
            by_row = dict(zip(ranked, values, strict=True))
            ranked.sort(key=lambda r: (-by_row[r], self.ids[r]))
            values = [by_row[r] for r in ranked]
        return ranked, values

    def exact_score(self, row: int, now: int) -> int:
        """The salience score of a row, computed exactly as ``core.salience`` defines it."""
        cols = self.cols
        factors = trusted_salience_factors(
            _TYPE_NAME[int(cols["type"][row])],
            float(cols["confidence"][row]),
            int(cols["priority"][row]),
            bool(cols["pinned"][row]),
            int(cols["indeg"][row]),
            self.max_indeg,
            int(cols["access"][row]),
            self.max_access,
            now - int(cols["at"][row]),
        )
        return trusted_cold_score(factors, self.weights)

    def _static_parts(
        self, rows: Rows
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float64], npt.NDArray[np.float64]]:
        """The salience terms of ``rows`` that do not depend on ``now``: the weighted sum
        of the confidence, priority, centrality and frequency factors (in ppm x weight,
        before the final division), the half-life in ms (0: no decay; doubled for hubs,
        as ``core.salience`` does), and the decay rate ``-1 / half-life`` (0: no decay),
        with which ``exp2(age * rate)`` is the recency factor (:meth:`_scores_vectorised`).

        Centrality is computed only for rows with an in-degree and frequency only for rows
        with accesses, in float64 as ``core.salience`` computes them (numpy's ``log1p``
        may differ from ``math.log`` in the last bits); :func:`_ppm` rounds them.
        """
        cols, weights = self.cols, self.weights
        static: npt.NDArray[np.int64] = weights[0] * cols["conf_ppm"][rows]
        static += weights[1] * cols["prio_ppm"][rows]
        access = cols["access"][rows]
        hub = access > HUB_ACCESS_COUNT
        if self.max_indeg:
            indeg = cols["indeg"][rows]
            linked = np.flatnonzero(indeg)
            if len(linked):
                centrality = indeg[linked] / self.max_indeg
                static[linked] += weights[2] * _ppm(centrality)
                hub[linked] |= centrality > HUB_CENTRALITY
        if self.max_access:
            read = np.flatnonzero(access)
            if len(read):
                counts = access[read]
                units = np.log1p(counts) / np.log1p(float(self.max_access))
                units[counts == self.max_access] = 1.0
                most = self.max_access

                def exactly(i: int) -> int:  # core.salience's math.log, near a half ppm
                    return round_ppm(frequency(int(counts[i]), most))

                static[read] += weights[3] * _ppm(units, exactly)
        life = _HALF_LIFE[cols["type"][rows]]
        life[cols["pinned"][rows]] = 0.0
        life[hub] *= 2
        rate = np.zeros(len(life), dtype=np.float64)
        np.divide(-1.0, life, out=rate, where=life > 0)
        return static, life, rate

    def _static_all(
        self,
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float64], npt.NDArray[np.float64]]:
        """:meth:`_static_parts` of every row, computed once per change of the store-wide
        maxima or weights and kept current row by row by the catch-up."""
        static = self._static
        if static is None:
            with self._lock:
                static = self._static
                if static is None:
                    static = self._static = self._static_parts(self.all_rows())
        return static

    def _bound_order(self, now: int) -> _BoundOrder:
        """The rows by an upper bound of their score (see :class:`_BoundOrder`), sorted
        when first needed after the static terms were computed afresh, with bounds for
        every instant from ``now`` on."""
        while True:
            order = self._order
            if order is not None:
                return order
            static_parts = self._static_all()
            static = static_parts[0]
            count = len(static)
            upper = static + self.weights[4] * 1_000_000
            upper //= 1_000_000
            # a score only falls as time passes (recency decays): the score at ``now``
            # bounds every later one; the 1 added covers a last-place difference in
            # ``0.5 ** x`` between two instants that could round a factor up by 1 ppm
            later = self.exact_scores(np.arange(count, dtype=np.int64), now)
            later += 1
            np.minimum(upper, later, out=upper)
            types = self.cols["type"][:count]
            made = _sorted_order(types, upper, np.lexsort((-upper, types)), now)
            with self._lock:
                if self._static is static_parts and self._order is None:
                    self._order = made
                    return made
            # the static terms moved meanwhile (a refresh): sort again

    def _update_static(self, rows: Rows) -> None:
        """Recompute the static parts of ``rows`` (new rows included); under the lock."""
        assert self._static is not None
        static, life, rate = self._static
        size = len(self.ids)
        if len(static) < size:
            grow = size - len(static)
            static = np.concatenate((static, np.zeros(grow, dtype=np.int64)))
            life = np.concatenate((life, np.zeros(grow, dtype=np.float64)))
            rate = np.concatenate((rate, np.zeros(grow, dtype=np.float64)))
        else:  # readers may hold the old arrays: never write into them
            static, life, rate = static.copy(), life.copy(), rate.copy()
        static[rows], life[rows], rate[rows] = self._static_parts(rows)
        self._static = (static, life, rate)
        if self._order is not None:  # None: sorted anew when a walk next needs it
            self._order = _with_changed(self._order, rows, size)

    def salience_bounds(self, rows: Rows) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
        """Bounds ``(lower, upper)`` of each row's salience score at any ``now``: exact
        for memories that do not decay (recency is 1), else recency 0 and 1.
        """
        static_all, life_all, _ = self._static_all()
        full = self.weights[4] * 1_000_000
        static = static_all[rows]
        upper = (static + full) // 1_000_000
        lower = np.where(life_all[rows] > 0, static // 1_000_000, upper)
        return lower, upper

    def exact_scores(self, rows: Rows, now: int) -> npt.NDArray[np.int64]:
        """:meth:`exact_score` of every row, equal to it row for row.

        The terms that do not depend on ``now`` come from :meth:`_static_all`. A few rows
        are scored one by one (:meth:`_scores_one_by_one`: numpy's fixed cost per call
        would dominate); more are vectorised (:meth:`_scores_vectorised`).
        """
        if len(rows) <= _ONE_BY_ONE:
            return np.asarray(self._scores_one_by_one(rows.tolist(), now), dtype=np.int64)
        return self._scores_vectorised(rows, now)

    def scores_of(self, rows: list[int], now: int) -> list[int]:
        """:meth:`exact_scores` of a list of rows, as a list."""
        if len(rows) <= _ONE_BY_ONE:
            return self._scores_one_by_one(rows, now)
        scores: list[int] = self._scores_vectorised(np.asarray(rows, dtype=np.int64), now).tolist()
        return scores

    def _scores_one_by_one(self, rows: list[int], now: int) -> list[int]:
        """The scores of ``rows`` in plain Python: the kept static terms plus the weighted
        recency ``round_ppm(0.5 ** (age / half_life))``, the arithmetic of ``core.salience``
        (an age and a half-life in integer ms, divided as Python divides integers)."""
        static_all, life_all, _ = self._static_all()
        weight = self.weights[4]
        scores = []
        for static, life, at in zip(
            map(static_all.item, rows),
            map(life_all.item, rows),
            map(self.cols["at"].item, rows),
            strict=True,
        ):
            age = now - at
            recency = _ppm_one(0.5 ** (age / int(life))) if life and age > 0 else 1_000_000
            scores.append((static + weight * recency) // 1_000_000)
        return scores

    def _scores_vectorised(self, rows: Rows, now: int) -> npt.NDArray[np.int64]:
        """The scores of ``rows`` with numpy, every row alike: the recency factor is
        ``exp2(age * rate)`` (1 for a memory that does not decay, whose rate is 0, and for
        an age of 0 or less), rounded to ppm with ``rint``.

        That rounding is exact (the half-to-even rounding of ``core.salience``'s
        ``0.5 ** (age / half_life)``) unless the value lies within :data:`_TIE_GUARD` ppm of
        a half: up to ages of 50 half-lives (beyond, recency rounds to 0 either way) the
        float error of ``age * rate`` and ``exp2`` is below 1e-7 ppm. Rows near a half, and
        rows too old for their age to be exact as a float, are scored by
        :meth:`exact_score`.
        """
        static_all, _, rate_all = self._static_all()
        age = now - self.cols["at"][rows]
        np.maximum(age, 0, out=age)
        scaled = np.exp2(age * rate_all[rows])
        scaled *= 1e6
        recency = np.rint(scaled)
        near = np.abs(scaled - recency) >= 0.5 - _TIE_GUARD
        total = recency.astype(np.int64)
        total *= self.weights[4]
        total += static_all[rows]
        total //= 1_000_000
        if near.any() or age.max() >= _EXACT_FLOAT:
            for i in np.flatnonzero(near | (age >= _EXACT_FLOAT)).tolist():
                total[i] = self.exact_score(int(rows[i]), now)
        return total

    def _by_salience(
        self, rows: Rows, now: int, first: int, scores: dict[int, int]
    ) -> Iterator[int]:
        """Exact salience order: every row scored exactly (vectorised), then only a pool
        that must hold the first ``first`` (then 4 x, 16 x, ...) sorted. The score of
        every row yielded is left in ``scores``."""
        if not len(rows):
            return
        yield from self._by_column(rows, self.exact_scores(rows, now), first, scores)


def _ppm_one(value: float) -> int:
    """``core.salience.round_ppm(value)`` for a value in 0..1, by float arithmetic unless
    ``value * 1e6`` lies within :data:`_TIE_GUARD` of a half (its float error is below
    1e-9 ppm, so only near a half can the two roundings disagree).

    >>> [_ppm_one(v) == round_ppm(v) for v in (0.25, 0.0000125, 0.0000135, 0.3333333)]
    [True, True, True, True]
    """
    scaled = value * 1e6
    whole = int(scaled)
    fraction = scaled - whole
    if abs(fraction - 0.5) > _TIE_GUARD:
        return whole + 1 if fraction > 0.5 else whole
    return round_ppm(value)


def _ppm(
    values: npt.NDArray[np.float64], exactly: Callable[[int], int] | None = None
) -> npt.NDArray[np.int64]:
    """``core.salience.round_ppm`` of each value, vectorised.

    ``rint(value * 1e6)`` can only disagree with the exact half-to-even rounding when
    ``value * 1e6`` lies within a hair of a half: the product's float error is below
    1e-9 ppm. Values within :data:`_TIE_GUARD` of a half are rounded one by one: by
    ``exactly(i)`` when the values are numpy's approximation of a factor ``core.salience``
    computes otherwise (``log1p`` for ``math.log``: a few units in the last place apart,
    which near a half can round differently), else by ``round_ppm`` of the value itself.
    """
    scaled = values * 1e6
    rounded = np.rint(scaled).astype(np.int64)
    close = np.flatnonzero(np.abs(scaled - np.floor(scaled) - 0.5) <= _TIE_GUARD)
    for i in close.tolist():
        rounded[i] = round_ppm(float(values[i])) if exactly is None else exactly(i)
    return rounded


class _PlanFacts:
    """What a column index keeps of a plan until its columns move to another seq."""

    __slots__ = ("matched", "plan", "seq", "shape")

    def __init__(self, plan: Plan, seq: int, shape: _WalkShape | None) -> None:
        self.plan, self.seq, self.shape = plan, seq, shape
        self.matched = -1  # not counted yet


class _WalkShape(NamedTuple):
    """What :meth:`ColumnIndex.walk_budget` weighs for a plan (kept in its facts)."""

    #: the type atom every step requires
    kind: Atom
    #: how many rows have that type (the walk reads at most these)
    segment: int
    #: the rows a select reads first (the steps' driving posting lists together)
    driven: int
    #: the matches expected, as if the atoms were independent
    expected: float
    #: each step's literals (see :func:`_literals`)
    conjuncts: tuple[Conjunct, ...]
    #: the same without the type atom: what a row of that type must still pass
    rest: tuple[Conjunct, ...]


def _literals(step: ConjunctPlan) -> Conjunct:
    """Every literal a row must pass for ``step``: its lists, then its residual."""
    return (
        (step.driver, True),
        *((atom, True) for atom in step.intersect),
        *((atom, False) for atom in step.subtract),
        *step.residual,
    )


def _walk_type(plan: Plan) -> Atom | None:
    """The type atom every step of ``plan`` requires, if they all require the same one."""
    found: Atom | None = None
    for step in plan.steps:
        kinds = [atom for atom in (step.driver, *step.intersect) if atom.kind == "type"]
        if not kinds or (found is not None and kinds[0] != found):
            return None
        found = kinds[0]
    return found


def _sorted_order(types: npt.NDArray[Any], bounds: Rows, rows: Rows, since: int) -> _BoundOrder:
    """The order of ``rows`` (every row, sorted by type code first), with ``bounds``
    (per row) taken in that order, nothing changed yet."""
    starts = types.take(rows).searchsorted(np.arange(len(_HALF_LIFE) + 1)).astype(np.int64)
    none = np.zeros(0, dtype=np.int64)
    changed = np.zeros(len(rows), dtype=np.bool_)
    return _BoundOrder(rows, bounds.take(rows), starts, changed, none, since, {})


def _with_changed(order: _BoundOrder, rows: Rows, size: int) -> _BoundOrder | None:
    """``order`` with ``rows`` marked changed (``size`` rows in all now), or None once
    more than :data:`_WALK_CHANGED` rows (or a 16th of the order) changed."""
    changed_rows = np.union1d(order.changed_rows, rows)
    if len(changed_rows) > max(_WALK_CHANGED, len(order.rows) // 16):
        return None
    changed = np.zeros(size, dtype=np.bool_)
    changed[: len(order.changed)] = order.changed
    changed[rows] = True
    return order._replace(changed=changed, changed_rows=changed_rows)


def _holds(
    size: int, conjuncts: Iterable[Conjunct], mask_of: Callable[[Atom], npt.NDArray[np.bool_]]
) -> npt.NDArray[np.bool_]:
    """Per row of ``size``: whether some conjunct holds, every literal ``(atom,
    positive)`` of it being ``mask_of(atom)`` (or its negation). Never writes into a mask
    ``mask_of`` returns (those may be views a walk keeps). No literals: all True; no
    conjuncts: all False."""
    keep: npt.NDArray[np.bool_] | None = None
    for literals in conjuncts:
        mask: npt.NDArray[np.bool_] | None = None
        for atom, positive in literals:
            hit = mask_of(atom)
            if not positive:
                hit = ~hit
            mask = hit if mask is None else mask & hit
        if mask is None:
            mask = np.ones(size, dtype=np.bool_)
        keep = mask if keep is None else keep | mask
    return np.zeros(size, dtype=np.bool_) if keep is None else keep


def _member(rows: Rows, posting: Rows) -> npt.NDArray[np.bool_]:
    """Per row of ``rows``: whether it is in ``posting`` (sorted, each row once), by
    binary search (``np.isin`` sorts both arrays together, which costs more when
    ``rows`` is the shorter).

    >>> _member(np.array([5, 1, 9, 3]), np.array([1, 3, 4])).tolist()
    [False, True, False, True]
    """
    if not len(posting):
        return np.zeros(len(rows), dtype=np.bool_)
    found: npt.NDArray[np.bool_] = posting.take(posting.searchsorted(rows), mode="clip") == rows
    return found


def _type_name(code: int) -> str:
    return _TYPE_NAME[code]
