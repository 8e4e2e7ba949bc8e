"""compact(): forgetting at the documented thresholds, consolidation, auto-linking, replay."""

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
IDLE = 14 * DAY
PRUNE = 30 * DAY


def test_archive_and_prune_happen_exactly_at_the_thresholds(tmp_path: Path) -> None:
    """A low-confidence Fact is archived exactly 14 days after its write (not 1 ms
    earlier) and pruned exactly 30 days after being archived; find stops returning it
    when archived; reading it (late binding) before pruning restores it."""
    with cg.open(tmp_path, "a") as cx:
        weak = cx.write(cg.Fact(text="a vague rumour", tags=["x"], confidence=0.2), at=T0)
        keep = cx.write(cg.Fact(text="a solid fact", tags=["x"], confidence=0.9), at=T0)
        assert cx.compact(now=T0 + IDLE - 1).archived == ()
        report = cx.compact(now=T0 + IDLE)
        assert [u.id for u in report.archived] == [weak.id]
        assert cx.resolve(weak).status == "archived"
        assert cx.find(Q.tag("x"), limit=5, now=T0 + IDLE).uris == [keep]
        archived_at = T0 + IDLE
        assert cx.compact(now=archived_at + PRUNE - 1).pruned == ()
        assert [u.id for u in cx.compact(now=archived_at + PRUNE).pruned] == [weak.id]
        assert cx.resolve(weak).status == "pruned"
        assert cx.history(weak)[0].memory.text == "a vague rumour"


def test_an_access_restores_an_archived_memory(tmp_path: Path) -> None:
    """Reading an archived memory with late binding makes it active again (journaled as
    part of the access entry), and it is back in keyword recall."""
    with cg.open(tmp_path, "a") as cx:
        weak = cx.write(cg.Fact(text="obscure trivia about llamas", tags=["x"],
                                confidence=0.1), at=T0)
        cx.compact(now=T0 + IDLE)
        assert cx.recall("llamas", mode="keyword", now=T0 + IDLE).uris == []
        found = cx.find(Q.tag("x") & Q.status("archived"), limit=5, late_binding=True,
                        now=T0 + IDLE + 1)
        assert [u.id for u in found.uris] == [weak.id]
        assert cx.resolve(weak).status == "active"
        assert [u.id for u in cx.recall("llamas", mode="keyword").uris] == [weak.id]


def test_pinned_memories_and_hubs_are_never_archived(tmp_path: Path) -> None:
    """Pinned memories and hubs (centrality > 0.5) stay active however weak and old."""
    with cg.open(tmp_path, "a") as cx:
        pinned = cx.write(cg.Fact(text="pinned", confidence=0.0, pinned=True), at=T0)
        hub = cx.write(cg.Fact(text="hub", confidence=0.0), at=T0)
        plain = cx.write(cg.Fact(text="plain", confidence=0.0), at=T0)
        for i in range(3):
            other = cx.write(cg.Fact(text=f"spoke {i}", confidence=0.9), at=T0)
            cx.add_edge(other, hub, "relates_to", at=T0)
        report = cx.compact(now=T0 + 400 * DAY)
        assert {u.id for u in report.archived} == {plain.id}
        assert cx.resolve(pinned).status == cx.resolve(hub).status == "active"


_memories = st.lists(
    st.tuples(
        st.sampled_from([cg.Fact, cg.Preference, cg.Event, cg.Pattern]),
        st.sampled_from(["one", "two"]),
        st.sampled_from(["deploy pipeline main", "deploy pipeline main branch",
                         "lunch place", "lunch place downtown", "coffee"]),
        st.sampled_from([0.1, 0.4, 0.9]),
        st.booleans(),
    ),
    min_size=1,
    max_size=12,
)


@settings(max_examples=30)
@given(memories=_memories, days=st.lists(st.integers(0, 120), min_size=1, max_size=3))
def test_consolidation_rules_hold_and_replay_reproduces_every_transition(
    memories: list[Any], days: list[int]
) -> None:
    """With auto-linking on and random compactions: merges only join memories of the same
    namespace and type, no supersedes edge is ever created, pinned memories are never
    archived, every merged memory's history still resolves, and rebuilding from the
    journal gives identical tables."""
    root = Path(tempfile.mkdtemp())
    try:
        with cg.open(root, "a", autolink=True, sync=False) as cx:
            uris = []
            for kind, ns, text, confidence, pinned in memories:
                memory = kind(text=text, confidence=confidence, pinned=pinned)
                uris.append(cx.write(memory, ns=ns, at=T0))
            for day in sorted(days):
                report = cx.compact(now=T0 + day * DAY)
                for survivor, merged in report.merged:
                    s, m = cx.resolve(survivor.id.hex()), cx.resolve(merged.id.hex())
                    assert (s.uri.ns, s.memory.type_name) == (m.uri.ns, m.memory.type_name)
                    assert m.status == "merged"
                    assert [r.version for r in cx.history(merged)] == list(
                        range(1, m.latest + 1))
                    edges = {(e.relation, e.dst.id) for e in cx.edges(survivor)}
                    assert ("derived_from", merged.id) in edges
                for uri in report.archived:
                    assert not cx.resolve(uri.id.hex()).memory.pinned
            assert all(e.fields.get("rel") != "supersedes" for e in cx.journal())
            digests = cx.table_digests()
            cx.rebuild()
            assert cx.table_digests() == digests
    finally:
        shutil.rmtree(root)


def test_autolink_links_similar_memories_in_the_same_namespace_only(tmp_path: Path) -> None:
    """Auto-linking journals relates_to edges from a new memory to similar ones (strength
    = Jaccard of their terms; suggested from 0.4), only within its namespace."""
    with cg.open(tmp_path, "a", autolink=True) as cx:
        a = cx.write(cg.Fact(text="deploys run through the ci pipeline"), ns="one")
        other_ns = cx.write(cg.Fact(text="deploys run through the ci pipeline"), ns="two")
        b = cx.write(cg.Fact(text="deploys run through the ci pipeline nightly"), ns="one")
        edges = cx.edges(b)
        assert [(e.dst.id, e.relation, e.status) for e in edges] == [
            (a.id, "relates_to", "suggested")]
        assert edges[0].strength == pytest.approx(4 / 5)
        assert cx.edges(other_ns) == []


def test_compact_with_nothing_to_do_journals_nothing(cx: cg.Cortex) -> None:
    """A compaction that moves nothing appends no entry."""
    cx.write(cg.Fact(text="fresh"))
    seq = cx.seq
    report = cx.compact()
    assert (report.archived, report.pruned, report.merged, cx.seq) == ((), (), (), seq)
