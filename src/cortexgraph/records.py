"""The public records the facade returns: :class:`Stats`, :class:`Attestation`,
:class:`Edge`, :class:`Neighbor` and :class:`Traversal` (frozen attrs classes)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Protocol, TypeVar, overload

import attrs

from .core.bundle import ScopeEdge
from .core.uri import MemoryURI

__all__ = ["Attestation", "Edge", "HitSequence", "Neighbor", "Salience", "Stats", "Traversal"]


class _Addressed(Protocol):
    @property
    def uri(self) -> MemoryURI: ...


_H = TypeVar("_H", bound=_Addressed, covariant=True)


class HitSequence(Sequence[_H]):
    """What a result of hits (``find``'s, ``recall``'s) is as a sequence: its ``hits``,
    best first, indexed, counted and iterated as they are, and their URIs."""

    __slots__ = ()
    hits: tuple[_H, ...]

    @overload
    def __getitem__(self, index: int) -> _H: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[_H]: ...
    def __getitem__(self, index: int | slice) -> _H | Sequence[_H]:
        return self.hits[index]

    def __len__(self) -> int:
        return len(self.hits)

    def __iter__(self) -> Iterator[_H]:
        return iter(self.hits)

    @property
    def uris(self) -> list[MemoryURI]:
        """The hits' URIs, in order."""
        return [hit.uri for hit in self.hits]


@attrs.frozen
class Stats:
    """What :meth:`Cortex.stats` reports, all taken in one read.

    Attributes:
        seq: the journal's last seq (= its number of entries, J1).
        memories: how many memories (of every status).
        tables: how many keys each table holds.
        map_size: the LMDB map size in bytes; file_bytes: the size of ``data.mdb``.
        hash_name: the store's hash.
        by_type, by_status: memories per type name and per status (sorted by name).
        edges: how many edges (active and suggested).
        overall_root: the OverallRoot at ``seq``; None while the derived tables are
            dropped (``replay.drop_derived``) and not rebuilt yet.
    """

    seq: int
    memories: int
    tables: dict[str, int]
    map_size: int
    hash_name: str
    by_type: dict[str, int] = attrs.field(factory=dict)
    by_status: dict[str, int] = attrs.field(factory=dict)
    edges: int = 0
    overall_root: bytes | None = None
    file_bytes: int = 0



@attrs.frozen
class Attestation:
    """What :meth:`Cortex.attest` journaled.

    Attributes:
        attest: the ``Attest`` memory (the outcome and the pinned URIs it cited).
        learn: the ``LearnWeights`` memory holding the new weights.
        before, after: the salience weights (ppm) before and after learning.
    """

    attest: MemoryURI
    learn: MemoryURI
    before: tuple[int, ...]
    after: tuple[int, ...]


@attrs.frozen
class Edge(ScopeEdge):
    """An edge as stored: ``src --relation--> dst``, and when it was last set.

    Attributes:
        src, dst: the two memories (head URIs).
        relation: the canonical relation name.
        strength: 0..1 (stored as integer parts per million).
        status: ``"active"`` or ``"suggested"`` (suggested edges are not traversed).
        origin: who asserted it: ``"human"``, ``"llm"`` or ``"system"``.
        at: when it was last added or changed (ms); seq: the journal entry that did.

    The first six fields are a :class:`~cortexgraph.core.bundle.ScopeEdge`'s, which is
    what a verified scope knows of an edge.
    """

    at: int
    seq: int


@attrs.frozen
class Neighbor:
    """A memory reached by :meth:`Cortex.traverse`, and the edge it was first reached by.

    ``direction`` is ``"out"`` when the edge is ``via --relation--> uri`` and ``"in"``
    when it is ``uri --relation--> via``.
    """

    uri: MemoryURI
    depth: int
    via: MemoryURI
    relation: str
    direction: str
    strength: float


@attrs.frozen
class Salience:
    """A memory's salience at one instant and the signals it comes from
    (:meth:`Cortex.salience`).

    Attributes:
        uri: the memory, pinned to its head version.
        factors: the five factors in 0..1 by name (``confidence``, ``priority``,
            ``centrality``, ``frequency``, ``recency``; see ``docs/ranking.md``).
        score: the cold score with the store's current weights, 0..1,000,000.
        access_count: how often the memory was read with late binding.
        last_access: when it was last read so (ms; 0 if never).
        in_degree: its active incoming edges.
    """

    uri: MemoryURI
    factors: dict[str, float]
    score: int
    access_count: int
    last_access: int
    in_degree: int


@attrs.frozen
class Traversal:
    """What :meth:`Cortex.traverse` found: ``levels[d]`` holds the memories at depth d + 1."""

    start: MemoryURI
    levels: tuple[tuple[Neighbor, ...], ...]

    def __iter__(self) -> Iterator[Neighbor]:
        """Every memory found, nearest first."""
        for level in self.levels:
            yield from level

    def __len__(self) -> int:
        return sum(len(level) for level in self.levels)

