"""The ``postings`` table: the keyword (BM25) index, kept up to date by ``apply``.

Only active memories are indexed, by their head version. What is indexed of a memory is
:func:`index_text`: its text, summary and tags, an Event's speaker and channel, an
ArtifactRef's path (never its raw content). Terms come from ``core.text.term_counts``.

Layout (``id`` is the 16-byte memory id; integers big-endian)::

    b"t" | term (UTF-8) | 0x00 | id   -> u32 term frequency            (term -> memories)
    b"d" | id                         -> forward row (below)           (memory -> terms)
    b"N"                              -> u64 memories indexed
    b"S"                              -> u64 sum of their lengths (in terms)

    forward row:
    +----+------------+---------+------------------------------------------+
    | 01 | length u32 | n u16   | n x (u16 term length, term, u32 tf)       |
    +----+------------+---------+------------------------------------------+

Terms never contain NUL (the tokenizer splits on it), so ``b"t" | term | 0x00`` is the
prefix of exactly one term's postings. Terms longer than :data:`MAX_TERM_BYTES` bytes are
not indexed (hashes, base64 blobs).

Invariants:

- K1 a memory has postings (and a forward row) iff it is active; they are the terms of
  :func:`index_text` of its head version, with their frequencies.
- K2 ``N`` is the number of forward rows and ``S`` the sum of their lengths.
"""

from __future__ import annotations

import struct
from typing import Protocol

from ..errors import CorruptionError
from .forms import format_ms
from .taxonomy import ArtifactRef, Event, Memory
from .text import term_counts

__all__ = [
    "MAX_TERM_BYTES",
    "ForwardRow",
    "decode_forward",
    "index_text",
    "posting_prefix",
    "postings_set",
    "read_forward",
    "read_stats",
    "spoken_date",
]

MAX_TERM_BYTES = 64
TERM = b"t"
FORWARD = b"d"
COUNT = b"N"
TOTAL = b"S"

_U16 = struct.Struct(">H")
_U32 = struct.Struct(">I")
_U64 = struct.Struct(">Q")
_HEAD = struct.Struct(">BIH")
#: a forward row's entry for a term of n bytes (u16 n, the term, u32 tf), by n
_ENTRY = tuple(struct.Struct(f">H{size}sI") for size in range(MAX_TERM_BYTES + 1))
_LAYOUT = 1
#: a term of at most this many characters has at most MAX_TERM_BYTES bytes of UTF-8
_SHORT_TERM = MAX_TERM_BYTES // 4

Mutation = tuple[str, bytes, bytes | None]


class _View(Protocol):
    def get(self, table: str, key: bytes) -> bytes | None: ...


_MONTHS = (
    "January", "February", "March", "April", "May", "June",
    "July", "August", "September", "October", "November", "December",
)  # fmt: skip


def spoken_date(ms: int) -> str:
    """A UTC date the way people write it in questions: ``8 May 2023``.

    >>> spoken_date(1_683_554_160_000)
    '8 May 2023'
    """
    date = format_ms(ms).split("T", 1)[0].lstrip("+")
    year, month, day = (int(part) for part in date.split("-"))
    return f"{day} {_MONTHS[month - 1]} {year}"


def index_text(memory: Memory) -> str:
    """The text the keyword index holds for a memory (never ArtifactRef content).

    Text, summary and tags; an Event's speaker, channel and the date it occurred (as
    ``8 May 2023``, so that "what happened in May 2023?" matches); an ArtifactRef's path.
    """
    parts = [memory.text]
    if memory.summary:
        parts.append(memory.summary)
    parts.extend(memory.tags)
    if isinstance(memory, Event):
        parts.extend(p for p in (memory.speaker, memory.channel) if p)
        if memory.occurred_at is not None:
            parts.append(spoken_date(memory.occurred_at))
    elif isinstance(memory, ArtifactRef) and memory.path:
        parts.append(memory.path)
    return "\n".join(parts)


