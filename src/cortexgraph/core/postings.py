"""What the keyword (BM25) index holds of a memory, and the changes ``apply`` reports.

Only active memories are indexed, by their head version. What is indexed of a memory is
:func:`index_text`: its text, summary and tags, an Event's speaker and channel, an
ArtifactRef's path (never its raw content). Terms come from ``core.text.term_counts``;
terms longer than :data:`MAX_TERM_BYTES` bytes are not indexed (hashes, base64 blobs).
A memory's length is the sum of its indexed terms' frequencies (what BM25 counts).

The ``postings`` table stores the terms as immutable segments (``core.segments``);
``core.journal.apply`` reports each memory it (re)indexes or stops indexing as a
:class:`KeywordChange`, and the write sequence (``writing.EntryWriter``) turns those into
segments. Nothing stores a memory's terms apart from the segments: who needs them
recomputes them from its head version (:func:`head_terms`).
"""

from __future__ import annotations

from typing import NamedTuple, Protocol

from ..errors import CorruptionError
from .forms import civil_date
from .keys import version_key
from .state import HeadState, VersionState
from .taxonomy import ArtifactRef, Event, Memory
from .text import term_counts

__all__ = [
    "MAX_TERM_BYTES",
    "KeywordChange",
    "head_terms",
    "index_terms",
    "index_text",
    "spoken_date",
]

MAX_TERM_BYTES = 64
#: a term of at most this many characters has at most MAX_TERM_BYTES bytes of UTF-8
_SHORT_TERM = MAX_TERM_BYTES // 4


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
    year, month, day = civil_date(ms // 86_400_000)
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


def index_terms(memory: Memory) -> dict[str, int]:
    """The indexed terms of a memory and their frequencies (in order of first use)."""
    counts = term_counts(index_text(memory))
    for term in [t for t in counts if len(t) > _SHORT_TERM]:
        if len(term.encode("utf-8")) > MAX_TERM_BYTES:
            del counts[term]
    return counts


def head_terms(view: _View, memory_id: bytes) -> dict[str, int] | None:
    """The indexed terms of a memory's head version, None if it is not indexed (not
    active, or unknown).

    Raises:
        CorruptionError: the head names a version that does not exist.
    """
    raw = view.get("heads", memory_id)
    if raw is None:
        return None
    head = HeadState.decode(raw)
    if head.status != "active":
        return None
    version = view.get("versions", version_key(memory_id, head.head))
    if version is None:
        raise CorruptionError(f"memory {memory_id.hex()} has no stored head version")
    return index_terms(VersionState.decode(version).memory())


class KeywordChange(NamedTuple):
    """A memory an entry (re)indexed or stopped indexing (what ``apply`` reports).

    ``before`` and ``before_length``: its index seq and length before the entry (0 and 0
    if it was not indexed); ``terms``: its terms after the entry (None: not indexed), at
    the entry's seq; ``length``: their frequencies' sum (0 when not indexed).
    """

    memory_id: bytes
    before: int
    before_length: int
    terms: dict[str, int] | None
    length: int

    def stats_delta(self) -> tuple[int, int]:
        """What the change adds to the statistics: (memories indexed, sum of lengths)."""
        return (self.terms is not None) - (self.before != 0), self.length - self.before_length
