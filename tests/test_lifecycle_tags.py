"""Archiving by hand, the consolidation candidates, and half-lives chosen by tag."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import cortexgraph as cg
from cortexgraph import Q

DAY = 86_400_000
T0 = 1_700_000_000_000
PRUNE = 30 * DAY


# ---------------------------------------------------------------------------
# archive by hand


def test_archive_by_hand_journals_a_status_entry_and_an_access_restores_it(
    tmp_path: Path,
) -> None:
    """``archive`` moves an active memory to ``archived`` with one ``status`` entry
    (carrying the reason); it leaves find and recall but resolves; a late-binding read
    restores it, and the tables rebuilt from the journal are identical."""
    with cg.open(tmp_path, "a") as cx:
        uri = cx.write(cg.Fact(text="the staging box is called tortoise", tags=["x"]), at=T0)
        back = cx.archive(uri, reason="no longer true", at=T0 + 1)
        assert back == uri
        last = list(cx.journal())[-1]
        assert (last.op, last.fields["status"], last.fields["reason"]) == (
            "status", "archived", "no longer true")
        assert last.at == T0 + 1
        assert cx.resolve(uri).status == "archived"
        assert cx.find(Q.tag("x"), limit=5, now=T0 + 2).uris == []
        assert cx.recall("tortoise", mode="keyword", now=T0 + 2).uris == []
        found = cx.find(Q.tag("x") & Q.status("archived"), limit=5, late_binding=True,
                        now=T0 + 3)
        assert [u.id for u in found.uris] == [uri.id]
        assert cx.resolve(uri).status == "active"
        assert [u.id for u in cx.recall("tortoise", mode="keyword").uris] == [uri.id]
        digests = cx.table_digests()
        cx.rebuild()
        assert cx.table_digests() == digests


def test_archive_without_a_reason_journals_the_entry_compaction_journals(
    tmp_path: Path,
) -> None:
    """With no reason, the hand-made entry has exactly the fields of compaction's
    (``id`` and ``status``), so both archive paths look the same in the journal."""
    with cg.open(tmp_path, "a") as cx:
        by_hand = cx.write(cg.Fact(text="archived by hand", confidence=0.9), at=T0)
        decayed = cx.write(cg.Fact(text="archived by compaction", confidence=0.1), at=T0)
        cx.archive(by_hand, at=T0 + 14 * DAY)
        cx.compact(now=T0 + 14 * DAY)
        entries = [e for e in cx.journal() if e.op == "status"]
        assert [e.fields for e in entries] == [
            {"id": by_hand.id, "status": "archived"},
            {"id": decayed.id, "status": "archived"},
        ]


def test_archiving_an_archived_memory_is_a_no_op(tmp_path: Path) -> None:
    """A second ``archive`` journals nothing and returns the same URI."""
    with cg.open(tmp_path, "a") as cx:
        uri = cx.write(cg.Fact(text="forget me"), at=T0)
        cx.archive(uri, at=T0 + 1)
        before = len(list(cx.journal()))
        assert cx.archive(uri, reason="again", at=T0 + 2) == uri
        assert len(list(cx.journal())) == before
        assert cx.resolve(uri).status == "archived"


def test_a_hand_archived_memory_is_pruned_30_days_later_unless_pinned(
    tmp_path: Path,
) -> None:
    """Compaction prunes a hand-archived memory 30 untouched days after the archive;
    a pinned one archived by hand stays archived (pinned memories are never pruned)."""
    with cg.open(tmp_path, "a") as cx:
        plain = cx.write(cg.Fact(text="plain", confidence=0.9), at=T0)
        pinned = cx.write(cg.Fact(text="pinned", confidence=0.9, pinned=True), at=T0)
        cx.archive(plain, at=T0 + DAY)
        cx.archive(pinned, at=T0 + DAY)
        assert cx.compact(now=T0 + DAY + PRUNE - 1).pruned == ()
        report = cx.compact(now=T0 + DAY + PRUNE)
        assert [u.id for u in report.pruned] == [plain.id]
        assert cx.resolve(pinned).status == "archived"


def test_archive_refuses_tombstoned_pruned_and_merged_memories(tmp_path: Path) -> None:
    """A tombstoned memory raises TombstonedError; a pruned or merged one
    ValidationError on ``ref`` naming its status; a bad reason ValidationError on
    ``reason``; an unknown id NotFoundError. None of them journals anything, and a
    read-only handle raises ReadOnlyError."""
    with cg.open(tmp_path, "a") as cx:
        gone = cx.write(cg.Fact(text="gone"), at=T0)
        cx.tombstone(gone, at=T0)
        pruned = cx.write(cg.Fact(text="pruned"), at=T0)
        cx.archive(pruned, at=T0)
        cx.compact(now=T0 + PRUNE)
        assert cx.resolve(pruned).status == "pruned"
        twin_a = cx.write(cg.Fact(text="the twin deploys on main"), at=T0)
        twin_b = cx.write(cg.Fact(text="the twin deploys on main", confidence=0.5), at=T0)
        _suggest(cx, twin_a, twin_b)
        cx.compact(now=T0 + PRUNE)
        assert cx.resolve(twin_b).status == "merged"
        live = cx.write(cg.Fact(text="live"), at=T0)
        before = len(list(cx.journal()))
        with pytest.raises(cg.TombstonedError):
            cx.archive(gone)
        with pytest.raises(cg.ValidationError, match="pruned") as caught:
            cx.archive(pruned)
        assert caught.value.field == "ref"
        with pytest.raises(cg.ValidationError, match="merged") as caught:
            cx.archive(twin_b)
        assert caught.value.field == "ref"
        with pytest.raises(cg.ValidationError) as caught:
            cx.archive(live, reason=3)  # type: ignore[arg-type]
        assert caught.value.field == "reason"
        with pytest.raises(cg.ValidationError) as caught:
            cx.archive(live, reason="x" * 100_000)
        assert caught.value.field == "reason"
        with pytest.raises(cg.NotFoundError):
            cx.archive("00" * 16)
        assert len(list(cx.journal())) == before
        assert cx.resolve(live).status == "active"
    with cg.open(tmp_path, "a", readonly=True) as ro, pytest.raises(cg.ReadOnlyError):
        ro.archive(live)


def test_archive_in_a_batch_commits_with_the_batch(tmp_path: Path) -> None:
    """``Batch.archive`` sees the batch's own write: a memory written and archived in
    one batch commits archived."""
    with cg.open(tmp_path, "a") as cx:
        with cx.batch() as batch:
            uri = batch.write(cg.Fact(text="born archived"), at=T0)
            batch.archive(uri, at=T0)
        assert cx.resolve(uri).status == "archived"


# ---------------------------------------------------------------------------
# consolidation candidates


def _suggest(cx: cg.Cortex, a: cg.MemoryURI, b: cg.MemoryURI) -> None:
    cx.add_edge(a, b, "relates_to", strength=0.9, status="suggested", at=T0)


def _candidate_store(cx: cg.Cortex) -> dict[str, cg.MemoryURI]:
    """One suggested pair for each decision (strength 0.9 each, made by hand)."""
    text = "deploys run through the ci pipeline on main"
    m = {
        "same_a": cx.write(cg.Fact(text=text), at=T0),
        "same_b": cx.write(cg.Fact(text=text, confidence=0.8), at=T0),
        "same_c": cx.write(cg.Fact(text=text, confidence=0.7), at=T0),
        "near_a": cx.write(cg.Fact(text="alpha beta gamma delta"), at=T0),
        "near_b": cx.write(cg.Fact(text="alpha beta gamma epsilon"), at=T0),
        "far_a": cx.write(cg.Fact(text="red green"), at=T0),
        "far_b": cx.write(cg.Fact(text="blue yellow"), at=T0),
        "event": cx.write(cg.Event(text=text), at=T0),
    }
    _suggest(cx, m["same_a"], m["same_b"])
    _suggest(cx, m["same_a"], m["same_c"])
    _suggest(cx, m["near_a"], m["near_b"])
    _suggest(cx, m["far_a"], m["far_b"])
    _suggest(cx, m["same_b"], m["event"])
    return m


def test_consolidation_candidates_list_each_decision_and_change_nothing(
    tmp_path: Path,
) -> None:
    """Each suggested pair is listed once with its edge strength, similarity and
    decision: identical texts merge (only one merge per memory, so the second identical
    pair is kept), 0.5-0.7 is kept, below 0.5 weakened, a Fact and an Event skipped
    (no similarity). Listing journals nothing, and two listings are equal and sorted by
    (source id, target id)."""
    with cg.open(tmp_path, "a") as cx:
        m = _candidate_store(cx)
        before = len(list(cx.journal()))
        listed = cx.consolidation_candidates()
        assert cx.consolidation_candidates() == listed
        assert len(list(cx.journal())) == before
        assert [(c.src.id, c.dst.id) for c in listed] == sorted(
            (c.src.id, c.dst.id) for c in listed)
        by_pair = {(c.src.id, c.dst.id): c for c in listed}
        assert len(by_pair) == 5
        assert all(c.strength == 0.9 for c in listed)
        near = by_pair[m["near_a"].id, m["near_b"].id]
        assert near.decision == "keep" and 0.5 <= near.similarity < 0.7  # type: ignore[operator]
        far = by_pair[m["far_a"].id, m["far_b"].id]
        assert (far.decision, far.similarity) == ("weaken", 0.0)
        skip = by_pair[m["same_b"].id, m["event"].id]
        assert (skip.decision, skip.similarity, skip.survivor) == ("skip", None, None)
        same = [by_pair[m["same_a"].id, m[k].id] for k in ("same_b", "same_c")]
        assert sorted(c.decision for c in same) == ["keep", "merge"]
        assert all(c.similarity == 1.0 for c in same)
        merge = next(c for c in same if c.decision == "merge")
        assert merge.survivor == m["same_a"]  # the more confident one


def test_compact_does_exactly_what_the_candidates_listed(tmp_path: Path) -> None:
    """After listing, ``compact`` merges the listed merge pair into the listed
    survivor, gives the weakened edge the listed similarity as its strength (no longer a
    candidate), and leaves the kept and skipped pairs as candidates."""
    with cg.open(tmp_path, "a") as cx:
        _candidate_store(cx)
        listed = cx.consolidation_candidates()
        report = cx.compact(now=T0)
        merges = [c for c in listed if c.decision == "merge"]
        assert [(s.id, o.id) for s, o in report.merged] == [
            (c.survivor.id, (c.dst if c.survivor == c.src else c.src).id)  # type: ignore[union-attr]
            for c in merges]
        after = {(c.src.id, c.dst.id) for c in cx.consolidation_candidates()}
        assert after == {(c.src.id, c.dst.id) for c in listed
                         if c.decision in ("keep", "skip")}
        for c in listed:
            if c.decision == "weaken":
                [edge] = [e for e in cx.edges(c.src) if e.dst.id == c.dst.id]
                assert (edge.status, edge.strength) == ("suggested", c.similarity)


def test_consolidation_candidates_limit(tmp_path: Path) -> None:
    """``limit`` returns the first pairs of the full listing; a limit that is not an
    integer >= 1 raises ValidationError on ``limit``."""
    with cg.open(tmp_path, "a") as cx:
        _candidate_store(cx)
        assert cx.consolidation_candidates(limit=2) == cx.consolidation_candidates()[:2]
        for bad in (0, -1, 1.5, True, "3"):
            with pytest.raises(cg.ValidationError) as caught:
                cx.consolidation_candidates(limit=bad)  # type: ignore[arg-type]
            assert caught.value.field == "limit"


# ---------------------------------------------------------------------------
# half-lives by tag

#: the coding assistant's categories (seed: decay by category, not by type)
LIVES: dict[str, int | None] = {
    "architecture": None, "decision": None, "code_description": None, "code": None,
    "pattern": 60, "gotcha": 45, "context": 30, "progress": 7,
}


def _archived(cx: cg.Cortex, now: int) -> set[bytes]:
    return {u.id for u in cx.compact(now=now, half_lives=LIVES).archived}


def test_a_context_fact_is_archived_after_two_30_day_half_lives(tmp_path: Path) -> None:
    """A Fact (stable by type) tagged context decays with a 30-day half-life: at 52
    days its effective confidence is still 0.30 (kept), at 60 days 0.25 (archived).
    Without ``half_lives`` the same Fact is never archived."""
    with cg.open(tmp_path / "a", "a") as cx:
        uri = cx.write(cg.Fact(text="we are mid-migration", tags=["context"]), at=T0)
        assert _archived(cx, T0 + 52 * DAY) == set()
        assert _archived(cx, T0 + 60 * DAY) == {uri.id}
    with cg.open(tmp_path / "b", "a") as cx:
        cx.write(cg.Fact(text="we are mid-migration", tags=["context"]), at=T0)
        assert cx.compact(now=T0 + 400 * DAY).archived == ()


def test_a_context_fact_read_recently_waits_for_14_idle_days(tmp_path: Path) -> None:
    """A decayed context Fact read at day 50 is not archived at day 60 (10 days idle)
    but is at day 64 (14 days idle)."""
    with cg.open(tmp_path, "a") as cx:
        uri = cx.write(cg.Fact(text="the cache is warm", tags=["context"]), at=T0)
        cx.find(Q.tag("context"), limit=1, late_binding=True, now=T0 + 50 * DAY)
        assert _archived(cx, T0 + 60 * DAY) == set()
        assert _archived(cx, T0 + 64 * DAY - 1) == set()
        assert _archived(cx, T0 + 64 * DAY) == {uri.id}


def test_a_gotcha_constraint_decays_with_a_45_day_half_life(tmp_path: Path) -> None:
    """A Constraint (stable by type) tagged gotcha is kept at 78 days (0.301) and
    archived at 90 (two 45-day half-lives: 0.25)."""
    with cg.open(tmp_path, "a") as cx:
        uri = cx.write(cg.Constraint(text="never run migrations on friday",
                                     tags=["gotcha"]), at=T0)
        assert _archived(cx, T0 + 78 * DAY) == set()
        assert _archived(cx, T0 + 90 * DAY) == {uri.id}


def test_stable_tags_pinned_memories_and_hubs_are_never_archived(tmp_path: Path) -> None:
    """An Event (7 days by type) tagged architecture (stable) stays active at 400 days,
    while an untagged Event of the same confidence is archived; a pinned progress Fact
    and a context Fact that is a hub (centrality > 0.5) stay active too."""
    with cg.open(tmp_path, "a") as cx:
        stable = cx.write(cg.Event(text="we chose lmdb", tags=["architecture"],
                                   confidence=0.5), at=T0)
        plain = cx.write(cg.Event(text="we chose lmdb", confidence=0.5), at=T0)
        pinned = cx.write(cg.Fact(text="ship on green", tags=["progress"], pinned=True),
                          at=T0)
        hub = cx.write(cg.Fact(text="the core module", tags=["context"]), at=T0)
        for i in range(3):
            spoke = cx.write(cg.Fact(text=f"spoke {i}"), at=T0)
            cx.add_edge(spoke, hub, "relates_to", at=T0)
        assert _archived(cx, T0 + 400 * DAY) == {plain.id}
        for uri in (stable, pinned, hub):
            assert cx.resolve(uri).status == "active"


def test_more_than_ten_reads_double_a_tag_half_life(tmp_path: Path) -> None:
    """A context Fact read 11 times decays with a 60-day half-life: at day 60 it is
    kept (0.5) while its unread twin is archived; kept at day 104 (0.301), archived at
    day 120 (0.25)."""
    with cg.open(tmp_path, "a") as cx:
        read = cx.write(cg.Fact(text="read often", tags=["context", "hot"]), at=T0)
        unread = cx.write(cg.Fact(text="never read", tags=["context"]), at=T0)
        for i in range(11):
            cx.find(Q.tag("hot"), limit=1, late_binding=True, now=T0 + 1 + i)
        assert _archived(cx, T0 + 60 * DAY) == {unread.id}
        assert _archived(cx, T0 + 104 * DAY) == set()  # 0.5 ** (104 / 60) = 0.301
        assert _archived(cx, T0 + 120 * DAY) == {read.id}


def test_several_matching_tags_take_the_shortest_finite_half_life(tmp_path: Path) -> None:
    """A Fact tagged progress (7) and decision (stable) decays in 7-day half-lives
    (archived at 14 days); one tagged decision and architecture (both stable) never
    decays; keys match tags case-insensitively, as tags are normalised."""
    with cg.open(tmp_path, "a") as cx:
        mixed = cx.write(cg.Fact(text="half done", tags=["progress", "decision"]), at=T0)
        stable = cx.write(cg.Fact(text="use lmdb", tags=["decision", "architecture"]),
                          at=T0)
        report = cx.compact(now=T0 + 14 * DAY,
                            half_lives={"Progress": 7, "DECISION": None, "architecture": None})
        assert [u.id for u in report.archived] == [mixed.id]
        assert cx.compact(now=T0 + 400 * DAY, half_lives=LIVES).archived == ()
        assert cx.resolve(stable).status == "active"


def test_the_same_operations_give_the_same_journal_bytes(tmp_path: Path) -> None:
    """Two stores given the same writes and the same compaction (``half_lives`` in a
    different key order) journal identical bytes."""
    journals = []
    for name, lives in (("a", LIVES), ("b", dict(reversed(list(LIVES.items()))))):
        with cg.open(tmp_path / name, "a", clock=cg.ManualClock(T0)) as cx:
            cx.write(cg.Fact(text="mid-migration", tags=["context"]), at=T0)
            cx.write(cg.Constraint(text="no friday deploys", tags=["gotcha"]), at=T0)
            cx.write(cg.Event(text="we chose lmdb", tags=["architecture"]), at=T0)
            report = cx.compact(now=T0 + 60 * DAY, half_lives=lives)
            assert len(report.archived) == 1
            journals.append(list(cx.journal_bytes()))
    assert journals[0] == journals[1]


@pytest.mark.parametrize(
    ("half_lives", "named"),
    [
        ({"context": 0}, "'context'"),
        ({"context": -3}, "'context'"),
        ({"context": 1.5}, "'context'"),
        ({"context": True}, "'context'"),
        ({"context": "30"}, "'context'"),
        ({"": 30}, "''"),
        ({"two words": 30}, "two words"),
        ({"x" * 65: 30}, "64"),
        ({3: 30}, "3"),
        ({"Context": 30, "context": 7}, "'context'"),
        ([("context", 30)], "list"),
    ],
)
def test_bad_half_lives_raise_naming_the_key_and_change_nothing(
    tmp_path: Path, half_lives: object, named: str
) -> None:
    """Each bad ``half_lives`` raises ValidationError on ``half_lives`` whose message
    names the bad key (or the bad type), and journals nothing."""
    with cg.open(tmp_path, "a") as cx:
        cx.write(cg.Fact(text="weak", tags=["context"], confidence=0.1), at=T0)
        before = list(cx.journal_bytes())
        with pytest.raises(cg.ValidationError) as caught:
            cx.compact(now=T0 + 400 * DAY, half_lives=half_lives)  # type: ignore[arg-type]
        assert caught.value.field == "half_lives"
        assert named in str(caught.value)
        assert list(cx.journal_bytes()) == before


def test_lifecycle_facts_take_a_half_life_in_place_of_the_type_s() -> None:
    """The pure rule: ``half_life_days`` replaces the type's half-life (a Fact given 30
    days is at 0.25 of its confidence after 60), None makes an Event stable, "type"
    (the default) follows ``type_name`` also through ``attrs.evolve``; 0, a bool or a
    float raise ValidationError on ``half_life_days``."""
    import attrs

    from cortexgraph.core.lifecycle import LifecycleFacts, effective_confidence

    fact = LifecycleFacts(status="active", type_name="fact", confidence=1.0,
                          half_life_days=30)
    assert effective_confidence(fact, 60 * DAY) == 250_000
    event = LifecycleFacts(status="active", type_name="event", confidence=1.0)
    assert effective_confidence(event, 14 * DAY) == 250_000
    assert effective_confidence(attrs.evolve(event, half_life_days=None), 400 * DAY) == 1_000_000
    assert effective_confidence(attrs.evolve(event, type_name="fact"), 400 * DAY) == 1_000_000
    for bad in (0, True, 1.5, "30"):
        with pytest.raises(cg.ValidationError) as caught:
            LifecycleFacts(status="active", type_name="fact", confidence=1.0,
                           half_life_days=bad)  # type: ignore[arg-type]
        assert caught.value.field == "half_life_days"


_tagged = st.lists(
    st.tuples(
        st.sampled_from([cg.Fact, cg.Constraint, cg.Event, cg.Preference, cg.Pattern]),
        st.lists(st.sampled_from([*LIVES, "deploy"]), max_size=3),
        st.sampled_from([0.2, 0.5, 0.9, 1.0]),
        st.booleans(),
    ),
    min_size=1,
    max_size=12,
)


@settings(max_examples=25)
@given(memories=_tagged, day=st.integers(0, 200))
def test_compact_archives_exactly_what_the_pure_rule_says(
    memories: list[Any], day: int
) -> None:
    """For random typed, tagged, pinned or not memories and a random day, ``compact``
    with the categories' half-lives archives exactly the memories for which
    ``next_status`` (with ``tag_half_life``) says "archived", computed over every
    memory: the column-index candidate selection misses none."""
    from cortexgraph.core.lifecycle import LifecycleFacts, next_status, tag_half_life
    from cortexgraph.core.salience import HALF_LIFE_DAYS

    root = Path(tempfile.mkdtemp())
    try:
        with cg.open(root, "a", sync=False) as cx:
            expected = set()
            now = T0 + day * DAY
            for kind, tags, confidence, pinned in memories:
                memory = kind(text="note", tags=tags, confidence=confidence, pinned=pinned)
                uri = cx.write(memory, at=T0)
                facts = LifecycleFacts(
                    status="active", type_name=memory.type_name, confidence=confidence,
                    pinned=pinned, at=T0, status_since=T0,
                    half_life_days=tag_half_life(memory.tags, LIVES,
                                                 HALF_LIFE_DAYS[memory.type_name]),
                )
                if next_status(facts, now) == "archived":
                    expected.add(uri.id)
            assert _archived(cx, now) == expected
    finally:
        shutil.rmtree(root)
