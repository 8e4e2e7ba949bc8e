"""The public records the facade returns: :class:`Stats`, :class:`Attestation`,
:class:`Edge`, :class:`Neighbor` and :class:`Traversal` (frozen attrs classes)."""

from __future__ import annotations

from collections.abc import Iterator

import attrs

from .core.uri import MemoryURI

__all__ = ["Attestation", "Edge", "Neighbor", "Stats", "Traversal"]


@attrs.frozen
class Stats:
    """What :meth:`Cortex.stats` reports."""

    seq: int
    memories: int
    tables: dict[str, int]
    map_size: int
    hash_name: str



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
class Edge:
    """An edge as stored: ``src --relation--> dst``.

    Attributes:
        src, dst: the two memories (head URIs).
        relation: the canonical relation name.
        strength: 0..1 (stored as integer parts per million).
        status: ``"active"`` or ``"suggested"`` (suggested edges are not traversed).
        origin: who asserted it: ``"human"``, ``"llm"`` or ``"system"``.
        at: when it was last added or changed (ms); seq: the journal entry that did.
    """

    src: MemoryURI
    dst: MemoryURI
    relation: str
    strength: float
    status: str
    origin: str
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

