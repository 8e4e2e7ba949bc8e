"""Exact boundaries and guards that a mutation run found unguarded: each test here fails
when one comparison, constant or guard of the code is changed (see docs/testing.md)."""

from __future__ import annotations

from pathlib import Path

import cbor2
import pytest

import cortexgraph as cg
from cortexgraph.core.body import encode_body
from cortexgraph.core.lifecycle import LifecycleFacts
from cortexgraph.core.packing import pack_context
from cortexgraph.core.predicates import Or
from cortexgraph.core.taxonomy import MAX_TAGS, MAX_TEXT_BYTES

T0 = 1_700_000_000_000


@pytest.mark.parametrize("count", [22, 23, 24, 25, MAX_TAGS])
def test_bodies_with_arrays_around_the_one_byte_head_limit(count: int) -> None:
    """CBOR gives arrays of up to 23 items a one-byte head and longer ones a two-byte
    head: a memory with 22 to 25 (and the most) tags encodes to exactly cbor2's canonical
    bytes."""
    tags = [f"t{i:02d}" for i in range(count)]
    memory = cg.Fact(text="tagged", tags=tags)
    _, body = encode_body(memory)
    assert body == cbor2.dumps(memory.to_dict(), canonical=True)


def test_text_of_exactly_the_largest_size_is_accepted_and_one_byte_more_is_not() -> None:
    """Text may be 1 MiB of UTF-8, not a byte more (in characters of several bytes too)."""
    assert len(cg.Fact(text="x" * MAX_TEXT_BYTES).text) == MAX_TEXT_BYTES
    with pytest.raises(cg.ValidationError, match="longer than"):
        cg.Fact(text="x" * (MAX_TEXT_BYTES + 1))
    two_bytes = "é" * (MAX_TEXT_BYTES // 2)  # exactly 1 MiB of UTF-8
    assert cg.Fact(text=two_bytes).text == two_bytes
    with pytest.raises(cg.ValidationError, match="longer than"):
        cg.Fact(text=two_bytes + "x")


def test_an_or_of_fewer_than_two_parts_is_refused() -> None:
    """``Or`` is built by ``|`` and ``Q.any_of``; built by hand with one part it refuses
    (``Q.any_of`` of one predicate returns that predicate instead)."""
    with pytest.raises(TypeError, match="at least two"):
        Or((cg.Q.tag("a"),))
    assert cg.Q.any_of(cg.Q.tag("a")) == cg.Q.tag("a")


def test_taking_a_snapshot_twice_at_one_seq_returns_the_stored_one(tmp_path: Path) -> None:
    """A second snapshot at the same seq returns the manifest stored first (its ``at``),
    and stores nothing new."""
    with cg.open(tmp_path, "a", sync=False) as cx:
        cx.write(cg.Fact(text="one"), at=T0)
        first = cx.snapshot(at=T0 + 1)
        again = cx.snapshot(at=T0 + 2)
        assert again == first and again.at == T0 + 1
        assert cx.snapshots() == [first]


def test_custom_section_headers_are_one_line_each() -> None:
    """Headers may be replaced by one non-blank line each (they then head the text); two
    lines, or a trailing newline, are refused naming ``headers``."""
    headers = {"floor": "## Always", "foreground": "## Now", "background": "## Also"}
    packed = pack_context([], 100, headers=headers)
    assert packed.tokens == 0
    for bad in ("## Always\n## Twice", "## Always\n", " "):
        with pytest.raises(cg.ValidationError) as caught:
            pack_context([], 100, headers={**headers, "floor": bad})
        assert caught.value.field == "headers"


@pytest.mark.parametrize("items", [5, None, object()])
def test_packing_something_that_is_not_an_iterable_is_refused(items: object) -> None:
    """``pack_context`` of a non-iterable is a ValidationError naming ``items``, not a
    TypeError from iterating it."""
    with pytest.raises(cg.ValidationError) as caught:
        pack_context(items, 100)  # type: ignore[arg-type]
    assert caught.value.field == "items"


@pytest.mark.parametrize("status", [5, b"active", ""])
def test_lifecycle_facts_need_a_status_name(status: object) -> None:
    """The lifecycle rules refuse facts whose status is not a non-empty string."""
    with pytest.raises(cg.ValidationError) as caught:
        LifecycleFacts(status=status, type_name="fact", confidence=0.5)  # type: ignore[arg-type]
    assert caught.value.field == "status"


def test_the_plan_of_a_one_list_query_names_no_intersection(tmp_path: Path) -> None:
    """A query read from one posting list is planned as a scan alone; two lists add an
    intersection (the plan text is documented in docs/queries.md)."""
    with cg.open(tmp_path, "a", sync=False) as cx:
        cx.write(cg.Fact(text="x", tags=["a"]), at=T0)
        one = cx.find(cg.Q.tag("a"), limit=1).plan
        two = cx.find(cg.Q.tag("a") & cg.Q.type(cg.Fact), limit=1).plan
    assert one == "1. scan Q.tag('a') (1); filter Q.status('active') [default]"
    assert two == (
        "1. scan Q.type('fact') (1); intersect Q.tag('a') (1);"
        " filter Q.status('active') [default]"
    )


def test_context_refuses_an_estimator_that_cannot_count(tmp_path: Path) -> None:
    """``context(estimator=...)`` must be a callable: anything else is a ValidationError
    naming it, before anything is read."""
    with cg.open(tmp_path, "a", sync=False) as cx:
        cx.write(cg.Fact(text="x"), at=T0)
        with pytest.raises(cg.ValidationError) as caught:
            cx.context(budget_tokens=100, estimator=5)  # type: ignore[arg-type]
    assert caught.value.field == "estimator"


def test_a_scope_view_indexes_its_records_and_floors_active_goals(tmp_path: Path) -> None:
    """``view[i]`` is the i-th record of the slice; the view's context puts an active Goal
    in the floor and an achieved one in the background (as Cortex.context does)."""
    with cg.open(tmp_path, "a", sync=False) as cx:
        active = cx.write(cg.Goal(text="ship the verifier", status="active"), at=T0)
        done = cx.write(cg.Goal(text="write the parser", status="achieved"), at=T0 + 1)
        cx.write(cg.Event(text="a meeting happened"), at=T0 + 2)
        view = cg.verify_scope(cx.scope([active, done]), trusted_root=cx.overall_root())
    assert len(view) == 2
    assert {view[0].uri.head, view[1].uri.head} == {active.head, done.head}
    assert view[0] is view.records[0] and view[1] is view.records[1]
    layers = {uri.head: layer for uri, layer, _ in view.context(budget_tokens=500).items}
    assert layers[active.head] == "floor"
    assert layers[done.head] == "background"


@pytest.mark.parametrize("tokens", [1.5, "3", None])
def test_find_refuses_an_estimator_that_returns_no_count(tmp_path: Path, tokens: object) -> None:
    """A token estimator must return an integer >= 0 for each hit; a float, a string or
    None is a ValidationError naming the estimator (not a wrong total)."""
    with cg.open(tmp_path, "a", sync=False) as cx:
        cx.write(cg.Fact(text="x", tags=["a"]), at=T0)
        with pytest.raises(cg.ValidationError) as caught:
            cx.find(cg.Q.tag("a"), limit=5, estimator=lambda text: tokens)  # type: ignore[arg-type,return-value]
    assert caught.value.field == "estimator"


def test_the_first_handle_of_a_new_store_uses_the_embedder_it_recorded(tmp_path: Path) -> None:
    """The handle that creates a store records the default embedder and uses it: vector
    recall works on it at once, before any reopen."""
    with cg.open(tmp_path, "a", sync=False) as cx:
        uri = cx.write(cg.Fact(text="the first memory"), at=T0)
        assert cx.embedder.name == cg.HashEmbedder().name
        assert cx.recall("first memory", k=1, mode="vector")[0].uri == uri


def _near_pair(cx: cg.Cortex) -> tuple[cg.MemoryURI, cg.MemoryURI]:
    """Two Facts whose terms overlap by Jaccard 0.6 (a consolidation candidate, below the
    0.7 merge line) and whose embedded texts ("[fact] [default] ...") share 5 of 6 words."""
    a = cx.write(cg.Fact(text="alpha beta gamma delta"), at=T0)
    b = cx.write(cg.Fact(text="alpha beta gamma epsilon"), at=T0 + 1)
    return a, b


def test_compact_measures_candidates_by_cached_embeddings_when_it_has_them(
    tmp_path: Path,
) -> None:
    """Consolidation uses the cosine of the two memories' cached embeddings when both are
    cached (here about 0.83: they merge) and their terms' Jaccard otherwise (0.6: they
    stay apart)."""
    with cg.open(tmp_path / "cached", "a", autolink=True, sync=False) as cx:
        _near_pair(cx)
        cx.recall("alpha", k=2, mode="vector")  # caches both embeddings
        assert len(cx.compact(now=T0 + 2).merged) == 1
    with cg.open(tmp_path / "uncached", "a", autolink=True, sync=False) as cx:
        _near_pair(cx)
        assert cx.compact(now=T0 + 2).merged == ()


def test_a_memory_merges_once_per_compaction(tmp_path: Path) -> None:
    """Three identical Facts are each other's candidates: one compaction merges one pair
    and leaves the third memory for the next one."""
    with cg.open(tmp_path, "a", autolink=True, sync=False) as cx:
        uris = [cx.write(cg.Fact(text="the same words exactly"), at=T0 + i) for i in range(3)]
        first = cx.compact(now=T0 + 10)
        assert len(first.merged) == 1
        merged = {first.merged[0][1].id}
        assert sum(cx.resolve(u.head).status == "merged" for u in uris) == 1
        second = cx.compact(now=T0 + 20)
        assert len(second.merged) == 1 and second.merged[0][1].id not in merged


def test_a_scope_bundle_whose_records_are_not_a_list_is_refused(tmp_path: Path) -> None:
    """A bundle whose ``records`` is a map (even an empty one) fails verification naming
    it, rather than verifying as a slice of no memories."""
    with cg.open(tmp_path, "a", sync=False) as cx:
        uri = cx.write(cg.Fact(text="x"), at=T0)
        blob = cx.scope([uri])
    bundle = cbor2.loads(blob)
    bundle["records"] = {}
    with pytest.raises(cg.VerificationError, match="records is not a list"):
        cg.verify_scope(cbor2.dumps(bundle, canonical=True), trusted_root=None)