def posting_prefix(term: str) -> bytes:
    """The key prefix of one term's postings."""
    return TERM + term.encode("utf-8") + b"\0"


ForwardRow = tuple[int, dict[str, int]]


def _terms(memory: Memory) -> ForwardRow:
    counts = term_counts(index_text(memory))
    for term in [t for t in counts if len(t) > _SHORT_TERM]:
        if len(term.encode("utf-8")) > MAX_TERM_BYTES:
            del counts[term]
    return sum(counts.values()), counts


def decode_forward(data: bytes) -> ForwardRow:
    """``(length, {term: tf})`` of a forward row."""
    try:
        layout, length, count = _HEAD.unpack_from(data)
        if layout != _LAYOUT:
            raise ValueError("bad layout")
        pos = _HEAD.size
        counts: dict[str, int] = {}
        for _ in range(count):
            (size,) = _U16.unpack_from(data, pos)
            pos += 2
            term = data[pos : pos + size].decode("utf-8")
            pos += size
            (counts[term],) = _U32.unpack_from(data, pos)
            pos += 4
        if pos != len(data) or sum(counts.values()) != length:
            raise ValueError("bad length")
    except (struct.error, ValueError) as exc:
        raise CorruptionError(f"a keyword forward row is malformed ({exc})") from None
    return length, counts


def read_forward(view: _View, memory_id: bytes) -> ForwardRow | None:
    """The indexed terms of a memory, or None if it is not indexed (not active)."""
    raw = view.get("postings", FORWARD + memory_id)
    return None if raw is None else decode_forward(raw)


def read_stats(view: _View) -> tuple[int, int]:
    """``(memories indexed, sum of their lengths)``."""
    return _u64(view, COUNT), _u64(view, TOTAL)


def _u64(view: _View, key: bytes) -> int:
    raw = view.get("postings", key)
    if raw is None:
        return 0
    if len(raw) != 8:
        raise CorruptionError("a keyword statistics row is malformed")
    return int(_U64.unpack(raw)[0])


def _stats(view: _View, docs: int, length: int) -> list[Mutation]:
    count, total = read_stats(view)
    count += docs
    total += length
    if count < 0 or total < 0:
        raise CorruptionError("the keyword statistics would drop below zero")
    return [
        ("postings", COUNT, _U64.pack(count) if count else None),
        ("postings", TOTAL, _U64.pack(total) if total else None),
    ]


def postings_set(view: _View, memory_id: bytes, memory: Memory | None) -> list[Mutation]:
    """Make the keyword index hold ``memory`` for ``memory_id`` (None: not indexed).

    Writes only what changes: terms the old version had and the new one lacks are
    deleted, new or changed frequencies are put, and ``N``/``S`` move by the difference
    (K1, K2).
    """
    old = read_forward(view, memory_id)
    new = None if memory is None else _terms(memory)
    if old == new:
        return []
    old_counts = {} if old is None else old[1]
    out: list[Mutation] = [
        ("postings", posting_prefix(term) + memory_id, None)
        for term in old_counts
        if term not in (() if new is None else new[1])
    ]
    forward = None
    if new is not None:
        # each term encoded once, for its posting key and its forward-row entry
        suffix = b"\0" + memory_id
        parts = [_HEAD.pack(_LAYOUT, new[0], len(new[1]))]
        before = old_counts.get
        for term, tf in new[1].items():
            raw = term.encode("utf-8")
            parts.append(_ENTRY[len(raw)].pack(len(raw), raw, tf))
            if before(term) != tf:
                out.append(("postings", TERM + raw + suffix, _U32.pack(tf)))
        forward = b"".join(parts)
    out.append(("postings", FORWARD + memory_id, forward))
    docs = (new is not None) - (old is not None)
    length = (0 if new is None else new[0]) - (0 if old is None else old[0])
    if docs or length:
        out.extend(_stats(view, docs, length))
    return out
