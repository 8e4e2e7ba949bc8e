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
