"""The ``salience`` table: what ranking reads about each memory, kept up to date by ``apply``.

Layout (``id`` is the 16-byte memory id; integers big-endian)::

    b"m" | id        -> attributes row (below): what queries filter and rank on
    b"a" | id        -> u32 access count | u64 last access at (ms)      (absent: never)
    b"d" | id        -> u32 in-degree: active in-edges                   (absent: 0)
    b"D" | u32 deg   -> u64 how many memories have that in-degree (deg >= 1)
    b"X"             -> u32 the highest access count of any memory      (absent: 0)
    b"Y"             -> u32 the highest in-degree of any memory         (absent: 0)
    b"W"             -> 5 x u32 the learned salience weights, ppm        (absent: defaults)
    b"k" | src | dst -> b""   a consolidation candidate: a suggested relates_to edge of
                              strength >= 0.5 (what ``compact`` examines)

    attributes row:
    +----+------+--------+-------+----------+------------+--------+------------+------------+
    | 02 | type | status | flags | priority | confidence | at     | created_at | updated_at |
    |    | u8   | u8     | u8    | u8       | f64        | u64 ms | u64 ms     | u64 ms     |
    +----+------+--------+-------+----------+------------+--------+------------+------------+
    +-----------+--------+
    | index seq | length |
    | u64       | u32    |
    +-----------+--------+
    +--------+----+------------+-----------------------------+
    | ns len | ns | tag count  | per tag: u16 len, UTF-8 tag |
    | u8     |    | u8         |                             |
    +--------+----+------------+-----------------------------+

``flags`` bit 0 is ``pinned``; ``at`` is when the head version was written; ``updated_at``
when an entry last changed the memory (its status included); ``index seq`` is the seq of
the entry that last (re)indexed it for keyword search and ``length`` its indexed length
(both 0 when it is not indexed: ``core.segments``); tags are in the memory's (sorted)
order. The row duplicates what ``heads`` and the head version hold,
so that the in-memory query index (``cortexgraph.index``) loads from one scan of small rows
instead of decoding every body.

Invariants:

- R1 every memory has exactly one attributes row, equal to what its head state and head
  version say (type, status, pinned, priority, confidence, at, created_at, ns, tags),
  and to its keyword indexing (index seq, length; K1).
- R2 ``X`` is the maximum access count, ``Y`` the maximum in-degree, and ``D`` counts
  in-degrees exactly (``Y`` is the largest ``deg`` with a ``D`` row).
- R3 ``W`` holds the weights of the last ``LearnWeights`` memory written (five integers
  >= 0 summing to 1,000,000).
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from typing import Any, ClassVar, Final, NamedTuple, Protocol, final

import numpy as np

from ..errors import CorruptionError
from .salience import DEFAULT_WEIGHTS, salience_factors
from .state import STATUSES, DerivedRow
from .taxonomy import MEMORY_TYPES, WEIGHT_COUNT, WEIGHT_TOTAL, Memory

__all__ = [
    "DEFAULT_WEIGHTS",
    "MEMORY_STATUSES",
    "CANDIDATE",
    "CONSOLIDATION_PPM",
    "AttrsColumns",
    "AttrsRow",
    "candidate_key",
    "access_key",
    "access_mutations",
    "attrs_key",
    "decode_attrs_rows",
    "degree_key",
    "degree_mutations",
    "index_seq_of",
    "max_access",
    "max_in_degree",
    "memory_factors",
    "read_access",
    "read_in_degree",
    "read_weights",
    "weights_mutation",
]

#: Every status a memory can have (``core.state.STATUSES``).
MEMORY_STATUSES = STATUSES

_STATUS_CODE = {name: code for code, name in enumerate(MEMORY_STATUSES, start=1)}
_TYPE_NAME = {t.type_code: t.type_name for t in MEMORY_TYPES}
_TYPE_CODE = {t.type_name: t.type_code for t in MEMORY_TYPES}

_ROW = struct.Struct(">BBBBBdQQQQIB")
#: where the index seq lies in an attributes row (read without decoding the row)
_INDEX_SEQ = struct.Struct(">Q")
_INDEX_SEQ_AT = 37
_U16 = struct.Struct(">H")
_U32 = struct.Struct(">I")
_U64 = struct.Struct(">Q")
_ACCESS = struct.Struct(">IQ")
_WEIGHTS = struct.Struct(">" + "I" * WEIGHT_COUNT)
_LAYOUT = 2
#: ``_ROW`` as numpy reads it, for :func:`decode_attrs_rows`
_ROW_DTYPE = np.dtype(
    [
        ("layout", "u1"),
        ("type", "u1"),
        ("status", "u1"),
        ("flags", "u1"),
        ("priority", "u1"),
        ("confidence", ">f8"),
        ("at", ">u8"),
        ("created", ">u8"),
        ("updated", ">u8"),
        ("index_seq", ">u8"),
        ("length", ">u4"),
        ("ns_len", "u1"),
    ]
)
assert _ROW_DTYPE.itemsize == _ROW.size

ATTRS = b"m"
ACCESS = b"a"
DEGREE = b"d"
HISTOGRAM = b"D"
MAX_ACCESS = b"X"
MAX_DEGREE = b"Y"
WEIGHTS = b"W"

Mutation = tuple[str, bytes, bytes | None]


class _View(Protocol):
    def get(self, table: str, key: bytes) -> bytes | None: ...


#: a suggested ``relates_to`` edge at least this strong is a consolidation candidate
CONSOLIDATION_PPM = 500_000
CANDIDATE = b"k"


def candidate_key(src: bytes, dst: bytes) -> bytes:
    return CANDIDATE + src + dst


def attrs_key(memory_id: bytes) -> bytes:
    return ATTRS + memory_id


def access_key(memory_id: bytes) -> bytes:
    return ACCESS + memory_id


def degree_key(memory_id: bytes) -> bytes:
    return DEGREE + memory_id


@final
class AttrsRow(DerivedRow):
    """One memory's attributes row (see the module layout)."""

    __slots__ = ("at", "confidence", "created_at", "index_seq", "length", "ns", "pinned",
                 "priority", "status", "tags", "type_name", "updated_at")  # fmt: skip
    FIELDS: ClassVar[tuple[str, ...]] = (
        "type_name", "status", "pinned", "priority", "confidence", "at", "created_at",
        "updated_at", "ns", "tags", "index_seq", "length",
    )  # fmt: skip

    def __init__(
        self,
        type_name: str,
        status: str,
        pinned: bool,
        priority: int,
        confidence: float,
        at: int,
        created_at: int,
        updated_at: int,
        ns: str,
        tags: tuple[str, ...],
        index_seq: int = 0,
        length: int = 0,
    ) -> None:
        self.type_name: Final = type_name
        self.status: Final = status
        self.pinned: Final = pinned
        self.priority: Final = priority
        self.confidence: Final = confidence
        self.at: Final = at
        self.created_at: Final = created_at
        self.updated_at: Final = updated_at
        self.ns: Final = ns
        self.tags: Final = tags
        #: the seq of the entry that last (re)indexed the memory (0: not indexed)
        self.index_seq: Final = index_seq
        #: its keyword-index length (0: not indexed)
        self.length: Final = length

    def with_status(self, status: str, updated_at: int, index_seq: int, length: int) -> AttrsRow:
        """This row with the status, update time and index fields replaced."""
        return AttrsRow(
            self.type_name, status, self.pinned, self.priority, self.confidence, self.at,
            self.created_at, updated_at, self.ns, self.tags, index_seq, length,
        )  # fmt: skip

    @staticmethod
    def of(
        memory: Memory,
        *,
        ns: str,
        status: str,
        at: int,
        created_at: int,
        updated_at: int,
        index_seq: int,
        length: int,
    ) -> AttrsRow:
        return AttrsRow(
            memory.type_name,
            status,
            memory.pinned,
            memory.priority,
            memory.confidence,
            at,
            created_at,
            updated_at,
            ns,
            memory.tags,
            index_seq,
            length,
        )

    def encode(self) -> bytes:
        ns = self.ns.encode("utf-8")
        parts = [
            _ROW.pack(
                _LAYOUT,
                _TYPE_CODE[self.type_name],
                _STATUS_CODE[self.status],
                1 if self.pinned else 0,
                self.priority,
                self.confidence,
                self.at,
                self.created_at,
                self.updated_at,
                self.index_seq,
                self.length,
                len(ns),
            ),
            ns,
            bytes((len(self.tags),)),
        ]
        for tag in self.tags:
            raw = tag.encode("utf-8")
            parts.append(_U16.pack(len(raw)))
            parts.append(raw)
        return b"".join(parts)

    @staticmethod
    def decode(data: bytes) -> AttrsRow:
        try:
            (
                layout, type_code, status, flags, priority, confidence, at, created, updated,
                index_seq, indexed_length, ns_len,
            ) = _ROW.unpack_from(data)  # fmt: skip
            if layout != _LAYOUT or flags > 1 or not 1 <= priority <= 10:
                raise ValueError("bad layout, flags or priority")
            if not 1 <= status <= len(MEMORY_STATUSES):
                raise ValueError(f"bad status {status}")
            if index_seq == 0 and indexed_length:
                raise ValueError("a length without an index seq")
            if not 0.0 <= confidence <= 1.0:
                raise ValueError("confidence out of range")
            tail = _parse_tail(data[_ROW.size - 1 :])  # from the namespace's length on
            if tail is None:
                raise ValueError(f"bad namespace or tags (namespace length {ns_len})")
            ns, tags = tail
            return AttrsRow(
                _TYPE_NAME[type_code],
                MEMORY_STATUSES[status - 1],
                bool(flags),
                priority,
                confidence,
                at,
                created,
                updated,
                ns,
                tags,
                index_seq,
                indexed_length,
            )
        except (struct.error, ValueError, KeyError, IndexError) as exc:
            raise CorruptionError(f"an attributes row is malformed ({exc})") from None


