"""The memory graph: edges, traversal and centrality against a plain adjacency-dict model."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import cortexgraph as cg
from cortexgraph.core.graph import RELATION_ALIASES, RELATIONS

T0 = 1_700_000_000_000

# one graph operation: (kind, i, j, relation, strength in 0..10 tenths, status)
_OPS = st.lists(
    st.tuples(
        st.sampled_from(["add", "add", "add", "remove", "tombstone"]),
        st.integers(0, 6),
        st.integers(0, 6),
        st.sampled_from(RELATIONS[:3]),
        st.integers(0, 10),
        st.sampled_from(["active", "active", "suggested"]),
    ),
    max_size=30,
)


def _build(
    root: Path, ops: list[tuple[str, int, int, str, int, str]]
) -> tuple[cg.Cortex, list[cg.MemoryURI], dict[tuple[int, str, int], tuple[int, str]], set[int]]:
    """Apply ``ops`` to a fresh store and to the model; return both."""
    cx = cg.open(root, "agent", sync=False)
    uris = [cx.write(cg.Fact(text=f"memory {i}"), at=T0 + i) for i in range(7)]
    edges: dict[tuple[int, str, int], tuple[int, str]] = {}
    dead: set[int] = set()
    at = T0 + 100
    for kind, i, j, rel, tenths, status in ops:
        at += 1
        if kind == "tombstone":
            if i not in dead:
                cx.tombstone(uris[i], at=at)
                dead.add(i)
            continue
        if i == j or i in dead or j in dead:
            continue
        if kind == "add":
            cx.add_edge(uris[i], uris[j], rel, strength=tenths / 10, status=status, at=at)
            edges[(i, rel, j)] = (tenths * 100_000, status)
        elif (i, rel, j) in edges:
            cx.remove_edge(uris[i], uris[j], rel, at=at)
            del edges[(i, rel, j)]
    return cx, uris, edges, dead


def _model_bfs(
    start: int,
    depth: int,
    edges: dict[tuple[int, str, int], tuple[int, str]],
    dead: set[int],
    ids: list[bytes],
    relations: set[str] | None,
    direction: str,
    min_ppm: int,
) -> list[list[int]]:
    """Plain BFS over an adjacency dict: levels of memory indexes, each sorted by id."""
    adjacency: dict[int, set[int]] = {}
    for (i, rel, j), (strength, status) in edges.items():
        if status != "active" or strength < min_ppm:
            continue
        if relations is not None and rel not in relations:
            continue
        if direction in ("out", "both"):
            adjacency.setdefault(i, set()).add(j)
        if direction in ("in", "both"):
            adjacency.setdefault(j, set()).add(i)
    seen = {start}
    frontier = [start]
    levels: list[list[int]] = []
    for _ in range(depth):
        found = {
            n for f in frontier for n in adjacency.get(f, ()) if n not in seen and n not in dead
        }
        if not found:
            break
        level = sorted(found, key=lambda n: ids[n])
        levels.append(level)
        seen |= found
        frontier = level
    return levels


@settings(max_examples=60)
@given(
    ops=_OPS,
    start=st.integers(0, 6),
    depth=st.integers(0, 5),
    relations=st.one_of(st.none(), st.sets(st.sampled_from(RELATIONS[:3]), min_size=1)),
    direction=st.sampled_from(["out", "in", "both"]),
    min_tenths=st.integers(0, 10),
)
def test_traverse_equals_bfs_over_an_adjacency_dict(
    ops: list[tuple[str, int, int, str, int, str]],
    start: int,
    depth: int,
    relations: set[str] | None,
    direction: str,
    min_tenths: int,
) -> None:
    """For random edge histories, traverse gives exactly the levels of a plain BFS built
    from the same operations; no level is deeper than asked; every step's edge exists and
    passes the relation, direction, status and strength filters; centrality is in 0..1
    and equals in-degree over the highest in-degree of the model."""
    root = Path(tempfile.mkdtemp())
    try:
        cx, uris, edges, dead = _build(root, ops)
        with cx:
            ids = [u.id for u in uris]
            result = cx.traverse(
                uris[start],
                depth=depth,
                relations=sorted(relations) if relations is not None else None,
                direction=direction,
                min_strength=min_tenths / 10,
            )
            expected = _model_bfs(
                start, depth, edges, dead, ids, relations, direction, min_tenths * 100_000
            )
            got = [[ids.index(n.uri.id) for n in level] for level in result.levels]
            assert got == expected
            assert len(result.levels) <= depth
            for d, level in enumerate(result.levels, start=1):
                for n in level:
                    assert n.depth == d
                    via, other = ids.index(n.via.id), ids.index(n.uri.id)
                    key = (
                        (via, n.relation, other)
                        if n.direction == "out"
                        else (other, n.relation, via)
                    )
                    assert key in edges and edges[key][1] == "active"
                    assert edges[key][0] >= min_tenths * 100_000
                    assert relations is None or n.relation in relations
                    assert direction == "both" or n.direction == direction
            in_degree = [
                sum(1 for (_, _, j), (_, s) in edges.items() if j == k and s == "active")
                for k in range(7)
            ]
            top = max(in_degree)
            for k in range(7):
                value = cx.centrality(uris[k])
                assert 0.0 <= value <= 1.0
                assert value == (in_degree[k] / top if top else 0.0)
    finally:
        shutil.rmtree(root)


@settings(max_examples=25)
@given(ops=_OPS)
def test_edge_tables_rebuild_byte_identical(ops: list[tuple[str, int, int, str, int, str]]) -> None:
    """Replaying the journal of any edge history gives the same edges, salience (in-degree
    rows, histogram, maximum) and OverallRoot as the incremental store (J4)."""
    root = Path(tempfile.mkdtemp())
    try:
        cx, _, _, _ = _build(root, ops)
        with cx:
            before, root_before = cx.table_digests(), cx.overall_root()
            cx.rebuild()
            assert cx.table_digests() == before
            assert cx.overall_root() == root_before
    finally:
        shutil.rmtree(root)


def test_aliases_are_normalised_before_journaling(cx: cg.Cortex) -> None:
    """Every alias is stored and journaled under its canonical relation name."""
    a = cx.write(cg.Fact(text="a"))
    b = cx.write(cg.Fact(text="b"))
    for alias, canonical in sorted(RELATION_ALIASES.items()):
        origin = "human" if canonical == "supersedes" else "system"
        edge = cx.add_edge(a, b, alias.upper(), origin=origin)
        assert edge.relation == canonical
        assert next(iter(cx.journal(since=cx.seq - 1))).fields["rel"] == canonical


def test_supersedes_needs_a_human(cx: cg.Cortex) -> None:
    """``supersedes`` from an LLM (or the default system origin) is refused with a clear
    ValidationError naming ``origin``, journals nothing; from a human it is stored."""
    a = cx.write(cg.Fact(text="new way"))
    b = cx.write(cg.Fact(text="old way"))
    before = cx.table_digests()
    for origin in ("llm", "system"):
        with pytest.raises(cg.ValidationError, match="human") as info:
            cx.add_edge(a, b, "supersedes", origin=origin)
        assert info.value.field == "origin"
    assert cx.table_digests() == before
    edge = cx.add_edge(a, b, "supersede", origin="human")
    assert (edge.relation, edge.origin) == ("supersedes", "human")


@pytest.mark.parametrize(
    ("call", "error", "field"),
    [
        (lambda cx, a, b, c: cx.add_edge(a, a, "relates_to"), cg.ValidationError, "dst"),
        (lambda cx, a, b, c: cx.add_edge(a, b, "likes"), cg.ValidationError, "relation"),
        (
            lambda cx, a, b, c: cx.add_edge(a, b, "relates_to", strength=1.5),
            cg.ValidationError,
            "strength",
        ),
        (
            lambda cx, a, b, c: cx.add_edge(a, b, "relates_to", strength=float("nan")),
            cg.ValidationError,
            "strength",
        ),
        (
            lambda cx, a, b, c: cx.add_edge(a, b, "relates_to", status="maybe"),
            cg.ValidationError,
            "status",
        ),
        (
            lambda cx, a, b, c: cx.add_edge(a, b, "relates_to", origin="robot"),
            cg.ValidationError,
            "origin",
        ),
        (lambda cx, a, b, c: cx.add_edge(a, c, "relates_to"), cg.TombstonedError, None),
        (lambda cx, a, b, c: cx.add_edge("0" * 32, b, "relates_to"), cg.NotFoundError, None),
        (lambda cx, a, b, c: cx.remove_edge(b, a, "relates_to"), cg.NotFoundError, None),
        (lambda cx, a, b, c: cx.traverse(a, depth=6), cg.ValidationError, "depth"),
        (lambda cx, a, b, c: cx.traverse(a, direction="up"), cg.ValidationError, "direction"),
        (lambda cx, a, b, c: cx.traverse(a, min_strength=-0.1), cg.ValidationError, "min_strength"),
        (
            lambda cx, a, b, c: cx.traverse(a, relations="relates_to"),
            cg.ValidationError,
            "relations",
        ),
    ],
)
def test_bad_graph_calls_raise_and_change_nothing(
    cx: cg.Cortex, call: object, error: type[Exception], field: str | None
) -> None:
    """Each bad edge or traversal call raises the typed error naming the field, and
    every table is byte-identical afterwards."""
    a = cx.write(cg.Fact(text="a"))
    b = cx.write(cg.Fact(text="b"))
    c = cx.write(cg.Fact(text="c"))
    cx.tombstone(c)
    cx.add_edge(a, b, "relates_to")
    before = cx.table_digests()
    with pytest.raises(error) as info:
        call(cx, a, b, c)  # type: ignore[operator]
    if field is not None:
        assert info.value.field == field  # type: ignore[attr-defined]
    assert cx.table_digests() == before


def test_re_adding_an_edge_updates_it_and_an_identical_one_journals_nothing(
    cx: cg.Cortex,
) -> None:
    """add_edge is an upsert: a changed strength or status journals one entry and moves
    the in-degree when the edge becomes suggested; repeating it exactly journals nothing."""
    a = cx.write(cg.Fact(text="a"))
    b = cx.write(cg.Fact(text="b"))
    cx.add_edge(a, b, "relates_to", strength=0.5)
    seq = cx.seq
    cx.add_edge(a, b, "relates_to", strength=0.5)
    assert cx.seq == seq
    cx.add_edge(a, b, "relates_to", strength=0.5, status="suggested")
    assert cx.seq == seq + 1
    assert cx.centrality(b) == 0.0
    assert [e.status for e in cx.edges(a)] == ["suggested"]
    assert len(cx.traverse(a, depth=1)) == 0


def test_a_failed_batch_leaves_no_edge(cx: cg.Cortex) -> None:
    """An error later in a batch rolls back the edges added earlier in it."""
    a = cx.write(cg.Fact(text="a"))
    b = cx.write(cg.Fact(text="b"))
    before = cx.table_digests()
    with pytest.raises(RuntimeError), cx.batch() as batch:
        batch.add_edge(a, b, "relates_to")
        raise RuntimeError("boom")
    assert cx.table_digests() == before
    assert cx.edges(a) == []
