"""The ``postings`` table: the keyword (BM25) index as immutable segments.

As SQLite FTS5, Lucene and tantivy store postings, a segment is a sorted term dictionary
with packed postings; segments are written whole and merged, never edited in place. What
goes into a segment, and when segments merge, is decided by seq alone, so that a write in
any batching and a rebuild from the journal leave the same bytes (J4).

Index seq. The *index seq* of a memory is the seq of the entry that last (re)indexed it:
``write``, ``update``, ``head``, and a ``status`` or ``access`` entry that makes it active
again. A memory that is not active is not indexed (K1); its index seq is then 0. The
attributes row (``core.signals``) holds it, with the document length.

Segments. A level-``L`` segment covers the aligned seq range ``[k * span(L) + 1,
(k + 1) * span(L)]``, ``span(L) = FANOUT ** L`` (1, 16, 256, 4096, 65536 seqs for levels
0 to :data:`MAX_LEVEL`). It holds, for every memory whose index seq as of the range's last
seq lies in its range and that is indexed then, its terms and term frequencies. A memory
indexed twice inside one range appears once, with its latest terms. A level-0 segment is
one entry's: the memories that entry indexed, written once and never edited, so a single
write adds one small row and rewrites nothing (as SQLite FTS5 writes each transaction's
postings as a new segment). When the entry at the end of a level-``L`` range (``L >= 1``)
is applied, every segment inside that range is merged into one level-``L`` segment and
deleted. There are no merges above :data:`MAX_LEVEL`: level-4 segments accumulate. So the
segments of a store at seq ``s`` (:func:`segments_at`) are disjoint and cover ``[1, s]``,
every one of them complete; a segment with no postings has no rows.

Liveness. A posting of a segment is live iff its memory's current index seq lies in the
segment's range (a later re-index or a deactivation moved it out). A merge drops the
postings that are not live at its seq. No delete lists and no per-posting seq are needed.

Layout (integers big-endian)::

    b"g" | u8 level | u64 first seq of the range | last term of the block  -> block
    b"s"                                                      -> u64 N | u64 S

``N`` is the number of memories indexed and ``S`` the sum of their lengths (absent when
``N`` is 0). A segment's terms are cut into blocks in term order; a block is closed when
the next term would take it past :data:`BLOCK_BUDGET` bytes (a term's postings are never
split: a block holds at least one term, however long its postings). A term lookup is one
``set_range`` per segment, to the first block whose last term is at or after the term.

Block::

    +--------+------------+---------------+-------------------+
    | layout | n terms    | p postings    | t term bytes      |
    | u8 (1) | u32        | u32           | u32               |
    +--------+------------+---------------+-------------------+
    | n x u8 term length | the n terms, UTF-8, ascending, concatenated (t bytes) |
    | n x u32 postings of terms 0..i (cumulative)                              |
    | p x 16-byte memory id (per term, ascending) | p x u32 term frequency     |

Every field has a fixed width or a length the header gives, so the value's length is a
function of the header: a truncated block, or one with any header bit flipped, fails
:func:`decode_block`. The arrays are laid out for ``numpy.frombuffer``.

Invariants:

- K1 a memory is indexed (index seq > 0) iff it is active; it then has exactly one live
  posting per term of :func:`~cortexgraph.core.postings.index_terms` of its head version,
  in the segment whose range holds its index seq, and no other live posting.
- K2 ``N`` is the number of memories indexed and ``S`` the sum of their lengths.
- K3 the rows of the table are :func:`build_postings` of the journal's keyword changes:
  a function of the journal, whatever the batching (J4).
"""

from __future__ import annotations

import bisect
import itertools
import operator
import struct
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from ..errors import CorruptionError
from .hashing import native_core

__all__ = [
    "BLOCK_BUDGET",
    "FANOUT",
    "MAX_LEVEL",
    "SEGMENT",
    "STATS",
    "Postings",
    "block_term",
    "build_postings",
    "decode_block",
    "decode_stats",
    "docs_blocks",
    "encode_stats",
    "merge_level",
    "range_first",
    "segment_blocks",
    "segment_of_key",
    "segment_prefix",
    "segments_at",
    "span",
]