class AttrsColumns(NamedTuple):
    """Many attributes rows decoded at once (:func:`decode_attrs_rows`), one array per
    field, a row per element. Namespaces and tag lists are numbered by first appearance,
    in row order."""

    type_code: Any  # uint8: the type's code (``core.taxonomy``)
    status_code: Any  # uint8: 1 + the status's index in MEMORY_STATUSES
    pinned: Any  # bool
    priority: Any  # int64
    confidence: Any  # float64
    at: Any  # int64
    updated_at: Any  # int64
    index_seq: Any  # int64
    length: Any  # int64
    ns_of: Any  # int64: the row's namespace, an index into ``ns_names``
    ns_names: tuple[str, ...]
    tag_of: Any  # int64: the row's tags, an index into ``tag_sets``
    tag_sets: tuple[tuple[str, ...], ...]


_TYPE_KNOWN = np.zeros(256, dtype=np.bool_)
_TYPE_KNOWN[sorted(_TYPE_NAME)] = True
_INT64_LIMIT = 1 << 63


def decode_attrs_rows(rows: list[bytes]) -> AttrsColumns | None:
    """Decode many attributes rows at once: what :meth:`AttrsRow.decode` gives row by
    row, as columns. The fixed part of every row is read by numpy in one go, and the
    namespace and tags once per distinct tail (most memories share a few), so a row
    costs a slice and a dict lookup instead of a decode.

    Returns:
        The columns, or None when a row is not well formed (or holds a time or seq too
        large for a signed 64-bit column): decoding the rows one by one then says which
        and why.
    """
    size = _ROW.size
    count = len(rows)
    lengths = np.fromiter(map(len, rows), dtype=np.int64, count=count)
    if count and int(lengths.min()) <= size:  # a row ends before its tag count
        return None
    head = np.frombuffer(b"".join([row[:size] for row in rows]), dtype=_ROW_DTYPE)
    tails: dict[bytes, int] = {}  # everything from the namespace's length on
    tail_of = np.fromiter(
        (tails.setdefault(row[size - 1 :], len(tails)) for row in rows),
        dtype=np.int64,
        count=count,
    )
    ns_codes: dict[str, int] = {}
    tag_codes: dict[tuple[str, ...], int] = {}
    ns_of_tail = np.zeros(len(tails), dtype=np.int64)
    tags_of_tail = np.zeros(len(tails), dtype=np.int64)
    for tail, code in tails.items():  # in the order of their first rows
        parsed = _parse_tail(tail)
        if parsed is None:
            return None
        ns_of_tail[code] = ns_codes.setdefault(parsed[0], len(ns_codes))
        tags_of_tail[code] = tag_codes.setdefault(parsed[1], len(tag_codes))
    status = head["status"]
    priority = head["priority"]
    confidence = head["confidence"].astype(np.float64)
    index_seq = head["index_seq"]
    length = head["length"]
    good = (
        (head["layout"] == _LAYOUT)
        & (head["flags"] <= 1)
        & (priority >= 1)
        & (priority <= 10)
        & (status >= 1)
        & (status <= len(MEMORY_STATUSES))
        & ((index_seq != 0) | (length == 0))
        & (confidence >= 0.0)
        & (confidence <= 1.0)
        & _TYPE_KNOWN[head["type"]]
        & (head["at"] < _INT64_LIMIT)
        & (head["updated"] < _INT64_LIMIT)
        & (index_seq < _INT64_LIMIT)
    )
    if not bool(good.all()):
        return None
    return AttrsColumns(
        type_code=head["type"].astype(np.uint8),
        status_code=status.astype(np.uint8),
        pinned=head["flags"] == 1,
        priority=priority.astype(np.int64),
        confidence=confidence,
        at=head["at"].astype(np.int64),
        updated_at=head["updated"].astype(np.int64),
        index_seq=index_seq.astype(np.int64),
        length=length.astype(np.int64),
        ns_of=ns_of_tail[tail_of],
        ns_names=tuple(ns_codes),
        tag_of=tags_of_tail[tail_of],
        tag_sets=tuple(tag_codes),
    )


