"""The pure lifecycle rules (``cortexgraph.core.lifecycle``): forgetting, auto-linking,
consolidation decisions and merging.

A fake clock (``ManualClock``) moves time by hand; every threshold is checked one
millisecond (or one ppm) before it and exactly at it.
"""

from __future__ import annotations

import attrs
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

import cortexgraph as cg
from cortexgraph.core import lifecycle as lc
from cortexgraph.core.lifecycle import (
    ARCHIVE_BELOW_PPM,
    ARCHIVE_IDLE_MS,
    PRUNE_AFTER_MS,
    LifecycleFacts,
    MergeCandidate,
    can_merge,
    choose_survivor,
    consolidation_decision,
    effective_confidence,
    jaccard_ppm,
    link_decision,
    merged_changes,
    next_status,
    restores_on_access,
)
from cortexgraph.core.salience import DAY_MS, HALF_LIFE_DAYS
from cortexgraph.core.taxonomy import MAX_TAGS, Constraint, Fact, Pattern
from cortexgraph.errors import ValidationError
from strategies import memories

T0 = 1_700_000_000_000
TYPE_NAMES = sorted(HALF_LIFE_DAYS)
ms = st.integers(min_value=0, max_value=T0 + 400 * DAY_MS)


@st.composite
def lifecycle_facts(draw: st.DrawFn, *, status: str | None = None) -> LifecycleFacts:
    max_in = draw(st.integers(0, 20))
    max_access = draw(st.integers(0, 50))
    at = draw(st.integers(T0 - 100 * DAY_MS, T0))
    return LifecycleFacts(
        status=status or draw(st.sampled_from(lc.STATUSES)),
        type_name=draw(st.sampled_from(TYPE_NAMES)),
        confidence=draw(st.floats(0.0, 1.0)),
        pinned=draw(st.booleans()),
        access_count=draw(st.integers(0, max_access)),
        last_access=draw(st.one_of(st.just(0), st.integers(at, T0 + 10 * DAY_MS))),
        at=at,
        status_since=draw(st.integers(at, T0 + 10 * DAY_MS)),
        in_degree=draw(st.integers(0, max_in)),
        max_in_degree=max_in,
        max_access=max_access,
    )


def facts(**changes: object) -> LifecycleFacts:
    """An unremarkable active Event written at T0 and never read."""
    base = LifecycleFacts(
        status="active", type_name="event", confidence=0.5, at=T0, status_since=T0
    )
    return attrs.evolve(base, **changes)


# ---------------------------------------------------------------------------
# Archive


def test_archive_happens_exactly_when_idle_for_14_days() -> None:
    """A low-confidence memory (always below 0.3) stays active at 14 days - 1 ms idle
    and is archived at exactly 14 days, idle counted from the last access."""
    clock = cg.ManualClock(T0)
    f = facts(type_name="fact", confidence=0.2, last_access=T0 + 5 * DAY_MS)
    clock.set(T0 + 5 * DAY_MS + ARCHIVE_IDLE_MS - 1)
    assert next_status(f, clock.now_ms()) is None
    clock.advance(1)
    assert next_status(f, clock.now_ms()) == "archived"


def test_never_read_counts_idle_from_the_last_write() -> None:
    """A memory that was never read (last_access 0) is idle from ``at``, not from the
    epoch: a fresh low-confidence memory is not archived the moment it is written."""
    f = facts(type_name="fact", confidence=0.1, last_access=0, at=T0)
    assert next_status(f, T0) is None
    assert next_status(f, T0 + ARCHIVE_IDLE_MS - 1) is None
    assert next_status(f, T0 + ARCHIVE_IDLE_MS) == "archived"


def test_effective_confidence_threshold_is_strict() -> None:
    """Exactly 0.3 effective confidence stays active; 1 ppm below is archived."""
    now = T0 + 100 * DAY_MS
    at_threshold = facts(type_name="fact", confidence=0.3)
    below = facts(type_name="fact", confidence=0.299999)
    assert effective_confidence(at_threshold, now) == ARCHIVE_BELOW_PPM
    assert next_status(at_threshold, now) is None
    assert effective_confidence(below, now) == ARCHIVE_BELOW_PPM - 1
    assert next_status(below, now) == "archived"