FANOUT = 16
MAX_LEVEL = 4
#: a block is closed before the next term would take it past this many bytes
BLOCK_BUDGET = 64 * 1024
SEGMENT = b"g"
STATS = b"s"
#: length of a segment's key prefix: b"g", the level, the first seq
PREFIX_SIZE = 10

_LAYOUT = 1
_HEADER = struct.Struct(">BIII")
_PREFIX = struct.Struct(">cBQ")
_STATS = struct.Struct(">QQ")
_ID = 16
#: bytes a posting takes in a block (its id and its frequency)
_POSTING = _ID + 4

IdArray = np.ndarray[Any, np.dtype[np.uint8]]
Counts = np.ndarray[Any, np.dtype[np.int64]]
Mask = np.ndarray[Any, np.dtype[np.bool_]]
_Halves = np.ndarray[Any, np.dtype[np.uint64]]
#: the C forms (``smt_native.c``) when the compiled modules run, else None
_NATIVE: Any = native_core()


def span(level: int) -> int:
    """How many seqs a level-``level`` segment covers."""
    return int(FANOUT**level)


def range_first(level: int, seq: int) -> int:
    """The first seq of the level-``level`` range that holds ``seq`` (>= 1)."""
    size = span(level)
    return (seq - 1) // size * size + 1


def merge_level(seq: int) -> int:
    """The level of the segment the entry at ``seq`` completes by merging (0: none)."""
    level = 0
    while level < MAX_LEVEL and seq % span(level + 1) == 0:
        level += 1
    return level