def _parse_tail(tail: bytes) -> tuple[str, tuple[str, ...]] | None:
    """The namespace and tags of an attributes row's tail (from its namespace's length
    byte on), for :meth:`AttrsRow.decode` and :func:`decode_attrs_rows`; None if
    malformed."""
    size = len(tail)
    ns_len = tail[0]
    pos = 1 + ns_len
    if pos >= size:
        return None
    count = tail[pos]
    pos += 1
    try:
        ns = tail[1 : 1 + ns_len].decode("utf-8")
        tags: list[str] = []
        for _ in range(count):
            if pos + 2 > size:
                return None
            end = pos + 2 + ((tail[pos] << 8) | tail[pos + 1])
            if end > size:
                return None
            tags.append(tail[pos + 2 : end].decode("utf-8"))
            pos = end
    except UnicodeDecodeError:
        return None
    if pos != size or len(ns) != ns_len:
        return None
    return ns, tuple(tags)


def index_seq_of(row: bytes) -> int:
    """The index seq an encoded attributes row holds (read without decoding the row).

    Raises:
        CorruptionError: the row is too short or of another layout.
    """
    if len(row) < _ROW.size or row[0] != _LAYOUT:
        raise CorruptionError("an attributes row is malformed (too short or bad layout)")
    return int(_INDEX_SEQ.unpack_from(row, _INDEX_SEQ_AT)[0])