@given(
    type_name=st.sampled_from(["event", "pattern", "preference"]),
    confidence=st.floats(0.31, 1.0),
    access=st.integers(0, 20),
)
def test_archive_happens_at_the_exact_ms_decay_crosses_the_threshold(
    type_name: str, confidence: float, access: int
) -> None:
    """For a decaying type, the first instant the memory is archived is the first instant
    its effective confidence is below 0.3 (found by bisection): one ms earlier, no change."""
    f = facts(type_name=type_name, confidence=confidence, access_count=access, max_access=20)
    lo, hi = T0, T0 + 10_000 * DAY_MS  # effective(lo) >= 0.3 > effective(hi)
    assert effective_confidence(f, hi) < ARCHIVE_BELOW_PPM <= effective_confidence(f, lo)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if effective_confidence(f, mid) < ARCHIVE_BELOW_PPM:
            hi = mid
        else:
            lo = mid
    first = max(hi, T0 + ARCHIVE_IDLE_MS)
    assert next_status(f, first - 1) is None
    assert next_status(f, first) == "archived"


@given(f=lifecycle_facts(status="active"), now=ms)
def test_archive_only_under_every_documented_condition(f: LifecycleFacts, now: int) -> None:
    """Archiving implies: not pinned, not a hub, idle >= 14 days, effective confidence
    < 0.3; and those conditions imply archiving."""
    conditions = (
        not f.pinned
        and f.centrality <= 0.5
        and now - max(f.last_access, f.at) >= ARCHIVE_IDLE_MS
        and effective_confidence(f, now) < ARCHIVE_BELOW_PPM
    )
    assert (next_status(f, now) == "archived") == conditions
    assert next_status(f, now) in (None, "archived")


@given(f=lifecycle_facts(), now=ms)
@example(f=facts(pinned=True, confidence=0.0), now=T0 + 999 * DAY_MS)
def test_pinned_memories_are_never_archived_or_pruned(f: LifecycleFacts, now: int) -> None:
    """Pinned memories never move, whatever their confidence, age or status."""
    assert next_status(attrs.evolve(f, pinned=True), now) is None


@given(f=lifecycle_facts(), now=ms, extra=st.integers(1, 10))
def test_hubs_are_never_archived_or_pruned(f: LifecycleFacts, now: int, extra: int) -> None:
    """A memory with centrality above 0.5 never moves."""
    hub = attrs.evolve(f, in_degree=extra + 1, max_in_degree=2 * extra + 1)  # > 0.5
    assert hub.centrality > 0.5
    assert next_status(hub, now) is None


def test_exactly_half_centrality_is_not_a_hub() -> None:
    """Centrality exactly 0.5 is not exempt (the hub test is strict)."""
    f = facts(type_name="fact", confidence=0.1, in_degree=2, max_in_degree=4)
    assert next_status(f, T0 + ARCHIVE_IDLE_MS) == "archived"
    assert next_status(attrs.evolve(f, in_degree=3), T0 + ARCHIVE_IDLE_MS) is None


# ---------------------------------------------------------------------------
# Prune and restore


@given(
    since=st.integers(0, 60 * DAY_MS),
    access=st.integers(0, 60 * DAY_MS),
    write=st.integers(0, 60 * DAY_MS),
)
def test_prune_happens_exactly_after_30_days_untouched(since: int, access: int, write: int) -> None:
    """archived -> pruned at exactly 30 days after the latest of entering the status,
    the last access and the last write; not one ms before."""
    clock = cg.ManualClock(T0)
    f = facts(status="archived", status_since=T0 + since, last_access=T0 + access, at=T0 + write)
    clock.set(T0 + max(since, access, write) + PRUNE_AFTER_MS - 1)
    assert next_status(f, clock.now_ms()) is None
    clock.advance(1)
    assert next_status(f, clock.now_ms()) == "pruned"


@given(f=lifecycle_facts(), now=ms)
def test_other_statuses_never_move(f: LifecycleFacts, now: int) -> None:
    """Pruned, merged and unknown statuses are terminal for ``next_status``."""
    for status in ("pruned", "merged", "tombstoned"):
        assert next_status(attrs.evolve(f, status=status), now) is None


