"""The memory graph: relations, the ``edges`` table layout, and breadth-first traversal.

Relations are a closed set; aliases are accepted on input and normalised before anything
is journaled, so the journal only ever holds canonical names::

    relates_to   derived_from   contradicts   exemplifies   refines   supersedes   source_of
    (related)    (derives)      (contradict)  (example)     (refine)  (supersede)  (source)

An edge is identified by ``(src, relation, dst)``: at most one edge per relation between
two memories; adding it again changes its strength or status. ``supersedes`` needs origin
``"human"`` (G1). Self-edges are refused.

Layout (``edges`` table; ``id`` is the 16-byte memory id, ``rel`` the relation's code)::

    b"o" | src id | u8 rel | dst id   -> edge record      (out-edges, by source)
    b"i" | dst id | u8 rel | src id   -> edge record      (in-edges, by target)

    edge record:
    +----+--------+-------------+--------+---------+---------+
    | 01 | status | strength    | origin | at      | seq     |
    |    | u8     | u32 (ppm)   | u8     | u64 ms  | u64     |
    +----+--------+-------------+--------+---------+---------+

Invariants:

- G1 a ``supersedes`` edge has origin ``"human"``.
- G2 every out-key has the in-key with the same record, and no other in-keys exist.
- G3 the stored in-degree of a memory (``salience`` table, ``core.signals``) equals the
  number of its *active* in-edges, and the degree histogram counts those in-degrees.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterable, Sequence

import attrs

from ..errors import CorruptionError, ValidationError
from .taxonomy import ORIGINS

__all__ = [
    "DIRECTIONS",
    "EDGE_STATUSES",
    "MAX_DEPTH",
    "RELATIONS",
    "RELATION_ALIASES",
    "EdgeState",
    "Step",
    "bfs",
    "check_traversal",
    "edge_in_key",
    "edge_out_key",
    "normalise_relation",
    "relation_code",
    "relation_name",
    "strength_ppm",
]

RELATIONS = (
    "relates_to",
    "derived_from",
    "contradicts",
    "exemplifies",
    "refines",
    "supersedes",
    "source_of",
)
RELATION_ALIASES = {
    "related": "relates_to",
    "derives": "derived_from",
    "contradict": "contradicts",
    "example": "exemplifies",
    "refine": "refines",
    "supersede": "supersedes",
    "source": "source_of",
}
EDGE_STATUSES = ("active", "suggested")
DIRECTIONS = ("out", "in", "both")
MAX_DEPTH = 5
PPM = 1_000_000

_CODE = {name: code for code, name in enumerate(RELATIONS, start=1)}
_STATUS_CODE = {name: code for code, name in enumerate(EDGE_STATUSES, start=1)}
_ORIGIN_CODE = {name: code for code, name in enumerate(ORIGINS, start=1)}
_RECORD = struct.Struct(">BBIBQQ")
_LAYOUT = 1
OUT = b"o"
IN = b"i"


def normalise_relation(name: object) -> str:
    """The canonical relation for ``name`` (a relation or one of its aliases).

    Raises:
        ValidationError: not a relation (field ``relation``).

    >>> normalise_relation("Source")
    'source_of'
    """
    if type(name) is str:
        key = name.strip().lower()
        key = RELATION_ALIASES.get(key, key)
        if key in _CODE:
            return key
    raise ValidationError(
        f"unknown relation {name!r}; expected one of {', '.join(RELATIONS)}"
        f" (or an alias: {', '.join(sorted(RELATION_ALIASES))})",
        field="relation",
    )


def relation_code(name: str) -> int:
    return _CODE[name]


def relation_name(code: int) -> str:
    if 1 <= code <= len(RELATIONS):
        return RELATIONS[code - 1]
    raise CorruptionError(f"an edge key has unknown relation code {code}")


def strength_ppm(strength: object) -> int:
    """A strength in 0..1 as integer parts per million (journaled numbers are integers).

    Raises:
        ValidationError: not a finite number in 0..1 (field ``strength``).
    """
    if not isinstance(strength, (int, float)) or type(strength) is bool:
        raise ValidationError(f"must be a number in 0..1, not {strength!r}", field="strength")
    if not 0.0 <= strength <= 1.0:  # NaN fails too
        raise ValidationError(f"must be a number in 0..1, not {strength!r}", field="strength")
    return round(strength * PPM)


def edge_out_key(src: bytes, rel: str, dst: bytes) -> bytes:
    return OUT + src + bytes((_CODE[rel],)) + dst


def edge_in_key(src: bytes, rel: str, dst: bytes) -> bytes:
    return IN + dst + bytes((_CODE[rel],)) + src


@attrs.frozen
class EdgeState:
    """One stored edge (the value under both of its keys)."""

    status: str
    strength: int  # ppm
    origin: str
    at: int
    seq: int

    @property
    def active(self) -> bool:
        return self.status == "active"

    def encode(self) -> bytes:
        return _RECORD.pack(
            _LAYOUT,
            _STATUS_CODE[self.status],
            self.strength,
            _ORIGIN_CODE[self.origin],
            self.at,
            self.seq,
        )

    @classmethod
    def decode(cls, data: bytes) -> EdgeState:
        try:
            layout, status, strength, origin, at, seq = _RECORD.unpack(data)
            if layout != _LAYOUT or not 1 <= status <= 2 or not 1 <= origin <= 3:
                raise ValueError("bad code")
            if strength > PPM:
                raise ValueError("strength out of range")
        except (struct.error, ValueError) as exc:
            raise CorruptionError(f"an edge record is malformed ({exc})") from None
        return cls(EDGE_STATUSES[status - 1], strength, ORIGINS[origin - 1], at, seq)


# ---------------------------------------------------------------------------
# traversal

#: ``neighbours(node_id)`` -> ``(relation, neighbour_id, strength_ppm)`` in a fixed order.
Neighbours = Callable[[bytes], Iterable[tuple[str, bytes, int]]]


@attrs.frozen
class Step:
    """One memory reached by a traversal.

    Attributes:
        id: the memory reached.
        depth: how many edges from the start (1 for a direct neighbour).
        via: the memory it was first reached from.
        relation: the relation of the edge it was first reached by.
        direction: ``"out"`` (``via -> id``) or ``"in"`` (``id -> via``).
        strength: that edge's strength in ppm.
    """

    id: bytes
    depth: int
    via: bytes
    relation: str
    direction: str
    strength: int


def bfs(
    start: bytes,
    depth: int,
    out_neighbours: Neighbours | None,
    in_neighbours: Neighbours | None,
    *,
    admit: Callable[[bytes], bool] = lambda _: True,
) -> list[list[Step]]:
    """Breadth-first search from ``start`` up to ``depth`` edges; one list per depth.

    Each memory appears once, at the depth where it is first reached, never the start.
    Order is deterministic: a level is sorted by memory id; a memory's ``via`` edge is
    the first one found when the previous level is walked in its order, out-edges before
    in-edges, each in the order the neighbour functions give (the ``edges`` key order).
    ``admit(id)`` excludes memories (and so what lies beyond them) from the search.
    """
    seen = {start}
    frontier = [start]
    levels: list[list[Step]] = []
    for level in range(1, depth + 1):
        found: dict[bytes, Step] = {}
        for node in frontier:
            for direction, neighbours in (("out", out_neighbours), ("in", in_neighbours)):
                if neighbours is None:
                    continue
                for relation, other, strength in neighbours(node):
                    if other in seen or other in found or not admit(other):
                        continue
                    found[other] = Step(other, level, node, relation, direction, strength)
        if not found:
            break
        ordered = [found[key] for key in sorted(found)]
        levels.append(ordered)
        seen.update(found)
        frontier = [step.id for step in ordered]
    return levels


def check_traversal(
    depth: object, relations: Sequence[str] | None, direction: object, min_strength: object
) -> tuple[int, frozenset[str] | None, str, int]:
    """Validate ``traverse`` arguments; relations come back canonical, strength in ppm."""
    if type(depth) is not int or not 0 <= depth <= MAX_DEPTH:
        raise ValidationError(f"must be an integer in 0..{MAX_DEPTH}", field="depth")
    if direction not in DIRECTIONS:
        raise ValidationError(
            f"must be one of {', '.join(DIRECTIONS)}, not {direction!r}", field="direction"
        )
    wanted: frozenset[str] | None = None
    if relations is not None:
        if isinstance(relations, str) or not isinstance(relations, Iterable):
            raise ValidationError("must be a list of relation names", field="relations")
        wanted = frozenset(normalise_relation(r) for r in relations)
    try:
        threshold = strength_ppm(min_strength)
    except ValidationError:
        raise ValidationError(
            f"must be a number in 0..1, not {min_strength!r}", field="min_strength"
        ) from None
    return depth, wanted, str(direction), threshold