def _u32(view: _View, key: bytes) -> int:
    raw = view.get("salience", key)
    if raw is None:
        return 0
    if len(raw) != 4:
        raise CorruptionError(f"salience row {key[:1]!r} is malformed")
    return int(_U32.unpack(raw)[0])


def read_in_degree(view: _View, memory_id: bytes) -> int:
    """How many active edges point at the memory."""
    return _u32(view, degree_key(memory_id))


def max_in_degree(view: _View) -> int:
    """The highest in-degree of any memory (0 without edges)."""
    return _u32(view, MAX_DEGREE)


def max_access(view: _View) -> int:
    """The highest access count of any memory (0 before the first access)."""
    return _u32(view, MAX_ACCESS)


def read_access(view: _View, memory_id: bytes) -> tuple[int, int]:
    """``(access count, last access at)``; ``(0, 0)`` for a memory never accessed."""
    raw = view.get("salience", access_key(memory_id))
    if raw is None:
        return 0, 0
    if len(raw) != _ACCESS.size:
        raise CorruptionError("an access row is malformed")
    count, last = _ACCESS.unpack(raw)
    return int(count), int(last)


def read_weights(view: _View) -> tuple[int, ...]:
    """The current salience weights in ppm (the defaults until an attest learns)."""
    raw = view.get("salience", WEIGHTS)
    if raw is None:
        return DEFAULT_WEIGHTS
    if len(raw) != _WEIGHTS.size:
        raise CorruptionError("the weights row is malformed")
    weights = tuple(int(w) for w in _WEIGHTS.unpack(raw))
    if sum(weights) != WEIGHT_TOTAL:
        raise CorruptionError("the stored weights do not sum to 1,000,000")
    return weights