def segments_at(seq: int) -> list[tuple[int, int]]:
    """``(level, first seq)`` of every segment a store at ``seq`` has (some may be
    empty, and so have no rows), oldest range first: disjoint ranges covering ``[1,
    seq]``.

    >>> segments_at(0), segments_at(18), segments_at(256), segments_at(258)
    ([], [(1, 1), (0, 17), (0, 18)], [(2, 1)], [(2, 1), (0, 257), (0, 258)])
    """
    found: list[tuple[int, int]] = []
    start = 1
    for level in range(MAX_LEVEL, -1, -1):
        size = span(level)
        for _ in range((seq - start + 1) // size):
            found.append((level, start))
            start += size
    return found


def segment_prefix(level: int, first: int) -> bytes:
    """The key prefix of one segment's blocks."""
    return _PREFIX.pack(SEGMENT, level, first)


def segment_of_key(key: bytes) -> tuple[int, int]:
    """``(level, first seq)`` of a block key.

    Raises:
        CorruptionError: the key is not a block key of a valid segment.
    """
    if len(key) <= PREFIX_SIZE or key[:1] != SEGMENT:
        raise CorruptionError("a keyword segment key is malformed", table="postings")
    _, level, first = _PREFIX.unpack_from(key)
    if level > MAX_LEVEL or first < 1 or (first - 1) % span(level):
        raise CorruptionError(
            f"a keyword segment key names level {level} at seq {first}", table="postings"
        )
    return level, first


def encode_stats(count: int, total: int) -> bytes | None:
    """The statistics row's value (None: no row, nothing indexed)."""
    if count < 0 or total < 0 or (not count and total):
        raise CorruptionError("the keyword statistics would be negative", table="postings")
    return _STATS.pack(count, total) if count else None


def decode_stats(raw: bytes | None) -> tuple[int, int]:
    """``(memories indexed, sum of their lengths)`` of a statistics row (None: absent)."""
    if raw is None:
        return 0, 0
    if len(raw) != _STATS.size:
        raise CorruptionError("the keyword statistics row is malformed", table="postings")
    count, total = _STATS.unpack(raw)
    return int(count), int(total)


def _id_halves(ids: IdArray) -> tuple[_Halves, _Halves]:
    """The ids (one per row of ``ids``) as two big-endian 64-bit integers, for sorting."""
    flat = np.ascontiguousarray(ids).view(">u8").reshape(-1, 2)
    return flat[:, 0].astype(np.uint64), flat[:, 1].astype(np.uint64)


def _rows_at(ids: IdArray, index: Any) -> IdArray:
    """``ids[index]`` (rows of 16 bytes; ``index`` an index array or a mask), gathered as
    one 16-byte value per row: numpy copies rows of a 2-D byte array byte by byte, about
    15 times slower."""
    flat = np.ascontiguousarray(ids).view(np.dtype("V16")).reshape(-1)
    rows: IdArray = flat[index].view(np.uint8).reshape(-1, _ID)
    return rows


class Postings:
    """A segment's postings in memory: terms ascending, per term the ids ascending.

    Attributes:
        terms: the distinct terms, UTF-8, ascending.
        counts: per term, how many postings it has (each >= 1).
        ids: the memory ids, one 16-byte row per posting, term by term.
        tf: the term frequency of each posting (each >= 1).
    """

    __slots__ = ("counts", "ids", "terms", "tf")

    def __init__(self, terms: list[bytes], counts: Counts, ids: IdArray, tf: Counts) -> None:
        self.terms, self.counts, self.ids, self.tf = terms, counts, ids, tf

    def __len__(self) -> int:
        return len(self.tf)

    @classmethod
    def empty(cls) -> Postings:
        return cls([], np.zeros(0, np.int64), np.zeros((0, _ID), np.uint8), np.zeros(0, np.int64))

    @classmethod
    def from_docs(cls, docs: Mapping[bytes, Mapping[str, int]]) -> Postings:
        """The postings of ``docs`` (memory id -> its terms and frequencies)."""
        # The postings are laid out doc by doc with the docs in id order, so a stable sort
        # by term alone leaves each term's ids ascending (what a sort by (term, id) gives).
        # Code point order is UTF-8 byte order, so the strings sort as their bytes.
        keys = sorted(docs)
        values = [docs[key] for key in keys]
        found = _columns(values)
        if found is None:
            return cls.empty()
        distinct, term_of, tf = found
        if len(distinct) <= 1 << 16:  # a 16-bit term index sorts by radix (wider ones merge)
            term_of = term_of.astype(np.uint16)
        sizes = np.fromiter(map(len, values), dtype=np.int64, count=len(values))
        doc_of = np.repeat(np.arange(len(values), dtype=np.int64), sizes)
        order = np.argsort(term_of, kind="stable")
        blob = np.frombuffer(b"".join(keys), dtype=np.uint8).reshape(-1, _ID)
        return cls(
            [name.encode("utf-8") for name in distinct],
            np.bincount(term_of, minlength=len(distinct)).astype(np.int64),
            _rows_at(blob, doc_of[order]),
            tf[order],
        )

    @classmethod
    def merge(cls, parts: Sequence[tuple[Postings, Mask]]) -> Postings:
        """The union of the postings each mask keeps (one bool per posting of its part);
        no ``(term, id)`` may be kept twice."""
        kept = [(part, mask) for part, mask in parts if len(part)]
        if not kept:
            return cls.empty()
        terms = sorted(set().union(*(part.terms for part, _ in kept)))
        position = dict(zip(terms, range(len(terms)), strict=True))
        term_of = np.concatenate(
            [
                np.repeat(
                    np.fromiter(map(position.__getitem__, part.terms), np.int64, len(part.terms)),
                    part.counts,
                )
                for part, _ in kept
            ]
        )
        mask = np.concatenate([mask for _, mask in kept])
        ids = _rows_at(np.concatenate([part.ids for part, _ in kept]), mask)
        tf = np.concatenate([part.tf for part, _ in kept])[mask]
        return _sorted(terms, term_of[mask], ids, tf)

    @classmethod
    def concat(cls, blocks: Sequence[Postings]) -> Postings:
        """One segment's postings from its blocks, in key order (ascending terms)."""
        if len(blocks) == 1:
            return blocks[0]
        if not blocks:
            return cls.empty()
        return cls(
            [term for block in blocks for term in block.terms],
            np.concatenate([block.counts for block in blocks]),
            np.concatenate([block.ids for block in blocks]),
            np.concatenate([block.tf for block in blocks]),
        )

    def docs(self) -> dict[bytes, dict[str, int]]:
        """Memory id -> its terms and frequencies (the inverse of :meth:`from_docs`)."""
        out: dict[bytes, dict[str, int]] = {}
        ids = self.ids.tobytes()
        tf = self.tf.tolist()
        at = 0
        for term, count in zip(self.terms, self.counts.tolist(), strict=True):
            name = term.decode("utf-8")
            for i in range(at, at + count):
                out.setdefault(ids[i * _ID : (i + 1) * _ID], {})[name] = tf[i]
            at += count
        return out


def _columns(values: list[Mapping[str, int]]) -> tuple[list[str], Counts, Counts] | None:
    """The distinct terms of ``values`` (ascending) and, per posting (doc by doc, each
    doc's terms in its order), its term's index among them and its frequency; None if
    there is no posting. The C form (``smt_native.columns``) when the compiled modules
    run, this Python otherwise and for anything it gives back."""
    if _NATIVE is not None:
        first_seen: dict[str, int] = {}
        found = _NATIVE.columns(values, first_seen)
        if found is not None:
            if not first_seen:
                return None
            distinct = sorted(first_seen)  # code point order is UTF-8 byte order
            renumber = np.empty(len(distinct), dtype=np.int64)
            seen_at = np.fromiter(map(first_seen.__getitem__, distinct), np.int64, len(distinct))
            renumber[seen_at] = np.arange(len(distinct), dtype=np.int64)
            term_of: Counts = renumber[np.frombuffer(found[0], dtype=np.uint32)]
            return distinct, term_of, np.frombuffer(found[1], dtype=np.int64)
    names = list(itertools.chain.from_iterable(values))
    if not names:
        return None
    distinct = sorted(set(names))
    rank = dict(zip(distinct, range(len(distinct)), strict=True))
    term_of = np.fromiter(map(rank.__getitem__, names), dtype=np.int64, count=len(names))
    tf = np.fromiter(
        itertools.chain.from_iterable(map(operator.methodcaller("values"), values)),
        dtype=np.int64,
        count=len(names),
    )
    return distinct, term_of, tf


def _sorted(terms: list[bytes], term_of: Counts, ids: IdArray, tf: Counts) -> Postings:
    """Postings from unordered ``(term index, id, tf)`` triples (``terms`` ascending, each
    ``(term, id)`` at most once); terms without a posting are dropped.

    The order is ``np.lexsort((low, high, term_of))`` (by term, then by id as two
    big-endian 64-bit halves), found faster: one sort of a 64-bit key holding the term
    index in its top bits and as many of the id's first bits as fit below. Distinct keys
    have one sorted order, whichever sort finds it (numpy's unstable sort of 64-bit
    integers is several times faster than its stable one); two postings share a key only
    when their ids share those first bits under the same term, and then the three-key
    sort decides."""
    high, low = _id_halves(ids)
    shift = (len(terms) - 1).bit_length()  # the bits the term index needs
    if shift:
        key = term_of.astype(np.uint64) << np.uint64(64 - shift) | high >> np.uint64(shift)
    else:
        key = high
    order = np.argsort(key)
    ordered = key[order]
    if (ordered[1:] == ordered[:-1]).any():
        order = np.lexsort((low, high, term_of))
    counts = np.bincount(term_of, minlength=len(terms)).astype(np.int64)
    kept = np.flatnonzero(counts)
    return Postings(
        [terms[i] for i in kept.tolist()],
        counts[kept],
        _rows_at(ids, order),
        tf[order],
    )


def segment_blocks(level: int, first: int, postings: Postings) -> list[tuple[bytes, bytes]]:
    """The rows ``(key, value)`` of a segment holding ``postings``, in key order."""
    prefix = segment_prefix(level, first)
    terms = postings.terms
    if not terms:
        return []
    ends = np.cumsum(postings.counts, dtype=np.int64)
    sizes = 5 + _POSTING * postings.counts + np.fromiter(map(len, terms), np.int64, len(terms))
    if _HEADER.size + int(sizes.sum()) <= BLOCK_BUDGET:
        return [_block(prefix, postings, ends, 0, len(terms))]
    rows: list[tuple[bytes, bytes]] = []
    start = 0
    used = _HEADER.size
    for index, size in enumerate(sizes.tolist()):
        if index > start and used + size > BLOCK_BUDGET:
            rows.append(_block(prefix, postings, ends, start, index))
            start, used = index, _HEADER.size
        used += size
    rows.append(_block(prefix, postings, ends, start, len(terms)))
    return rows


def _block(
    prefix: bytes, postings: Postings, ends: Counts, start: int, stop: int
) -> tuple[bytes, bytes]:
    terms = postings.terms[start:stop]
    low = int(ends[start - 1]) if start else 0
    high = int(ends[stop - 1])
    joined = b"".join(terms)
    value = b"".join(
        (
            _HEADER.pack(_LAYOUT, len(terms), high - low, len(joined)),
            bytes(len(term) for term in terms),
            joined,
            (ends[start:stop] - low).astype(">u4").tobytes(),
            postings.ids[low:high].tobytes(),
            postings.tf[low:high].astype(">u4").tobytes(),
        )
    )
    return prefix + terms[-1], value


def docs_blocks(
    level: int, first: int, docs: Mapping[bytes, Mapping[str, int]]
) -> list[tuple[bytes, bytes]]:
    """``segment_blocks(level, first, Postings.from_docs(docs))``, the same bytes, built
    with plain Python: faster for the few memories of a low-level segment (no array set-up).
    """
    if len(docs) == 1:  # a single write's level-0 segment: every term one posting, one id
        ((memory_id, only),) = docs.items()
        names = sorted(only)  # code point order is UTF-8 byte order
        return _plain_block(
            level,
            first,
            docs,
            [name.encode("utf-8") for name in names],
            range(1, len(names) + 1),
            memory_id * len(names),
            [only[name] for name in names],
        )
    by_term: dict[str, list[tuple[bytes, int]]] = {}
    for memory_id in sorted(docs):
        for term, tf in docs[memory_id].items():
            found = by_term.get(term)
            if found is None:
                by_term[term] = [(memory_id, tf)]
            else:
                found.append((memory_id, tf))
    terms = sorted(by_term)  # code point order is UTF-8 byte order
    ends: list[int] = []
    ids: list[bytes] = []
    freqs: list[int] = []
    for term in terms:
        for memory_id, tf in by_term[term]:
            ids.append(memory_id)
            freqs.append(tf)
        ends.append(len(freqs))
    encoded = [term.encode("utf-8") for term in terms]
    return _plain_block(level, first, docs, encoded, ends, b"".join(ids), freqs)


def _plain_block(
    level: int,
    first: int,
    docs: Mapping[bytes, Mapping[str, int]],
    encoded: list[bytes],
    ends: Sequence[int],
    ids: bytes,
    freqs: list[int],
) -> list[tuple[bytes, bytes]]:
    """The rows of ``docs``'s segment from its columns: the terms (UTF-8, ascending), the
    cumulative posting count after each, the ids joined and the frequencies. One block,
    unless it would pass the budget: then the array encoder cuts it as the bulk build
    does."""
    if not encoded:
        return []
    joined = b"".join(encoded)
    size = _HEADER.size + 5 * len(encoded) + len(joined) + _POSTING * len(freqs)
    if size > BLOCK_BUDGET and len(encoded) > 1:
        return segment_blocks(level, first, Postings.from_docs(docs))
    value = b"".join(
        (
            _HEADER.pack(_LAYOUT, len(encoded), len(freqs), len(joined)),
            bytes(map(len, encoded)),
            joined,
            struct.pack(f">{len(ends)}I", *ends),
            ids,
            struct.pack(f">{len(freqs)}I", *freqs),
        )
    )
    return [(segment_prefix(level, first) + encoded[-1], value)]


class _Block:
    """A block's header and term directory, checked; the postings stay in the buffer."""

    __slots__ = ("count", "data", "ends_at", "ids_at", "offsets", "postings", "terms_at", "tf_at")

    def __init__(self, data: bytes) -> None:
        if len(data) < _HEADER.size:
            raise _malformed("shorter than its header")
        layout, count, postings, term_bytes = _HEADER.unpack_from(data)
        if layout != _LAYOUT:
            raise _malformed(f"layout {layout}")
        if not count or postings < count:
            raise _malformed("no terms, or fewer postings than terms")
        expected = _HEADER.size + count * 5 + term_bytes + postings * _POSTING
        if len(data) != expected:
            raise _malformed(f"{len(data)} bytes where its header says {expected}")
        lengths = np.frombuffer(data, dtype=np.uint8, count=count, offset=_HEADER.size)
        if int(lengths.sum()) != term_bytes or not lengths.all():
            raise _malformed("term lengths that do not add up")
        self.data = data
        self.count = count
        self.postings = postings
        self.terms_at = _HEADER.size + count
        self.offsets = [0, *np.cumsum(lengths, dtype=np.int64).tolist()]
        self.ends_at = self.terms_at + term_bytes
        self.ids_at = self.ends_at + 4 * count
        self.tf_at = self.ids_at + _ID * postings

    def term(self, index: int) -> bytes:
        at = self.terms_at
        return self.data[at + self.offsets[index] : at + self.offsets[index + 1]]

    def ends(self) -> Counts:
        return np.frombuffer(self.data, dtype=">u4", count=self.count, offset=self.ends_at).astype(
            np.int64
        )

    def span_of(self, index: int) -> tuple[int, int]:
        """The postings ``[low, high)`` of term ``index``."""
        (high,) = struct.unpack_from(">I", self.data, self.ends_at + 4 * index)
        low = struct.unpack_from(">I", self.data, self.ends_at + 4 * index - 4)[0] if index else 0
        if not low < high <= self.postings:
            raise _malformed("posting counts out of order")
        return int(low), int(high)

    def ids(self, low: int, high: int) -> IdArray:
        return np.frombuffer(
            self.data, dtype=np.uint8, count=_ID * (high - low), offset=self.ids_at + _ID * low
        ).reshape(-1, _ID)

    def tf(self, low: int, high: int) -> Counts:
        return np.frombuffer(
            self.data, dtype=">u4", count=high - low, offset=self.tf_at + 4 * low
        ).astype(np.int64)


def _malformed(what: str) -> CorruptionError:
    return CorruptionError(f"a keyword segment block is malformed ({what})", table="postings")


def decode_block(data: bytes, last_term: bytes | None = None) -> Postings:
    """The postings of one block, every field checked.

    Args:
        last_term: the last term its key names, checked against the block when given.

    Raises:
        CorruptionError: a truncated or malformed block, terms out of order or not
            UTF-8, ids out of order within a term, a frequency of 0.
    """
    block = _Block(bytes(data))
    joined = block.data[block.terms_at : block.ends_at]
    offsets = block.offsets
    terms = [joined[a:b] for a, b in itertools.pairwise(offsets)]
    # every term starts a character and the whole is UTF-8: so is every term
    leads = np.frombuffer(joined, dtype=np.uint8)[np.asarray(offsets[:-1], dtype=np.int64)]
    try:
        joined.decode("utf-8")
    except UnicodeDecodeError:
        raise _malformed("a term that is not UTF-8") from None
    if ((leads & 0xC0) == 0x80).any():
        raise _malformed("a term that is not UTF-8")
    if any(a >= b for a, b in itertools.pairwise(terms)):
        raise _malformed("terms out of order")
    if last_term is not None and terms[-1] != last_term:
        raise _malformed("a last term that is not its key's")
    ends = block.ends()
    counts = np.diff(ends, prepend=0)
    if (counts < 1).any() or int(ends[-1]) != block.postings:
        raise _malformed("posting counts out of order")
    ids = block.ids(0, block.postings)
    tf = block.tf(0, block.postings)
    if (tf < 1).any():
        raise _malformed("a term frequency of 0")
    high, low = _id_halves(ids)
    rising = (high[1:] > high[:-1]) | ((high[1:] == high[:-1]) & (low[1:] > low[:-1]))
    starts = np.zeros(len(tf), dtype=np.bool_)
    starts[ends[:-1]] = True
    if not (rising | starts[1:]).all():
        raise _malformed("ids out of order")
    return Postings(terms, counts.astype(np.int64), ids, tf)


def block_term(data: bytes, term: bytes) -> tuple[IdArray, Counts] | None:
    """The postings of ``term`` in one block: ``(ids, tf)``, or None if it has none.

    Checks what the lookup relies on (header, lengths, the term's posting range), not
    the order of every field: :func:`decode_block` does that.

    Raises:
        CorruptionError: a truncated or malformed block.
    """
    block = _Block(data)
    index = bisect.bisect_left(range(block.count), term, key=block.term)
    if index == block.count or block.term(index) != term:
        return None
    low, high = block.span_of(index)
    return block.ids(low, high), block.tf(low, high)


# ---------------------------------------------------------------------------
# bulk build


def build_postings(
    changes: Iterable[tuple[int, bytes, Mapping[str, int] | None]], last: int
) -> list[tuple[bytes, bytes]]:
    """Every row of the ``postings`` table of a store at seq ``last``, from its keyword
    changes, without replaying merge by merge.

    Args:
        changes: ``(seq, memory id, terms)`` in seq order, one per memory an entry
            (re)indexed (``terms``: its terms and frequencies) or stopped indexing
            (``terms`` None); what ``core.journal.apply`` reports.
        last: the store's seq (at least the last change's).

    Returns:
        ``(key, value)`` in key order: each segment's blocks, then the statistics row.

    Each indexing goes to the one segment of :func:`segments_at` whose range holds its
    seq, if it is still the memory's indexing at that segment's as-of seq (the memory's
    next change comes after it).
    """
    history: list[tuple[int, bytes, Mapping[str, int] | None]] = list(changes)
    following = [0] * len(history)
    latest: dict[bytes, int] = {}
    for position in range(len(history) - 1, -1, -1):
        memory_id = history[position][1]
        following[position] = latest.get(memory_id, last + 1)
        latest[memory_id] = history[position][0]
    segments = segments_at(last)
    firsts = [first for _, first in segments]
    docs: list[dict[bytes, Mapping[str, int]]] = [{} for _ in segments]
    for (seq, memory_id, terms), after in zip(history, following, strict=True):
        if terms is None:
            continue
        index = bisect.bisect_right(firsts, seq) - 1
        level, first = segments[index]
        if after > min(first + span(level) - 1, last):
            docs[index][memory_id] = terms
    rows: list[tuple[bytes, bytes]] = []
    for (level, first), held in sorted(zip(segments, docs, strict=True), key=lambda s: s[0]):
        if held:
            rows.extend(segment_blocks(level, first, Postings.from_docs(held)))
    count = total = 0
    final: dict[bytes, Mapping[str, int] | None] = {}
    for _, memory_id, terms in history:
        final[memory_id] = terms
    for terms in final.values():
        if terms is not None:
            count += 1
            total += sum(terms.values())
    stats = encode_stats(count, total)
    if stats is not None:
        rows.append((STATS, stats))
    return rows
