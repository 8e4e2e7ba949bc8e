"""Lifecycle rules: forgetting (archive, prune, restore), auto-linking and consolidation.

Everything here is a pure decision: the caller (``Cortex.compact`` and the write path)
gathers the facts, passes ``now`` in, and journals what the functions decide. Nothing
reads the clock, the store or randomness; similarities arrive as integers in parts per
million (ppm, 1,000,000 = 1) so that every threshold comparison is exact.

Forgetting (``docs/lifecycle.md``)::

              effective confidence < 0.3
              and idle >= 14 days                  untouched >= 30 days
    active  ----------------------------> archived ------------------------> pruned
       ^     (not pinned, not a hub)          |     (not pinned, not a hub)
       +--------------- any access -----------+

    effective confidence = confidence_ppm * recency_ppm // 1e6   (salience's formula)
    idle                 = now - max(last_access, at)
    untouched            = now - max(status_since, last_access, at)
    hub                  = centrality (in_degree / max_in_degree) > 0.5

Every comparison, exactly:

======================  =====================================================
archive                 ``effective < ARCHIVE_BELOW_PPM`` (strict: 300,000 ppm
                        stays active) **and** ``idle >= ARCHIVE_IDLE_MS``
                        (inclusive: exactly 14 days idle archives)
prune                   ``untouched >= PRUNE_AFTER_MS`` (inclusive)
hub exemption           ``centrality > HUB_CENTRALITY`` (strict: exactly 0.5 is
                        not a hub)
pinned exemption        ``pinned`` is true
======================  =====================================================

A memory that was never read counts as idle from its last write (``at``), not from the
epoch: otherwise a fresh memory that nobody has read yet would be archived the moment
its recency decayed. Pinned memories and hubs are exempt from both transitions: they
are never archived and, should one be archived (pinned or linked to after archiving),
never pruned. Stable types (``fact``, ``goal``, ...) have recency 1, so their effective
confidence is their own confidence: an idle one below 0.3 is archived too. The caller
may give a memory another half-life than its type's (``LifecycleFacts.half_life_days``):
``compact(half_lives=...)`` picks it by tag with :func:`tag_half_life`.

Auto-linking (on write, over similarities to keyword-index candidates):

==============================  ==========================================
``s < 100,000``                 ``"none"``: no edge
``100,000 <= s < 400,000``      ``"relates_to"``: an active edge, strength ``s``
``400,000 <= s < 500,000``      ``"suggested"``: a suggested ``relates_to``, strength ``s``
``s >= 500,000``                ``"candidate"``: a consolidation candidate
==============================  ==========================================

Consolidation (``compact``): ``s >= 700,000`` merge, ``500,000 <= s < 700,000`` a
suggested edge, below that nothing. The caller must check :func:`can_merge` first: a
merge never crosses namespaces or types. The survivor (:func:`choose_survivor`) gets a
new version with :func:`merged_changes`; the other memory is marked ``merged`` and stays
resolvable; the survivor gets a ``derived_from`` edge to it (:func:`merge_edge`: "the
survivor's new version was derived from the other"). Consolidation never creates
``supersedes`` edges.

See ``docs/lifecycle.md`` for worked examples.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any, Final, Literal

import attrs

from ..errors import ValidationError
from .salience import (
    DAY_MS,
    HALF_LIFE_DAYS,
    HUB_CENTRALITY,
    PPM,
    centrality,
    check_int,
    effective_confidence_ppm,
    factor_ppm,
    recency,
    scaled_half_life_ms,
)
from .taxonomy import MAX_TAGS, Memory, check_tags, normalise_tag
from .text import jaccard_ppm  # re-exported: the similarity the link and merge rules read

__all__ = [
    "ARCHIVE_BELOW_PPM",
    "ARCHIVE_IDLE_MS",
    "HUB_CENTRALITY",
    "LINK_ACTIONS",
    "LINK_CANDIDATE_FROM_PPM",
    "LINK_NONE_BELOW_PPM",
    "LINK_SUGGEST_FROM_PPM",
    "MERGEABLE_TYPES",
    "MERGE_AT_PPM",
    "MERGE_RELATION",
    "PRUNE_AFTER_MS",
    "STATUSES",
    "SUGGEST_AT_PPM",
    "LifecycleFacts",
    "LinkDecision",
    "MergeCandidate",
    "can_merge",
    "check_half_lives",
    "choose_survivor",
    "consolidation_decision",
    "effective_confidence",
    "jaccard_ppm",
    "link_decision",
    "merge_edge",
    "merged_changes",
    "next_status",
    "restores_on_access",
    "tag_half_life",
]

ARCHIVE_BELOW_PPM: Final = 300_000
"""An active memory whose effective confidence is *below* this (ppm) may be archived."""

ARCHIVE_IDLE_MS: Final = 14 * DAY_MS
"""... once it has been idle (no access, no write) for *at least* this long."""

PRUNE_AFTER_MS: Final = 30 * DAY_MS
"""An archived memory untouched for *at least* this long is pruned."""

MERGE_AT_PPM: Final = 700_000
"""Consolidation merges two memories at *least* this similar."""

SUGGEST_AT_PPM: Final = 500_000
"""Consolidation suggests an edge between memories at least this similar (below a merge)."""

LINK_NONE_BELOW_PPM: Final = 100_000
"""Auto-linking makes no edge below this similarity."""

LINK_SUGGEST_FROM_PPM: Final = 400_000
"""From this similarity auto-linking only suggests the ``relates_to`` edge."""

LINK_CANDIDATE_FROM_PPM: Final = 500_000
"""From this similarity a new memory is a consolidation candidate instead of a link."""

STATUSES: Final = ("active", "archived", "pruned", "merged")
"""Lifecycle statuses. Only ``active`` and ``archived`` ever move on their own."""

LINK_ACTIONS: Final = ("none", "relates_to", "suggested", "candidate")
"""What :func:`link_decision` can decide, from least to most similar."""

MERGEABLE_TYPES: Final = ("goal", "preference", "constraint", "fact", "pattern")
"""Types whose near-duplicates consolidate. Events are occurrences (two similar events
are two things that happened), an ArtifactRef is identified by its path and content, and
Attest / LearnWeights are execution records: none of these is ever merged."""

MERGE_RELATION: Final = "derived_from"
"""The relation a merge adds, from the survivor to the merged memory."""


# ---------------------------------------------------------------------------
# Validation helpers


_Validator = Callable[[Any, "attrs.Attribute[Any]", Any], None]


def _check_int(lo: int = 0) -> _Validator:
    def check(_: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
        check_int(value, attribute.name, lo=lo)

    return check


def _check_bool(_: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if type(value) is not bool:
        raise ValidationError(f"must be True or False, not {value!r}", field=attribute.name)


def _check_unit(_: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if type(value) is not float or not 0.0 <= value <= 1.0:  # also rejects NaN
        raise ValidationError(f"must be a number in 0..1, not {value!r}", field=attribute.name)


def _check_type_name(_: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if type(value) is not str or value not in HALF_LIFE_DAYS:
        raise ValidationError(f"not a memory type: {value!r}", field=attribute.name)


def _check_half_life(_: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if value is not None and value != "type":
        check_int(value, attribute.name, lo=1)


def _check_status(_: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if type(value) is not str or not value:
        raise ValidationError(f"must be a non-empty string, not {value!r}", field=attribute.name)


def _as_float(value: Any) -> Any:
    """Ints become floats (bools stay, for the validator to reject); -0.0 becomes 0.0."""
    if type(value) is int:
        return float(value)
    if type(value) is float and value == 0.0:
        return 0.0
    return value


# ---------------------------------------------------------------------------
# Forgetting


@attrs.frozen(kw_only=True)
class LifecycleFacts:
    """What the lifecycle rules need to know about one memory, gathered by the caller.

    Attributes:
        status: the memory's lifecycle status (``"active"``, ``"archived"``, ...);
            statuses other than active and archived never move (see :data:`STATUSES`).
        type_name: its type (``"event"``, ...), which picks the half-life.
        confidence: its confidence, 0..1.
        pinned: pinned memories never decay and are never archived or pruned.
        access_count: late-binding reads journaled for it.
        last_access: ms of the last read; 0 means never read.
        at: ms the head version was written (its last write).
        status_since: ms the current status was entered (for an active memory never
            archived, its creation).
        in_degree: its active in-edges.
        max_in_degree: the store-wide maximum in-degree (>= ``in_degree``).
        max_access: the store-wide maximum access count (>= ``access_count``).
        half_life_days: the base half-life in days before the doubling rules, or None
            for a memory that does not decay; ``"type"`` (the default) for its type's
            (:data:`~cortexgraph.core.salience.HALF_LIFE_DAYS`, so that changing
            ``type_name`` changes it), else what :func:`tag_half_life` gives for the
            memory's tags.
    """

    status: str = attrs.field(validator=_check_status)
    type_name: str = attrs.field(validator=_check_type_name)
    confidence: float = attrs.field(converter=_as_float, validator=_check_unit)
    pinned: bool = attrs.field(default=False, validator=_check_bool)
    access_count: int = attrs.field(default=0, validator=_check_int())
    last_access: int = attrs.field(default=0, validator=_check_int())
    at: int = attrs.field(default=0, validator=_check_int())
    status_since: int = attrs.field(default=0, validator=_check_int())
    in_degree: int = attrs.field(default=0, validator=_check_int())
    max_in_degree: int = attrs.field(default=0, validator=_check_int())
    max_access: int = attrs.field(default=0, validator=_check_int())
    half_life_days: int | Literal["type"] | None = attrs.field(
        default="type", validator=_check_half_life
    )

    def __attrs_post_init__(self) -> None:
        if self.in_degree > self.max_in_degree:
            raise ValidationError("must not exceed max_in_degree", field="in_degree")
        if self.access_count > self.max_access:
            raise ValidationError("must not exceed max_access", field="access_count")

    @property
    def centrality(self) -> float:
        """``in_degree / max_in_degree`` (0 when the maximum is 0), as salience has it."""
        return centrality(self.in_degree, self.max_in_degree)

    @property
    def base_half_life_days(self) -> int | None:
        """The half-life in days before the doubling rules (None: stable)."""
        if self.half_life_days == "type":
            return HALF_LIFE_DAYS[self.type_name]
        return self.half_life_days

    @property
    def is_exempt(self) -> bool:
        """Pinned, or a hub (centrality strictly above :data:`HUB_CENTRALITY`)."""
        return self.pinned or self.centrality > HUB_CENTRALITY


def effective_confidence(facts: LifecycleFacts, now: int) -> int:
    """The memory's effective confidence at ``now``, in ppm: confidence x recency.

    Recency is computed exactly as :mod:`~cortexgraph.core.salience` computes the
    recency factor: the half-life ``half_life_days`` (the type's unless the caller chose
    one by tag; doubled for a memory read more than 10 times or with centrality above
    0.5, none when pinned or stable), the age
    ``now - at`` (a negative age counts as 0), rounded to ppm half to even; then
    :func:`~cortexgraph.core.salience.effective_confidence_ppm`.

    >>> facts = LifecycleFacts(status="active", type_name="event", confidence=0.8)
    >>> effective_confidence(facts, 7 * DAY_MS)  # one half-life: 0.8 * 0.5
    400000

    Raises:
        ValidationError: ``now`` is not an integer >= 0.
    """
    check_int(now, "now")
    life = scaled_half_life_ms(
        facts.base_half_life_days,
        pinned=facts.pinned,
        access_count=facts.access_count,
        centrality=facts.centrality,
    )
    recency_ppm = factor_ppm((0.0, 0.0, 0.0, 0.0, recency(now - facts.at, life)))[4]
    return effective_confidence_ppm(facts.confidence, recency_ppm)


def next_status(facts: LifecycleFacts, now: int) -> str | None:
    """The status ``compact(now)`` moves this memory to, or ``None`` to leave it.

    - ``"active"`` -> ``"archived"`` when not exempt (pinned, or centrality > 0.5), idle
      for at least :data:`ARCHIVE_IDLE_MS` (``now - max(last_access, at)``), and with
      effective confidence strictly below :data:`ARCHIVE_BELOW_PPM`;
    - ``"archived"`` -> ``"pruned"`` when not exempt and untouched for at least
      :data:`PRUNE_AFTER_MS` (``now - max(status_since, last_access, at)``);
    - anything else: ``None``. (Restoring is done on access: :func:`restores_on_access`.)

    >>> day = DAY_MS
    >>> old = LifecycleFacts(status="active", type_name="event", confidence=0.5)
    >>> next_status(old, 14 * day - 1), next_status(old, 14 * day)
    (None, 'archived')
    >>> archived = attrs.evolve(old, status="archived", status_since=14 * day)
    >>> next_status(archived, 44 * day - 1), next_status(archived, 44 * day)
    (None, 'pruned')

    Raises:
        ValidationError: ``now`` is not an integer >= 0.
    """
    check_int(now, "now")
    if facts.status == "active":
        if facts.is_exempt:
            return None
        if now - max(facts.last_access, facts.at) < ARCHIVE_IDLE_MS:
            return None
        if effective_confidence(facts, now) < ARCHIVE_BELOW_PPM:
            return "archived"
        return None
    if facts.status == "archived":
        if facts.is_exempt:
            return None
        if now - max(facts.status_since, facts.last_access, facts.at) >= PRUNE_AFTER_MS:
            return "pruned"
        return None
    return None


class _HalfLivesField:
    """Stands in for the attrs attribute ``check_tags`` names in its errors."""

    name = "half_lives"


def check_half_lives(value: object) -> dict[str, int | None]:
    """Check a ``half_lives`` mapping (tag -> half-life in days, or None for stable) and
    return it with its tags normalised as memory tags are (lowercase, NFC).

    >>> check_half_lives({"Context": 30, "architecture": None})
    {'architecture': None, 'context': 30}

    Raises:
        ValidationError: not a mapping; a key that is not a valid tag; a value that is
            neither None nor an integer >= 1; two keys that normalise to the same tag
            with different half-lives. Field ``half_lives``; the message names the key.
    """
    if not isinstance(value, Mapping):
        raise ValidationError(
            f"must be a mapping of tag to days, not {type(value).__name__}", field="half_lives"
        )
    checked: dict[str, int | None] = {}
    for key, days in value.items():
        if type(key) is not str:
            raise ValidationError(
                f"tag {key!r} must be a string, not {type(key).__name__}", field="half_lives"
            )
        tag = normalise_tag(key)
        check_tags(None, _HalfLivesField, (tag,))  # type: ignore[arg-type]
        if days is not None and (type(days) is not int or days < 1):
            raise ValidationError(
                f"tag {key!r}: the half-life must be None (stable) or an integer number of"
                f" days >= 1, not {days!r}",
                field="half_lives",
            )
        if tag in checked and checked[tag] != days:
            raise ValidationError(
                f"tag {key!r} and another key both mean {tag!r}, with different half-lives",
                field="half_lives",
            )
        checked[tag] = days
    return dict(sorted(checked.items()))


def tag_half_life(
    tags: Iterable[str], half_lives: Mapping[str, int | None], default: int | None
) -> int | None:
    """The base half-life (days, None: stable) of a memory with ``tags`` under
    ``half_lives`` (checked by :func:`check_half_lives`); ``default`` (its type's)
    when no tag matches.

    When several tags match, the shortest finite half-life wins: a memory tagged both
    ``progress`` (7 days) and ``decision`` (stable) is as transient as its most
    transient label says. It is stable only if every matching tag is stable.

    >>> lives = {"progress": 7, "pattern": 60, "decision": None}
    >>> tag_half_life(["pattern", "progress"], lives, None)
    7
    >>> tag_half_life(["decision"], lives, 180), tag_half_life(["x"], lives, 180)
    (None, 180)
    >>> tag_half_life(["decision", "pattern"], lives, None)
    60
    """
    matched = [half_lives[tag] for tag in tags if tag in half_lives]
    if not matched:
        return default
    finite = [days for days in matched if days is not None]
    return min(finite) if finite else None


def restores_on_access(status: str) -> bool:
    """Whether an access (a late-binding read) moves a memory with ``status`` back to
    ``"active"``: true for ``"archived"`` only. Pruned memories are invisible to queries,
    so nothing reads them; merged ones live on in their survivor.

    >>> restores_on_access("archived"), restores_on_access("pruned")
    (True, False)
    """
    return status == "archived"


# ---------------------------------------------------------------------------
# Similarity decisions


def _similarity(value: object) -> int:
    return check_int(value, "similarity_ppm", hi=PPM)


@attrs.frozen
class LinkDecision:
    """What auto-linking does with one candidate.

    Attributes:
        action: one of :data:`LINK_ACTIONS`. ``"relates_to"`` adds an active
            ``relates_to`` edge, ``"suggested"`` a ``relates_to`` edge with status
            ``suggested``, ``"candidate"`` hands the pair to consolidation.
        strength_ppm: the edge strength, the similarity itself; 0 for ``"none"``.
    """

    action: str
    strength_ppm: int


def link_decision(similarity_ppm: int) -> LinkDecision:
    """Auto-linking's decision for a similarity in ppm (see the module docstring).

    >>> link_decision(99_999).action, link_decision(100_000)
    ('none', LinkDecision(action='relates_to', strength_ppm=100000))
    >>> link_decision(400_000).action, link_decision(500_000).action
    ('suggested', 'candidate')

    Raises:
        ValidationError: not an integer in 0..1,000,000 (field ``similarity_ppm``).
    """
    s = _similarity(similarity_ppm)
    if s < LINK_NONE_BELOW_PPM:
        return LinkDecision("none", 0)
    if s < LINK_SUGGEST_FROM_PPM:
        return LinkDecision("relates_to", s)
    if s < LINK_CANDIDATE_FROM_PPM:
        return LinkDecision("suggested", s)
    return LinkDecision("candidate", s)


def consolidation_decision(similarity_ppm: int) -> str | None:
    """``"merge"`` at >= 700,000 ppm, ``"suggest"`` (a suggested edge) at >= 500,000,
    else ``None``.

    >>> consolidation_decision(699_999), consolidation_decision(700_000)
    ('suggest', 'merge')
    >>> consolidation_decision(499_999) is None
    True

    Raises:
        ValidationError: not an integer in 0..1,000,000 (field ``similarity_ppm``).
    """
    s = _similarity(similarity_ppm)
    if s >= MERGE_AT_PPM:
        return "merge"
    if s >= SUGGEST_AT_PPM:
        return "suggest"
    return None


# ---------------------------------------------------------------------------
# Merging


def can_merge(a_type: str, a_ns: str, b_type: str, b_ns: str) -> bool:
    """Whether two memories may be merged: same namespace, same type, and that type in
    :data:`MERGEABLE_TYPES`. The caller checks this before anything else.

    >>> can_merge("fact", "default", "fact", "default")
    True
    >>> can_merge("fact", "default", "fact", "work"), can_merge("fact", "a", "goal", "a")
    (False, False)
    >>> can_merge("event", "a", "event", "a")
    False
    """
    return a_ns == b_ns and a_type == b_type and a_type in MERGEABLE_TYPES


@attrs.frozen(kw_only=True)
class MergeCandidate:
    """What :func:`choose_survivor` compares: one memory of a pair to merge."""

    id: bytes = attrs.field()
    created_at: int = attrs.field(validator=_check_int())
    confidence: float = attrs.field(converter=_as_float, validator=_check_unit)
    priority: int = attrs.field(validator=_check_int(lo=1))
    pinned: bool = attrs.field(default=False, validator=_check_bool)
    access_count: int = attrs.field(default=0, validator=_check_int())

    @id.validator
    def _check_id(self, attribute: attrs.Attribute[bytes], value: Any) -> None:
        if type(value) is not bytes or not value:
            raise ValidationError("must be non-empty bytes", field="id")

    def _key(self) -> tuple[bool, int, float, int, int, bytes]:
        # Smaller wins: pinned, more read, more confident, more important, older, smaller id.
        return (
            not self.pinned,
            -self.access_count,
            -self.confidence,
            -self.priority,
            self.created_at,
            self.id,
        )


def choose_survivor(a: MergeCandidate, b: MergeCandidate) -> int:
    """Which of two memories survives a merge: ``0`` for ``a``, ``1`` for ``b``.

    The first difference decides, in this order: pinned over not pinned; more accesses
    (the memory agents actually read, whose URI is in use); higher confidence; higher
    priority; older (smaller ``created_at``: its URI has been around longer); smaller id.
    Ids differ, so this is a total order and the choice does not depend on argument
    order: ``choose_survivor(a, b) == 1 - choose_survivor(b, a)``.

    >>> old = MergeCandidate(id=b"\\x01", created_at=1, confidence=0.5, priority=5)
    >>> new = MergeCandidate(id=b"\\x02", created_at=2, confidence=0.5, priority=5)
    >>> choose_survivor(old, new), choose_survivor(new, old)
    (0, 1)
    >>> choose_survivor(old, attrs.evolve(new, access_count=1))
    1

    Raises:
        ValidationError: both have the same id (a memory does not merge with itself).
    """
    if a.id == b.id:
        raise ValidationError("a memory cannot be merged with itself", field="id")
    return 0 if a._key() < b._key() else 1


def merged_changes(survivor: Memory, other: Memory) -> dict[str, object]:
    """The field changes that make the survivor's new version after absorbing ``other``.

    - ``tags``: the union, sorted. At most :data:`~cortexgraph.core.taxonomy.MAX_TAGS`:
      the survivor keeps all of its own tags, and the other's tags that it lacks fill the
      remaining room in sorted order (the rest are dropped; the other memory keeps them
      in its own, still resolvable history);
    - ``confidence``: the larger of the two;
    - ``priority``: the larger of the two (both memories claimed that importance for the
      same content);
    - ``pinned``: true if either was pinned (a pin is never lost by merging).

    Text, summary, source, validity and type-specific fields stay the survivor's. Only
    fields whose value changes are returned: an empty dict means the survivor already
    covers the other (the caller still marks the other merged and adds the edge).

    >>> from cortexgraph.core.taxonomy import Fact
    >>> a = Fact(text="deploy with make ship", tags=["deploy"], confidence=0.6, priority=4)
    >>> b = Fact(text="make ship deploys", tags=["make", "deploy"], confidence=0.9)
    >>> merged_changes(a, b)
    {'tags': ('deploy', 'make'), 'confidence': 0.9, 'priority': 5}

    Raises:
        ValidationError: the two memories are of different types.
    """
    if survivor.type_name != other.type_name:
        raise ValidationError(
            f"cannot merge a {other.type_name} into a {survivor.type_name}", field="other"
        )
    own = survivor.tags
    extra = sorted(frozenset(other.tags) - frozenset(own))
    tags = tuple(sorted((*own, *extra[: max(MAX_TAGS - len(own), 0)])))
    changes: dict[str, object] = {}
    if tags != own:
        changes["tags"] = tags
    if other.confidence > survivor.confidence:
        changes["confidence"] = other.confidence
    if other.priority > survivor.priority:
        changes["priority"] = other.priority
    if other.pinned and not survivor.pinned:
        changes["pinned"] = True
    return changes


def merge_edge(survivor_id: bytes, other_id: bytes) -> tuple[bytes, str, bytes]:
    """The edge a merge adds, as ``(src, relation, dst)``: the survivor
    ``derived_from`` the merged memory (its new version was derived from the other).

    >>> merge_edge(b"s", b"o")
    (b's', 'derived_from', b'o')
    """
    return (survivor_id, MERGE_RELATION, other_id)