def memory_factors(view: _View, memory_id: bytes, now: int) -> tuple[int, ...]:
    """The five salience factors of one memory at ``now``, in ppm (``core.salience``).

    The maxima that normalise centrality and frequency are store-wide (``X``, ``Y``);
    the age is ``now`` minus the time its head version was written.
    """
    raw = view.get("salience", attrs_key(memory_id))
    if raw is None:
        raise CorruptionError(f"memory {memory_id.hex()} has no attributes row")
    row = AttrsRow.decode(raw)
    return salience_factors(
        type_name=row.type_name,
        confidence=row.confidence,
        priority=row.priority,
        pinned=row.pinned,
        in_degree=read_in_degree(view, memory_id),
        max_in_degree=max_in_degree(view),
        access_count=read_access(view, memory_id)[0],
        max_access=max_access(view),
        age_ms=now - row.at,
    )


def weights_mutation(weights: tuple[int, ...]) -> Mutation:
    return ("salience", WEIGHTS, _WEIGHTS.pack(*weights))


def _histogram_key(degree: int) -> bytes:
    return HISTOGRAM + _U32.pack(degree)


def degree_mutations(view: _View, memory_id: bytes, delta: int) -> list[Mutation]:
    """Change a memory's in-degree by ``delta`` (+1 or -1), with histogram and maximum."""
    old = read_in_degree(view, memory_id)
    new = old + delta
    if new < 0:
        raise CorruptionError("an in-degree would drop below zero")
    out: list[Mutation] = [("salience", degree_key(memory_id), _U32.pack(new) if new else None)]
    highest = max_in_degree(view)
    if old:
        count = _u64(view, _histogram_key(old)) - 1
        if count < 0:
            raise CorruptionError(f"the in-degree histogram has no memory of degree {old}")
        out.append(("salience", _histogram_key(old), _U64.pack(count) if count else None))
        if not count and old == highest and new < old:
            highest = new  # the memory that moved down is now the highest
    if new:
        count = _u64(view, _histogram_key(new)) + 1
        out.append(("salience", _histogram_key(new), _U64.pack(count)))
        highest = max(highest, new)
    out.append(("salience", MAX_DEGREE, _U32.pack(highest) if highest else None))
    return out


def _u64(view: _View, key: bytes) -> int:
    raw = view.get("salience", key)
    if raw is None:
        return 0
    if len(raw) != 8:
        raise CorruptionError("an in-degree histogram row is malformed")
    return int(_U64.unpack(raw)[0])


def access_mutations(view: _View, memory_ids: Iterable[bytes], at: int) -> list[Mutation]:
    """Count one access of each memory at ``at`` (ids distinct), and the new maximum."""
    out: list[Mutation] = []
    highest = old_highest = max_access(view)
    for memory_id in memory_ids:
        count, last = read_access(view, memory_id)
        count += 1
        out.append(("salience", access_key(memory_id), _ACCESS.pack(count, max(last, at))))
        highest = max(highest, count)
    if highest != old_highest:
        out.append(("salience", MAX_ACCESS, _U32.pack(highest)))
    return out