def test_restores_on_access() -> None:
    """Only an archived memory is restored by an access."""
    assert [restores_on_access(s) for s in lc.STATUSES] == [False, True, False, False]


def test_bad_facts_are_rejected() -> None:
    """Bad facts fail with ValidationError naming the field."""
    cases = [
        ({"type_name": "note"}, "type_name"),
        ({"confidence": 1.5}, "confidence"),
        ({"confidence": float("nan")}, "confidence"),
        ({"pinned": 1}, "pinned"),
        ({"at": -1}, "at"),
        ({"in_degree": 3, "max_in_degree": 2}, "in_degree"),
        ({"access_count": 3, "max_access": 2}, "access_count"),
    ]
    for change, field in cases:
        with pytest.raises(ValidationError) as info:
            facts(**change)
        assert info.value.field == field
    with pytest.raises(ValidationError):
        next_status(facts(), -1)


# ---------------------------------------------------------------------------
# Link and consolidation decisions


@pytest.mark.parametrize(
    ("similarity", "action", "strength"),
    [
        (0, "none", 0),
        (99_999, "none", 0),
        (100_000, "relates_to", 100_000),
        (399_999, "relates_to", 399_999),
        (400_000, "suggested", 400_000),
        (499_999, "suggested", 499_999),
        (500_000, "candidate", 500_000),
        (1_000_000, "candidate", 1_000_000),
    ],
)
def test_link_decision_at_every_boundary(similarity: int, action: str, strength: int) -> None:
    """Each auto-link threshold is inclusive at its lower end."""
    assert link_decision(similarity) == lc.LinkDecision(action, strength)


@pytest.mark.parametrize(
    ("similarity", "decision"),
    [(0, None), (499_999, None), (500_000, "suggest"), (699_999, "suggest"),
     (700_000, "merge"), (1_000_000, "merge")],
)  # fmt: skip
def test_consolidation_decision_at_every_boundary(similarity: int, decision: str | None) -> None:
    """>= 0.7 merges, 0.5 <= s < 0.7 suggests, below nothing."""
    assert consolidation_decision(similarity) == decision


@given(s=st.integers(0, 1_000_000))
def test_link_and_consolidation_agree(s: int) -> None:
    """Everything auto-linking hands to consolidation gets a consolidation decision, and
    nothing else does."""
    assert (link_decision(s).action == "candidate") == (consolidation_decision(s) is not None)


@pytest.mark.parametrize("bad", [-1, 1_000_001, 0.5, True, None])
def test_similarity_must_be_ppm(bad: object) -> None:
    """Similarities are integers in 0..1,000,000."""
    for decide in (link_decision, consolidation_decision):
        with pytest.raises(ValidationError) as info:
            decide(bad)  # type: ignore[arg-type]
        assert info.value.field == "similarity_ppm"


@given(a=st.sets(st.text(max_size=3), max_size=8), b=st.sets(st.text(max_size=3), max_size=8))
def test_jaccard_ppm_is_symmetric_and_bounded(a: set[str], b: set[str]) -> None:
    """Jaccard in ppm is symmetric, in range, 1e6 for equal non-empty sets, rounded down."""
    value = jaccard_ppm(a, b)
    assert value == jaccard_ppm(sorted(b), sorted(a))
    assert 0 <= value <= 1_000_000
    if a and a == b:
        assert value == 1_000_000
    union = len(a | b)
    if union:
        assert value * union <= len(a & b) * 1_000_000 < (value + 1) * union


# ---------------------------------------------------------------------------
# Merging


def test_can_merge_needs_same_ns_and_a_mergeable_type() -> None:
    """Never across namespaces or types; never events, artifacts or execution records."""
    for t in lc.MERGEABLE_TYPES:
        assert can_merge(t, "n", t, "n")
        assert not can_merge(t, "n", t, "m")
    for t in ("event", "artifact_ref", "attest", "learn_weights"):
        assert not can_merge(t, "n", t, "n")
    assert not can_merge("fact", "n", "pattern", "n")


