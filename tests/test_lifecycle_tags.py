"""Archiving by hand, the consolidation candidates, and half-lives chosen by tag."""

from __future__ import annotations

from pathlib import Path

import pytest

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
    """A tombstoned memory raises TombstonedError; a pruned one ValidationError on
    ``ref`` naming its status; a bad reason ValidationError on ``reason``; an unknown
    id NotFoundError. None of them journals anything."""
    with cg.open(tmp_path, "a") as cx:
        gone = cx.write(cg.Fact(text="gone"), at=T0)
        cx.tombstone(gone, at=T0)
        pruned = cx.write(cg.Fact(text="pruned"), at=T0)
        cx.archive(pruned, at=T0)
        cx.compact(now=T0 + PRUNE)
        assert cx.resolve(pruned).status == "pruned"
        live = cx.write(cg.Fact(text="live"), at=T0)
        before = len(list(cx.journal()))
        with pytest.raises(cg.TombstonedError):
            cx.archive(gone)
        with pytest.raises(cg.ValidationError, match="pruned") as caught:
            cx.archive(pruned)
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