candidates = st.builds(
    MergeCandidate,
    id=st.binary(min_size=1, max_size=2),
    created_at=st.integers(0, 5),
    confidence=st.sampled_from([0.0, 0.5, 1.0]),
    priority=st.integers(1, 3),
    pinned=st.booleans(),
    access_count=st.integers(0, 3),
)


@given(a=candidates, b=candidates)
def test_survivor_choice_is_symmetric(a: MergeCandidate, b: MergeCandidate) -> None:
    """The same memory survives whichever way round the pair is passed."""
    if a.id == b.id:
        with pytest.raises(ValidationError):
            choose_survivor(a, b)
        return
    first = (a, b)[choose_survivor(a, b)]
    second = (b, a)[choose_survivor(b, a)]
    assert first == second


@given(a=candidates, b=candidates, c=candidates)
def test_survivor_choice_is_transitive(
    a: MergeCandidate, b: MergeCandidate, c: MergeCandidate
) -> None:
    """If a beats b and b beats c, a beats c: chains of merges end at one survivor."""
    if len({a.id, b.id, c.id}) < 3:
        return
    if choose_survivor(a, b) == 0 and choose_survivor(b, c) == 0:
        assert choose_survivor(a, c) == 0


def test_survivor_rule_order() -> None:
    """Pinned beats reads beats confidence beats priority beats age beats id."""
    base = MergeCandidate(id=b"\x02", created_at=1, confidence=0.5, priority=5)
    other = attrs.evolve(base, id=b"\x01")
    assert choose_survivor(base, other) == 1  # smaller id
    other = attrs.evolve(other, created_at=2)
    assert choose_survivor(base, other) == 0  # older
    other = attrs.evolve(other, priority=6)
    assert choose_survivor(base, other) == 1  # higher priority
    base = attrs.evolve(base, confidence=0.6)
    assert choose_survivor(base, other) == 0  # more confident
    other = attrs.evolve(other, access_count=1)
    assert choose_survivor(base, other) == 1  # more reads
    base = attrs.evolve(base, pinned=True)
    assert choose_survivor(base, other) == 0  # pinned


@given(survivor=memories(Fact), other=memories(Fact))
def test_merged_changes_properties(survivor: Fact, other: Fact) -> None:
    """The merged version is valid, keeps the survivor's text and tags, holds the union
    of tags up to MAX_TAGS, the larger confidence and priority, and any pin; only changed
    fields are returned."""
    changes = merged_changes(survivor, other)
    merged = attrs.evolve(survivor, **changes)  # validates like an update would
    assert merged.text == survivor.text and merged.summary == survivor.summary
    assert set(survivor.tags) <= set(merged.tags) <= set(survivor.tags) | set(other.tags)
    assert list(merged.tags) == sorted(merged.tags)
    assert len(merged.tags) == min(MAX_TAGS, len(set(survivor.tags) | set(other.tags)))
    assert merged.confidence == max(survivor.confidence, other.confidence)
    assert merged.priority == max(survivor.priority, other.priority)
    assert merged.pinned == (survivor.pinned or other.pinned)
    assert all(getattr(survivor, k) != v for k, v in changes.items())


def test_merged_tags_beyond_the_cap() -> None:
    """At the cap the survivor keeps all its tags and the other's fill the room in
    sorted order."""
    own = [f"s{i:02d}" for i in range(MAX_TAGS - 2)]
    survivor = Pattern(text="x", tags=own)
    other = Pattern(text="y", tags=["zz", "aa", "mm", "s00"])
    assert merged_changes(survivor, other)["tags"] == tuple(sorted([*own, "aa", "mm"]))


def test_merging_across_types_is_refused() -> None:
    """merged_changes refuses memories of different types."""
    with pytest.raises(ValidationError):
        merged_changes(Fact(text="a"), Constraint(text="a"))


def test_merge_edge_is_derived_from_never_supersedes() -> None:
    """The merge edge goes survivor --derived_from--> other."""
    assert lc.merge_edge(b"s", b"o") == (b"s", "derived_from", b"o")
    assert lc.MERGE_RELATION != "supersedes"
